package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// fill appends n one-record batches of ~size bytes stamped ts and returns the log.
func fill(t *testing.T, l *Log, n, size int, ts int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		appendAll(t, l, valueBatch(t, 1, size, ts, i))
	}
}

func TestRetentionByTime(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		cfg := testConfig()
		cfg.SegmentBytes = 2 << 10
		cfg.RetentionMs = time.Hour
		l := e.open(cfg)
		defer l.Close()
		now := e.clock.now().UnixMilli()
		fill(t, l, 20, 500, now-2*time.Hour.Milliseconds()) // expired
		fill(t, l, 20, 500, now)                            // fresh
		n, err := l.EnforceRetention()
		if err != nil || n == 0 {
			t.Fatalf("EnforceRetention() = %d, %v; want some segments removed", n, err)
		}
		start := l.StartOffset()
		if start == 0 || start > 20 {
			t.Errorf("StartOffset() = %d; want within (0, 20]", start)
		}
		if _, err := l.Read(nil, start-1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("Read(start-1) = %v; want ErrOffsetOutOfRange", err)
		}
		for _, b := range readAll(t, l) { // every fresh batch survives
			h, _ := batch.ParseHeader(b)
			if h.MaxTimestamp < now && h.BaseOffset >= 20 {
				t.Errorf("batch %d is fresh but was treated as expired", h.BaseOffset)
			}
		}
		if got := keyValues(t, l); len(got) < 20 {
			t.Errorf("%d records left; want at least the 20 fresh ones", len(got))
		}
		// Everything expires: the active segment is rolled and removed too.
		e.clock.advance(3 * time.Hour)
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		if l.StartOffset() != 40 || l.EndOffset() != 40 || len(l.segments) != 1 {
			t.Errorf("after full expiry: start %d end %d segments %d; want 40 40 1", l.StartOffset(), l.EndOffset(), len(l.segments))
		}
		appendAll(t, l, valueBatch(t, 1, 10, now, 1))
	})
}

func TestRetentionByBytes(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	cfg.RetentionBytes = 5 << 10
	cfg.RetentionMs = -1
	l := e.open(cfg)
	defer l.Close()
	fill(t, l, 60, 300, e.clock.now().UnixMilli())
	before := l.Size()
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	// As in Kafka, a segment goes only if the log stays at or above retention.bytes without it.
	if got := l.Size(); got < cfg.RetentionBytes || got >= cfg.RetentionBytes+cfg.SegmentBytes {
		t.Errorf("Size() = %d after retention (was %d); want within [%d, %d)", got, before, cfg.RetentionBytes, cfg.RetentionBytes+cfg.SegmentBytes)
	}

	// retention.bytes=0 takes everything, the active segment too (rolled first), as Kafka's
	// deleteRetentionSizeBreachedSegments; appends go on at the end.
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	end := l.EndOffset()
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != end || l.Size() != 0 {
		t.Errorf("retention.bytes=0: start %d, size %d; want start %d (the end), size 0", l.StartOffset(), l.Size(), end)
	}
	appendAll(t, l, valueBatch(t, 1, 10, e.clock.now().UnixMilli(), 1))
	if l.EndOffset() != end+1 {
		t.Errorf("after an append: end %d; want %d", l.EndOffset(), end+1)
	}
}

func TestAdvanceStartOffsetSurvivesRestart(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		cfg := testConfig()
		cfg.SegmentBytes = 2 << 10
		l := e.open(cfg)
		fill(t, l, 30, 300, 1)
		if err := l.AdvanceStartOffset(17); err != nil {
			t.Fatal(err)
		}
		if err := l.AdvanceStartOffset(31); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("AdvanceStartOffset(past end) = %v; want ErrOffsetOutOfRange", err)
		}
		if l.segments[0].base > 17 || l.segments[0].next <= 17 {
			t.Errorf("first segment [%d, %d) should hold offset 17", l.segments[0].base, l.segments[0].next)
		}
		l.Close()
		l = e.open(cfg)
		defer l.Close()
		if got := l.StartOffset(); got != 17 {
			t.Errorf("StartOffset() after restart = %d; want 17", got)
		}
		if _, err := l.Read(nil, 16, 1); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("Read(16) = %v; want ErrOffsetOutOfRange", err)
		}
		if b, err := l.Read(nil, 17, 1); err != nil || len(b) == 0 {
			t.Errorf("Read(17) = %d bytes, %v; want the batch", len(b), err)
		}
	})
}

