package logstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// preallocEnv opens a log without write caching whose fills run synchronously in the appending
// goroutine, so tests see them deterministically.
func preallocEnv(t *testing.T, fs vfs.FS, dir string, cfg Config) (*env, *Log) {
	t.Helper()
	e := newEnv(t, fs, dir)
	l := e.open(cfg)
	l.spawnFill = l.runFill
	return e, l
}

// appendFast appends n batches of one ~1 KiB record, moving the fake clock 100 µs per batch:
// 10 MB/s, fast enough to be preallocated.
func appendFast(t *testing.T, e *env, l *Log, n, seed int) {
	t.Helper()
	for i := range n {
		appendAll(t, l, valueBatch(t, 1, 1000, e.clock.now().UnixMilli(), seed+i))
		e.clock.advance(100 * time.Microsecond)
	}
}

// appendUntilFill appends fast until a fill is handed to the log's spawnFill, which the caller
// has replaced to capture it, and returns it without running it.
func appendUntilFill(t *testing.T, e *env, l *Log, fills *[]*zeroFill) *zeroFill {
	t.Helper()
	n := len(*fills)
	for i := 0; len(*fills) == n; i++ {
		if i == 5000 {
			t.Fatal("no fill started after 5000 fast appends")
		}
		appendFast(t, e, l, 1, 100_000+i)
	}
	return (*fills)[len(*fills)-1]
}

// fileSize is the size of segment s's file.
func fileSize(t *testing.T, s *segment) int64 {
	t.Helper()
	info, err := s.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// segState returns the active segment's size, preallocated end and file size.
func segState(t *testing.T, l *Log) (size, alloc, file int64) {
	t.Helper()
	l.mu.RLock()
	act := l.active()
	size, alloc = act.size, act.alloc
	l.mu.RUnlock()
	return size, alloc, fileSize(t, act)
}

func TestPreallocationOverwritesZeroedSpace(t *testing.T) {
	dir := t.TempDir() // the OS file system: real zeros, real file sizes
	cfg := DefaultConfig()
	e, l := preallocEnv(t, vfs.Default, dir, cfg)
	appendFast(t, e, l, 2000, 0)
	size, alloc, file := segState(t, l)
	if alloc <= size || file != alloc {
		t.Fatalf("after 2000 fast appends: size %d, preallocated to %d, file %d; want zeroed space past the size", size, alloc, file)
	}
	// The next appends land in the zeroed space: the file does not grow.
	appendFast(t, e, l, 10, 5000)
	size2, alloc2, file2 := segState(t, l)
	if size2 <= size || size2 > alloc || file2 != alloc2 {
		t.Fatalf("after 10 more: size %d (was %d), preallocated %d, file %d", size2, size, alloc2, file2)
	}
	if st := e.flusher.Stats(); st.PreallocFills < 1 || st.PreallocBytes < alloc-size {
		t.Fatalf("flusher stats count %d fills of %d bytes; want at least 1 and %d", st.PreallocFills, st.PreallocBytes, alloc-size)
	}
	syncAll(t, l)
	want := readAll(t, l)
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != size2 {
		t.Fatalf("after Close the segment file is %d bytes, want its %d bytes of batches", info.Size(), size2)
	}
	l = e.open(cfg)
	defer l.Close()
	if l.EndOffset() != end || len(readAll(t, l)) != len(want) {
		t.Fatalf("reopened: end %d, %d batches; want %d, %d", l.EndOffset(), len(readAll(t, l)), end, len(want))
	}
}

func TestPreallocationOnlyWithoutWriteCachingAndWhenFast(t *testing.T) {
	for _, tc := range []struct {
		name        string
		caching     bool
		off         bool
		step        time.Duration
		wantPadding bool
	}{
		{"fsync acks, fast", false, false, 100 * time.Microsecond, true},
		{"write caching", true, false, 100 * time.Microsecond, false},
		{"disabled", false, true, 100 * time.Microsecond, false},
		{"slow: 1 KB every 10 ms", false, false, 10 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.WriteCaching, cfg.Preallocate = tc.caching, !tc.off
			e, l := preallocEnv(t, vfs.NewMem(), "/p", cfg)
			defer l.Close()
			for i := range 2000 {
				appendAll(t, l, valueBatch(t, 1, 1000, 0, i))
				e.clock.advance(tc.step)
			}
			size, alloc, file := segState(t, l)
			if got := alloc > size; got != tc.wantPadding {
				t.Fatalf("size %d, preallocated to %d (file %d): padding %v, want %v", size, alloc, file, got, tc.wantPadding)
			}
		})
	}
}

