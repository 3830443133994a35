package logstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// A flusher round that captures its target inside Truncate's unlocked window (after truncGen++,
// before s.next is rescanned) finishes after Truncate and claims the old, larger end as durable.
func TestRegressionSyncRacingTruncateClaimsPastEnd(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	var blockTrunc, blockSync chan struct{}
	truncReached := make(chan struct{}, 1)
	syncReached := make(chan struct{}, 1)
	// fsyncs of a segment, counted as they start: before the durable offset they lead to is
	// claimed (the flusher's own Syncs counter moves only after its waiters are woken).
	var logSyncs atomic.Int64
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, ".log") {
			logSyncs.Add(1)
		}
		mu.Lock()
		var wait chan struct{}
		switch {
		case op == vfs.OpTruncate && blockTrunc != nil:
			wait, blockTrunc = blockTrunc, nil
			truncReached <- struct{}{}
		case op == vfs.OpSync && strings.HasSuffix(path, ".log") && blockSync != nil:
			wait, blockSync = blockSync, nil
			syncReached <- struct{}{}
		}
		mu.Unlock()
		if wait != nil {
			<-wait
		}
		return nil
	})
	e := newEnv(t, vfs.NewErrorFS(mem, inj), "/p")
	l := e.open(testConfig())
	for i := 0; i < 10; i++ {
		appendAll(t, l, valueBatch(t, 1, 100, 1, i)) // offsets 0..9, nothing synced
	}
	relTrunc, relSync := make(chan struct{}), make(chan struct{})
	mu.Lock()
	blockTrunc = relTrunc
	mu.Unlock()
	truncDone := make(chan error)
	go func() { _, err := l.Truncate(5); truncDone <- err }()
	<-truncReached // Truncate is between its two critical sections
	mu.Lock()
	blockSync = relSync
	mu.Unlock()
	waitDone := make(chan error)
	go func() { waitDone <- l.WaitDurable(context.Background(), 3) }() // offsets the cut keeps
	<-syncReached                                                      // the flusher captured its target mid-truncation and is syncing
	close(relTrunc)
	if err := <-truncDone; err != nil {
		t.Fatal(err)
	}
	close(relSync)
	if err := <-waitDone; err != nil {
		t.Errorf("WaitDurable(3) across Truncate(5) = %v; want nil", err)
	}
	time.Sleep(10 * time.Millisecond)
	t.Logf("after Truncate(5): EndOffset=%d DurableOffset=%d", l.EndOffset(), l.DurableOffset())
	// New, never-synced data at 5..9:
	b := makeBatch(t, batch.CodecNone, kv("a", "1"), kv("a", "2"), kv("a", "3"), kv("a", "4"), kv("a", "5"))
	syncs := logSyncs.Load() // before the append: the flusher may sync it at once
	appendAll(t, l, b)
	if err := l.WaitDurable(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if logSyncs.Load() == syncs {
		t.Errorf("WaitDurable(10) returned nil without any fsync of the new batch (durable %d, end %d)", l.DurableOffset(), l.EndOffset())
	}
	crashed := mem.Crash(vfs.CrashOptions{})
	e.fs = crashed
	l2 := e.open(testConfig())
	if l2.EndOffset() < 10 {
		t.Errorf("after crash EndOffset=%d; offsets up to 10 were reported durable", l2.EndOffset())
	}
}

// Truncate into a sealed segment, die before the final SyncDir: the truncated segment is short
// but the later segments come back, leaving a hole in the middle of the log.
func TestRegressionTruncateCrashLeavesHole(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpSyncDir {
			return vfs.ErrInjected
		}
		return nil
	})
	e := newEnv(t, vfs.NewErrorFS(mem, inj), "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	l := e.open(cfg)
	for i := 0; i < 20; i++ {
		appendAll(t, l, valueBatch(t, 1, 300, 1, i))
	}
	syncAll(t, l)
	armed.Store(true)
	if _, err := l.Truncate(3); err == nil {
		t.Fatal("Truncate succeeded")
	}
	e.fs = mem.Crash(vfs.CrashOptions{})
	l2 := e.open(cfg)
	var offs []int64
	for _, b := range readAll(t, l2) {
		h, _ := batch.ParseHeader(b)
		offs = append(offs, h.BaseOffset)
	}
	t.Logf("recovered offsets: %v (end %d)", offs, l2.EndOffset())
	for i := 1; i < len(offs); i++ {
		if offs[i] != offs[i-1]+1 {
			t.Errorf("hole in recovered log between %d and %d", offs[i-1], offs[i])
		}
	}
}

// ListOffsets by timestamp gives up when the first segment whose maxTimestamp >= ts only
// reaches ts below the log start offset.
func TestRegressionOffsetForTimestampStopsAtFirstSegment(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	l := e.open(cfg)
	appendAll(t, l, valueBatch(t, 1, 300, 500, 0)) // offset 0, ts 500
	for i := 1; l.active().base == 0; i++ {
		appendAll(t, l, valueBatch(t, 1, 300, 1, i)) // ts 1, until a roll
	}
	want := l.EndOffset() - 1 // the batch that rolled, in segment 2
	appendAll(t, l, valueBatch(t, 1, 300, 500, 99))
	want = l.EndOffset() - 1
	if err := l.AdvanceStartOffset(1); err != nil {
		t.Fatal(err)
	}
	off, _, ok, err := l.OffsetForTimestamp(500)
	if err != nil || !ok || off != want {
		t.Errorf("OffsetForTimestamp(500) = %d, %v, %v; want %d (in the second segment)", off, ok, err, want)
	}
}

