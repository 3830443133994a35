package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// Kafka's LogValidator.validateTimestamp skips records with NO_TIMESTAMP (-1) in the
// message.timestamp.before/after.max.ms check: such a batch is accepted.
func TestNoTimestampRecordAccepted(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "ts", 1, map[string]string{"message.timestamp.before.max.ms": "86400000"})
	var body []byte
	body = batch.AppendRecord(body, 0, 0, []byte("k"), []byte("v"), 0, nil)
	b := batch.AppendBatch(nil, batch.Header{BaseTimestamp: -1, MaxTimestamp: -1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, body)
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"ts", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("record with NO_TIMESTAMP (-1): %v (%v); Kafka accepts it (the bounds skip NO_TIMESTAMP)", kerr.ErrorForCode(p.ErrorCode), *p.ErrorMessage)
	}
}

// Kafka rejects a producer batch that sets the LogAppendTime attribute (INVALID_TIMESTAMP,
// "Producer should not set timestamp type to LogAppendTime"). Runnel stored it, so a client
// stamped every record with any time it liked, past message.timestamp.*.max.ms.
func TestProducerLogAppendTimeAttrRejected(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "ts", 1, map[string]string{"message.timestamp.after.max.ms": "60000"})
	now := time.Now().UnixMilli()
	future := now + 100*365*24*3600*1000 // a century ahead
	var body []byte
	body = batch.AppendRecord(body, 0, 0, []byte("k"), []byte("v"), 0, nil)
	b := batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrLogAppendTime, BaseTimestamp: now, MaxTimestamp: future,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, body)
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"ts", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidTimestamp.Code {
		tp, _ := reg.Get("ts")
		stored, _ := tp.Partitions[0].Log.Read(nil, 0, 1<<20)
		h, _ := batch.ParseHeader(stored)
		t.Fatalf("batch with the LogAppendTime attribute: %v; want INVALID_TIMESTAMP. Stored max timestamp %d (now %d): consumers see the record a century ahead despite after.max.ms=60000",
			kerr.ErrorForCode(p.ErrorCode), h.MaxTimestamp, now)
	}
}
