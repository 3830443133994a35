package logstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// forEachFS runs a test on the OS, the crashable in-memory FS and the error-injecting wrapper.
func forEachFS(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Run("os", func(t *testing.T) { fn(t, newEnv(t, vfs.Default, t.TempDir()+"/p0")) })
	t.Run("mem", func(t *testing.T) { fn(t, newEnv(t, vfs.NewMem(), "/data/p0")) })
	t.Run("errorfs", func(t *testing.T) {
		fn(t, newEnv(t, vfs.NewErrorFS(vfs.NewMem(), &vfs.Rules{}), "/data/p0"))
	})
}

func TestAppendAssignsOffsetsAndEpoch(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		l := e.open(testConfig())
		defer l.Close()
		for i, n := range []int{1, 5, 3} {
			b := valueBatch(t, n, 10, 1000, i)
			before := l.EndOffset()
			first, last, err := l.Append(b, 7)
			if err != nil || first != before || last != before+int64(n)-1 {
				t.Fatalf("Append(%d records) = %d, %d, %v; want %d, %d, nil", n, first, last, err, before, before+int64(n)-1)
			}
			got, err := l.Read(nil, first, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.ValidateStored(got)
			if err != nil || h.BaseOffset != first || h.LeaderEpoch != 7 {
				t.Errorf("read back = base %d epoch %d err %v; want %d, 7, nil", h.BaseOffset, h.LeaderEpoch, err, first)
			}
			if !bytes.Equal(got[batch.HeaderSize:], b[batch.HeaderSize:]) {
				t.Errorf("records were re-encoded")
			}
		}
		if got := l.EndOffset(); got != 9 {
			t.Errorf("EndOffset() = %d; want 9", got)
		}
	})
}

func TestAppendRejectsBadBatchAndStaysUsable(t *testing.T) {
	l := newEnv(t, vfs.NewMem(), "/p").open(testConfig())
	defer l.Close()
	good := valueBatch(t, 2, 10, 1000, 1)
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 0xff
	tests := []struct {
		name  string
		b     []byte
		check string
	}{
		{"crc", bad, "crc"},
		{"short", good[:30], "length"},
		{"magic", func() []byte { b := bytes.Clone(good); b[16] = 1; return b }(), "magic"},
	}
	for _, tt := range tests {
		_, _, err := l.Append(tt.b, 0)
		var ce *batch.CorruptError
		if !errors.As(err, &ce) || ce.Check != tt.check {
			t.Errorf("Append(%s) = %v; want the %q check to fail", tt.name, err, tt.check)
		}
	}
	if first, _, err := l.Append(good, 0); err != nil || first != 0 {
		t.Errorf("Append(good) after rejections = %d, %v; want 0, nil", first, err)
	}
}

