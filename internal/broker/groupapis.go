package broker

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/group"
)

// The consumer group APIs and the coordinator lookup. Each hands the request to the shard of
// the group coordinator that owns the group (groups.go); a group this node does not coordinate
// gets NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads), and the client asks
// FindCoordinator again. Requests naming several groups are split by shard and answered
// together.

func init() {
	register(kmsg.FindCoordinator, 0, 6, handleFindCoordinator)
	register(kmsg.JoinGroup, 0, 9, handleJoinGroup)
	register(kmsg.SyncGroup, 0, 5, handleSyncGroup)
	register(kmsg.Heartbeat, 0, 4, handleHeartbeat)
	register(kmsg.LeaveGroup, 0, 5, handleLeaveGroup)
	register(kmsg.OffsetCommit, 0, 9, handleOffsetCommit)
	register(kmsg.OffsetFetch, 0, 9, handleOffsetFetch)
	register(kmsg.DescribeGroups, 0, 6, handleDescribeGroups)
	register(kmsg.ListGroups, 0, 5, handleListGroups)
	register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups)
	register(kmsg.OffsetDelete, 0, 0, handleOffsetDelete)
	register(kmsg.ConsumerGroupHeartbeat, 0, 1, handleConsumerGroupHeartbeat)
	register(kmsg.ConsumerGroupDescribe, 0, 1, handleConsumerGroupDescribe)
}

// handleConsumerGroupHeartbeat answers once the group's changed state is committed.
func handleConsumerGroupHeartbeat(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ConsumerGroupHeartbeatRequest)
	gs := r.conn.b.groups
	resp, done := gs.immediate(ctx, req.Group, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.ConsumerGroupHeartbeatAs(timeNow(), req, r.clientID, clientHost(r.conn.remote), r.describeFilter())
	}, func(code *kerr.Error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code.Code
		return resp
	})
	return reply{resp: resp, wait: func() {
		if err := done(); err != nil {
			hb := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
			hb.ErrorCode, hb.Assignment = kerr.CoordinatorNotAvailable.Code, nil
		}
	}}
}

func handleConsumerGroupDescribe(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	gs := r.conn.b.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var ids []string
	for _, id := range req.Groups {
		if id == "" { // as Kafka's GroupCoordinatorService.consumerGroupDescribe, on any node
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.ErrorCode, g.AuthorizedOperations = kerr.InvalidGroupID.Code, notRequested
			resp.Groups = append(resp.Groups, g)
			continue
		}
		ids = append(ids, id)
	}
	in, missing := gs.byShardLocked(ids)
	for sh, ids := range in {
		sub := *req
		sub.Groups = ids
		for _, g := range sh.c.ConsumerGroupDescribe(&sub).Groups {
			g.AuthorizedOperations = notRequested
			if g.ErrorCode == 0 && req.IncludeAuthorizedOperations { // KIP-430, as DescribeGroups
				g.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeGroup, g.Group, groupOps)
			}
			resp.Groups = append(resp.Groups, g)
		}
	}
	for _, id := range ids {
		if code, ok := missing[id]; ok {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = id, code.Code, notRequested
			resp.Groups = append(resp.Groups, g)
		}
	}
	return reply{resp: resp}
}

