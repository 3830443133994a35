package logstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

func compactConfig() Config {
	c := testConfig()
	c.SegmentBytes = 2 << 10
	c.Compact, c.Delete = true, false
	c.MinCleanableDirtyRatio = 0
	c.DeleteRetentionMs = time.Hour
	return c
}

func kv(k, v string) rec {
	r := rec{key: []byte(k), ts: 1000}
	if v != "" {
		r.value = []byte(v)
	}
	return r
}

// rollActive makes every batch so far part of a sealed segment, as compaction ignores the
// active one.
func rollActive(t *testing.T, l *Log) {
	t.Helper()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if _, err := l.roll(l.active()); err != nil {
		t.Fatal(err)
	}
}

// latest returns, for a map offset -> "k=v", the last value per key.
func latest(m map[int64]string) map[string]int64 {
	out := map[string]int64{}
	for off, s := range m {
		k := s[:indexOf(s, '=')]
		if cur, ok := out[k]; !ok || off > cur {
			out[k] = off
		}
	}
	return out
}

func indexOf(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return len(s)
}

func TestCompactionKeepsLatestPerKeyAtOriginalOffsets(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		l := e.open(compactConfig())
		rng := rand.New(rand.NewPCG(3, 4))
		codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLz4, batch.CodecZstd}
		for i := 0; i < 300; i++ {
			var recs []rec
			for j := 0; j < 1+rng.IntN(4); j++ {
				recs = append(recs, kv(fmt.Sprintf("key%d", rng.IntN(20)), fmt.Sprintf("v%d-%d-%s", i, j, make([]byte, rng.IntN(100)))))
			}
			appendAll(t, l, makeBatch(t, codecs[rng.IntN(len(codecs))], recs...))
		}
		rollActive(t, l)
		before := keyValues(t, l)
		want := latest(before)
		st, err := NewCompactor(0).Compact(context.Background(), l)
		if err != nil {
			t.Fatal(err)
		}
		after := keyValues(t, l)
		if st.RecordsRemoved == 0 || len(after) != len(want) {
			t.Fatalf("compaction removed %d records, left %d; want exactly the %d latest", st.RecordsRemoved, len(after), len(want))
		}
		for k, off := range want {
			if after[off] != before[off] {
				t.Errorf("latest %s at %d = %q after compaction; want %q", k, off, after[off], before[off])
			}
		}
		// The next pass groups the now small cleaned segments into fewer files.
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv("key1", "again")))
		rollActive(t, l)
		segs := len(l.segments)
		if _, err := NewCompactor(0).Compact(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		if len(l.segments) >= segs/2 {
			t.Errorf("second pass left %d segments of %d; want small segments merged", len(l.segments), segs)
		}
		delete(after, want["key1"])
		after[l.EndOffset()-1] = "key1=again"
		if got := keyValues(t, l); len(got) != len(after) || got[l.EndOffset()-1] != "key1=again" {
			t.Errorf("after second pass: %v; want %v", got, after)
		}
		// Reopen: the cleaned segments load, and offsets keep going.
		end := l.EndOffset()
		l.Close()
		l = e.open(compactConfig())
		if got := keyValues(t, l); len(got) != len(after) || l.EndOffset() != end {
			t.Errorf("after reopen: %d records, end %d; want %d, %d", len(got), l.EndOffset(), len(after), end)
		}
		if first := appendAll(t, l, makeBatch(t, batch.CodecNone, kv("key1", "new")))[0]; first != end {
			t.Errorf("append after compaction got %d; want %d", first, end)
		}
		l.Close()
	})
}