func TestReadSemantics(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		l := e.open(testConfig())
		defer l.Close()
		var sizes []int
		for i := 0; i < 10; i++ {
			b := valueBatch(t, 4, 100, 1000, i) // offsets 4i..4i+3
			sizes = append(sizes, len(b))
			appendAll(t, l, b)
		}
		tests := []struct {
			from     int64
			maxBytes int
			want     []int64 // base offsets of the returned batches
		}{
			{0, 1 << 20, []int64{0, 4, 8, 12, 16, 20, 24, 28, 32, 36}},
			{5, 1 << 20, []int64{4, 8, 12, 16, 20, 24, 28, 32, 36}}, // starts with the batch holding 5
			{7, sizes[1] + sizes[2], []int64{4, 8}},
			{7, sizes[1] + sizes[2] - 1, []int64{4}},
			{0, 1, []int64{0}}, // at least one batch
			{39, 0, []int64{36}},
			{40, 1 << 20, nil}, // the log end
		}
		for _, tt := range tests {
			got, err := l.Read(nil, tt.from, tt.maxBytes)
			if err != nil {
				t.Fatalf("Read(%d, %d) = %v", tt.from, tt.maxBytes, err)
			}
			var bases []int64
			for len(got) > 0 {
				n, _ := batch.Split(got)
				h, _ := batch.ParseHeader(got)
				bases = append(bases, h.BaseOffset)
				got = got[n:]
			}
			if !equalInts(bases, tt.want) {
				t.Errorf("Read(%d, %d) = batches %v; want %v", tt.from, tt.maxBytes, bases, tt.want)
			}
		}
		for _, from := range []int64{-1, 41} {
			if _, err := l.Read(nil, from, 100); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Errorf("Read(%d) = %v; want ErrOffsetOutOfRange", from, err)
			}
		}
	})
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReadSliceServesFileRange(t *testing.T) {
	l := newEnv(t, vfs.Default, t.TempDir()).open(testConfig())
	defer l.Close()
	b := valueBatch(t, 3, 50, 1000, 1)
	appendAll(t, l, b, valueBatch(t, 3, 50, 1000, 2))
	s, err := l.ReadSlice(0, len(b))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if _, ok := s.File.(*os.File); !ok || s.Position != 0 || s.Size != len(b) {
		t.Errorf("ReadSlice = %T pos %d size %d; want *os.File 0 %d", s.File, s.Position, s.Size, len(b))
	}
}

func TestSegmentsRollAndIndexLookups(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *env) {
		cfg := testConfig()
		cfg.SegmentBytes = 8 << 10
		cfg.IndexIntervalBytes = 300
		l := e.open(cfg)
		rng := rand.New(rand.NewPCG(1, 2))
		var want [][]byte
		for i := 0; i < 400; i++ {
			b := valueBatch(t, 1+rng.IntN(5), 10+rng.IntN(200), int64(1000+i), i)
			appendAll(t, l, b)
			want = append(want, bytes.Clone(b))
		}
		if n := len(l.segments); n < 10 {
			t.Fatalf("%d segments; want many (segment.bytes %d)", n, cfg.SegmentBytes)
		}
		check := func(l *Log) {
			t.Helper()
			got := readAll(t, l)
			if len(got) != len(want) {
				t.Fatalf("read %d batches; want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i][batch.HeaderSize:], want[i][batch.HeaderSize:]) {
					t.Fatalf("batch %d differs", i)
				}
			}
			for i := 0; i < 200; i++ { // random point reads use the sparse index
				off := rng.Int64N(l.EndOffset())
				b, err := l.Read(nil, off, 1)
				h, _ := batch.ParseHeader(b)
				if err != nil || off < h.BaseOffset || off > h.LastOffset() {
					t.Fatalf("Read(%d) = batch [%d, %d], %v; want the batch holding it", off, h.BaseOffset, h.LastOffset(), err)
				}
			}
			for ts := int64(995); ts < 1405; ts += 7 {
				off, got, ok, err := l.OffsetForTimestamp(ts)
				wantTs := max(ts, 1000)
				if wantTs > 1399 {
					if ok || err != nil {
						t.Errorf("OffsetForTimestamp(%d) = %d, ok; want none", ts, off)
					}
					continue
				}
				b, _ := l.Read(nil, off, 1)
				h, _ := batch.ParseHeader(b)
				if !ok || err != nil || got != wantTs || h.BaseOffset != off || h.MaxTimestamp != wantTs {
					t.Errorf("OffsetForTimestamp(%d) = %d, ts %d, %v, %v; want the first batch at ts %d", ts, off, got, ok, err, wantTs)
				}
			}
		}
		check(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = e.open(cfg) // sealed segments load their index files
		check(l)
		l.Close()
		for _, base := range []int64{0, l.segments[1].base} { // lose or corrupt index files: rebuilt
			_ = e.fs.Remove(segmentName(e.dir, base, indexSuffix))
		}
		f, _ := e.fs.OpenReadWrite(segmentName(e.dir, l.segments[2].base, timeIndexSuffix))
		f.WriteAt([]byte("garbage"), 20)
		f.Close()
		l = e.open(cfg)
		check(l)
		l.Close()
	})
}