func TestTruncate(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		cfg := testConfig()
		cfg.SegmentBytes = 2 << 10
		l := e.open(cfg)
		for i := 0; i < 30; i++ {
			appendAll(t, l, valueBatch(t, 2, 300, 1, i)) // offsets 2i, 2i+1
		}
		if _, err := l.Truncate(41); !errors.Is(err, ErrNotBatchBoundary) {
			t.Errorf("Truncate(41) = %v; want ErrNotBatchBoundary", err)
		}
		end, err := l.Truncate(20)
		if err != nil || end != 20 || l.EndOffset() != 20 {
			t.Fatalf("Truncate(20) = %d, %v; EndOffset() %d; want 20", end, err, l.EndOffset())
		}
		first := appendAll(t, l, valueBatch(t, 2, 300, 1, 99))[0]
		if first != 20 {
			t.Errorf("append after truncate got offset %d; want 20", first)
		}
		syncAll(t, l)
		if got := len(readAll(t, l)); got != 11 {
			t.Errorf("%d batches after truncate and append; want 11", got)
		}
		l.Close()
		l = e.open(cfg)
		if got := l.EndOffset(); got != 22 {
			t.Errorf("EndOffset() after reopen = %d; want 22", got)
		}
		if end, err := l.Truncate(0); err != nil || end != 0 || l.EndOffset() != 0 || l.StartOffset() != 0 {
			t.Errorf("Truncate(0) = %d, %v; start %d end %d; want an empty log at 0", end, err, l.StartOffset(), l.EndOffset())
		}
		appendAll(t, l, valueBatch(t, 1, 10, 1, 1))
		l.Close()
	})
}

func TestTruncateIsDurable(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	l := e.open(cfg)
	for i := 0; i < 20; i++ {
		appendAll(t, l, valueBatch(t, 1, 300, 1, i))
	}
	syncAll(t, l)
	if _, err := l.Truncate(7); err != nil {
		t.Fatal(err)
	}
	e.fs = mem.Crash(vfs.CrashOptions{})
	l = e.open(cfg)
	if got := l.EndOffset(); got != 7 {
		t.Errorf("EndOffset() after truncate and crash = %d; want 7 (the truncation is durable)", got)
	}
}

// Retention deletes nothing at or past the retention bound (a replica's in-sync end, as Kafka's
// deletableSegments stops at the high watermark): expired records a follower in sync has not
// taken yet stay, and go once the bound passes them.
func TestRetentionStopsAtTheBound(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data/p0")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	cfg.RetentionMs = time.Hour
	l := e.open(cfg)
	defer l.Close()
	bound := int64(10)
	l.SetRetentionBound(func() int64 { return bound })
	fill(t, l, 40, 500, e.clock.now().UnixMilli()-2*time.Hour.Milliseconds()) // all expired
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if start := l.StartOffset(); start > 10 || l.EndOffset() != 40 {
		t.Fatalf("bound 10: log [%d, %d); want nothing at or past 10 deleted", start, l.EndOffset())
	}
	if l.StartOffset() == 0 {
		t.Fatalf("bound 10: nothing deleted; want the expired segments below 10 gone")
	}
	bound = 40
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if start := l.StartOffset(); start != 40 {
		t.Fatalf("bound at the end: log start %d; want 40 (all expired, the active segment rolled)", start)
	}
}