func TestCompactionTombstonesExpireAfterDeleteRetention(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	defer l.Close()
	appendAll(t, l,
		makeBatch(t, batch.CodecNone, kv("a", "1"), kv("b", "1")),
		makeBatch(t, batch.CodecNone, kv("a", "")), // tombstone for a
		makeBatch(t, batch.CodecNone, kv("c", "1")),
	)
	rollActive(t, l)
	c := NewCompactor(0)
	compact := func() map[int64]string {
		t.Helper()
		if _, err := c.Compact(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		return keyValues(t, l)
	}
	if got := compact(); got[2] != "a=<nil>" || len(got) != 3 {
		t.Errorf("first compaction = %v; want the tombstone for a kept at 2, b and c", got)
	}
	e.clock.advance(30 * time.Minute)
	l.mu.Lock()
	l.firstDirty = 0 // force a full pass
	l.mu.Unlock()
	if got := compact(); got[2] != "a=<nil>" {
		t.Errorf("compaction within delete.retention.ms = %v; want the tombstone kept", got)
	}
	e.clock.advance(31 * time.Minute)
	l.mu.Lock()
	l.firstDirty = 0
	l.mu.Unlock()
	if got := compact(); len(got) != 2 || got[1] != "b=1" || got[3] != "c=1" {
		t.Errorf("compaction after delete.retention.ms = %v; want only b and c", got)
	}
}

// txnKVBatch is a transactional batch of producer pid at epoch, sequence seq.
func txnKVBatch(t *testing.T, pid int64, epoch int16, seq int32, recs ...rec) []byte {
	b := makeBatch(t, batch.CodecNone, recs...)
	h, _ := batch.ParseHeader(b)
	h.Attributes |= batch.AttrTransactional
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
	return batch.AppendBatch(nil, h, b[batch.HeaderSize:])
}

// dataAndMarkers reads the log: the records of data batches ("k=v" by offset) and the markers
// (producer id by offset).
func dataAndMarkers(t *testing.T, l *Log) (map[int64]string, map[int64]int64) {
	t.Helper()
	data, markers := map[int64]string{}, map[int64]int64{}
	for _, b := range readAll(t, l) {
		h, _ := batch.ValidateStored(b)
		if h.IsControl() {
			markers[h.BaseOffset] = h.ProducerID
			continue
		}
		if err := eachRecord(&h, b, func(r *batch.Record, off int64) { data[off] = string(r.Key) + "=" + string(r.Value) }); err != nil {
			t.Fatal(err)
		}
	}
	return data, markers
}

// TestCompactionOfTransactions: compaction stops at an open transaction, removes aborted
// records, lets committed ones supersede and be superseded, and removes a marker only once its
// transaction has nothing left, its segment is past delete.retention.ms and it is below every
// producer state snapshot; the state rebuilt after a restart, from a snapshot or from the log
// alone, has no transaction left open.
func TestCompactionOfTransactions(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	marker := func(pid int64, epoch int16, commit bool) {
		t.Helper()
		if _, err := l.AppendMarker(txn.Marker{ProducerID: pid, Epoch: epoch, Commit: commit, CoordinatorEpoch: 0}, 0, 1000); err != nil {
			t.Fatal(err)
		}
	}
	// Segment 1: T1 of producer 5 committed (markers one epoch up, as transaction version 2
	// writes them), T2 of producer 7 aborted, then a plain a=last.
	appendAll(t, l, txnKVBatch(t, 5, 0, 0, kv("a", "t1"), kv("b", "t1")))
	marker(5, 1, true)
	appendAll(t, l, txnKVBatch(t, 7, 0, 0, kv("a", "aborted"), kv("c", "aborted")))
	marker(7, 1, false)
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "last")))
	rollActive(t, l)
	// Segment 2: T3 of producer 5, open, and a plain b=later after it.
	t3 := appendAll(t, l, txnKVBatch(t, 5, 2, 0, kv("d", "t3")), makeBatch(t, batch.CodecNone, kv("b", "later")))[0]
	rollActive(t, l)

	c := NewCompactor(0)
	if _, err := c.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	data, markers := dataAndMarkers(t, l)
	want := map[int64]string{1: "b=t1", 6: "a=last", t3: "d=t3", t3 + 1: "b=later"}
	if fmt.Sprint(data) != fmt.Sprint(want) {
		t.Errorf("with T3 open: records %v; want %v (aborted ones gone, nothing at or after the open transaction cleaned)", data, want)
	}
	if len(markers) != 2 {
		t.Errorf("with T3 open: markers %v; want both kept (inside delete.retention.ms)", markers)
	}

	// T3 commits; past delete.retention.ms, b=later supersedes T1's last record: T1 has nothing
	// left, and its marker goes with T2's; T3's stays with its record.
	marker(5, 3, true)
	rollActive(t, l)
	for _, k := range []string{"e", "f"} { // later snapshots: the markers are below every one kept
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv(k, "1")))
		rollActive(t, l)
	}
	for range 2 {
		e.clock.advance(61 * time.Minute)
		l.mu.Lock()
		l.firstDirty = 0
		l.mu.Unlock()
		if _, err := c.Compact(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	data, markers = dataAndMarkers(t, l)
	want = map[int64]string{6: "a=last", t3: "d=t3", t3 + 1: "b=later", t3 + 3: "e=1", t3 + 4: "f=1"}
	if fmt.Sprint(data) != fmt.Sprint(want) {
		t.Errorf("after T3 committed: records %v; want %v", data, want)
	}
	if len(markers) != 1 || markers[t3+2] != 5 {
		t.Errorf("after T3 committed: markers %v; want only T3's at %d", markers, t3+2)
	}
	// T2's ABORT marker is gone, and so is its transaction from what read_committed fetches
	// are told: a consumer told of it would drop producer 7's transactional batches until it
	// read a marker that is no longer there, later committed ones included.
	noAborted := func(when string) {
		t.Helper()
		if ab, err := l.AbortedTransactions(0, l.EndOffset()); err != nil || len(ab) != 0 {
			t.Errorf("%s: aborted transactions reported %+v, %v; want none (their markers are gone)", when, ab, err)
		}
	}
	noAborted("after T2's marker was removed")
	if fu := l.FirstUnstableOffset(); fu != -1 {
		t.Errorf("first unstable offset %d; want none", fu)
	}

	// A restart from the snapshots, then from the log alone: nothing open.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(compactConfig())
	if fu := l.FirstUnstableOffset(); fu != -1 {
		t.Errorf("after a restart: first unstable offset %d; want none", fu)
	}
	noAborted("after a restart")
	l.Close()
	names, _ := e.fs.List("/p")
	for _, n := range names {
		if _, ok := parseSegmentName(n, snapshotSuffix); ok {
			e.fs.Remove("/p/" + n)
		}
	}
	l = e.open(compactConfig())
	defer l.Close()
	if fu := l.FirstUnstableOffset(); fu != -1 {
		t.Errorf("after a replay of the whole log: first unstable offset %d; want none", fu)
	}
}

func TestCompactionRespectsDirtyRatioAndPolicy(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := compactConfig()
	cfg.Compact, cfg.Delete = false, true
	l := e.open(cfg)
	defer l.Close()
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "1")), makeBatch(t, batch.CodecNone, kv("a", "2")))
	rollActive(t, l)
	c := NewCompactor(0)
	if st, _ := c.Compact(context.Background(), l); st.RecordsRemoved != 0 {
		t.Errorf("cleanup.policy=delete: compaction removed %d records; want 0", st.RecordsRemoved)
	}
	cfg.Compact = true
	l.SetConfig(cfg)
	if st, _ := c.Compact(context.Background(), l); st.RecordsRemoved != 1 {
		t.Errorf("compact,delete: removed %d; want 1", st.RecordsRemoved)
	}
	cfg.MinCleanableDirtyRatio = 0.9
	l.SetConfig(cfg)
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "3")))
	rollActive(t, l)
	if st, _ := c.Compact(context.Background(), l); st.SegmentsIn != 0 {
		t.Errorf("dirty ratio below min.cleanable.dirty.ratio: compacted %d segments; want none", st.SegmentsIn)
	}

	// A ratio of 1 is never exceeded, even by a log never cleaned (all dirty): Kafka's cleaner
	// compares strictly (cleanableRatio > minCleanableRatio), so only max.compaction.lag.ms
	// compacts such a topic.
	l2 := newEnv(t, vfs.NewMem(), "/q").open(cfg)
	defer l2.Close()
	cfg.MinCleanableDirtyRatio = 1
	l2.SetConfig(cfg)
	appendAll(t, l2, makeBatch(t, batch.CodecNone, kv("a", "1")), makeBatch(t, batch.CodecNone, kv("a", "2")))
	rollActive(t, l2)
	if st, _ := c.Compact(context.Background(), l2); st.SegmentsIn != 0 {
		t.Errorf("min.cleanable.dirty.ratio=1, every segment dirty: compacted %d segments; want none", st.SegmentsIn)
	}
}