// TestSegmentMsRolls: as in Kafka, segment.ms counts from the active segment's first batch's
// timestamp to the new batch's, so a restart does not start the count again; batches without
// a timestamp count from the segment's creation in this process.
func TestSegmentMsRolls(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	hour := time.Hour.Milliseconds()
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.SegmentMs = time.Hour
	l := e.open(cfg)
	appendAll(t, l, valueBatch(t, 1, 10, t0, 1), valueBatch(t, 1, 10, t0+hour-1, 2))
	if n := len(l.segments); n != 1 {
		t.Fatalf("before segment.ms: %d segments; want 1", n)
	}
	l.Close()
	l = e.open(cfg) // the active segment's count goes on from its first batch
	defer l.Close()
	appendAll(t, l, valueBatch(t, 1, 10, t0+hour, 3))
	if n := len(l.segments); n != 2 || l.segments[1].base != 2 {
		t.Fatalf("after segment.ms across a restart: %d segments, last base %d; want 2, 2", n, l.segments[len(l.segments)-1].base)
	}
	e.clock.advance(2 * time.Hour) // the wall clock does not count when the batches have timestamps
	appendAll(t, l, valueBatch(t, 1, 10, t0+hour+1, 4))
	if n := len(l.segments); n != 2 {
		t.Fatalf("2 h later by the wall clock, 1 ms by the timestamps: %d segments; want 2", n)
	}

	e2 := newEnv(t, vfs.NewMem(), "/q")
	l2 := e2.open(cfg)
	defer l2.Close()
	appendAll(t, l2, valueBatch(t, 1, 10, -1, 1), valueBatch(t, 1, 10, -1, 2))
	e2.clock.advance(time.Hour)
	appendAll(t, l2, valueBatch(t, 1, 10, -1, 3))
	if n := len(l2.segments); n != 2 {
		t.Fatalf("no timestamps, segment.ms by the wall clock: %d segments; want 2", n)
	}
}