func TestPreallocationTrimmedAtRoll(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	mem := vfs.NewMem()
	e, l := preallocEnv(t, mem, "/p", cfg)
	for i := range 14_000 { // ~2 MB/s (fills of ~1 MiB, well inside a segment); ~15 MB: 3 rolls
		appendAll(t, l, valueBatch(t, 1, 1000, 0, i))
		e.clock.advance(500 * time.Microsecond)
	}
	l.mu.RLock()
	segs := append([]*segment(nil), l.segments...)
	l.mu.RUnlock()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	padded := 0
	for _, s := range segs[:len(segs)-1] {
		if got := fileSize(t, s); got != s.size {
			t.Errorf("sealed segment %d: file %d bytes, batches %d", s.base, got, s.size)
		}
		if s.alloc > 0 {
			padded++
		}
	}
	if padded == 0 {
		t.Fatal("no sealed segment was ever preallocated: the test does not test the trim")
	}
	syncAll(t, l)
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Sealed segments' index files describe them at their trimmed size, so Open uses them.
	l = e.open(cfg)
	defer l.Close()
	l.mu.RLock()
	for _, s := range l.segments[:len(l.segments)-1] {
		if len(s.idx.offsets) == 0 {
			t.Errorf("segment %d reopened without its index", s.base)
		}
	}
	l.mu.RUnlock()
	if l.EndOffset() != end {
		t.Fatalf("reopened at %d, want %d", l.EndOffset(), end)
	}
}

// logCapture collects a log's warnings.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func TestPreallocatedTailAfterPowerLoss(t *testing.T) {
	cfg := DefaultConfig()
	mem := vfs.NewMem()
	e, l := preallocEnv(t, mem, "/p", cfg)
	appendFast(t, e, l, 1500, 0)
	syncAll(t, l)
	want := readAll(t, l)
	size, alloc, _ := segState(t, l)
	if alloc <= size {
		t.Fatalf("no zeroed space past the end (size %d, preallocated %d)", size, alloc)
	}
	// Power fails with everything synced: the file ends in synced zeros, which are not a torn
	// write and must not be reported as one.
	e.fs = mem.Crash(vfs.CrashOptions{Tear: true})
	var logs logCapture
	l2, err := Open(Options{FS: e.fs, Dir: "/p", Config: cfg, Flusher: e.flusher, Now: e.clock.now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l2); len(got) != len(want) || !bytes.Equal(got[len(got)-1], want[len(want)-1]) {
		t.Fatalf("recovered %d batches, want %d", len(got), len(want))
	}
	if s2, _, file := segState(t, l2); file != s2 || s2 != size {
		t.Fatalf("recovered segment: %d bytes of batches (want %d), file %d", s2, size, file)
	}
	if strings.Contains(logs.String(), "torn") {
		t.Fatalf("zeroed space reported as a torn write:\n%s", logs.String())
	}
	// Appends go on after recovery, and more unsynced ones are lost in a second crash without
	// taking the synced ones along.
	appendFast(t, e, l2, 500, 10_000)
	syncAll(t, l2)
	want = readAll(t, l2)
	appendFast(t, e, l2, 50, 20_000) // not synced
	e.fs = e.fs.(*vfs.MemFS).Crash(vfs.CrashOptions{Tear: true})
	l3 := e.open(cfg)
	defer l3.Close()
	got := readAll(t, l3)
	if len(got) < len(want) {
		t.Fatalf("second crash: %d batches survive, %d were synced", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("second crash: batch %d differs", i)
		}
	}
	if s3, _, file := segState(t, l3); file != s3 {
		t.Fatalf("after the second crash the segment file is %d bytes, its batches %d", file, s3)
	}
	l.Close()
	l2.Close()
}