func TestCompactionStaysWithinIOBudget(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	defer l.Close()
	for i := 0; i < 200; i++ {
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv(fmt.Sprint(i%10), string(make([]byte, 1000)))))
	}
	rollActive(t, l)
	// 200 KB at 1 KB/s cannot finish in 50 ms: the budget must make it wait.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c := NewCompactor(1024)
	c.limiter.SetBurst(4096)
	if _, err := c.Compact(ctx, l); !errors.Is(err, context.DeadlineExceeded) && err == nil {
		t.Errorf("Compact under a 1 KB/s budget = %v; want it to be throttled past the deadline", err)
	}
	if got := len(keyValues(t, l)); got != 200 {
		t.Errorf("%d records after an interrupted compaction; want all 200", got)
	}
}

// TestCompactionCrashAtEveryStep fails every file operation from step n on during a compaction
// pass, loses power, and reopens: the log must hold the latest value of every key at its
// offset, every record must be one that was appended there, and the log must take appends.
func TestCompactionCrashAtEveryStep(t *testing.T) {
	for n := 1; ; n++ {
		mem := vfs.NewMem()
		var ops atomic.Int64
		var armed atomic.Bool
		dead := vfs.InjectorFunc(func(vfs.Op, string) error {
			if armed.Load() && ops.Add(1) >= int64(n) {
				return vfs.ErrInjected
			}
			return nil
		})
		e := newEnv(t, vfs.NewErrorFS(mem, dead), "/p")
		l := e.open(compactConfig())
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		for i := 0; i < 60; i++ {
			appendAll(t, l, makeBatch(t, batch.CodecNone, kv(fmt.Sprint(rng.IntN(8)), fmt.Sprintf("v%d%s", i, make([]byte, 100)))))
		}
		rollActive(t, l)
		syncAll(t, l)
		before := keyValues(t, l)
		armed.Store(true)
		_, err := NewCompactor(0).Compact(context.Background(), l)
		if err == nil {
			if n < 3 {
				t.Fatalf("compaction survived step %d; the injector is not reached", n)
			}
			return // passed the last step
		}
		e.fs = mem.Crash(vfs.CrashOptions{Tear: true, Rand: rng})
		l2 := e.open(compactConfig())
		after := keyValues(t, l2)
		for off, s := range after {
			if before[off] != s {
				t.Fatalf("step %d: record at %d = %q; it was %q", n, off, s, before[off])
			}
		}
		for k, off := range latest(before) {
			if after[off] == "" {
				t.Fatalf("step %d: latest value of %s at %d lost", n, k, off)
			}
		}
		appendAll(t, l2, makeBatch(t, batch.CodecNone, kv("x", "y")))
		l2.Close()
	}
}

