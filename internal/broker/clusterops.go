package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/txn"
)

// adminTimeout bounds how long an admin request waits for the controller.
const adminTimeout = 30 * time.Second

// propose has the controller apply cmd and waits until this node's registry reflects it. Errors
// come back as Kafka errors with a message.
func (b *Broker) propose(ctx context.Context, cmd *controller.Command) (controller.Result, *adminError) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	res, err := b.cl.Propose(ctx, cmd)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return res, adminErr(kerr.RequestTimedOut, "The controller did not apply the change in time: %v", err)
		}
		return res, adminErr(kerr.NotController, "The controller could not be reached: %v", err)
	}
	if res.Err != nil {
		switch {
		case errors.Is(res.Err, controller.ErrTopicExists):
			return res, adminErr(kerr.TopicAlreadyExists, "%v", res.Err)
		case errors.Is(res.Err, controller.ErrUnknownTopic):
			return res, adminErr(kerr.UnknownTopicOrPartition, "%v", res.Err)
		case errors.Is(res.Err, controller.ErrBadAssignment), errors.Is(res.Err, controller.ErrUnknownNode):
			return res, adminErr(kerr.InvalidReplicaAssignment, "%v", res.Err)
		case errors.Is(res.Err, controller.ErrPartitionsChanged):
			return res, adminErr(kerr.InvalidPartitions, "%v", res.Err)
		case errors.Is(res.Err, controller.ErrNoReassignment):
			return res, adminErr(kerr.NoReassignmentInProgress, "%v", res.Err)
		case errors.Is(res.Err, controller.ErrTokenNotFound):
			return res, adminErr(kerr.DelegationTokenNotFound, "%v", res.Err)
		case errors.Is(res.Err, controller.ErrTokenExpired):
			return res, adminErr(kerr.DelegationTokenExpired, "%v", res.Err)
		}
		return res, adminErr(kerr.UnknownServerError, "%v", res.Err)
	}
	return res, nil
}

// producerIDBlock reserves a block of producer ids from the controller.
func (b *Broker) producerIDBlock() (int64, error) {
	ctx, cancel := context.WithTimeout(b.ctx, adminTimeout)
	defer cancel()
	res, aerr := b.propose(ctx, &controller.Command{Op: controller.OpAllocProducerIDs,
		AllocProducerIDs: &controller.AllocProducerIDs{Node: b.cfg.NodeID, Count: txn.IDBlockSize}})
	if aerr != nil {
		return 0, aerr
	}
	return res.Value, nil
}

// defaultReplicationFactor is the replication factor of a topic created without one:
// default.replication.factor (--default-replication-factor), else autoReplicationFactor.
func (b *Broker) defaultReplicationFactor() int16 {
	if b.cfg.DefaultReplicationFactor > 0 {
		return b.cfg.DefaultReplicationFactor
	}
	return b.autoReplicationFactor()
}

// autoReplicationFactor is 3 once three storage nodes are registered (live or fenced: a node
// restarting is still one of them), else 1.
func (b *Broker) autoReplicationFactor() int16 {
	img := b.cl.Image()
	if len(img.StorageNodes())+len(img.FencedStorageNodes()) >= 3 {
		return 3
	}
	return 1
}