func TestTruncateWithPreallocation(t *testing.T) {
	cfg := DefaultConfig()
	e, l := preallocEnv(t, vfs.NewMem(), "/p", cfg)
	appendFast(t, e, l, 1500, 0)
	if size, alloc, _ := segState(t, l); alloc <= size {
		t.Fatal("no zeroed space to truncate across")
	}
	if _, err := l.Truncate(700); err != nil {
		t.Fatal(err)
	}
	size, alloc, file := segState(t, l)
	if file != size || alloc != size {
		t.Fatalf("after Truncate: batches %d, preallocated %d, file %d; want one size", size, alloc, file)
	}
	appendFast(t, e, l, 1500, 50_000)
	syncAll(t, l)
	if l.EndOffset() != 2200 {
		t.Fatalf("end %d, want 2200", l.EndOffset())
	}
	kv := keyValues(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(cfg)
	defer l.Close()
	if got := keyValues(t, l); len(got) != 2200 || got[699] != kv[699] || got[700] != kv[700] || got[2199] != kv[2199] {
		t.Fatalf("reopened: %d records; 699 %q 700 %q 2199 %q", len(got), got[699], got[700], got[2199])
	}
}

// A fill that cannot write (a disk with room for small appends but not for the zeros ahead)
// pauses preallocation and loses nothing; a fill whose fsync fails poisons the log, because the
// kernel may have dropped the file's other unsynced pages with it.
func TestPreallocationFailures(t *testing.T) {
	var failWrite, failSync atomic.Bool
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		switch {
		case op == vfs.OpWrite && failWrite.Load() && strings.HasSuffix(path, ".log"):
			return syscall.ENOSPC
		case op == vfs.OpSync && failSync.Load():
			return syscall.EIO
		}
		return nil
	})
	t.Run("write", func(t *testing.T) {
		failWrite.Store(false)
		e, l := preallocEnv(t, vfs.NewErrorFS(vfs.NewMem(), inj), "/p", DefaultConfig())
		defer l.Close()
		var fills []*zeroFill
		l.spawnFill = func(f *zeroFill) { fills = append(fills, f) } // run them below
		f := appendUntilFill(t, e, l, &fills)
		failWrite.Store(true)
		l.runFill(f)
		failWrite.Store(false)
		if err := l.Err(); err != nil {
			t.Fatalf("a failed fill write poisoned the log: %v", err)
		}
		size, alloc, _ := segState(t, l)
		if alloc > size {
			t.Fatalf("failed fill counted: preallocated to %d past size %d", alloc, size)
		}
		appendFast(t, e, l, 100, 10_000) // within fillRetryAfter: no new fill
		if len(fills) != 1 {
			t.Fatalf("a fill started %v after a failed one", 100*100*time.Microsecond)
		}
		syncAll(t, l)
		if n := len(readAll(t, l)); int64(n) != l.EndOffset() {
			t.Fatalf("%d batches readable, end offset %d", n, l.EndOffset())
		}
		e.clock.advance(fillRetryAfter)
		l.runFill(appendUntilFill(t, e, l, &fills)) // preallocation resumes
		if size, alloc, _ := segState(t, l); alloc <= size {
			t.Fatalf("resumed fill: size %d, preallocated to %d", size, alloc)
		}
	})
	t.Run("sync", func(t *testing.T) {
		failSync.Store(false)
		e, l := preallocEnv(t, vfs.NewErrorFS(vfs.NewMem(), inj), "/p", DefaultConfig())
		defer l.Close()
		var fills []*zeroFill
		l.spawnFill = func(f *zeroFill) { fills = append(fills, f) }
		f := appendUntilFill(t, e, l, &fills)
		failSync.Store(true)
		l.runFill(f)
		failSync.Store(false)
		if err := l.Err(); !errors.Is(err, ErrPoisoned) {
			t.Fatalf("after a failed fill fsync Err = %v, want ErrPoisoned", err)
		}
		if _, _, err := l.Append(valueBatch(t, 1, 10, 0, 1), 1); !errors.Is(err, ErrPoisoned) {
			t.Fatalf("Append after a failed fill fsync = %v, want ErrPoisoned", err)
		}
	})
}