// An error reading the checkpoint fails the open. Before, it was taken for a missing file: the
// log start fell back to the first segment's base, and records DeleteRecords had removed were
// readable again.
func TestCheckpointReadErrorFailsTheOpen(t *testing.T) {
	mem := vfs.NewMem()
	failing := false
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if failing && strings.HasSuffix(path, "/"+checkpointName) && (op == vfs.OpOpen || op == vfs.OpRead) {
			return errors.New("injected: I/O error")
		}
		return nil
	})
	e := newEnv(t, vfs.NewErrorFS(mem, inj), "/p")
	l := e.open(testConfig())
	appendAll(t, l, valueBatch(t, 10, 100, 1000, 1))
	if err := l.AdvanceStartOffset(5); err != nil {
		t.Fatal(err)
	}
	l.Close()
	failing = true
	if l2, err := Open(Options{FS: e.fs, Dir: e.dir, Config: testConfig(), Flusher: e.flusher, Now: e.clock.now, Logger: quiet}); err == nil {
		start := l2.StartOffset()
		l2.Close()
		t.Fatalf("Open with the checkpoint unreadable succeeded, log start %d; want an error (records below 5 were deleted)", start)
	}
	failing = false
	l3 := e.open(testConfig())
	defer l3.Close()
	if start := l3.StartOffset(); start != 5 {
		t.Errorf("log start after the error cleared = %d; want 5", start)
	}
}

// TestEmptyCleanupPolicyKeepsEverything: with cleanup.policy empty (neither delete nor compact,
// Kafka 4.1's KIP-1161: "the same as delete with infinite retention") neither retention.ms nor
// retention.bytes removes a segment, and compaction leaves every version of a key; only the log
// start offset (DeleteRecords) moves the log's start. The log store used to refuse the config.
func TestEmptyCleanupPolicyKeepsEverything(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	cfg.RetentionMs, cfg.RetentionBytes = time.Hour, 1
	cfg.Delete, cfg.Compact = false, false
	cfg.MinCleanableDirtyRatio = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate() of an empty cleanup.policy = %v; want nil", err)
	}
	l := e.open(cfg)
	defer l.Close()
	old := e.clock.now().Add(-2 * time.Hour).UnixMilli()
	for i := range 40 { // 10 keys, 4 versions each, all past retention.ms
		appendAll(t, l, makeBatch(t, batch.CodecNone, rec{key: []byte(fmt.Sprintf("k%d", i%10)), value: bytes.Repeat([]byte{'v'}, 300), ts: old}))
	}
	if len(l.segments) < 3 {
		t.Fatalf("%d segments; want several", len(l.segments))
	}
	if n, err := l.EnforceRetention(); err != nil || n != 0 || l.StartOffset() != 0 {
		t.Fatalf("EnforceRetention() = %d, %v, start %d; want 0 segments removed, start 0", n, err, l.StartOffset())
	}
	if _, err := NewCompactor(0).Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, l)); got != 40 {
		t.Fatalf("%d batches left after retention and compaction; want all 40", got)
	}
	if err := l.AdvanceStartOffset(25); err != nil { // DeleteRecords still moves the start
		t.Fatal(err)
	}
	if n, err := l.EnforceRetention(); err != nil || l.StartOffset() != 25 {
		t.Fatalf("EnforceRetention() after AdvanceStartOffset(25) = %d, %v, start %d; want start 25", n, err, l.StartOffset())
	}
}

// TestRetentionOfRecordsWithoutTimestamps: a batch with timestamp -1 (a producer's
// NO_TIMESTAMP) is aged by its segment file's modification time, as Kafka's
// LogSegment.largestTimestamp falls back to lastModified: it outlives retention.ms after its
// last write, and min.compaction.lag.ms holds back its compaction. Such records were taken as
// older than any retention and deleted at the next check, and compacted at once.
func TestRetentionOfRecordsWithoutTimestamps(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		e.clock = &fakeClock{t: time.Now()} // from real time: the files' modification times are the file system's
		cfg := testConfig()
		cfg.SegmentBytes = 2 << 10
		cfg.RetentionMs = 2 * time.Second
		l := e.open(cfg)
		defer l.Close()
		fill(t, l, 20, 500, -1)
		if n, err := l.EnforceRetention(); err != nil || n != 0 || l.StartOffset() != 0 {
			t.Fatalf("EnforceRetention() at once = %d, %v, start %d; want nothing removed (written just now)", n, err, l.StartOffset())
		}
		for _, s := range l.segments {
			if lt := s.largestTimestamp(); s.size > 0 && (lt < time.Now().Add(-time.Minute).UnixMilli() || lt > time.Now().UnixMilli()+1000) {
				t.Fatalf("segment %d aged by %d; want its modification time, about now", s.base, lt)
			}
		}
		e.clock.advance(3 * time.Second)
		if n, err := l.EnforceRetention(); err != nil || n == 0 || l.StartOffset() == 0 {
			t.Fatalf("EnforceRetention() past retention.ms = %d, %v, start %d; want the old segments removed", n, err, l.StartOffset())
		}
	})
}

