package logstore

import (
	"testing"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestNoOpSpansItsSlots: a total-order shard's no-op entry is one batch that takes as many
// offsets as slots (so slots are offsets), a follower copies it, and both logs reopen with the
// same ends.
func TestNoOpSpansItsSlots(t *testing.T) {
	fs := vfs.NewMem()
	le, fe := newEnv(t, fs, "/leader"), newEnv(t, fs, "/follower")
	l, f := le.open(testConfig()), fe.open(testConfig())
	appendAll(t, l, valueBatch(t, 3, 10, 1000, 1))
	first, last, err := l.AppendNoOp(batch.NoOp{Slots: 40, View: 2}, 1, 1000)
	if err != nil || first != 3 || last != 42 {
		t.Fatalf("AppendNoOp = %d..%d, %v; want 3..42", first, last, err)
	}
	appendAll(t, l, valueBatch(t, 2, 10, 1000, 2))
	if l.EndOffset() != 45 {
		t.Fatalf("end offset %d after 3 records, 40 no-op slots and 2 records; want 45", l.EndOffset())
	}
	syncAll(t, l)
	batches := readAll(t, l)
	if len(batches) != 3 {
		t.Fatalf("%d batches; want 3", len(batches))
	}
	h, _ := batch.ParseHeader(batches[1])
	if n, err := batch.ParseNoOp(&h, batches[1]); err != nil || n.Slots != 40 || h.BaseOffset != 3 {
		t.Fatalf("stored no-op %+v at %d: %v", n, h.BaseOffset, err)
	}
	for _, b := range batches {
		if _, _, err := f.AppendReplica(append([]byte(nil), b...)); err != nil {
			t.Fatalf("AppendReplica = %v", err)
		}
	}
	if f.EndOffset() != 45 {
		t.Fatalf("follower end %d; want 45", f.EndOffset())
	}
	syncAll(t, f)
	l.Close()
	f.Close()
	if l2 := le.open(testConfig()); l2.EndOffset() != 45 {
		t.Fatalf("reopened end %d; want 45", l2.EndOffset())
	} else {
		l2.Close()
	}
	// A control batch that is neither a marker nor a well-formed no-op is refused.
	good := batch.AppendNoOp(nil, batch.NoOp{Slots: 4, View: 1}, 1000)
	gh, _ := batch.ParseHeader(good)
	recs, _ := batch.Records(&gh, good)
	gh.LastOffsetDelta = 0 // a span of one offset for four slots
	bad := batch.AppendBatch(nil, gh, recs)
	f2 := newEnv(t, fs, "/f2").open(testConfig())
	defer f2.Close()
	if _, _, err := f2.AppendReplica(bad); err == nil {
		t.Fatal("AppendReplica took a no-op whose span differs from its slots")
	}
}
