package logstore

import (
	"math"
	"sync/atomic"
	"time"
)

// Histogram counts observations into fixed buckets, lock-free, for metrics. Bounds are the
// buckets' inclusive upper bounds, ascending; one more bucket holds everything above the last.
// The shape matches a Prometheus histogram, so the metrics endpoint exports a Snapshot as is.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // len(bounds)+1
	sum    atomic.Uint64   // float64 bits
	n      atomic.Uint64
}

// NewHistogram returns a histogram with the given bucket upper bounds (ascending).
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// ExponentialBounds returns n bounds starting at start, each factor times the previous.
func ExponentialBounds(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.n.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramSnapshot is a histogram's state: Buckets[i] counts observations <= Bounds[i]
// (cumulative, as Prometheus wants); Count includes those above the last bound.
type HistogramSnapshot struct {
	Bounds  []float64
	Buckets []uint64
	Count   uint64
	Sum     float64
}

// Snapshot reads the histogram. Concurrent observations may be half counted (in Count but not
// yet in a bucket); the error is one observation per concurrent Observe.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Bounds: h.bounds, Buckets: make([]uint64, len(h.bounds))}
	var cum uint64
	for i := range h.bounds {
		cum += h.counts[i].Load()
		s.Buckets[i] = cum
	}
	s.Count = cum + h.counts[len(h.bounds)].Load()
	s.Sum = math.Float64frombits(h.sum.Load())
	return s
}

// FlusherStats is what a Flusher has done, for the metrics endpoint.
type FlusherStats struct {
	Rounds int64 // sync rounds run
	Syncs  int64 // sync calls: a log's fsync, or one syncfs covering several logs
	// SyncSeconds is the latency of each log sync (file fsync plus directory sync if any).
	SyncSeconds HistogramSnapshot
	// BatchesPerSync is how many appended batches each log sync made durable: the group-commit
	// factor on one partition.
	BatchesPerSync HistogramSnapshot
	// LogsPerRound is how many logs each round synced: the group-commit factor across partitions.
	LogsPerRound HistogramSnapshot
	// PreallocFills and PreallocBytes count completed zero fills of preallocated segment space
	// (prealloc.go) and the zero bytes they wrote and fsynced: the extra writes of preallocation.
	PreallocFills, PreallocBytes int64
}

var (
	syncLatencyBounds = ExponentialBounds(50e-6, 2, 16) // 50 µs .. 1.6 s
	countBounds       = ExponentialBounds(1, 2, 14)     // 1 .. 8192
)

// Stats returns the flusher's counters and histograms.
func (f *Flusher) Stats() FlusherStats {
	return FlusherStats{
		Rounds:         f.Rounds.Load(),
		Syncs:          f.Syncs.Load(),
		SyncSeconds:    f.syncSeconds.Snapshot(),
		BatchesPerSync: f.batchesPerSync.Snapshot(),
		LogsPerRound:   f.logsPerRound.Snapshot(),
		PreallocFills:  f.preallocFills.Load(),
		PreallocBytes:  f.preallocBytes.Load(),
	}
}

// FlushLag is how much of a log is appended but not yet durable: the bytes and records, and how
// long the oldest of them has waited. With write caching this is what a power loss would take;
// the flush policy (flush.ms, flush.bytes, flush.messages) bounds it.
type FlushLag struct {
	Bytes   int64
	Records int64
	Age     time.Duration
}

// FlushLag returns the log's current flush lag.
func (l *Log) FlushLag() FlushLag {
	l.mu.Lock()
	defer l.mu.Unlock()
	lag := FlushLag{Bytes: l.unsynced + l.syncing, Records: l.unsyncedMsgs + l.syncingMsgs}
	since := l.unsyncedSince
	if !l.syncingSince.IsZero() {
		since = l.syncingSince
	}
	if !since.IsZero() {
		lag.Age = max(0, l.now().Sub(since))
	}
	return lag
}
