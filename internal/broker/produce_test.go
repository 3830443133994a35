package broker

import (
	"context"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
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

// TestKeylessRecordNamed: a keyless record in a batch for a compacted topic is INVALID_RECORD,
// and the response names the record (ErrorRecords, KIP-467), as Kafka's does.
func TestKeylessRecordNamed(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "keyed", 1, map[string]string{"cleanup.policy": "compact"})
	var body []byte
	body = batch.AppendRecord(body, 0, 0, []byte("k0"), []byte("v"), 0, nil)
	body = batch.AppendRecord(body, 0, 1, nil, []byte("v"), 0, nil)
	ts := time.Now().UnixMilli()
	b := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: 1, BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 2}, body)
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"keyed", 0, b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidRecord.Code || len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("error %v, error records %+v; want INVALID_RECORD naming record 1", kerr.ErrorForCode(p.ErrorCode), p.ErrorRecords)
	}
	// Kafka's LogValidator.validateKey names the partition in the message.
	const want = "Compacted topic cannot accept message without key in topic partition keyed-0"
	if m := p.ErrorRecords[0].ErrorMessage; m == nil || *m != want {
		t.Errorf("record error message %v; want %q, as Kafka", m, want)
	}
}

// TestMaxMessageBytesAfterRecompression: a batch within max.message.bytes as sent, but over it
// once recompressed with the topic's compression.type, is MESSAGE_TOO_LARGE, as Kafka checks
// the batch as stored.
func TestMaxMessageBytesAfterRecompression(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "plain", 1, map[string]string{"compression.type": "uncompressed", "max.message.bytes": "2000"})
	gz, err := batch.Recompress(ctBatch(10, 500), batch.CodecGzip) // 5,000 bytes of values, compressed small
	if err != nil {
		t.Fatal(err)
	}
	if len(gz) > 2000 {
		t.Fatalf("the gzip batch is %d bytes; the test needs it under the limit", len(gz))
	}
	p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"plain", 0, gz})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("error %v; want MESSAGE_TOO_LARGE (over the limit once stored uncompressed)", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestTimestampBounds: with message.timestamp.before.max.ms / after.max.ms (KIP-937) a
// CreateTime batch holding a record too far from the broker's clock is INVALID_TIMESTAMP, the
// record named in ErrorRecords, and nothing is appended; within the bounds it is taken.
func TestTimestampBounds(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "ts", 1, map[string]string{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"})
	at := func(offsets ...time.Duration) []byte {
		now := time.Now().UnixMilli()
		var body []byte
		for i, d := range offsets {
			body = batch.AppendRecord(body, d.Milliseconds(), int32(i), []byte("k"), []byte("v"), 0, nil)
		}
		return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(offsets) - 1), BaseTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(offsets))}, body)
	}
	for _, tc := range []struct {
		what    string
		offsets []time.Duration
		bad     []int32
	}{
		{"an hour ahead", []time.Duration{0, time.Hour}, []int32{1}},
		{"an hour behind", []time.Duration{-time.Hour, 0, -2 * time.Hour}, []int32{0, 2}},
		{"within a minute", []time.Duration{0, 30 * time.Second, -30 * time.Second}, nil},
	} {
		p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"ts", 0, at(tc.offsets...)})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		var bad []int32
		for _, r := range p.ErrorRecords {
			bad = append(bad, r.RelativeOffset)
		}
		wantCode := int16(0)
		if tc.bad != nil {
			wantCode = kerr.InvalidTimestamp.Code
		}
		if p.ErrorCode != wantCode || fmt.Sprint(bad) != fmt.Sprint(tc.bad) {
			t.Errorf("%s: %v, records %v; want %v, records %v", tc.what, kerr.ErrorForCode(p.ErrorCode), bad, kerr.ErrorForCode(wantCode), tc.bad)
		}
	}
	if tp, _ := reg.Get("ts"); tp.Partitions[0].Log.EndOffset() != 3 {
		t.Errorf("the partition holds %d records; want only the 3 within bounds", tp.Partitions[0].Log.EndOffset())
	}
}

