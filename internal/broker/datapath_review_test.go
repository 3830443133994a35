package broker

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyMessage is a one-message log entry of magic 0 or 1 (a pre-0.11 record set).
func legacyMessage(magic byte) []byte {
	m := []byte{magic, 0}
	if magic == 1 {
		m = binary.BigEndian.AppendUint64(m, 1700000000000)
	}
	m = binary.BigEndian.AppendUint32(m, 1)
	m = append(m, 'k')
	m = binary.BigEndian.AppendUint32(m, 3)
	m = append(m, "val"...)
	var e []byte
	e = binary.BigEndian.AppendUint64(e, 0)
	e = binary.BigEndian.AppendUint32(e, uint32(4+len(m)))
	e = binary.BigEndian.AppendUint32(e, crc32.ChecksumIEEE(m))
	return append(e, m...)
}

// TestProduceRecordSetShape: a produce request's record set is read as Kafka's
// ProduceRequest.validateRecords reads it, before any other check. A v3+ request with no
// complete batch, a batch of magic 0 or 1, or a second complete batch is INVALID_RECORD, which
// clients do not retry; only a length below a message's overhead is CORRUPT_MESSAGE; bytes
// after the batch too few to be another are dropped (Kafka's trimInvalidBytes) and the batch
// appended. Runnel used to answer CORRUPT_MESSAGE (retriable: a Java producer retried such a
// batch until its delivery timeout) for a magic 0 or 1 message or a cut-off batch, and
// INVALID_RECORD for a batch followed by a few stray bytes.
func TestProduceRecordSetShape(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "shape", 1, nil)
	shortLength := ctBatch(1, 10)
	binary.BigEndian.PutUint32(shortLength[8:], 13)
	cases := []struct {
		name    string
		records []byte
		want    int16
		added   int64
	}{
		{"magic 0 message", legacyMessage(0), kerr.InvalidRecord.Code, 0},
		{"magic 1 message", legacyMessage(1), kerr.InvalidRecord.Code, 0},
		{"cut-off batch", ctBatch(2, 10)[:40], kerr.InvalidRecord.Code, 0},
		{"fewer bytes than a log entry header", []byte{0, 0, 0, 0, 0}, kerr.InvalidRecord.Code, 0},
		{"length below a message's overhead", shortLength, kerr.CorruptMessage.Code, 0},
		{"two batches", append(ctBatch(1, 10), ctBatch(1, 10)...), kerr.InvalidRecord.Code, 0},
		{"a batch and 3 stray bytes", append(ctBatch(2, 10), 1, 2, 3), 0, 2},
		{"a batch and the start of another", append(ctBatch(2, 10), ctBatch(1, 10)[:30]...), 0, 2},
	}
	for _, c := range cases {
		before := tp.Partitions[0].Log.EndOffset()
		resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"shape", 0, c.records})).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != c.want {
			t.Errorf("produce(%s) = %s; want %s", c.name, errName(p.ErrorCode), errName(c.want))
		}
		if got := tp.Partitions[0].Log.EndOffset() - before; got != c.added {
			t.Errorf("produce(%s) appended %d records; want %d", c.name, got, c.added)
		}
	}
}

// TestFetchNegativeLeaderEpochIsNone: a fetch's CurrentLeaderEpoch below -1 means no epoch, as
// any negative one does in Kafka's FetchRequest (optionalEpoch). Runnel used to answer it
// FENCED_LEADER_EPOCH.
func TestFetchNegativeLeaderEpochIsNone(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "neg", 1, nil)
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"neg", 0, ctBatch(2, 10)}))
	req := ctFetch(12, 0, 0, "neg", 0, 0)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = -5
	resp := ctRoundTrip(t, addr, req).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("fetch with CurrentLeaderEpoch -5 = %s, %d bytes; want NONE with the records", errName(p.ErrorCode), len(p.RecordBatches))
	}
}