// assignReplicas spreads partitions' replicas over the live nodes not in controlled shutdown
// (Kafka's usable brokers) as Kafka does: rack-aware when the nodes name two racks or more
// (--rack), else rack-unaware. first is the index of the first new partition (for
// CreatePartitions).
// A total-order topic's shards go anywhere too: every serve node follows the sequencer group.
//
// As Kafka's StripedReplicaPlacer, fenced nodes (stopped, or out of their session) are taken
// once the live ones run out, never as a partition's first replica: an RF 3 topic can be
// created on three nodes while one restarts, and the stopped node catches up when it is back.
func (b *Broker) assignReplicas(first, count int32, rf int16) ([][]int32, *adminError) {
	img := b.cl.Image()
	nodes, fenced := img.PlacementNodes(), img.FencedStorageNodes()
	if int(rf) > len(nodes)+len(fenced) {
		return nil, adminErr(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, len(nodes)+len(fenced))
	}
	if len(nodes) < int(rf)/2+1 {
		// A partition commits on a majority of its replicas (§4.2 of cluster.md), where Kafka's
		// ISR may shrink to the leader alone: a majority on fenced nodes could commit nothing.
		return nil, adminErr(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): only %d broker(s) are unfenced, fewer than a majority of the replicas.", rf, len(nodes))
	}
	racks := make(map[int32]string, len(nodes)+len(fenced))
	for _, id := range append(slices.Clone(nodes), fenced...) {
		racks[id] = img.Nodes[id].Rack
	}
	r, _ := rand.Int(rand.Reader, big.NewInt(int64(len(nodes))))
	out := assignOver(nodes, racks, first, count, min(rf, int16(len(nodes))), int32(r.Int64()))
	rackOf := func(id int32) string { // a node without a rack is a rack of its own
		if racks[id] == "" {
			return fmt.Sprintf("#%d", id)
		}
		return racks[id]
	}
	for i := range out { // the rest on fenced nodes: of racks the partition lacks first, round-robin
		used := map[string]bool{}
		for _, id := range out[i] {
			used[rackOf(id)] = true
		}
		for pass := 0; pass < 2 && len(out[i]) < int(rf); pass++ {
			for k := range fenced {
				id := fenced[(int(first)+i+k)%len(fenced)]
				if len(out[i]) == int(rf) || slices.Contains(out[i], id) || (pass == 0 && used[rackOf(id)]) {
					continue
				}
				out[i] = append(out[i], id)
				used[rackOf(id)] = true
			}
		}
	}
	return out, nil
}

// assignOver assigns partitions [first, first+count) over nodes from the start index start.
//
// Rack-unaware (every node in one rack, or none named): the preferred leaders (first replicas)
// go round-robin over the nodes, and each partition's followers are the nodes after its leader,
// shifted once per full round so that pairs of nodes do not always replicate each other.
//
// Rack-aware (two racks or more; a node without a rack counts as a rack of its own, as in
// KRaft): the same round-robin over the nodes listed rack by rack in turn (a1, b1, c1, a2, ...),
// and a follower is taken only from a rack that holds no replica of the partition yet, until
// every rack holds one; so a partition of replication factor r spans min(r, racks) racks and
// losing a rack loses at most one replica of each partition whose factor is at most the racks.
func assignOver(nodes []int32, racks map[int32]string, first, count int32, rf int16, start int32) [][]int32 {
	byRack := map[string][]int32{}
	for _, id := range nodes {
		byRack[racks[id]] = append(byRack[racks[id]], id)
	}
	if len(byRack) < 2 {
		return assignUnaware(nodes, first, count, rf, start)
	}
	arranged := rackAlternated(byRack)
	n, nRacks := int32(len(arranged)), int32(len(byRack))
	out := make([][]int32, 0, count)
	for i := first; i < first+count; i++ {
		lead := (start + i) % n
		replicas := []int32{arranged[lead]}
		haveRack := map[string]bool{racks[arranged[lead]]: true}
		shift := ((start + i/n) % n) * nRacks
		for k := int32(0); len(replicas) < int(rf) && k < int32(rf)*n; k++ { // every other node comes up each n-1 steps
			id := arranged[(lead+1+(shift+k)%(n-1))%n]
			if slices.Contains(replicas, id) || (haveRack[racks[id]] && len(haveRack) < int(nRacks)) {
				continue
			}
			replicas = append(replicas, id)
			haveRack[racks[id]] = true
		}
		out = append(out, replicas)
	}
	return out
}

