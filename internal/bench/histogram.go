package bench

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in microseconds from 1 µs to 60 s with 3
// significant digits (a recorded value is within 0.1% of the true one).
const (
	histLowestMicros  = 1
	histHighestMicros = 60_000_000
	histSigFigs       = 3
)

// NewHistogram returns an empty latency histogram with the bench's bounds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowestMicros, histHighestMicros, histSigFigs)
}

// MergeHistograms returns a new histogram holding every value of hs; nil entries are skipped.
// The caller owns the result; hs are not changed.
func MergeHistograms(hs ...*hdrhistogram.Histogram) *hdrhistogram.Histogram {
	out := NewHistogram()
	for _, h := range hs {
		if h != nil {
			out.Merge(h) // same bounds everywhere, so nothing is dropped
		}
	}
	return out
}

// Recorder collects latencies from many goroutines into two histograms: the measured window's
// (values recorded with measured set) and the current progress interval's (every value).
type Recorder struct {
	mu       sync.Mutex
	window   *hdrhistogram.Histogram
	interval *hdrhistogram.Histogram
	clamped  int64 // values above 60 s, recorded as 60 s
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{window: NewHistogram(), interval: NewHistogram()}
}

// histMicros converts a latency to the microseconds a histogram records: negative latencies (a
// wall clock step) count as 0, and those above 60 s as 60 s, with clamped set.
func histMicros(d time.Duration) (us int64, clamped bool) {
	us = max(d.Microseconds(), 0)
	if us > histHighestMicros {
		return histHighestMicros, true
	}
	return us, false
}

// Record adds one latency. Negative latencies (a wall clock step) count as 0.
func (r *Recorder) Record(d time.Duration, measured bool) {
	us, clamped := histMicros(d)
	r.mu.Lock()
	if clamped {
		r.clamped++
	}
	_ = r.interval.RecordValue(us) // in range by construction
	if measured {
		_ = r.window.RecordValue(us)
	}
	r.mu.Unlock()
}

// TakeInterval merges the values recorded since the last call into into, and starts a new
// interval.
func (r *Recorder) TakeInterval(into *hdrhistogram.Histogram) {
	r.mu.Lock()
	into.Merge(r.interval)
	r.interval.Reset()
	r.mu.Unlock()
}

// Window returns a copy of the measured window's histogram, which the caller owns, and how many
// of its values were clamped to 60 s.
func (r *Recorder) Window() (*hdrhistogram.Histogram, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return MergeHistograms(r.window), r.clamped
}

// LatencySummary is what the report shows of one histogram, in milliseconds.
type LatencySummary struct {
	Count  int64   `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// Summarize reads the report's quantiles off h; an empty h gives all zeros.
func Summarize(h *hdrhistogram.Histogram) LatencySummary {
	if h == nil || h.TotalCount() == 0 {
		return LatencySummary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{
		Count:  h.TotalCount(),
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P90Ms:  ms(h.ValueAtQuantile(90)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
		MeanMs: math.Round(h.Mean()) / 1000,
	}
}
