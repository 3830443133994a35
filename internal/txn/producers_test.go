package txn

import (
	"errors"
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
					s.Apply(b, next, 1000+next)
					next += int64(st.records)
				}
			}
		})
	}
}

func TestExpire(t *testing.T) {
	s := NewPartition()
	s.Apply(Batch{ProducerID: 1, FirstSeq: 0}, 0, 1000)
	s.Apply(Batch{ProducerID: 2, FirstSeq: 0}, 1, 5000)
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
		s.Apply(Batch{ProducerID: 5, Epoch: 2, FirstSeq: i * 3, LastOffsetDelta: 2}, int64(i)*10, 100+int64(i))
	}
	s.Apply(Batch{ProducerID: 9, Epoch: 0, FirstSeq: 0}, 99, 7)
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
