package txn

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// step is one produced batch in a table test and what Check must say about it.
type step struct {
	pid     int64
	epoch   int16
	seq     int32
	records int32
	want    error // nil: append; errDup: a duplicate of the batch at dupOffset
	dupOf   int64 // for errDup: the first offset of the original
}

var errDup = errors.New("duplicate")

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{1, 0, 0, 3, nil, 0}, {1, 0, 3, 1, nil, 0}, {1, 0, 4, 2, nil, 0}}},
		{"retry of the last batch", []step{{1, 0, 0, 3, nil, 0}, {1, 0, 3, 2, nil, 0}, {1, 0, 3, 2, errDup, 3}}},
		{"retry of the oldest of 5", []step{{1, 0, 0, 1, nil, 0}, {1, 0, 1, 1, nil, 0}, {1, 0, 2, 1, nil, 0}, {1, 0, 3, 1, nil, 0},
			{1, 0, 4, 1, nil, 0}, {1, 0, 0, 1, errDup, 0}}},
		{"a batch older than 5 is a gap", []step{{1, 0, 0, 1, nil, 0}, {1, 0, 1, 1, nil, 0}, {1, 0, 2, 1, nil, 0}, {1, 0, 3, 1, nil, 0},
			{1, 0, 4, 1, nil, 0}, {1, 0, 5, 1, nil, 0}, {1, 0, 0, 1, kerr.OutOfOrderSequenceNumber, 0}}},
		{"gap", []step{{1, 0, 0, 3, nil, 0}, {1, 0, 4, 1, kerr.OutOfOrderSequenceNumber, 0}}},
		{"overlap that is not a retry", []step{{1, 0, 0, 3, nil, 0}, {1, 0, 1, 3, kerr.OutOfOrderSequenceNumber, 0}}},
		{"unknown producer at any sequence", []step{{7, 3, 42, 2, nil, 0}, {7, 3, 44, 1, nil, 0}}},
		{"new epoch restarts at 0", []step{{1, 0, 0, 5, nil, 0}, {1, 1, 0, 1, nil, 0}, {1, 1, 1, 1, nil, 0}}},
		{"new epoch not at 0", []step{{1, 0, 0, 5, nil, 0}, {1, 1, 5, 1, kerr.OutOfOrderSequenceNumber, 0}}},
		{"stale epoch", []step{{1, 0, 0, 1, nil, 0}, {1, 1, 0, 1, nil, 0}, {1, 0, 1, 1, kerr.InvalidProducerEpoch, 0}}},
		{"retry from a stale epoch is not a duplicate", []step{{1, 0, 0, 1, nil, 0}, {1, 1, 0, 1, nil, 0}, {1, 0, 0, 1, kerr.InvalidProducerEpoch, 0}}},
		{"producers are independent", []step{{1, 0, 0, 1, nil, 0}, {2, 0, 0, 1, nil, 0}, {1, 0, 1, 1, nil, 0}, {2, 0, 0, 1, errDup, 1}}},
		{"sequence wraps", []step{{1, 0, math.MaxInt32 - 1, 2, nil, 0}, {1, 0, 0, 1, nil, 0}}},
		{"negative sequence", []step{{1, 0, -1, 1, kerr.InvalidRecord, 0}}},
		{"not idempotent", []step{{-1, -1, -1, 1, nil, 0}, {-1, -1, -1, 1, nil, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewPartition()
			var next int64
			for i, st := range tt.steps {
				b := Batch{ProducerID: st.pid, Epoch: st.epoch, FirstSeq: st.seq, LastOffsetDelta: st.records - 1}
				dup, err := s.Check(b)
				switch {
				case st.want == errDup:
					if err != nil || dup == nil || dup.FirstOffset != st.dupOf {
						t.Fatalf("step %d: Check(%+v) = %+v, %v; want a duplicate of offset %d", i, b, dup, err, st.dupOf)
					}
				case st.want != nil:
					if !errors.Is(err, st.want) {
						t.Fatalf("step %d: Check(%+v) = %+v, %v; want %v", i, b, dup, err, st.want)
					}
				default:
					if err != nil || dup != nil {
						t.Fatalf("step %d: Check(%+v) = %+v, %v; want append", i, b, dup, err)
					}
					s.Apply(b, next, 1000+next, 0)
					next += int64(st.records)
				}
			}
		})
	}
}