func TestMaintainerCompactsAndRetainsInTheBackground(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := compactConfig()
	cfg.Delete = true
	cfg.RetentionBytes = 8 << 10
	cfg.RetentionMs = -1 // the records are stamped 1970
	l := e.open(cfg)
	defer l.Close()
	for i := 0; i < 100; i++ {
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv(fmt.Sprint(i%5), fmt.Sprintf("%d%s", i, make([]byte, 200)))))
	}
	rollActive(t, l)
	m := NewMaintainer(NewCompactor(0), time.Millisecond, time.Millisecond, quiet)
	m.Add(l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(keyValues(t, l)) > 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got := keyValues(t, l); len(got) != 5 {
		t.Errorf("background maintenance left %d records; want the 5 latest", len(got))
	}
}

// TestCompactionLags: min.compaction.lag.ms keeps a segment whose newest record is younger out
// of a pass (its keys are not mapped, so older values survive too); max.compaction.lag.ms
// compacts a dirty segment with a record older than it whatever the dirty ratio.
func TestCompactionLags(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 60_000
	l := e.open(cfg)
	defer l.Close()
	ctx := context.Background()
	now := e.clock.now().UnixMilli()
	at := func(v string, ts int64) []byte {
		return makeBatch(t, batch.CodecNone, rec{key: []byte("a"), value: []byte(v), ts: ts})
	}
	for _, b := range [][]byte{at("1", now-120_000), at("2", now-90_000), at("3", now-30_000)} {
		appendAll(t, l, b)
		rollActive(t, l)
	}
	c := NewCompactor(0)
	if st, err := c.Compact(ctx, l); err != nil || st.RecordsRemoved != 1 {
		t.Fatalf("with a=3 younger than min.compaction.lag.ms: removed %d, %v; want 1 (a=1; a=2 stays)", st.RecordsRemoved, err)
	}
	e.clock.advance(31 * time.Second)
	if st, err := c.Compact(ctx, l); err != nil || st.RecordsRemoved != 1 {
		t.Fatalf("once a=3 is old enough: removed %d, %v; want 1 (a=2)", st.RecordsRemoved, err)
	}
	cfg.MinCompactionLagMs, cfg.MinCleanableDirtyRatio, cfg.MaxCompactionLagMs = 0, 0.99, 3_600_000
	l.SetConfig(cfg)
	appendAll(t, l, at("4", e.clock.now().UnixMilli()))
	rollActive(t, l)
	if st, err := c.Compact(ctx, l); err != nil || st.RecordsRemoved != 0 {
		t.Fatalf("below the dirty ratio, within max.compaction.lag.ms: removed %d, %v; want 0", st.RecordsRemoved, err)
	}
	e.clock.advance(time.Hour + time.Second)
	if st, err := c.Compact(ctx, l); err != nil || st.RecordsRemoved != 1 {
		t.Fatalf("past max.compaction.lag.ms: removed %d, %v; want 1 (a=3)", st.RecordsRemoved, err)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("a zero config validates")
	}
	bad := compactConfig()
	bad.MinCompactionLagMs, bad.MaxCompactionLagMs = 10, 5
	if err := bad.Validate(); err == nil {
		t.Fatal("min.compaction.lag.ms above max.compaction.lag.ms validates")
	}
}