// An append that would overwrite a range a fill is zeroing waits for the fill.
func TestAppendWaitsForOverlappingFill(t *testing.T) {
	e, l := preallocEnv(t, vfs.NewMem(), "/p", DefaultConfig())
	defer l.Close()
	var fills []*zeroFill
	l.spawnFill = func(f *zeroFill) { fills = append(fills, f) }
	pending := appendUntilFill(t, e, l, &fills)
	// Append until the next write reaches the fill's range; that append must wait.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			size, _, _ := segState(t, l)
			if size+2000 > pending.from {
				appendAll(t, l, valueBatch(t, 1, 1000, 0, 1)) // overlaps: waits
				return
			}
			appendAll(t, l, valueBatch(t, 1, 1000, 0, 2))
		}
	}()
	select {
	case <-done:
		t.Fatal("an append overlapping a running fill did not wait for it")
	case <-time.After(200 * time.Millisecond):
	}
	l.runFill(pending)
	<-done
	syncAll(t, l)
	if got := readAll(t, l); len(got) != int(l.EndOffset()) {
		t.Fatalf("%d batches readable, end offset %d", len(got), l.EndOffset())
	}
}

func TestScanZeroTail(t *testing.T) {
	b1 := valueBatch(t, 2, 100, 0, 1)
	b2 := valueBatch(t, 2, 100, 0, 2)
	for _, tc := range []struct {
		name      string
		tail      []byte
		wantTorn  bool
		wantBytes int64 // file size the scan reports
	}{
		{"no tail", nil, false, 0},
		{"zeros", make([]byte, 70_000), false, 70_000},
		{"a few zero bytes", make([]byte, 5), false, 5},
		{"torn batch then zeros", append(append([]byte(nil), b2[:len(b2)/2]...), make([]byte, 1000)...), true, int64(len(b2)/2 + 1000)},
		{"zeros then a byte", append(make([]byte, 5000), 1), true, 5001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			f, err := mem.Create("/s.log")
			if err != nil {
				t.Fatal(err)
			}
			// Give b1 offsets 0-1 as a log would.
			data := append(append([]byte(nil), b1...), tc.tail...)
			if _, err := f.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
			s := newSegment(f, 0)
			res, err := s.scan(math.MaxInt64, 4096, true)
			if err != nil {
				t.Fatal(err)
			}
			if (res.reason != nil) != tc.wantTorn {
				t.Fatalf("reason %v, want torn=%v", res.reason, tc.wantTorn)
			}
			if res.end != int64(len(b1)) || res.fileSize != int64(len(b1))+tc.wantBytes {
				t.Fatalf("end %d, file %d; want %d, %d", res.end, res.fileSize, len(b1), int64(len(b1))+tc.wantBytes)
			}
		})
	}
}

