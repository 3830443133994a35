package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAcks0ErrorClosesConnection: an acks=0 produce that fails on a partition closes the
// connection, as Kafka's does (KafkaApis.handleProduceRequest), so the client notices and
// refreshes its metadata rather than go on sending where its records are dropped.
func TestAcks0ErrorClosesConnection(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	nc := ctDial(t, addr)
	defer nc.Close()
	req := ctProduce(9, 0, ctPart{"no-such-topic", 0, ctBatch(1, 10)})
	if _, err := nc.Write(ctEncode(req, 1)); err != nil {
		t.Fatal(err)
	}
	ctExpectClosed(t, nc, "acks=0 produce to an unknown topic")
}

// TestCompactedCorruptBatch: a batch damaged on the way (a bad CRC) to a compacted topic is
// CORRUPT_MESSAGE, which clients retry, as Kafka checks the CRC before the keys; no batch at
// all is INVALID_RECORD.
func TestCompactedCorruptBatch(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "cmp", 1, map[string]string{"cleanup.policy": "compact"})
	b := ctBatch(2, 10)
	b[len(b)-1] ^= 0xff // flip a byte of the last record's value: CRC mismatch
	resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"cmp", 0, b})).(*kmsg.ProduceResponse)
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.CorruptMessage.Code {
		t.Errorf("error = %v; want CORRUPT_MESSAGE", kerr.ErrorForCode(got))
	}
	empty := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"cmp", 0, nil})).(*kmsg.ProduceResponse)
	if got := empty.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidRecord.Code {
		t.Errorf("empty records: error = %v; want INVALID_RECORD", kerr.ErrorForCode(got))
	}
}

// TestProduceToInternalTopic: a client's produce to a coordinator's log is refused with
// INVALID_TOPIC_EXCEPTION, as Kafka does (ReplicaManager.appendToLocalLog) for any client but
// its admin tools (client id __admin_client): such records would be loaded as group state.
func TestProduceToInternalTopic(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	if aerr := b.ensureCoordinatorTopic(context.Background(), OffsetsTopic, 1, 1); aerr != nil {
		t.Fatal(aerr.msg)
	}
	// A keyed batch (the offsets topic is compacted).
	resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{OffsetsTopic, 0, ctBatch(1, 10)})).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidTopicException.Code {
		t.Errorf("produce to %s: error %v, base offset %d; want INVALID_TOPIC_EXCEPTION", OffsetsTopic, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	if ot, ok := reg.Get(OffsetsTopic); !ok || ot.Partitions[0].Log.EndOffset() != 0 {
		t.Errorf("%s holds records after the refused produce", OffsetsTopic)
	}
}
