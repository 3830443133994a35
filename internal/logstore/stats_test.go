package logstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

func TestHistogram(t *testing.T) {
	h := NewHistogram([]float64{1, 2, 4})
	for _, v := range []float64{0.5, 1, 1.5, 3, 4, 9, 100} {
		h.Observe(v)
	}
	s := h.Snapshot()
	if want := []uint64{2, 3, 5}; !reflect.DeepEqual(s.Buckets, want) {
		t.Errorf("Buckets = %v, want cumulative %v", s.Buckets, want)
	}
	if s.Count != 7 || s.Sum != 119 {
		t.Errorf("Count, Sum = %d, %v; want 7, 119", s.Count, s.Sum)
	}
	if got := ExponentialBounds(1, 2, 4); !reflect.DeepEqual(got, []float64{1, 2, 4, 8}) {
		t.Errorf("ExponentialBounds(1, 2, 4) = %v", got)
	}
}

// TestFlushLagAndStats checks the metrics hooks: the flush lag counts exactly what is appended
// and not yet synced, and the flusher's histograms count every sync and every batch it covered.
func TestFlushLagAndStats(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	cfg := testConfig()
	cfg.FlushInterval, cfg.FlushBytes, cfg.FlushMessages = 0, 0, 0 // sync only for waiters
	l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: cfg, Flusher: e.flusher, Logger: quiet, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if lag := l.FlushLag(); lag != (FlushLag{}) {
		t.Fatalf("FlushLag() of an empty log = %+v, want zero", lag)
	}
	var size int64
	for i := 0; i < 5; i++ {
		b := valueBatch(t, 2, 100, 1, i)
		size += int64(len(b))
		appendAll(t, l, b)
		e.clock.advance(10 * time.Millisecond)
	}
	want := FlushLag{Bytes: size, Records: 10, Age: 50 * time.Millisecond}
	if lag := l.FlushLag(); lag != want {
		t.Fatalf("FlushLag() = %+v, want %+v", lag, want)
	}
	before := e.flusher.Stats()
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if lag := l.FlushLag(); lag != (FlushLag{}) {
		t.Errorf("FlushLag() after WaitDurable = %+v, want zero", lag)
	}
	after := e.flusher.Stats()
	syncs := after.Syncs - before.Syncs
	if syncs < 1 || after.SyncSeconds.Count-before.SyncSeconds.Count != uint64(syncs) {
		t.Errorf("%d syncs but %d sync latencies observed", syncs, after.SyncSeconds.Count-before.SyncSeconds.Count)
	}
	if got := after.BatchesPerSync.Sum - before.BatchesPerSync.Sum; got != 5 {
		t.Errorf("BatchesPerSync counted %v batches, want the 5 appended", got)
	}
	if after.LogsPerRound.Count-before.LogsPerRound.Count != uint64(after.Rounds-before.Rounds) {
		t.Errorf("LogsPerRound observed %d rounds, Rounds moved by %d", after.LogsPerRound.Count-before.LogsPerRound.Count, after.Rounds-before.Rounds)
	}
}