// handleFindCoordinator names the leader of a group's __consumer_offsets partition, or of a
// transactional id's __transaction_state partition, creating the topic on the first lookup as
// Kafka does.
func handleFindCoordinator(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	b := r.conn.b
	answer := func(key string) (int16, *string, int32, string, int32) {
		switch req.CoordinatorType {
		case 0:
			if aerr := b.groups.ensureTopic(ctx); aerr != nil {
				b.logger.Warn("broker: finding a coordinator", "err", aerr.msg)
				return kerr.CoordinatorNotAvailable.Code, &aerr.msg, -1, "", -1
			}
			n := b.groups.coordinatorNode(key)
			if n == nil {
				msg := "The coordinator's partition has no leader now."
				return kerr.CoordinatorNotAvailable.Code, &msg, -1, "", -1
			}
			return coordinatorEndpoint(n, r.conn.listener.Name)
		case 1:
			if aerr := b.txns.ensureTopic(ctx); aerr != nil {
				b.logger.Warn("broker: finding a transaction coordinator", "err", aerr.msg)
				return kerr.CoordinatorNotAvailable.Code, &aerr.msg, -1, "", -1
			}
			id := b.txns.coordinatorNode(key)
			n := b.cl.Image().Nodes[id]
			if id < 0 || n == nil || n.Fenced {
				msg := "The coordinator's partition has no leader now."
				return kerr.CoordinatorNotAvailable.Code, &msg, -1, "", -1
			}
			return coordinatorEndpoint(n, r.conn.listener.Name)
		}
		msg := "unknown coordinator type"
		return kerr.InvalidRequest.Code, &msg, -1, "", -1
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = answer(req.CoordinatorKey)
		return reply{resp: resp}
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = answer(key)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return reply{resp: resp}
}

// clientHost is how Kafka shows a member's address: "/" and the IP.
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}

func handleJoinGroup(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	return r.conn.b.groups.delayed(ctx, resp, req.Group, func(c *group.Coordinator, id group.RequestID) group.Output {
		return c.JoinGroup(timeNow(), id, req, r.clientID, clientHost(r.conn.remote))
	})
}

func handleSyncGroup(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if syncGroupProtocolMissing(req) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return reply{resp: resp}
	}
	return r.conn.b.groups.delayed(ctx, resp, req.Group, func(c *group.Coordinator, id group.RequestID) group.Output {
		return c.SyncGroup(timeNow(), id, req)
	})
}

// syncGroupProtocolMissing reports a SyncGroup v5+ without its protocol type or name, which
// Kafka's KafkaApis.handleSyncGroupRequest answers INCONSISTENT_GROUP_PROTOCOL before anything
// else (areMandatoryProtocolTypeAndNamePresent: mandatory from version 5).
func syncGroupProtocolMissing(req *kmsg.SyncGroupRequest) bool {
	return req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil)
}

func handleHeartbeat(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.HeartbeatRequest)
	return r.conn.b.groups.locked(req.Group, func(c *group.Coordinator) kmsg.Response { return c.Heartbeat(timeNow(), req) },
		func(code *kerr.Error) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = code.Code
			return resp
		})
}

func handleLeaveGroup(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.LeaveGroupRequest)
	resp, done := r.conn.b.groups.immediate(ctx, req.Group, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.LeaveGroup(timeNow(), req)
	}, func(code *kerr.Error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code.Code
		return resp
	})
	return reply{resp: resp, wait: func() { _ = done() }} // a failed write is logged; the answer stands
}

func handleOffsetCommit(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetCommitRequest)
	every := func(resp *kmsg.OffsetCommitResponse, code int16) {
		resp.Topics = append(resp.Topics, offsetCommitErrors(req.Topics, code)...)
	}
	// As Kafka's handleOffsetCommitRequest, a partition this node does not know is
	// UNKNOWN_TOPIC_OR_PARTITION before the group is looked at (NOT_COORDINATOR, a member's
	// error): the coordinator sees the others, and none if there are none.
	unknown, known := r.conn.b.splitUnknownCommits(req)
	if len(unknown) > 0 && len(known.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = mergeOffsetCommitTopics(unknown)
		return reply{resp: resp}
	}
	req = known
	resp, done := r.conn.b.groups.immediate(ctx, req.Group, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.OffsetCommit(timeNow(), req)
	}, func(code *kerr.Error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		every(resp, code.Code)
		return resp
	})
	oc := resp.(*kmsg.OffsetCommitResponse)
	oc.Topics = mergeOffsetCommitTopics(append(unknown, oc.Topics...))
	return reply{resp: resp, wait: func() {
		if err := done(); err != nil { // the commit is not durable: the client must retry
			for i := range resp.(*kmsg.OffsetCommitResponse).Topics {
				t := &resp.(*kmsg.OffsetCommitResponse).Topics[i]
				for j := range t.Partitions {
					if t.Partitions[j].ErrorCode == 0 {
						t.Partitions[j].ErrorCode = kerr.CoordinatorNotAvailable.Code
					}
				}
			}
		}
	}}
}