// Only the active segment can hold preallocated space (a segment is trimmed and fsynced before
// the next one is created), so zeros after the batches of an earlier segment are lost data: the
// log is cut there, with a warning, as for any torn or corrupt segment.
func TestZeroTailOfSealedSegmentIsCorruption(t *testing.T) {
	cfg := testConfig()
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/p")
	l := e.open(cfg)
	for i := range 200 {
		appendAll(t, l, valueBatch(t, 1, 1000, 0, i))
	}
	l.mu.RLock()
	first := l.segments[0]
	firstEnd, nsegs := first.next, len(l.segments)
	l.mu.RUnlock()
	if nsegs < 3 {
		t.Fatalf("%d segments, want at least 3", nsegs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg, err := mem.OpenReadWrite(segmentName("/p", 0, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := seg.Stat()
	if _, err := seg.WriteAt(make([]byte, 8192), info.Size()); err != nil {
		t.Fatal(err)
	}
	seg.Sync()
	seg.Close()
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} { // force a scan
		if err := mem.Remove(segmentName("/p", 0, suffix)); err != nil {
			t.Fatal(err)
		}
	}
	var logs logCapture
	l2, err := Open(Options{FS: mem, Dir: "/p", Config: cfg, Flusher: e.flusher, Now: e.clock.now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.EndOffset() != firstEnd {
		t.Fatalf("end offset %d after zeros in the first of %d segments; want the log cut at %d", l2.EndOffset(), nsegs, firstEnd)
	}
	if !strings.Contains(logs.String(), "torn or corrupt") {
		t.Fatalf("no warning for zeros in a sealed segment:\n%s", logs.String())
	}
}

// A fill told to stop (its space is about to be cut) writes nothing more, does not fsync, and
// does not count its range as preallocated.
func TestStoppedFill(t *testing.T) {
	var syncs atomic.Int32
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			syncs.Add(1)
		}
		return nil
	})
	e, l := preallocEnv(t, vfs.NewErrorFS(vfs.NewMem(), inj), "/p", DefaultConfig())
	defer l.Close()
	var fills []*zeroFill
	l.spawnFill = func(f *zeroFill) { fills = append(fills, f) }
	f := appendUntilFill(t, e, l, &fills)
	// The appends' own fsync (the flusher's, in the background) must be done before counting:
	// under load it could land in the middle of the check and pass for the fill's.
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	before := syncs.Load()
	f.stop.Store(true)
	l.runFill(f)
	size, alloc, file := segState(t, l)
	if alloc > size || file > f.from || syncs.Load() != before {
		t.Fatalf("stopped fill: size %d, preallocated %d, file %d (fill from %d), %d fsyncs", size, alloc, file, f.from, syncs.Load()-before)
	}
}

// A fill makes each piece usable as soon as it is synced: appends into a finished piece go on
// while the fill still writes the next one.
func TestAppendsUseFinishedPieces(t *testing.T) {
	var armed atomic.Bool
	var writes atomic.Int32
	gate := make(chan struct{})
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && armed.Load() && writes.Add(1) == 2 {
			<-gate // the fill's second piece
		}
		return nil
	})
	e, l := preallocEnv(t, vfs.NewErrorFS(vfs.NewMem(), inj), "/p", DefaultConfig())
	defer l.Close()
	var fills []*zeroFill
	l.spawnFill = func(f *zeroFill) { fills = append(fills, f) }
	f := appendUntilFill(t, e, l, &fills)
	if f.to-f.from < 2*zeroPiece {
		t.Fatalf("fill of %d bytes: too small for two pieces", f.to-f.from)
	}
	start := f.from
	armed.Store(true)
	done := make(chan struct{})
	go func() { l.runFill(f); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for { // wait for the first piece
		l.mu.RLock()
		from := f.from
		l.mu.RUnlock()
		if from > start && writes.Load() >= 2 { // piece one done, piece two's write held
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fill's first piece never finished")
		}
		time.Sleep(time.Millisecond)
	}
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for {
			size, _, _ := segState(t, l)
			if size > start+zeroPiece/2 {
				return
			}
			appendAll(t, l, valueBatch(t, 1, 1000, 0, 7)) // into the first piece, not the second
		}
	}()
	select {
	case <-appended:
	case <-time.After(5 * time.Second):
		close(gate)
		t.Fatal("appends into a finished piece waited for the rest of the fill")
	}
	close(gate)
	<-done
	if size, alloc, _ := segState(t, l); alloc != f.to || size > alloc {
		t.Fatalf("after the fill: size %d, preallocated %d, want %d", size, alloc, f.to)
	}
}