// rackAlternated lists the nodes one rack after the other in turn, racks and nodes in order.
func rackAlternated(byRack map[string][]int32) []int32 {
	names := slices.Sorted(maps.Keys(byRack))
	for _, r := range names {
		slices.Sort(byRack[r])
	}
	var out []int32
	for j := 0; ; j++ {
		added := false
		for _, r := range names {
			if ids := byRack[r]; j < len(ids) {
				out = append(out, ids[j])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// assignUnaware is Kafka's rack-unaware assignment (see assignOver).
func assignUnaware(nodes []int32, first, count int32, rf int16, start int32) [][]int32 {
	n := int32(len(nodes))
	out := make([][]int32, 0, count)
	for i := first; i < first+count; i++ {
		lead := (start + i) % n
		replicas := []int32{nodes[lead]}
		if n > 1 {
			// Kafka's rule: follower j sits 1 + (shift + j - 1) mod (n-1) after the leader, with a
			// shift that grows each time the leaders have gone round the nodes once.
			shift := (start + i/n) % (n - 1)
			for j := int32(1); j < int32(rf); j++ {
				replicas = append(replicas, nodes[(lead+1+(shift+j-1)%(n-1))%n])
			}
		}
		out = append(out, replicas)
	}
	return out
}

// checkReplicas checks one partition's explicit replica list against the registered nodes, and its
// length against want (0: any).
func (b *Broker) checkReplicas(replicas []int32, want int) *adminError {
	if len(replicas) == 0 {
		return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	if want > 0 && len(replicas) != want { // as Kafka's validateManualPartitionAssignment
		return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), want)
	}
	img := b.cl.Image()
	seen := map[int32]bool{}
	for _, id := range replicas {
		if seen[id] {
			return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
		seen[id] = true
		if n, ok := img.Nodes[id]; !ok {
			return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		} else if n.Agent {
			return adminErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, a runnel agent, which holds no replicas.", id)
		}
	}
	return nil
}

// checkNewReplicas checks a new partition's explicit replica list (CreateTopics,
// CreatePartitions): checkReplicas, and, as Kafka's ReplicationControlManager, at least one of
// its nodes must be live to lead it.
func (b *Broker) checkNewReplicas(replicas []int32, want, partition int) *adminError {
	if aerr := b.checkReplicas(replicas, want); aerr != nil {
		return aerr
	}
	img := b.cl.Image()
	if !slices.ContainsFunc(replicas, func(n int32) bool { return img.Live(n) && !img.Nodes[n].ShuttingDown }) { // Kafka's isActive
		return adminErr(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", partition)
	}
	return nil
}

// newTopicID makes a random topic id.
func newTopicID() controller.TopicID {
	var id controller.TopicID
	rand.Read(id[:])
	return id
}

// imagePartition returns a partition as the metadata image has it.
func (b *Broker) imagePartition(id [16]byte, index int32) *controller.Partition {
	_, p, ok := b.cl.Image().Partition(id, index)
	if !ok {
		return nil
	}
	return p
}

// leader resolves a partition a client asked the leader for, checking the client's leader epoch
// (-1: none): the partition's replica here must lead.
func (b *Broker) leader(t *topics.Topic, index int32, clientEpoch int32) (*topics.Partition, error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition
	}
	p := t.Partitions[index]
	if p.Replica == nil {
		if ip := b.imagePartition(t.ID, index); ip != nil && clientEpoch > ip.LeaderEpoch {
			return nil, kerr.UnknownLeaderEpoch
		}
		return nil, replica.ErrNotLeader
	}
	if err := p.Replica.CheckEpoch(clientEpoch); err != nil {
		return nil, err
	}
	return p, nil
}

// leaderHint is what KIP-951 tells a client that asked a replica that does not lead: the
// current leader and epoch (-1 if unknown), and its endpoint.
func (b *Broker) leaderHint(id [16]byte, index int32) (leader, epoch int32, node *controller.Node) {
	p := b.imagePartition(id, index)
	if p == nil || p.Leader < 0 {
		return -1, -1, nil
	}
	return p.Leader, p.LeaderEpoch, b.cl.Image().Nodes[p.Leader]
}

// isNotLeader reports whether err is one a KIP-951 hint goes with.
func isNotLeader(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch)
}

// produceEndpoints adds a node to a produce response's NodeEndpoints, once.
func produceEndpoint(resp *kmsg.ProduceResponse, n *controller.Node, listener string) {
	if n == nil || slices.ContainsFunc(resp.Brokers, func(e kmsg.ProduceResponseBroker) bool { return e.NodeID == n.ID }) {
		return
	}
	host, port, ok := n.Endpoint(listener)
	if !ok {
		return
	}
	e := kmsg.NewProduceResponseBroker()
	e.NodeID, e.Host, e.Port = n.ID, host, port
	if n.Rack != "" {
		e.Rack = &n.Rack
	}
	resp.Brokers = append(resp.Brokers, e)
}

// fetchEndpoint adds a node to a fetch response's NodeEndpoints, once.
func fetchEndpoint(resp *kmsg.FetchResponse, n *controller.Node, listener string) {
	if n == nil || slices.ContainsFunc(resp.Brokers, func(e kmsg.FetchResponseBroker) bool { return e.NodeID == n.ID }) {
		return
	}
	host, port, ok := n.Endpoint(listener)
	if !ok {
		return
	}
	e := kmsg.NewFetchResponseBroker()
	e.NodeID, e.Host, e.Port = n.ID, host, port
	if n.Rack != "" {
		e.Rack = &n.Rack
	}
	resp.Brokers = append(resp.Brokers, e)
}

// waitReady waits (up to wait) until a partition's new leader has committed its epoch's
// start, so that what it tells readers never goes back. It reports whether it did.
func waitReady(ctx context.Context, r *replica.Replica, wait time.Duration) bool {
	if _, ready, _ := r.Leading(); ready {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ch := r.Changed()
		_, ready, leading := r.Leading()
		if ready || !leading {
			return ready
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func errorf(code *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", code, fmt.Sprintf(format, args...))
}

// adminBarrier makes this node's image at least as new as the controller's before an admin
// change is checked and computed against it (a topic's existence, its partitions, the configs
// an incremental change starts from). Kafka forwards these requests to the active controller,
// which has every change committed; this node's image may trail it, a topic just created
// through another node then being unknown here, or a config change made there missing from the
// configs this one would write back. Without a controller in time the change goes on as
// before: proposing it fails then anyway.
func (b *Broker) adminBarrier(ctx context.Context) {
	bctx, cancel := context.WithTimeout(ctx, objectBarrierTimeout)
	defer cancel()
	if err := b.cl.BarrierReconciled(bctx); err != nil {
		b.logger.Debug("broker: no controller confirmed the image for an admin change", "err", err)
	}
}

// setTopicConfigs replaces a topic's explicitly set configs, through the controller.
func (b *Broker) setTopicConfigs(name string, configs map[string]string, validateOnly bool) *adminError {
	aerr, _ := b.setTopicConfigsFrom(name, configs, nil, validateOnly)
	return aerr
}

// setTopicConfigsFrom is setTopicConfigs for configs computed from base (non-nil): they are
// set only if the topic's configs are still base; changed reports that they were not.
func (b *Broker) setTopicConfigsFrom(name string, configs, base map[string]string, validateOnly bool) (aerr *adminError, changed bool) {
	if err := b.topics.ValidateConfigs(configs); err != nil {
		return toAdminError(err), false
	}
	t, ok := b.topics.Get(name)
	if !ok {
		return adminErr(kerr.UnknownTopicOrPartition, "Topic %s does not exist.", name), false
	}
	if aerr := checkObjectConfigs(t, configs); aerr != nil {
		return aerr, false
	}
	if validateOnly {
		return nil, false
	}
	res, aerr := b.propose(b.ctx, &controller.Command{Op: controller.OpSetTopicConfigs,
		SetTopicConfigs: &controller.SetTopicConfigs{ID: t.ID, Configs: configs, Conditional: base != nil, Base: base}})
	return aerr, errors.Is(res.Err, controller.ErrConfigsChanged)
}

// configAttempts bounds how often an incremental config change is computed again after the
// topic's configs changed under it.
const configAttempts = 5

// setBrokerConfigs replaces the dynamic broker configs of this node (perBroker) or of the
// cluster, through the controller.
func (b *Broker) setBrokerConfigs(perBroker bool, configs map[string]string, validateOnly bool) *adminError {
	if err := b.topics.CheckBrokerConfigs(perBroker, configs); err != nil {
		return toAdminError(err)
	}
	if validateOnly {
		return nil
	}
	node := int32(-1)
	if perBroker {
		node = b.cfg.NodeID
	}
	_, aerr := b.propose(b.ctx, &controller.Command{Op: controller.OpSetNodeConfigs,
		SetNodeConfigs: &controller.SetNodeConfigs{Node: node, Configs: configs}})
	return aerr
}