// A waiter whose flusher round straddles a Truncate must learn that its batch is gone, not
// hang, and not later take the new data's durability for its own.
func TestRegressionWaiterAcrossTruncate(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	var blockSync chan struct{}
	syncReached := make(chan struct{}, 1)
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		mu.Lock()
		var wait chan struct{}
		if op == vfs.OpSync && strings.HasSuffix(path, ".log") && blockSync != nil {
			wait, blockSync = blockSync, nil
			syncReached <- struct{}{}
		}
		mu.Unlock()
		if wait != nil {
			<-wait
		}
		return nil
	})
	e := newEnv(t, vfs.NewErrorFS(mem, inj), "/p")
	l := e.open(testConfig())
	for i := 0; i < 10; i++ {
		appendAll(t, l, valueBatch(t, 1, 100, 1, i))
	}
	rel := make(chan struct{})
	mu.Lock()
	blockSync = rel
	mu.Unlock()
	waitDone := make(chan error, 1)
	go func() { waitDone <- l.WaitDurable(context.Background(), 10) }()
	<-syncReached
	if _, err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	close(rel)
	select {
	case err := <-waitDone:
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("WaitDurable(10) overtaken by Truncate(5) = %v; want ErrTruncated", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitDurable(10) overtaken by Truncate(5) still blocked")
	}
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "1"), kv("a", "2"), kv("a", "3"), kv("a", "4"), kv("a", "5")))
	syncAll(t, l)
}

// checkpoint's firstDirty is past the log end, so new data below it is never mapped.
func TestRegressionTruncateFirstDirtyNotPersisted(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	for i := 0; i < 10; i++ {
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv(string(rune('a'+i)), "v")))
	}
	rollActive(t, l)
	if _, err := NewCompactor(0).Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	fd := l.firstDirty
	if _, err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	// truncate to an offset below firstDirty but above start
	t.Logf("firstDirty before %d, after truncate (mem) %d, end %d", fd, l.firstDirty, l.EndOffset())
	l.Close()
	l = e.open(compactConfig())
	if l.firstDirty > l.EndOffset() {
		t.Errorf("after reopen firstDirty = %d > end %d", l.firstDirty, l.EndOffset())
	}
}

// Close syncs the active file but not the directory: a segment created by a roll since the last
// WaitDurable vanishes with its (synced) data after power loss, though Close returned nil.
func TestRegressionCloseDoesNotSyncDir(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	l := e.open(cfg)
	for i := 0; i < 10; i++ {
		appendAll(t, l, valueBatch(t, 1, 300, 1, i))
	}
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	e.fs = mem.Crash(vfs.CrashOptions{})
	l2 := e.open(cfg)
	if l2.EndOffset() != end {
		t.Errorf("after clean Close and power loss, EndOffset %d; want %d", l2.EndOffset(), end)
	}
}

func TestRegressionTruncateFirstDirtyResurrectsDeletedKey(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	for i := 0; i < 10; i++ {
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv(string(rune('a'+i)), "v")))
	}
	rollActive(t, l)
	c := NewCompactor(0)
	if _, err := c.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = e.open(compactConfig())
	defer l.Close()
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", ""))) // delete a (offset 5)
	for i := 0; i < 6; i++ {
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv("z", "v")))
	}
	rollActive(t, l)
	for i := 0; i < 3; i++ {
		if _, err := c.Compact(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		e.clock.advance(2 * time.Hour) // past delete.retention.ms
		l.mu.Lock()
		l.firstDirty = max(l.firstDirty, 0)
		l.mu.Unlock()
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv("z", "w")))
		rollActive(t, l)
	}
	kvs := keyValues(t, l)
	t.Logf("log after deleting a: %v", kvs)
	for off, s := range kvs {
		if s == "a=v" {
			t.Errorf("deleted key a is back: %q at %d, and its tombstone is gone", s, off)
		}
	}
}

// finishSwap takes the replaced range from the swap file's last batch, not the group's end: a
// trailing group member that compaction emptied is left in place and its records come back.
func TestRegressionFinishSwapMissesEmptiedTrailingSegment(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpRemove && strings.HasSuffix(path, "00000000000000000002.log") {
			return vfs.ErrInjected
		}
		return nil
	})
	e := newEnv(t, vfs.NewErrorFS(mem, inj), "/p")
	l := e.open(compactConfig())
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("k0", "v")), makeBatch(t, batch.CodecNone, kv("k1", "v")))
	rollActive(t, l)
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("x", "1")))
	rollActive(t, l)
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("x", string(make([]byte, 1900)))))
	rollActive(t, l)
	syncAll(t, l)
	armed.Store(true)
	_, err := NewCompactor(0).Compact(context.Background(), l)
	t.Logf("Compact = %v; in memory: %v", err, keyValues(t, l))
	e.fs = mem.Crash(vfs.CrashOptions{})
	l2 := e.open(compactConfig())
	got := keyValues(t, l2)
	if got[2] == "x=1" {
		t.Errorf("after committed compaction + crash, superseded x=1 at 2 is back: segment 2 was not removed by finishSwap")
	}
}