func TestGroupCommitSharesFsyncs(t *testing.T) {
	e := newEnv(t, vfs.Default, t.TempDir())
	const logs, writers, perWriter = 4, 4, 50
	var ls []*Log
	for i := 0; i < logs; i++ {
		e.dir = t.TempDir()
		ls = append(ls, e.open(testConfig()))
	}
	errs := make(chan error, logs*writers)
	for _, l := range ls {
		for w := 0; w < writers; w++ {
			go func() {
				for i := 0; i < perWriter; i++ {
					_, last, err := l.Append(valueBatch(t, 1, 100, 1, i), 0)
					if err == nil {
						err = l.WaitDurable(context.Background(), last+1)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for i := 0; i < logs*writers; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	total := int64(logs * writers * perWriter)
	if syncs := e.flusher.Syncs.Load(); syncs >= total {
		t.Errorf("%d fsyncs for %d durable appends; want fewer (group commit)", syncs, total)
	}
	for _, l := range ls {
		if l.DurableOffset() != l.EndOffset() {
			t.Errorf("DurableOffset() = %d; want %d", l.DurableOffset(), l.EndOffset())
		}
		l.Close()
	}
}

func TestBackgroundWritebackWithoutWaiters(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30
	l := e.open(cfg)
	defer l.Close()
	b := valueBatch(t, 16, 1024, 1, 1)
	for n := 0; n < writebackBytes+len(b); n += len(b) {
		appendAll(t, l, b)
	}
	// Nobody waits, yet past writebackBytes the log asks for a sync on its own.
	deadline := time.Now().Add(10 * time.Second)
	for l.DurableOffset() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if l.DurableOffset() == 0 {
		t.Errorf("DurableOffset() = 0 after %d unsynced bytes; want a background sync", writebackBytes)
	}
}

// TestFlushPolicy: with nobody waiting, unsynced data is synced once flush.bytes or
// flush.messages is reached, or once it is older than flush.ms.
func TestFlushPolicy(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
	}{
		{"flush.bytes", func(c *Config) { c.FlushBytes = 1000 }},
		{"flush.messages", func(c *Config) { c.FlushMessages = 3 }},
		{"flush.ms", func(c *Config) { c.FlushInterval = 20 * time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, vfs.NewMem(), "/p")
			e.clock = nil // real time: flush.ms is checked by the flusher's ticker
			cfg := testConfig()
			cfg.FlushInterval, cfg.FlushBytes, cfg.FlushMessages = 0, 0, 0
			tt.modify(&cfg)
			l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: cfg, Flusher: e.flusher, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := 0; i < 4; i++ {
				appendAll(t, l, valueBatch(t, 1, 300, 1, i))
			}
			deadline := time.Now().Add(10 * time.Second)
			for l.DurableOffset() < 3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := l.DurableOffset(); got < 3 {
				t.Errorf("DurableOffset() = %d with nobody waiting; want the flush policy to have synced", got)
			}
		})
	}
	// With every limit off, nothing is synced without a waiter.
	e := newEnv(t, vfs.NewMem(), "/q")
	cfg := testConfig()
	cfg.FlushInterval, cfg.FlushBytes, cfg.FlushMessages = 0, 0, 0
	l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: cfg, Flusher: e.flusher, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendAll(t, l, valueBatch(t, 5, 300, 1, 1))
	time.Sleep(50 * time.Millisecond)
	if got := l.DurableOffset(); got != 0 {
		t.Errorf("DurableOffset() = %d with the flush policy off; want 0", got)
	}
}

// TestReadSliceBelowAndHighWatermark: reads stop at the high watermark, which is the log end
// with write caching and the durable offset without it.
func TestReadSliceBelowAndHighWatermark(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2000 // several segments
	cfg.FlushInterval, cfg.FlushBytes, cfg.FlushMessages = 0, 0, 0
	l := e.open(cfg)
	defer l.Close()
	var firsts []int64
	for i := range 12 {
		firsts = append(firsts, appendAll(t, l, valueBatch(t, 2, 200, 1, i))...)
	}
	end := l.EndOffset()
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("HighWatermark() before any sync = %d; want 0 (nothing durable)", hw)
	}
	changed := l.DurableChanged()
	if err := l.WaitDurable(t.Context(), firsts[7]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Errorf("DurableChanged() not closed after the durable offset moved")
	}
	if hw := l.HighWatermark(); hw < firsts[7] {
		t.Errorf("HighWatermark() = %d after WaitDurable(%d)", hw, firsts[7])
	}
	for _, tc := range []struct {
		from, below int64
		wantFirst   int64 // first offset of the slice, -1 for an empty one
	}{
		{0, firsts[3], 0},
		{firsts[2], firsts[3], firsts[2]},
		{firsts[3], firsts[3], -1},
		{firsts[5], firsts[4], -1},
		{firsts[10], end, firsts[10]},
	} {
		s, err := l.ReadSliceBelow(tc.from, 1<<20, tc.below)
		if err != nil {
			t.Fatalf("ReadSliceBelow(%d, below %d) = %v", tc.from, tc.below, err)
		}
		b := make([]byte, s.Size)
		if s.Size > 0 {
			s.File.ReadAt(b, s.Position)
		}
		s.Release()
		var offsets []int64
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			offsets = append(offsets, h.BaseOffset, h.LastOffset())
			b = b[h.Size():]
		}
		switch {
		case tc.wantFirst < 0 && len(offsets) > 0:
			t.Errorf("ReadSliceBelow(%d, below %d) read offsets %v; want nothing", tc.from, tc.below, offsets)
		case tc.wantFirst >= 0 && (len(offsets) == 0 || offsets[0] != tc.wantFirst || offsets[len(offsets)-1] >= tc.below):
			t.Errorf("ReadSliceBelow(%d, below %d) read offsets %v; want from %d, all below %d", tc.from, tc.below, offsets, tc.wantFirst, tc.below)
		}
	}
	// A slice's Next is the offset after its last batch, whether the byte budget, the bound or
	// the segment's end cut it (a read_committed fetch's aborted transactions stop there).
	for _, from := range []int64{0, firsts[1], firsts[5]} {
		for _, maxBytes := range []int{1, 300, 700, 1500, 1 << 20} {
			for _, below := range []int64{firsts[6], end} {
				s, err := l.ReadSliceBelow(from, maxBytes, below)
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, s.Size)
				s.File.ReadAt(b, s.Position)
				s.Release()
				last := int64(-1)
				for len(b) > 0 {
					h, err := batch.ParseHeader(b)
					if err != nil {
						t.Fatal(err)
					}
					last, b = h.LastOffset(), b[h.Size():]
				}
				if last < 0 || s.Next != last+1 {
					t.Errorf("ReadSliceBelow(%d, %d bytes, below %d): Next %d, last offset read %d; want last+1", from, maxBytes, below, s.Next, last)
				}
			}
		}
	}

	cfg.WriteCaching = true
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw != end {
		t.Errorf("HighWatermark() with write caching = %d; want the log end %d", hw, end)
	}
}

