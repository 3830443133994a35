package logstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// idemBatch is a batch of n 100-byte records from producer pid at epoch, starting at seq.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	var body []byte
	for i := range n {
		body = batch.AppendRecord(body, 0, int32(i), nil, fmt.Appendf(nil, "%d/%d/%d %090d", pid, epoch, int(seq)+i, 0), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, RecordCount: int32(n)}, body)
}

// appendIdem appends an idempotent batch and checks the outcome: a new append at wantFirst, or,
// with dup, a duplicate of the batch at wantFirst.
func appendIdem(t *testing.T, l *Log, b []byte, wantFirst int64, dup bool) {
	t.Helper()
	end := l.EndOffset()
	r, err := l.AppendBatch(b, 0)
	if err != nil || r.First != wantFirst || r.Duplicate != dup {
		t.Fatalf("AppendBatch = %+v, %v; want first %d duplicate %v", r, err, wantFirst, dup)
	}
	if dup && l.EndOffset() != end {
		t.Fatalf("a duplicate moved the log end from %d to %d", end, l.EndOffset())
	}
}

// TestIdempotentAppend: duplicates are answered with the original offsets and not written; a
// gap and a stale epoch are refused with Kafka's errors, and nothing is written for them.
func TestIdempotentAppend(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(testConfig())
	defer l.Close()
	appendIdem(t, l, idemBatch(t, 7, 0, 0, 3), 0, false)
	appendIdem(t, l, idemBatch(t, 7, 0, 3, 2), 3, false)
	appendIdem(t, l, idemBatch(t, 7, 0, 0, 3), 0, true)
	appendIdem(t, l, idemBatch(t, 7, 0, 3, 2), 3, true)
	for _, tc := range []struct {
		b    []byte
		want error
	}{
		{idemBatch(t, 7, 0, 6, 1), kerr.OutOfOrderSequenceNumber},
		{idemBatch(t, 7, 1, 4, 1), kerr.OutOfOrderSequenceNumber},
	} {
		if _, err := l.AppendBatch(tc.b, 0); !errors.Is(err, tc.want) {
			t.Errorf("AppendBatch = %v; want %v", err, tc.want)
		}
	}
	appendIdem(t, l, idemBatch(t, 7, 1, 0, 1), 5, false) // a bumped epoch starts at 0
	if _, err := l.AppendBatch(idemBatch(t, 7, 0, 5, 1), 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("AppendBatch(stale epoch) = %v; want INVALID_PRODUCER_EPOCH", err)
	}
	if got := l.EndOffset(); got != 6 {
		t.Errorf("EndOffset() = %d; want 6 (refused batches are not written)", got)
	}
	ps := l.Producers()
	if len(ps) != 1 || ps[0].ID != 7 || ps[0].Epoch != 1 || ps[0].LastSeq() != 0 {
		t.Errorf("Producers() = %+v; want producer 7 at epoch 1, last sequence 0", ps)
	}
}

// TestProducerStateSurvives: the state is rebuilt after a clean restart, after a power loss
// (snapshot at a roll plus the log tail), after retention removed every segment that held the
// producer's batches, and it forgets batches a truncation cut off.
func TestProducerStateSurvives(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000 // a roll every few batches: snapshots at rolls
	fill := func(t *testing.T, l *Log, pid int64, batches int) {
		for i := range batches {
			appendIdem(t, l, idemBatch(t, pid, 0, int32(i*2), 2), int64(i*2), false)
		}
	}
	checkDups := func(t *testing.T, l *Log, pid int64, batches int) {
		t.Helper()
		for i := batches - 5; i < batches; i++ { // the last 5 are still duplicates
			appendIdem(t, l, idemBatch(t, pid, 0, int32(i*2), 2), int64(i*2), true)
		}
		if _, err := l.AppendBatch(idemBatch(t, pid, 0, int32(batches*2+2), 2), 0); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
			t.Errorf("a gap after recovery: %v; want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
		}
	}
	t.Run("clean restart", func(t *testing.T) {
		e := newEnv(t, vfs.NewMem(), "/p")
		l := e.open(cfg)
		fill(t, l, 1, 20)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = e.open(cfg)
		defer l.Close()
		checkDups(t, l, 1, 20)
	})
	t.Run("power loss", func(t *testing.T) {
		mem := vfs.NewMem()
		e := newEnv(t, mem, "/p")
		l := e.open(cfg)
		fill(t, l, 1, 20)
		if err := l.WaitDurable(t.Context(), l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		e.fs = mem.Crash(vfs.CrashOptions{})
		l.Close()
		l = e.open(cfg)
		defer l.Close()
		checkDups(t, l, 1, 20)
	})
	t.Run("torn newest snapshot", func(t *testing.T) {
		mem := vfs.NewMem()
		e := newEnv(t, mem, "/p")
		l := e.open(cfg)
		fill(t, l, 1, 20)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		offsets, _ := l.snapshotOffsets()
		f, err := mem.OpenReadWrite(segmentName("/p", offsets[len(offsets)-1], snapshotSuffix))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(10)
		f.Close()
		l = e.open(cfg)
		defer l.Close()
		checkDups(t, l, 1, 20)
	})
	t.Run("retention removed the batches", func(t *testing.T) {
		e := newEnv(t, vfs.NewMem(), "/p")
		l := e.open(cfg)
		fill(t, l, 1, 20)
		appendAll(t, l, idemBatch(t, 2, 0, 0, 2)) // another producer, so the log start can pass 1's batches
		if err := l.AdvanceStartOffset(l.EndOffset()); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = e.open(cfg)
		defer l.Close()
		checkDups(t, l, 1, 20)
	})
	t.Run("truncate forgets", func(t *testing.T) {
		e := newEnv(t, vfs.NewMem(), "/p")
		l := e.open(cfg)
		defer l.Close()
		fill(t, l, 1, 20)
		if _, err := l.Truncate(30); err != nil { // cuts batches 15..19 (offsets 30..39)
			t.Fatal(err)
		}
		appendIdem(t, l, idemBatch(t, 1, 0, 28, 2), 28, true)  // batch 14 is still there
		appendIdem(t, l, idemBatch(t, 1, 0, 30, 2), 30, false) // batch 15 was cut: written again
	})
}

// TestExpireProducers: a producer is forgotten producer.id.expiration.ms after its last batch's
// timestamp; afterwards it is unknown and any sequence is accepted again.
func TestExpireProducers(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.ProducerIDExpiration = time.Hour
	l := e.open(cfg)
	defer l.Close()
	appendIdem(t, l, idemBatch(t, 3, 0, 0, 1), 0, false) // timestamp 1000
	if n := l.ExpireProducers(1000 + time.Hour.Milliseconds() - 1); n != 0 {
		t.Errorf("ExpireProducers just before the hour = %d; want 0", n)
	}
	if n := l.ExpireProducers(1000 + time.Hour.Milliseconds()); n != 1 || len(l.Producers()) != 0 {
		t.Errorf("ExpireProducers at the hour = %d, leaving %d; want 1, leaving none", n, len(l.Producers()))
	}
	appendIdem(t, l, idemBatch(t, 3, 0, 7, 1), 1, false) // unknown again: sequence 7 is fine
}