// TestAdvanceStartOffsetOnAFullDisk: when the checkpoint that makes a new log start durable
// cannot be written (a full disk), the segments wholly below the new start are removed first,
// as retention removes them, and the checkpoint is written again: DeleteRecords frees a full
// disk. If it still cannot be written, the error is returned and the log starts at its first
// kept segment, which is what a restart finds too.
func TestAdvanceStartOffsetOnAFullDisk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times int // checkpoint writes that fail (0: all)
	}{{"room-after-removal", 1}, {"still-full", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			rules := &vfs.Rules{}
			e := newEnv(t, vfs.NewErrorFS(vfs.NewMem(), rules), "/data/p0")
			cfg := testConfig()
			cfg.SegmentBytes = 2 << 10
			l := e.open(cfg)
			fill(t, l, 30, 300, 1)
			if len(l.segments) < 4 {
				t.Fatalf("%d segments; want several", len(l.segments))
			}
			rules.Add(vfs.Rule{Op: vfs.OpWrite, PathContains: checkpointName, Times: tc.times, Err: syscall.ENOSPC, PartialWrite: true})
			err := l.AdvanceStartOffset(17)
			first := l.segments[0].base
			if first > 17 || l.segments[0].next <= 17 {
				t.Fatalf("first segment [%d, %d); want the one holding 17, the ones below removed", first, l.segments[0].next)
			}
			want := int64(17)
			if tc.times == 0 {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("AdvanceStartOffset on a full disk = %v; want ENOSPC", err)
				}
				want = first
			} else if err != nil {
				t.Fatalf("AdvanceStartOffset once segments freed room = %v", err)
			}
			if got := l.StartOffset(); got != want {
				t.Fatalf("StartOffset() = %d; want %d", got, want)
			}
			rules.Clear()
			l.Close()
			l = e.open(cfg)
			defer l.Close()
			if got := l.StartOffset(); got != want {
				t.Errorf("StartOffset() after restart = %d; want %d", got, want)
			}
			if b, err := l.Read(nil, want, 1); err != nil || len(b) == 0 {
				t.Errorf("Read(%d) = %d bytes, %v; want the batch", want, len(b), err)
			}
		})
	}
}

// TestReopenableOnlyAfterARefusedWrite: a log poisoned by a write refused for want of space may
// be opened again (Reopenable); one poisoned by a failed fsync may not, whatever the operation
// that ran it (a truncation syncs too) and whatever its errno (ENOSPC included).
func TestReopenableOnlyAfterARefusedWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule vfs.Rule
		op   func(l *Log) error
		want bool
	}{
		{"write ENOSPC", vfs.Rule{Op: vfs.OpWrite, Err: syscall.ENOSPC, PartialWrite: true},
			func(l *Log) error { _, _, err := l.Append(valueBatch(t, 1, 100, 1, 9), 0); return err }, true},
		{"write EIO", vfs.Rule{Op: vfs.OpWrite, Err: syscall.EIO},
			func(l *Log) error { _, _, err := l.Append(valueBatch(t, 1, 100, 1, 9), 0); return err }, false},
		{"truncate's fsync ENOSPC", vfs.Rule{Op: vfs.OpSync, Err: syscall.ENOSPC},
			func(l *Log) error { _, err := l.Truncate(4); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := &vfs.Rules{}
			e := newEnv(t, vfs.NewErrorFS(vfs.NewMem(), rules), "/data/p0")
			l := e.open(testConfig())
			defer l.Close()
			fill(t, l, 10, 100, 1)
			rules.Add(tc.rule)
			if err := tc.op(l); err == nil {
				t.Fatal("the operation succeeded")
			}
			if l.Err() == nil || l.Reopenable() != tc.want {
				t.Fatalf("poisoned %v, reopenable %v; want poisoned, %v", l.Err(), l.Reopenable(), tc.want)
			}
		})
	}
}
