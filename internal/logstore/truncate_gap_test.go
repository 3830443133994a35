package logstore

import (
	"context"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestTruncateIntoACompactionGap: compaction leaves a gap inside one segment ([0,6) holding
// a@0, d@3, b@4, c@5). Truncate(2) (a follower's truncation) cuts at d@3 and the log ends at 1
// (the end of the last batch below 2); the compaction point must come down to 1 too. Before, it
// stayed at 2: offset 1, appended next, counted as cleaned, a tombstone written there was never
// mapped, the old value at 0 survived every pass, and once the tombstone's delete.retention.ms
// had passed the tombstone went: the deleted key was back.
func TestTruncateIntoACompactionGap(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := compactConfig()
	l := e.open(cfg)
	defer func() { l.Close() }()
	for _, r := range []rec{kv("a", "1"), kv("b", "1"), kv("c", "1"), kv("d", "1")} {
		appendAll(t, l, makeBatch(t, batch.CodecNone, r))
	}
	rollActive(t, l)
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("b", "2")), makeBatch(t, batch.CodecNone, kv("c", "2")))
	rollActive(t, l)
	c := NewCompactor(0)
	if _, err := c.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	end, err := l.Truncate(2)
	if err != nil {
		t.Fatalf("Truncate(2) = %v", err)
	}
	if end != 1 {
		t.Fatalf("Truncate(2) ended the log at %d; want 1 (the case under test: a cut in a gap)", end)
	}
	if l.firstDirty > l.EndOffset() {
		t.Errorf("after Truncate(2): compaction point %d is above the log end %d", l.firstDirty, l.EndOffset())
	}
	// Delete a: the tombstone lands at offset 1.
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "")))
	for i := 0; i < 3; i++ {
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv("z", "v")))
	}
	rollActive(t, l)
	for i := 0; i < 3; i++ {
		if _, err := c.Compact(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		e.clock.advance(2 * time.Hour) // past delete.retention.ms
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv("z", "w")))
		rollActive(t, l)
	}
	kvs := keyValues(t, l)
	for off, s := range kvs {
		if s == "a=1" {
			t.Errorf("deleted key a is back: %q at %d (its tombstone was compacted away)", s, off)
		}
	}
}
