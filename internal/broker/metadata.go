package broker

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.Metadata, 0, 12, handleMetadata) }

// notRequested is Kafka's authorized-operations value when the client did not ask for them.
const notRequested = math.MinInt32

func handleMetadata(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := r.conn.b
	host := b.cfg.AdvertisedHost
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: host, Port: b.cfg.AdvertisedPort}}
	resp.ClusterID = &b.cfg.ClusterID
	resp.ControllerID = b.cfg.NodeID
	resp.AuthorizedOperations = notRequested

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.topics.List() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t, req))
		}
		return reply{resp: resp}
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		var t *topics.Topic
		var ok bool
		if rt.Topic != nil {
			t, ok = b.topics.Get(*rt.Topic)
		} else {
			t, ok = b.topics.GetByID(rt.TopicID)
		}
		if ok {
			resp.Topics = append(resp.Topics, b.metadataTopic(t, req))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID, mt.AuthorizedOperations = rt.Topic, rt.TopicID, notRequested
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if rt.Topic == nil {
			mt.ErrorCode = kerr.UnknownTopicID.Code
		} else {
			if err := topics.ValidateName(*rt.Topic); err != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			} else if autoCreate && b.cfg.AutoCreateTopics {
				t, err := b.topics.Create(*rt.Topic, b.cfg.DefaultPartitions, nil, false)
				if err == nil || errors.Is(err, topics.ErrTopicExists) {
					if t, ok = b.topics.Get(*rt.Topic); ok {
						resp.Topics = append(resp.Topics, b.metadataTopic(t, req))
						continue
					}
				}
				b.logger.Warn("broker: auto-creating a topic failed", "topic", *rt.Topic, "err", err)
				mt.ErrorCode = kerr.UnknownServerError.Code
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return reply{resp: resp}
}

func (b *Broker) metadataTopic(t *topics.Topic, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, t.Name == OffsetsTopic
	mt.AuthorizedOperations = notRequested
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Index, b.cfg.NodeID, 0
		mp.Replicas, mp.ISR = []int32{b.cfg.NodeID}, []int32{b.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