// TestSegmentJitterRollsEarly: with segment.jitter.ms each segment rolls a random amount, drawn
// when it is made and below min(segment.jitter.ms, segment.ms), before segment.ms, as Kafka's
// LogSegment.rollJitterMs; without it every segment rolls at segment.ms.
func TestSegmentJitterRollsEarly(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	rollAges := func(jitter time.Duration) []int64 {
		e := newEnv(t, vfs.NewMem(), "/p")
		cfg := testConfig()
		cfg.SegmentMs, cfg.SegmentJitter = 100*time.Second, jitter
		l := e.open(cfg)
		defer l.Close()
		var ages []int64
		first := t0
		for i := int64(0); i < 2000; i++ { // a batch a second
			ts := t0 + i*1000
			act := l.active()
			appendAll(t, l, valueBatch(t, 1, 10, ts, int(i)))
			if l.active() != act && act.size > 0 {
				if want := cfg.SegmentMs - act.rollJitter(&cfg); time.Duration(ts-first)*time.Millisecond < want {
					t.Fatalf("segment %d rolled %d ms after its first batch; want at least %v (segment.ms less its jitter)", act.base, ts-first, want)
				}
				ages = append(ages, ts-first)
				first = ts
			}
		}
		return ages
	}
	for _, age := range rollAges(0) {
		if age != 100_000 {
			t.Fatalf("without jitter a segment rolled %d ms after its first batch; want 100000", age)
		}
	}
	ages := rollAges(50 * time.Second)
	distinct := map[int64]bool{}
	for _, age := range ages {
		if age <= 50_000 || age > 100_000 {
			t.Fatalf("with 50 s of jitter a segment rolled %d ms after its first batch; want within (50000, 100000]", age)
		}
		distinct[age] = true
	}
	if len(ages) < 10 || len(distinct) < 3 {
		t.Fatalf("roll ages %v; want at least 10 rolls at several random ages", ages)
	}

	s := newSegment(nil, 0)
	s.jitterDraw = 12_345_678
	for _, tt := range []struct{ jitter, segment, want time.Duration }{
		{0, time.Hour, 0},
		{time.Second, time.Hour, 678 * time.Millisecond},
		{time.Hour, time.Second, 678 * time.Millisecond}, // at most segment.ms, as Kafka's min(jitter, segment.ms)
	} {
		cfg := Config{SegmentMs: tt.segment, SegmentJitter: tt.jitter}
		if got := s.rollJitter(&cfg); got != tt.want {
			t.Errorf("rollJitter(jitter %v, segment.ms %v) = %v; want %v", tt.jitter, tt.segment, got, tt.want)
		}
	}
}
