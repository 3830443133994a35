package bench

import (
	"testing"
	"time"
)

func TestMergeHistogramsEqualsOneHistogram(t *testing.T) {
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	for i := int64(1); i <= 10000; i++ {
		h := a
		if i%3 == 0 {
			h = b
		}
		v := i * i % 5_000_000
		_ = h.RecordValue(v)
		_ = all.RecordValue(v)
	}
	m := MergeHistograms(a, nil, b)
	if !m.Equals(all) {
		t.Fatalf("MergeHistograms(a, b) = %v; want the histogram of all values %v", Summarize(m), Summarize(all))
	}
	if a.TotalCount()+b.TotalCount() != 10000 {
		t.Errorf("merging changed its inputs: counts %d + %d", a.TotalCount(), b.TotalCount())
	}
}

func TestRecorderWindowAndInterval(t *testing.T) {
	r := NewRecorder()
	r.Record(2*time.Millisecond, false) // warm-up
	r.Record(5*time.Millisecond, true)
	r.Record(-time.Second, true) // a clock step: counts as 0
	r.Record(2*time.Minute, true)

	w, clamped := r.Window()
	if got := w.TotalCount(); got != 3 {
		t.Errorf("window count = %d; want 3 (the warm-up value is left out)", got)
	}
	if clamped != 1 {
		t.Errorf("clamped = %d; want 1", clamped)
	}
	if got, want := w.Max(), int64(histHighestMicros); !w.ValuesAreEquivalent(got, want) {
		t.Errorf("window max = %d µs; want %d (60 s)", got, want)
	}
	iv := NewHistogram()
	r.TakeInterval(iv)
	if got := iv.TotalCount(); got != 4 {
		t.Errorf("interval count = %d; want 4 (warm-up included)", got)
	}
	iv.Reset()
	r.TakeInterval(iv)
	if got := iv.TotalCount(); got != 0 {
		t.Errorf("second interval count = %d; want 0", got)
	}
	if w2, _ := r.Window(); w2.TotalCount() != 3 {
		t.Errorf("TakeInterval changed the window: count %d; want 3", w2.TotalCount())
	}
}

func TestSummarize(t *testing.T) {
	if got := Summarize(NewHistogram()); got != (LatencySummary{}) {
		t.Errorf("Summarize(empty) = %+v; want zeros", got)
	}
	h := NewHistogram()
	for v := int64(1); v <= 1000; v++ {
		_ = h.RecordValue(v * 1000) // 1 ms .. 1000 ms
	}
	s := Summarize(h)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Ms, 500}, {"p90", s.P90Ms, 900}, {"p99", s.P99Ms, 990},
		{"p99.9", s.P999Ms, 999}, {"max", s.MaxMs, 1000}, {"mean", s.MeanMs, 500.5},
	} {
		if c.got < c.want*0.999 || c.got > c.want*1.001 {
			t.Errorf("Summarize %s = %v ms; want %v ms within 0.1%%", c.name, c.got, c.want)
		}
	}
	if s.Count != 1000 {
		t.Errorf("Summarize count = %d; want 1000", s.Count)
	}
}