// TestTombstoneExpiresUnderSteadyWrites: the tombstone for a is first compacted at t=0
// (delete.retention.ms = 1 h). The topic keeps getting writes: every 30 minutes a new segment is
// sealed and a pass runs, which cleans the old segment together with the new dirty one into one
// output. The tombstone's batch carries its delete horizon from the first pass (KIP-534), so it
// goes once that has passed, as in Kafka. Before, the merged output's first-compaction stamp
// was "now" whenever one input was never compacted, and the tombstone was never dropped.
func TestTombstoneExpiresUnderSteadyWrites(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	defer l.Close()
	c := NewCompactor(0)
	appendAll(t, l, makeBatch(t, batch.CodecNone, kv("a", "1")), makeBatch(t, batch.CodecNone, kv("a", "")))
	rollActive(t, l)
	if _, err := c.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if kvs := keyValues(t, l); kvs[1] != "a=<nil>" {
		t.Fatalf("after the first pass: %v; want the tombstone kept at 1", kvs)
	}
	for i := 0; i < 20; i++ { // 10 hours of steady writes, a pass every 30 minutes
		e.clock.advance(30 * time.Minute)
		appendAll(t, l, makeBatch(t, batch.CodecNone, kv(fmt.Sprintf("k%d", i), "v")))
		rollActive(t, l)
		if _, err := c.Compact(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.RLock()
	n := len(l.segments)
	l.mu.RUnlock()
	if kvs := keyValues(t, l); kvs[1] == "a=<nil>" {
		t.Errorf("10 h after its first compaction (delete.retention.ms 1 h) the tombstone for a is still there (%d segments)", n)
	}
}

// idemKVBatch is a batch of idempotent (not transactional) producer pid at epoch, sequence seq.
func idemKVBatch(t *testing.T, pid int64, epoch int16, seq int32, recs ...rec) []byte {
	b := makeBatch(t, batch.CodecNone, recs...)
	h, _ := batch.ParseHeader(b)
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
	return batch.AppendBatch(nil, h, b[batch.HeaderSize:])
}

// TestCompactionDropsEmptiedIdempotentBatches: an idempotent producer's batch whose records
// compaction removed stays (empty) only while the producer state remembers it, as Kafka's
// cleaner keeps only an active producer's last batch. Kept all, a compacted topic written by
// idempotent producers (every Java producer's default) never shrank below 61 bytes per batch
// ever written, and diluted the dirty ratio. The producer goes on, and a retry of its last
// batch is still answered as a duplicate, before and after a restart.
func TestCompactionDropsEmptiedIdempotentBatches(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(compactConfig())
	const n = 20
	var last []byte
	for i := range n {
		last = idemKVBatch(t, 9, 0, int32(i), kv("a", fmt.Sprint(i)))
		appendAll(t, l, last)
		if i%5 == 4 {
			rollActive(t, l)
		}
	}
	if _, err := NewCompactor(0).Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	batches := readAll(t, l)
	if len(batches) > 5 {
		t.Errorf("after compaction: %d batches; want at most 5 (the producer state's last batches)", len(batches))
	}
	if data, _ := dataAndMarkers(t, l); len(data) != 1 || data[n-1] != fmt.Sprintf("a=%d", n-1) {
		t.Errorf("after compaction: records %v; want only a=%d at %d", data, n-1, n-1)
	}
	check := func(when string) {
		t.Helper()
		retry := append([]byte(nil), last...)
		if r, err := l.AppendBatch(retry, 1); err != nil || !r.Duplicate || r.First != n-1 {
			t.Errorf("%s: a retry of the last batch = %+v, %v; want the duplicate at %d", when, r, err, n-1)
		}
	}
	check("after compaction")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(compactConfig())
	defer l.Close()
	check("after a restart")
	appendAll(t, l, idemKVBatch(t, 9, 0, n, kv("a", "next")))
}