// partitionExists reports whether this node has the topic's partition.
func (b *Broker) partitionExists(topic string, partition int32) bool {
	t, ok := b.topics.Get(topic)
	return ok && partition >= 0 && int(partition) < len(t.Partitions)
}

// splitPartitions parts a request's topics by keep: the topics with the partitions kept (and
// those naming none), and the topics with the others.
func splitPartitions[T, P any](in []T, partitions func(*T) *[]P, keep func(t *T, p P) bool) (kept, rest []T) {
	for _, t := range in {
		var k, r []P
		for _, p := range *partitions(&t) {
			if keep(&t, p) {
				k = append(k, p)
			} else {
				r = append(r, p)
			}
		}
		if len(k) > 0 || len(*partitions(&t)) == 0 {
			kt := t
			*partitions(&kt) = k
			kept = append(kept, kt)
		}
		if len(r) > 0 {
			rt := t
			*partitions(&rt) = r
			rest = append(rest, rt)
		}
	}
	return kept, rest
}

// splitUnknownCommits answers an OffsetCommit's partitions of topics this node does not have,
// or beyond their partition counts, UNKNOWN_TOPIC_OR_PARTITION, and returns the request for
// the rest.
func (b *Broker) splitUnknownCommits(req *kmsg.OffsetCommitRequest) ([]kmsg.OffsetCommitResponseTopic, *kmsg.OffsetCommitRequest) {
	known := *req
	var unknown []kmsg.OffsetCommitRequestTopic
	known.Topics, unknown = splitPartitions(req.Topics,
		func(t *kmsg.OffsetCommitRequestTopic) *[]kmsg.OffsetCommitRequestTopicPartition { return &t.Partitions },
		func(t *kmsg.OffsetCommitRequestTopic, p kmsg.OffsetCommitRequestTopicPartition) bool {
			return b.partitionExists(t.Topic, p.Partition)
		})
	return offsetCommitErrors(unknown, kerr.UnknownTopicOrPartition.Code), &known
}