func TestExpire(t *testing.T) {
	s := NewPartition()
	s.Apply(Batch{ProducerID: 1, FirstSeq: 0}, 0, 1000, 0)
	s.Apply(Batch{ProducerID: 2, FirstSeq: 0}, 1, 5000, 0)
	if n := s.Expire(6000, 5000); n != 1 || s.Len() != 1 {
		t.Fatalf("Expire(6000, 5000) = %d leaving %d; want 1 leaving 1", n, s.Len())
	}
	// Forgotten, producer 1 is unknown again: any sequence is accepted.
	if dup, err := s.Check(Batch{ProducerID: 1, FirstSeq: 9}); dup != nil || err != nil {
		t.Errorf("Check(expired producer, seq 9) = %v, %v; want append", dup, err)
	}
}

func TestIDAllocator(t *testing.T) {
	var persisted []int64
	fail := false
	persist := func(limit int64) error {
		if fail {
			return errors.New("disk full")
		}
		persisted = append(persisted, limit)
		return nil
	}
	a := NewIDAllocator(0, persist)
	for want := int64(0); want < IDBlockSize+2; want++ {
		if id, err := a.Next(); id != want || err != nil {
			t.Fatalf("Next() = %d, %v; want %d", id, err, want)
		}
	}
	if len(persisted) != 2 || persisted[1] != 2*IDBlockSize {
		t.Fatalf("persisted %v; want [%d %d]", persisted, IDBlockSize, 2*IDBlockSize)
	}
	// A restart resumes at the persisted limit: ids handed out before are never reused.
	b := NewIDAllocator(persisted[len(persisted)-1], persist)
	if id, _ := b.Next(); id != 2*IDBlockSize {
		t.Errorf("after restart Next() = %d; want %d", id, 2*IDBlockSize)
	}
	fail = true
	c := NewIDAllocator(5*IDBlockSize, persist)
	if _, err := c.Next(); err == nil {
		t.Errorf("Next() with a failing persist = nil error; want one")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := NewPartition()
	for i := range int32(8) {
		s.Apply(Batch{ProducerID: 5, Epoch: 2, FirstSeq: i * 3, LastOffsetDelta: 2}, int64(i)*10, 100+int64(i), 0)
	}
	s.Apply(Batch{ProducerID: 9, Epoch: 0, FirstSeq: 0}, 99, 7, 0)
	b := s.AppendSnapshot([]byte("prefix"), 123)
	off, got, err := ParseSnapshot(b[len("prefix"):])
	if err != nil || off != 123 {
		t.Fatalf("ParseSnapshot = %d, %v; want 123, nil", off, err)
	}
	if a, b := s.AppendSnapshot(nil, 123), got.AppendSnapshot(nil, 123); string(a) != string(b) {
		t.Errorf("the parsed snapshot re-encodes differently")
	}
	if ps := got.Producers(); len(ps) != 2 || len(ps[0].Batches) != MaxBatches || ps[0].Batches[0].FirstSeq != 9 {
		t.Errorf("parsed producers = %+v; want 2, the first with its last %d batches from sequence 9", ps, MaxBatches)
	}
	for i := range b[len("prefix"):] {
		c := append([]byte(nil), b[len("prefix"):]...)
		c[i] ^= 0x40
		if _, _, err := ParseSnapshot(c); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("ParseSnapshot with byte %d flipped = %v; want ErrBadSnapshot", i, err)
		}
	}
}

