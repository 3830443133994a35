package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/txn"
)

func init() { register(kmsg.DescribeProducers, 0, 0, handleDescribeProducers) }

// handleDescribeProducers lists the idempotent producers each partition remembers (KIP-664), with
// the first offset of each one's open transaction and its last marker's coordinator epoch (what
// kafka-transactions describe-producers and find-hanging show).
func handleDescribeProducers(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t, known := r.conn.b.topics.Get(rt.Topic)
		invalid := topics.ValidateName(rt.Topic) // checked first, as Kafka's checkValidTopic
		for _, index := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = index
			var producers []txn.Producer
			err := error(kerr.UnknownTopicOrPartition)
			switch {
			case invalid != nil:
				sp.ErrorMessage = kmsg.StringPtr(invalid.Error())
				err = kerr.InvalidTopicException
			case !r.allowedTopic(kmsg.ACLOperationRead, rt.Topic):
				err = kerr.TopicAuthorizationFailed
			case known && isObjectTopic(t): // any node serves it, from the image
				var op *objtopic.Partition
				if op, err = r.conn.b.objectPartition(t.ID, index); err == nil {
					producers = op.Producers()
				}
			case known:
				var part *topics.Partition
				if part, err = r.conn.b.leader(t, index, -1); err == nil {
					producers = part.Log.Producers()
				}
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, p := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = p.ID, int32(p.Epoch)
				ap.LastSequence, ap.LastTimestamp = p.LastSeq(), p.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = p.CoordinatorEpoch, p.TxnFirstOffset // -1: none
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{resp: resp}
}