// offsetCommitErrors answers every partition of topics code.
func offsetCommitErrors(in []kmsg.OffsetCommitRequestTopic, code int16) []kmsg.OffsetCommitResponseTopic {
	var out []kmsg.OffsetCommitResponseTopic
	for _, rt := range in {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}

// mergeByTopic answers each topic in one row, the first it has, with the partitions of its
// rows in the order given, as Kafka's response builders merge rows by topic name. Clients keep
// an answer's rows in a map by topic (sarama, kafka-go): a topic's second row hid its first
// row's errors.
func mergeByTopic[R any](rows []R, topic func(*R) string, join func(into, from *R)) []R {
	var out []R
	at := map[string]int{}
	for _, row := range rows {
		if i, ok := at[topic(&row)]; ok {
			join(&out[i], &row)
			continue
		}
		at[topic(&row)] = len(out)
		out = append(out, row)
	}
	return out
}

// mergeOffsetCommitTopics is mergeByTopic for OffsetCommit's answer.
func mergeOffsetCommitTopics(rows []kmsg.OffsetCommitResponseTopic) []kmsg.OffsetCommitResponseTopic {
	return mergeByTopic(rows, func(r *kmsg.OffsetCommitResponseTopic) string { return r.Topic },
		func(into, from *kmsg.OffsetCommitResponseTopic) {
			into.Partitions = append(into.Partitions, from.Partitions...)
		})
}

// mergeTxnOffsetCommitTopics is mergeByTopic for TxnOffsetCommit's answer.
func mergeTxnOffsetCommitTopics(rows []kmsg.TxnOffsetCommitResponseTopic) []kmsg.TxnOffsetCommitResponseTopic {
	return mergeByTopic(rows, func(r *kmsg.TxnOffsetCommitResponseTopic) string { return r.Topic },
		func(into, from *kmsg.TxnOffsetCommitResponseTopic) {
			into.Partitions = append(into.Partitions, from.Partitions...)
		})
}

func handleOffsetFetch(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetFetchRequest)
	gs := r.conn.b.groups
	if req.Version < 8 {
		return gs.locked(req.Group, func(c *group.Coordinator) kmsg.Response { return c.OffsetFetch(req) },
			func(code *kerr.Error) kmsg.Response { return offsetFetchError(req, code.Code) })
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	ids := make([]string, len(req.Groups))
	for i, g := range req.Groups {
		ids[i] = g.Group
	}
	in, missing := gs.byShardLocked(ids)
	answers := map[string]kmsg.OffsetFetchResponseGroup{}
	for sh := range in {
		sub := *req
		sub.Groups = nil
		for _, g := range req.Groups {
			if gs.partitionFor(g.Group) == sh.index {
				sub.Groups = append(sub.Groups, g)
			}
		}
		for _, g := range sh.c.OffsetFetch(&sub).Groups {
			answers[g.Group] = g
		}
	}
	for _, g := range req.Groups { // in the request's order
		if code, ok := missing[g.Group]; ok {
			fg := kmsg.NewOffsetFetchResponseGroup()
			fg.Group, fg.ErrorCode = g.Group, code.Code
			resp.Groups = append(resp.Groups, fg)
		} else {
			resp.Groups = append(resp.Groups, answers[g.Group])
		}
	}
	return reply{resp: resp}
}

func handleDescribeGroups(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	gs := r.conn.b.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	in, missing := gs.byShardLocked(req.Groups)
	answers := map[string]kmsg.DescribeGroupsResponseGroup{}
	for sh, ids := range in {
		sub := *req
		sub.Groups = ids
		for _, g := range sh.c.DescribeGroups(&sub).Groups {
			answers[g.Group] = g
		}
	}
	for _, id := range req.Groups {
		if code, ok := missing[id]; ok {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = id, code.Code, notRequested
			resp.Groups = append(resp.Groups, g)
		} else {
			resp.Groups = append(resp.Groups, answers[id])
		}
	}
	for i := range resp.Groups { // KIP-430
		if g := &resp.Groups[i]; g.ErrorCode == 0 {
			g.AuthorizedOperations = notRequested
			if req.Version >= 3 && req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeGroup, g.Group, groupOps)
			}
		}
	}
	return reply{resp: resp}
}

// handleListGroups lists the groups this node coordinates, as a Kafka broker does: admin
// clients ask every broker and merge.
func handleListGroups(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	gs := r.conn.b.groups
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, sh := range gs.shards {
		sub := sh.c.ListGroups(req)
		if sub.ErrorCode != 0 {
			resp.ErrorCode = sub.ErrorCode
		}
		resp.Groups = append(resp.Groups, sub.Groups...)
	}
	return reply{resp: resp}
}

func handleDeleteGroups(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	// A group named twice is deleted and answered once, as Kafka's (the second deletion
	// answered GROUP_ID_NOT_FOUND, over the first's answer).
	req.Groups = uniqueGroups(req.Groups)
	gs := r.conn.b.groups
	gs.mu.Lock()
	in, missing := gs.byShardLocked(req.Groups)
	type pending struct {
		w   commitWait
		err error
		out []group.Reply
	}
	var todo []pending
	answers := map[string]kmsg.DeleteGroupsResponseGroup{}
	for sh, ids := range in {
		sub := *req
		sub.Groups = ids
		sr, out := sh.c.DeleteGroups(&sub)
		for _, g := range sr.Groups {
			answers[g.Group] = g
		}
		w, err := gs.persistLocked(sh, out.Records)
		todo = append(todo, pending{w, err, out.Replies})
	}
	gs.mu.Unlock()
	for _, id := range req.Groups {
		if code, ok := missing[id]; ok {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code.Code
			resp.Groups = append(resp.Groups, g)
		} else {
			resp.Groups = append(resp.Groups, answers[id])
		}
	}
	return reply{resp: resp, wait: func() {
		for _, p := range todo {
			_ = gs.finish(ctx, p.w, p.err, p.out) // a failed write is logged; the answer stands
		}
	}}
}