// TestTransactions: the open transaction per producer, the first unstable offset, markers.
func TestTransactions(t *testing.T) {
	s := NewPartition()
	txb := func(pid int64, epoch int16, seq int32) Batch {
		return Batch{ProducerID: pid, Epoch: epoch, FirstSeq: seq, LastOffsetDelta: 1, Transactional: true}
	}
	if got := s.FirstUnstable(); got != -1 {
		t.Fatalf("FirstUnstable() of an empty state = %d; want -1", got)
	}
	s.Apply(Batch{ProducerID: 1, FirstSeq: 0}, 0, 1, 3) // plain idempotent producer
	s.Apply(txb(2, 0, 0), 10, 1, 3)
	s.Apply(txb(2, 0, 2), 12, 1, 3)
	s.Apply(txb(3, 5, 0), 20, 1, 4)
	if got := s.FirstUnstable(); got != 10 {
		t.Fatalf("FirstUnstable() = %d; want 10", got)
	}
	if first, le, ep, ok := s.Open(2); !ok || first != 10 || le != 3 || ep != 0 {
		t.Fatalf("Open(2) = %d, %d, %d, %v; want 10, 3, 0, true", first, le, ep, ok)
	}
	if _, err := s.Check(Batch{ProducerID: 2, Epoch: 0, FirstSeq: 4}); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("non-transactional batch during a transaction = %v; want INVALID_TXN_STATE", err)
	}
	if _, err := s.Check(Batch{ProducerID: -1, Transactional: true}); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("transactional batch without a producer id = %v; want INVALID_RECORD", err)
	}
	// An older epoch's marker is a zombie's; a newer one moves the producer on (TV2).
	if err := s.CheckMarker(Marker{ProducerID: 3, Epoch: 4}); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("marker of an older epoch = %v; want INVALID_PRODUCER_EPOCH", err)
	}
	if ab := s.ApplyMarker(Marker{ProducerID: 2, Epoch: 0, Commit: true, CoordinatorEpoch: 7}, 14, 2); ab != nil {
		t.Errorf("COMMIT returned an aborted range %+v", ab)
	}
	if err := s.CheckMarker(Marker{ProducerID: 2, Epoch: 0, CoordinatorEpoch: 6}); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Errorf("marker of an older coordinator epoch = %v; want TRANSACTION_COORDINATOR_FENCED", err)
	}
	if got := s.FirstUnstable(); got != 20 {
		t.Fatalf("FirstUnstable() after the commit = %d; want 20", got)
	}
	ab := s.ApplyMarker(Marker{ProducerID: 3, Epoch: 6}, 30, 2)
	if ab == nil || *ab != (Aborted{ProducerID: 3, First: 20, Last: 30}) {
		t.Fatalf("ABORT = %+v; want producer 3 [20, 30]", ab)
	}
	if got := s.FirstUnstable(); got != -1 {
		t.Fatalf("FirstUnstable() with nothing open = %d; want -1", got)
	}
	// The marker's newer epoch is the producer's now: its next batch starts a fresh sequence.
	if _, err := s.Check(txb(3, 5, 2)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("batch of the epoch before the marker = %v; want INVALID_PRODUCER_EPOCH", err)
	}
	if _, err := s.Check(txb(3, 6, 0)); err != nil {
		t.Errorf("batch of the marker's epoch = %v; want nil", err)
	}
	// A marker with nothing open changes nothing but the epochs.
	if ab := s.ApplyMarker(Marker{ProducerID: 9, Epoch: 0}, 31, 2); ab != nil {
		t.Errorf("ABORT with nothing open = %+v; want nil", ab)
	}
	// Open transactions survive a snapshot; expiry keeps their producers.
	s.Apply(txb(4, 0, 0), 40, 1, 5)
	_, got, err := ParseSnapshot(s.AppendSnapshot(nil, 42))
	if err != nil {
		t.Fatal(err)
	}
	if got.FirstUnstable() != 40 {
		t.Errorf("FirstUnstable() after a snapshot = %d; want 40", got.FirstUnstable())
	}
	if all, n := got.Len(), got.Expire(1<<40, 1); n != all-1 {
		t.Errorf("Expire forgot %d of %d; want all but the open transaction's producer", n, all)
	}
	if _, _, _, ok := got.Open(4); !ok {
		t.Errorf("the open transaction's producer expired")
	}
}

// TestSnapshotV1: a snapshot of the version before transactions still loads.
func TestSnapshotV1(t *testing.T) {
	var b []byte
	b = append(b, "RNPS"...)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, 50)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint64(b, 7)  // id
	b = binary.BigEndian.AppendUint16(b, 2)  // epoch
	b = binary.BigEndian.AppendUint64(b, 99) // lastTimestamp
	b = append(b, 1)
	for _, v := range []uint32{0, 4} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	for _, v := range []uint64{45, 49, 99} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	off, s, err := ParseSnapshot(b)
	if err != nil || off != 50 {
		t.Fatalf("ParseSnapshot(v1) = %d, %v", off, err)
	}
	ps := s.Producers()
	if len(ps) != 1 || ps[0].Epoch != 2 || ps[0].TxnFirstOffset != -1 || ps[0].CoordinatorEpoch != -1 || ps[0].Batches[0].LastOffset != 49 {
		t.Errorf("v1 producer = %+v", ps)
	}
}

