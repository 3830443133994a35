package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/cluster"
	"github.com/runnel-dev/runnel/internal/controller"
)

// Leadership and replica-set admin: ElectLeaders (kafka-leader-election), and
// AlterPartitionReassignments / ListPartitionReassignments (kafka-reassign-partitions).

func init() {
	register(kmsg.ElectLeaders, 0, 2, handleElectLeaders)
	register(kmsg.AlterPartitionAssignments, 0, 1, handleAlterPartitionAssignments)
	register(kmsg.ListPartitionReassignments, 0, 0, handleListPartitionReassignments)
}

// handleElectLeaders moves each partition's leadership to its preferred replica (the first
// listed), waiting up to the request's timeout for it to happen. An unclean election (type 1)
// is for a partition that lost a majority of its replicas, which can then neither elect nor
// commit: its most up-to-date live replica leads, and its live replicas become the replica set,
// losing what only the lost ones held (docs/cluster.md §4.5). A partition with a majority
// live needs none (its election, if one is due, runs without help).
func handleElectLeaders(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	// The whole request fails, each partition named with it (ElectLeadersRequest.getErrorResponse),
	// when its timeout has passed before Kafka's controller runs it (deadlinePassed) or its
	// election type is unknown (ReplicationControlManager.electionType).
	aerr := deadlinePassed(req.TimeoutMillis)
	if aerr == nil && req.ElectionType != 0 && req.ElectionType != 1 {
		aerr = adminErr(kerr.InvalidRequest, "Unknown election type %d", req.ElectionType)
	}
	if aerr != nil {
		resp.ErrorCode = aerr.code.Code
		for _, rt := range req.Topics {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = rt.Topic
			for _, part := range rt.Partitions {
				p := kmsg.NewElectLeadersResponseTopicPartition()
				p.Partition, p.ErrorCode, p.ErrorMessage = part, aerr.code.Code, &aerr.msg
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return reply{resp: resp}
	}
	b := r.conn.b
	b.adminBarrier(ctx)
	img := b.cl.Image()
	type target struct {
		topic string
		part  int32
		ref   controller.PartitionRef
		want  int32 // -1: any leader in an epoch after after
		after int32
	}
	var pending []target
	answer := map[string]map[int32]*kerr.Error{}
	messages := map[string]map[int32]string{} // where Kafka words the error itself
	set := func(topic string, part int32, err *kerr.Error) {
		if answer[topic] == nil {
			answer[topic] = map[int32]*kerr.Error{}
		}
		answer[topic][part] = err
	}
	topicsAsked := req.Topics
	if topicsAsked == nil { // every partition
		for _, name := range img.TopicNames() {
			t := kmsg.NewElectLeadersRequestTopic()
			t.Topic = name
			for i := range img.Topics[name].Partitions {
				t.Partitions = append(t.Partitions, int32(i))
			}
			topicsAsked = append(topicsAsked, t)
		}
	}
	var items []cluster.TransferItem
	var unclean []controller.EpochRef
	for _, rt := range topicsAsked {
		t, ok := img.Topics[rt.Topic]
		for _, part := range rt.Partitions {
			if !ok || part < 0 || int(part) >= len(t.Partitions) {
				set(rt.Topic, part, kerr.UnknownTopicOrPartition)
				// As Kafka's ReplicationControlManager.electLeader words them.
				msg := fmt.Sprintf("No such topic as %s", rt.Topic)
				if ok {
					msg = fmt.Sprintf("No such partition as %s-%d", rt.Topic, part)
				}
				if messages[rt.Topic] == nil {
					messages[rt.Topic] = map[int32]string{}
				}
				messages[rt.Topic][part] = msg
				continue
			}
			p := t.Partitions[part]
			pref := p.Preferred()
			ref := controller.PartitionRef{Topic: t.ID, Partition: part}
			switch {
			case req.ElectionType == 1 && (t.IsObject() || img.MajorityLive(p)),
				req.ElectionType == 0 && p.Leader == pref:
				set(rt.Topic, part, kerr.ElectionNotNeeded)
			case req.ElectionType == 1 && !slices.ContainsFunc(p.Hosts(), img.Live):
				set(rt.Topic, part, kerr.EligibleLeadersNotAvailable)
			case req.ElectionType == 1:
				unclean = append(unclean, controller.EpochRef{PartitionRef: ref, Epoch: p.LeaderEpoch})
				after := p.LeaderEpoch // a leader that cannot commit is replaced in a later epoch
				if p.Leader < 0 {
					after-- // a leaderless partition gets its leader in this one
				}
				pending = append(pending, target{rt.Topic, part, ref, -1, after})
			case p.Leader < 0 || !img.Live(pref) || !slices.Contains(p.ISR, pref):
				set(rt.Topic, part, kerr.PreferredLeaderNotAvailable)
			default:
				items = append(items, cluster.TransferItem{PartitionRef: ref, Target: pref})
				pending = append(pending, target{rt.Topic, part, ref, pref, p.LeaderEpoch})
			}
		}
	}
	timeout := time.Duration(max(req.TimeoutMillis, 1000)) * time.Millisecond
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(items) > 0 {
		started, err := b.cl.TransferLeaders(wctx, items)
		for i, tg := range pending {
			if err != nil || !started[i] {
				set(tg.topic, tg.part, kerr.PreferredLeaderNotAvailable)
			}
		}
	}
	if len(unclean) > 0 {
		if _, err := b.cl.Propose(wctx, &controller.Command{Op: controller.OpUncleanElection,
			UncleanElection: &controller.BeginElection{Items: unclean}}); err != nil {
			for _, tg := range pending {
				if tg.want < 0 {
					set(tg.topic, tg.part, kerr.EligibleLeadersNotAvailable)
				}
			}
		}
	}
	for _, tg := range pending { // wait for the transfers that started, and the unclean elections
		if _, done := answer[tg.topic][tg.part]; done {
			continue
		}
		for {
			if _, p, ok := b.cl.Image().Partition(tg.ref.Topic, tg.ref.Partition); ok &&
				(p.Leader == tg.want || tg.want < 0 && p.Leader >= 0 && p.LeaderEpoch > tg.after) {
				set(tg.topic, tg.part, nil)
				break
			}
			if wctx.Err() != nil {
				set(tg.topic, tg.part, kerr.RequestTimedOut)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, rt := range topicsAsked {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, part := range rt.Partitions {
			err := answer[rt.Topic][part]
			if req.Topics == nil && err == kerr.ElectionNotNeeded {
				// As Kafka (ReplicationControlManager.electLeaders): asked for every
				// partition, it answers those it acted on; each topic still has its entry.
				continue
			}
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = part
			if err != nil {
				sp.ErrorCode = err.Code
				msg, worded := messages[rt.Topic][part]
				if !worded {
					msg = err.Description
				}
				sp.ErrorMessage = &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}

// handleAlterPartitionAssignments starts (or, with null replicas, cancels) moves of partitions
// to new replica sets. The move completes in the background: the new replicas catch up, the
// leadership moves to one of them if the leader is not, and the partition switches to the new
// set (docs/cluster.md §4.7).
func handleAlterPartitionAssignments(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	b := r.conn.b
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if aerr := deadlinePassed(req.TimeoutMillis); aerr != nil {
		// As Kafka's controller: nothing is moved, and every partition named is answered so
		// (AlterPartitionReassignmentsRequest.getErrorResponse).
		resp.ErrorCode, resp.ErrorMessage = aerr.code.Code, &aerr.msg
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = rp.Partition, aerr.code.Code, &aerr.msg
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply{resp: resp}
	}
	b.adminBarrier(ctx)
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.Get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var aerr *adminError
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				aerr = adminErr(kerr.UnknownTopicOrPartition, "Partition %s-%d does not exist.", rt.Topic, rp.Partition)
			case rp.Replicas != nil && isObjectTopic(t):
				aerr = adminErr(kerr.InvalidReplicaAssignment, "Topic %s keeps its partitions in object storage: they have no replicas to move (any node serves them).", rt.Topic)
			case rp.Replicas != nil:
				aerr = b.checkReplicas(rp.Replicas, 0) // a move may change the replication factor
				// v1 (KIP-860, kafka-reassign-partitions --disallow-replication-factor-change):
				// unless allowed, the target keeps the partition's replication factor, that of
				// the set a move in progress is heading for, as Kafka's
				// validatePartitionReplicationFactorUnchanged.
				if p := b.imagePartition(t.ID, rp.Partition); aerr == nil && !req.AllowReplicationFactorChange && p != nil {
					rf := len(p.Replicas)
					if p.Target != nil {
						rf = len(p.Target)
					}
					if len(rp.Replicas) != rf {
						aerr = adminErr(kerr.InvalidReplicationFactor, "The replication factor is changed from %d to %d", rf, len(rp.Replicas))
					}
				}
			}
			if aerr == nil && rp.Replicas != nil && sameMove(b.imagePartition(t.ID, rp.Partition), rp.Replicas) {
				// Already so (asked again, as kafka-reassign-partitions --execute run twice): as
				// in Kafka, nothing changes, and a running move's catch-up is not restarted.
			} else if aerr == nil {
				cmd := &controller.Command{Op: controller.OpReassign, Reassign: &controller.Reassign{
					PartitionRef: controller.PartitionRef{Topic: t.ID, Partition: rp.Partition}, Target: rp.Replicas}}
				_, aerr = b.propose(ctx, cmd)
			}
			if aerr != nil {
				sp.ErrorCode, sp.ErrorMessage = aerr.code.Code, &aerr.msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}

// sameMove reports whether a reassignment of p to target changes nothing: it is moving there
// already, or it is there without a move.
func sameMove(p *controller.Partition, target []int32) bool {
	return p != nil && (slices.Equal(p.Target, target) || p.Target == nil && slices.Equal(p.Replicas, target))
}

// handleListPartitionReassignments lists the moves in progress: each partition's replicas
// (old and new), and which are being added and removed.
func handleListPartitionReassignments(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	r.conn.b.adminBarrier(ctx) // Kafka answers from the active controller: a move just started or ended shows
	img := r.conn.b.cl.Image()
	add := func(name string, index int32, p *controller.Partition) {
		if p.Target == nil {
			return
		}
		sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		sp.Partition = index
		sp.AddingReplicas, sp.RemovingReplicas, sp.Replicas = p.Joining(), p.Leaving(), p.KafkaReplicas()
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != name {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = name
			resp.Topics = append(resp.Topics, st)
		}
		last := &resp.Topics[len(resp.Topics)-1]
		last.Partitions = append(last.Partitions, sp)
	}
	if req.Topics == nil {
		img.EachPartition(func(t *controller.Topic, index int32, p *controller.Partition) { add(t.Name, index, p) })
		return reply{resp: resp}
	}
	for _, rt := range req.Topics {
		t, ok := img.Topics[rt.Topic]
		for _, part := range rt.Partitions {
			if ok && part >= 0 && int(part) < len(t.Partitions) {
				add(rt.Topic, part, t.Partitions[part])
			}
		}
	}
	return reply{resp: resp}
}
