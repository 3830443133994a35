package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// A record header's key is a non-null string in message format
// v2. Kafka's DefaultRecord.readFrom / readPartiallyFrom throw InvalidRecordException("Invalid
// negative header key size -1") while LogValidator walks the batch, so the produce is
// INVALID_RECORD and nothing is appended. Stored, such a record breaks every Java consumer
// that fetches it (the same exception on the client side).
func TestNullHeaderKeyRejected(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "hdr", 1, nil)
	var hdr []byte
	hdr = binary.AppendVarint(hdr, -1) // header key: null
	hdr = binary.AppendVarint(hdr, 1)
	hdr = append(hdr, 'v')
	body := batch.AppendRecord(nil, 0, 0, []byte("k"), []byte("v"), 1, hdr)
	ts := time.Now().UnixMilli()
	b := batch.AppendBatch(nil, batch.Header{BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, body)
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"hdr", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	tp, _ := reg.Get("hdr")
	if p.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("produce of a record with a null header key: error %v, base offset %d, log end %d; want INVALID_RECORD and nothing appended",
			kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, tp.Partitions[0].Log.EndOffset())
	}
}

// Kafka's UnifiedLog.analyzeAndValidateRecords refuses a
// client's v2 batch whose baseOffset is not 0 ("The baseOffset of the record batch in the
// append to ... should be 0, but it is N") with INVALID_RECORD.
func TestNonZeroBaseOffsetRejected(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "bo", 1, nil)
	b := ctBatch(1, 10)
	batch.SetBaseOffset(b, 42) // outside the CRC: the batch is otherwise intact
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"bo", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("produce of a batch with base offset 42: error %v, base offset %d; want INVALID_RECORD",
			kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
}

// Kafka's LogValidator validates every record of the batch and
// collects one RecordError per bad record (validateRecord -> validateKey), then throws them
// all (processRecordErrors); a compacted topic's batch with two keyless records names both.
func TestEveryKeylessRecordNamed(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "keyed2", 1, map[string]string{"cleanup.policy": "compact"})
	var body []byte
	body = batch.AppendRecord(body, 0, 0, nil, []byte("v"), 0, nil)
	body = batch.AppendRecord(body, 0, 1, []byte("k"), []byte("v"), 0, nil)
	body = batch.AppendRecord(body, 0, 2, nil, []byte("v"), 0, nil)
	ts := time.Now().UnixMilli()
	b := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: 2, BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 3}, body)
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"keyed2", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	var named []int32
	for _, r := range p.ErrorRecords {
		named = append(named, r.RelativeOffset)
	}
	if p.ErrorCode != kerr.InvalidRecord.Code || len(named) != 2 {
		t.Errorf("two keyless records (0 and 2): error %v, error records %v; want INVALID_RECORD naming [0 2]", kerr.ErrorForCode(p.ErrorCode), named)
	}
}