// TestTransactionalBatchWithoutTransactionalID: a produce carrying a transactional batch but no
// transactional id is refused whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's
// (KafkaApis.handleProduceRequest): nothing is appended, to any partition of the request.
func TestTransactionalBatchWithoutTransactionalID(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "tx", 2, nil)
	var body []byte
	body = batch.AppendRecord(body, 0, 0, []byte("k"), []byte("v"), 0, nil)
	ts := time.Now().UnixMilli()
	txBatch := batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrTransactional, BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, RecordCount: 1}, body)
	if !batch.FirstIsTransactional(txBatch) || batch.FirstIsTransactional(ctBatch(1, 10)) {
		t.Fatal("FirstIsTransactional does not tell the batches apart")
	}
	resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"tx", 0, ctBatch(1, 10)}, ctPart{"tx", 1, txBatch})).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Errorf("partition %d: %v; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	tp, _ := reg.Get("tx")
	for _, p := range tp.Partitions {
		if end := p.Log.EndOffset(); end != 0 {
			t.Errorf("partition %d holds %d records after the refused produce", p.Index, end)
		}
	}
}

// TestMaxTimestampFromTheRecords: a CreateTime batch whose header claims a max timestamp below
// its records' latest is stored with the records' (as Kafka's LogValidator sets it), so a
// lookup of the max timestamp (ListOffsets -3) and of a time past the header's claim find the
// right record.
func TestMaxTimestampFromTheRecords(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "mts", 1, nil)
	base := time.Now().UnixMilli() - 60_000
	var body []byte
	for i := range 3 {
		body = batch.AppendRecord(body, int64(i)*1000, int32(i), []byte("k"), []byte("v"), 0, nil)
	}
	b := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: 2, BaseTimestamp: base, MaxTimestamp: base, // wrong: the last record is at base+2000
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 3}, body)
	resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"mts", 0, b})).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 7, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "mts"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return ctRoundTrip(t, addr, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if p := list(-3); p.ErrorCode != 0 || p.Offset != 2 || p.Timestamp != base+2000 {
		t.Errorf("ListOffsets max timestamp: offset %d at %d, %v; want offset 2 at %d", p.Offset, p.Timestamp, kerr.ErrorForCode(p.ErrorCode), base+2000)
	}
	if p := list(base + 1500); p.ErrorCode != 0 || p.Offset != 2 {
		t.Errorf("ListOffsets by time %d: offset %d, %v; want 2", base+1500, p.Offset, kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestRecompressionLevel: a batch recompressed for compression.type=gzip is compressed at the
// topic's compression.gzip.level (KIP-390), as Kafka's broker does; it used to be compressed at
// the codec's default level whatever the topic said.
func TestRecompressionLevel(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	var body []byte
	ts := time.Now().UnixMilli()
	for i := range 200 { // text that compresses, but better with more effort
		v := []byte(fmt.Sprintf("record %d of a log line with a user id %d and a path /api/v1/items/%d", i, i*7919%1000, i*31%97))
		body = batch.AppendRecord(body, 0, int32(i), nil, v, 0, nil)
	}
	plain := batch.AppendBatch(nil, batch.Header{LastOffsetDelta: 199, BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 200}, body)
	stored := map[string]int64{}
	for _, level := range []string{"1", "9"} {
		name := "gz" + level
		tp := ctCreate(t, reg, name, 1, map[string]string{"compression.type": "gzip", "compression.gzip.level": level})
		p := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{name, 0, plain})).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("produce to %s: %v", name, kerr.ErrorForCode(p.ErrorCode))
		}
		stored[level] = tp.Partitions[0].Log.Size()
	}
	if stored["9"] >= stored["1"] {
		t.Errorf("stored %d bytes at gzip level 9 and %d at level 1; want level 9 smaller", stored["9"], stored["1"])
	}
}

// TestStorageFailuresAreStorageErrors: a disk that is full, failing or read-only answers
// KAFKA_STORAGE_ERROR (retriable), as Kafka answers for a failed log directory, not
// UNKNOWN_SERVER_ERROR; a DeleteRecords whose checkpoint hit a full disk was answered that way.
func TestStorageFailuresAreStorageErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		err := fmt.Errorf("writing the checkpoint: %w", &fs.PathError{Op: "write", Path: "/data/checkpoint.tmp", Err: errno})
		if got := errorCode(err); got != kerr.KafkaStorageError.Code {
			t.Errorf("errorCode(%v) = %d; want KAFKA_STORAGE_ERROR", err, got)
		}
	}
}
