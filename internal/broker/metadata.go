package broker

import (
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objects"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.Metadata, 0, 12, handleMetadata) }

// notRequested is Kafka's authorized-operations value when the client did not ask for them.
const notRequested = math.MinInt32

func handleMetadata(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := r.conn.b
	img := b.cl.Image()
	var rv *ripcordView
	if b.ripcording() {
		rv = b.ripcordView()
	}
	listed := b.brokerList(img, rv, r.conn.listener.Name)
	for _, m := range listed {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = m.Node, m.Host, m.Port
		if m.Rack != "" {
			mb.Rack = &m.Rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = b.controllerFor(listed)
	resp.AuthorizedOperations = notRequested

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.topics.List() {
			if r.allowedTopic(kmsg.ACLOperationDescribe, t.Name) { // the others are not shown
				resp.Topics = append(resp.Topics, b.metadataTopic(img, rv, t, clientZone(r.clientID)))
			}
		}
		r.metadataOperations(req, resp)
		return reply{resp: resp}
	}
	if req.Version < 12 && slices.ContainsFunc(req.Topics, func(rt kmsg.MetadataRequestTopic) bool {
		return rt.Topic == nil || rt.TopicID != [16]byte{}
	}) {
		// Lookups by topic id begin at v12: as Kafka, every topic is INVALID_REQUEST.
		for _, rt := range req.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.AuthorizedOperations, mt.ErrorCode = rt.Topic, rt.TopicID, notRequested, kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, mt)
		}
		return reply{resp: resp}
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	type asked struct {
		name string
		id   [16]byte
	}
	seen := map[asked]bool{} // a topic asked for twice is answered once, as Kafka's (a set)
	for _, rt := range req.Topics {
		if rt.TopicID != [16]byte{} {
			// By id: a name sent with it is not looked at, as Kafka's handleTopicMetadataRequest
			// (the Java client sends "" beside the id, which was looked up as a topic name).
			rt.Topic = nil
		}
		a := asked{id: rt.TopicID}
		if rt.Topic != nil {
			a.name = *rt.Topic
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		var t *topics.Topic
		var ok bool
		if rt.Topic != nil {
			t, ok = b.topics.Get(*rt.Topic)
		} else {
			t, ok = b.topics.GetByID(rt.TopicID)
		}
		denied := func() {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.AuthorizedOperations, mt.ErrorCode = rt.Topic, rt.TopicID, notRequested, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, mt)
		}
		switch {
		case ok && !r.allowedTopic(kmsg.ACLOperationDescribe, t.Name):
			denied() // by id: the name is not told
			continue
		case ok:
			resp.Topics = append(resp.Topics, b.metadataTopic(img, rv, t, clientZone(r.clientID)))
			continue
		case rt.Topic != nil && !r.allowedTopic(kmsg.ACLOperationDescribe, *rt.Topic),
			rt.Topic != nil && autoCreate && b.cfg.AutoCreateTopics && !r.allowedCluster(kmsg.ACLOperationCreate) && !r.allowedTopic(kmsg.ACLOperationCreate, *rt.Topic):
			denied()
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID, mt.AuthorizedOperations = rt.Topic, rt.TopicID, notRequested
		mt.IsInternal = rt.Topic != nil && internalTopic(*rt.Topic) // as Kafka's getTopicMetadata, even when missing
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if rt.Topic == nil {
			mt.ErrorCode = kerr.UnknownTopicID.Code
		} else {
			if err := topics.ValidateName(*rt.Topic); err != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			} else if autoCreate && b.cfg.AutoCreateTopics {
				if t, ok = b.autoCreate(ctx, *rt.Topic); ok {
					resp.Topics = append(resp.Topics, b.metadataTopic(b.cl.Image(), rv, t, clientZone(r.clientID)))
					continue
				}
				// Retriable: the client asks again. Kafka's KRaft brokers answer a topic they
				// send for creation so too (AutoTopicCreationManager.sendCreateTopicRequest).
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	r.metadataOperations(req, resp)
	return reply{resp: resp}
}

// controllerFor is the controller Metadata and DescribeCluster name: the controller quorum's
// leader, or while none is known (an election, the quorum lost) this node if listed, else the
// first node listed. Any node takes what a client sends the controller (it forwards it), as Kafka's KRaft
// brokers do, which always name a live broker. The Java admin client sends
// ListPartitionReassignments and ElectLeaders to the node named: with none, kafka-topics
// --describe timed out while the quorum was lost, where Kafka answers from its last metadata.
//
// Likewise while the known controller is not listed (fenced, or without an endpoint on this
// listener): the Java client looks the controller up among the brokers listed.
func (b *Broker) controllerFor(listed []objects.Member) int32 {
	id := b.cl.ControllerID()
	if len(listed) == 0 || slices.ContainsFunc(listed, func(m objects.Member) bool { return m.Node == id }) {
		return id
	}
	for _, m := range listed {
		if m.Node == b.cfg.NodeID {
			return m.Node
		}
	}
	return listed[0].Node
}

// autoCreate creates a topic a client asked for (auto.create.topics.enable), with the default
// partitions and replication factor; the coordinators' topics as their coordinators create
// them (their partition counts and configs), as Kafka's AutoTopicCreationManager does.
func (b *Broker) autoCreate(ctx context.Context, name string) (*topics.Topic, bool) {
	var aerr *adminError
	switch name {
	case OffsetsTopic:
		aerr = b.groups.ensureTopic(ctx)
	case TxnStateTopic:
		aerr = b.txns.ensureTopic(ctx)
	default:
		if other, ok := collides(b.topics, name); ok { // as CreateTopics: Kafka's controller refuses it
			aerr = adminErr(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", name, other)
			break
		}
		assignments := make([][]int32, b.cfg.DefaultPartitions) // an object topic's: no replicas
		if !b.storedInObjects(name, nil) {
			assignments, aerr = b.assignReplicas(0, b.cfg.DefaultPartitions, b.defaultReplicationFactor())
		}
		if aerr == nil {
			_, aerr = b.createTopicNow(ctx, name, nil, assignments)
		}
	}
	if aerr != nil && aerr.code != kerr.TopicAlreadyExists {
		b.logger.Warn("broker: auto-creating a topic failed", "topic", name, "err", aerr.msg)
	}
	return b.topics.Get(name)
}

// metadataTopic describes a topic; rv is the Ripcord view (nil: the image's); zone is the
// client's (clientZone), whose nodes lead an object topic's partitions for it.
func (b *Broker) metadataTopic(img *controller.Image, rv *ripcordView, t *topics.Topic, zone string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, internalTopic(t.Name)
	mt.AuthorizedOperations = notRequested
	object := isObjectTopic(t)
	candidates := img.ObjectNodes()
	if rv != nil {
		candidates = rv.nodes
	}
	if object {
		candidates = zoneNodes(img, rv, candidates, zone)
	}
	for _, p := range t.Partitions {
		if object {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = p.Index, objectLeader(candidates, t.ID, p.Index), 0
			if mp.Leader < 0 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			} else {
				mp.Replicas, mp.ISR = []int32{mp.Leader}, []int32{mp.Leader}
			}
			mt.Partitions = append(mt.Partitions, mp)
			continue
		}
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Index, -1, -1
		_, ip, ok := img.Partition(t.ID, p.Index)
		if !ok {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mt.Partitions = append(mt.Partitions, mp)
			continue
		}
		mp.Leader, mp.LeaderEpoch = ip.Leader, ip.LeaderEpoch
		// During a move: the target, then the replicas leaving (Kafka's order).
		mp.Replicas, mp.ISR = ip.KafkaReplicas(), slices.Clone(ip.ISR)
		live := img.Live
		if rv != nil {
			live = func(n int32) bool { return rv.live[n] }
		}
		for _, n := range mp.Replicas {
			if !live(n) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, n)
			}
		}
		if ip.Leader < 0 || rv != nil && !live(ip.Leader) { // Ripcord: a leader that stopped announcing is gone
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// metadataOperations fills in the authorized operations (KIP-430) the request asks for: per
// topic, and for the cluster (v8-v10).
func (r *request) metadataOperations(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations { // v11 moved it to DescribeCluster
		resp.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeCluster, security.ClusterResource, clusterOps)
	}
	if req.Version < 8 || !req.IncludeTopicAuthorizedOperations {
		return
	}
	// Every row with a name, an unknown or invalid topic's too, as Kafka's
	// handleTopicMetadataRequest; not a denied one (Kafka appends those afterwards).
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.ErrorCode != kerr.TopicAuthorizationFailed.Code && t.Topic != nil {
			t.AuthorizedOperations = r.authorizedOperations(kmsg.ACLResourceTypeTopic, *t.Topic, topicOps)
		}
	}
}