// TestMarkerOfALaterTransaction: a marker whose epoch is more than one past the open
// transaction's records belongs to a later transaction and does not close it; the partition's
// own abort (coordinator epoch -1) always does.
func TestMarkerOfALaterTransaction(t *testing.T) {
	s := NewPartition()
	s.Apply(Batch{ProducerID: 7, Epoch: 5, FirstSeq: 0, Transactional: true}, 10, 1, 0)
	if ab := s.ApplyMarker(Marker{ProducerID: 7, Epoch: 7, Commit: true, CoordinatorEpoch: 3}, 11, 1); ab != nil || s.FirstUnstable() != 10 {
		t.Fatalf("a later transaction's COMMIT closed the open one: %+v, first unstable %d", ab, s.FirstUnstable())
	}
	if err := s.CheckMarker(Marker{ProducerID: 7, Epoch: 5, CoordinatorEpoch: -1, Own: true}); err != nil {
		t.Fatalf("the partition's own abort refused: %v", err)
	}
	// An operator's abort (KIP-664's WriteTxnMarkers) with coordinator epoch -1 is not the
	// partition's own: at an epoch older than the producer's it is refused, as Kafka's
	// checkProducerEpoch refuses it, and at the producer's epoch it is fenced by a later
	// coordinator epoch (checkCoordinatorEpoch). Taken as the partition's own, it aborted a live
	// transaction whose commit the producer was then told succeeded.
	if err := s.CheckMarker(Marker{ProducerID: 7, Epoch: 5, CoordinatorEpoch: -1}); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("an operator's abort at an old epoch: %v; want INVALID_PRODUCER_EPOCH", err)
	}
	if err := s.CheckMarker(Marker{ProducerID: 7, Epoch: 7, CoordinatorEpoch: -1}); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("an operator's abort with coordinator epoch -1 after epoch 3's marker: %v; want TRANSACTION_COORDINATOR_FENCED", err)
	}
	if err := s.CheckMarker(Marker{ProducerID: 7, Epoch: 7, CoordinatorEpoch: 3}); err != nil {
		t.Fatalf("an operator's abort with the producer's epochs: %v", err)
	}
	if ab := s.ApplyMarker(Marker{ProducerID: 7, Epoch: 5, CoordinatorEpoch: -1}, 12, 1); ab == nil || ab.First != 10 || s.FirstUnstable() != -1 {
		t.Fatalf("the partition's own abort = %+v, first unstable %d; want [10, 12] aborted", ab, s.FirstUnstable())
	}
}

// TestEpochFromAMarkerStartsAtZero: a transaction version 2 marker moves the producer to the
// next epoch with no batch of it yet; that epoch's first batch must start at sequence 0, as in
// Kafka (ProducerAppendInfo.checkSequence). Taking any sequence let a pipelined later batch in
// ahead of a failed first one, leaving a gap.
func TestEpochFromAMarkerStartsAtZero(t *testing.T) {
	s := NewPartition()
	b := Batch{ProducerID: 1, Epoch: 0, FirstSeq: 0, LastOffsetDelta: 4, Transactional: true}
	if _, err := s.Check(b); err != nil {
		t.Fatal(err)
	}
	s.Apply(b, 0, 1, 0)
	s.ApplyMarker(Marker{ProducerID: 1, Epoch: 1, Commit: true, CoordinatorEpoch: 0}, 5, 2)
	if _, err := s.Check(Batch{ProducerID: 1, Epoch: 1, FirstSeq: 5, Transactional: true}); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Errorf("epoch 1's first batch at sequence 5: %v; want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	if _, err := s.Check(Batch{ProducerID: 1, Epoch: 1, FirstSeq: 0, Transactional: true}); err != nil {
		t.Errorf("epoch 1's first batch at sequence 0: %v", err)
	}
}