// uniqueGroups is ids without their repeats, in the order of their first mention.
func uniqueGroups(ids []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
}

// handleOffsetDelete answers, as Kafka's KafkaApis and group coordinator service, an empty group
// id INVALID_GROUP_ID on any node, and the partitions that do not exist UNKNOWN_TOPIC_OR_PARTITION
// without the coordinator; those rows are left out when the group itself fails (Kafka's
// OffsetDeleteResponse.Builder.merge keeps only the coordinator's top-level error).
func handleOffsetDelete(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.OffsetDeleteRequest)
	if req.Group == "" {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return reply{resp: resp}
	}
	sub := *req
	sub.Topics = nil
	var unknown []kmsg.OffsetDeleteResponseTopic
	for _, rt := range req.Topics {
		t, ok := r.conn.b.topics.Get(rt.Topic)
		known := rt
		known.Partitions = nil
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			if ok && rp.Partition >= 0 && int(rp.Partition) < len(t.Partitions) {
				known.Partitions = append(known.Partitions, rp)
				continue
			}
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownTopicOrPartition.Code
			st.Partitions = append(st.Partitions, sp)
		}
		if len(known.Partitions) > 0 {
			sub.Topics = append(sub.Topics, known)
		}
		if len(st.Partitions) > 0 {
			unknown = append(unknown, st)
		}
	}
	resp, done := r.conn.b.groups.immediate(ctx, req.Group, func(c *group.Coordinator) (kmsg.Response, group.Output) {
		return c.OffsetDelete(&sub)
	}, func(code *kerr.Error) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code.Code
		return resp
	})
	if od := resp.(*kmsg.OffsetDeleteResponse); od.ErrorCode == 0 {
		od.Topics = mergeOffsetDeleteTopics(od.Topics, unknown)
	}
	return reply{resp: resp, wait: func() { _ = done() }} // a failed write is logged; the answer stands
}

// mergeOffsetDeleteTopics adds the rows of more to topics, under a topic's entry where topics
// has one, as Kafka's OffsetDeleteResponse.Builder merges.
func mergeOffsetDeleteTopics(topics, more []kmsg.OffsetDeleteResponseTopic) []kmsg.OffsetDeleteResponseTopic {
	return mergeByTopic(append(topics, more...), func(r *kmsg.OffsetDeleteResponseTopic) string { return r.Topic },
		func(into, from *kmsg.OffsetDeleteResponseTopic) {
			into.Partitions = append(into.Partitions, from.Partitions...)
		})
}

// offsetFetchError answers a single-group OffsetFetch (v0-7) with one error: top level, and per
// partition, where v0-1 carry it.
func offsetFetchError(req *kmsg.OffsetFetchRequest, code int16) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.ErrorCode = p, -1, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// coordinatorEndpoint is FindCoordinator's answer naming node n on the client's listener.
func coordinatorEndpoint(n *controller.Node, listener string) (int16, *string, int32, string, int32) {
	host, port, ok := n.Endpoint(listener)
	if !ok {
		msg := fmt.Sprintf("The coordinator (node %d) has no listener %s.", n.ID, listener)
		return kerr.CoordinatorNotAvailable.Code, &msg, -1, "", -1
	}
	return 0, nil, n.ID, host, port
}
