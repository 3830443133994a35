package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ServerStats is what the brokers' own metrics say about the measured window (Options.Metrics):
// where object topics' produce time went, and their object store requests. Runnel only.
type ServerStats struct {
	// Stages: runnel_object_stage_seconds over the window, by stage (buffer, put, commit, get).
	Stages map[string]StageSummary `json:"object_stages,omitempty"`
	// Per second of the window, summed over the scraped brokers.
	PutsPerSec      float64 `json:"object_puts_per_sec"`
	GetsPerSec      float64 `json:"object_gets_per_sec"`
	WrittenMBPerSec float64 `json:"object_written_mb_per_sec"`
	ReadMBPerSec    float64 `json:"object_read_mb_per_sec"`
	CacheHitRatio   float64 `json:"object_cache_hit_ratio"` // -1: no lookups
}

// StageSummary summarizes one stage's histogram delta; quantiles are interpolated within buckets.
type StageSummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
}

// scrape is one read of the brokers' metrics: metric families by name, merged over brokers.
type scrape map[string][]*dto.Metric

func scrapeMetrics(ctx context.Context, urls []string) (scrape, error) {
	out := scrape{}
	for _, u := range urls {
		u = strings.TrimSuffix(u, "/")
		if !strings.HasPrefix(u, "http") {
			u = "http://" + u
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("bench: scraping %s: %w", u, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("bench: parsing the metrics of %s: %w", u, err)
		}
		for name, f := range fams {
			if strings.HasPrefix(name, "runnel_object_") {
				out[name] = append(out[name], f.GetMetric()...)
			}
		}
	}
	return out, nil
}

func metricLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// counter sums a counter's values whose label key has value.
func (s scrape) counter(name, key, value string) float64 {
	var sum float64
	for _, m := range s[name] {
		if key == "" || metricLabel(m, key) == value {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// histogram merges a histogram's series with label key=value: cumulative counts by upper bound.
func (s scrape) histogram(name, key, value string) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = map[float64]uint64{}
	for _, m := range s[name] {
		if metricLabel(m, key) != value {
			continue
		}
		h := m.GetHistogram()
		count += h.GetSampleCount()
		sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return count, sum, buckets
}

// serverStats is the difference of two scrapes over a window of secs seconds.
func serverStats(before, after scrape, secs float64) *ServerStats {
	st := &ServerStats{Stages: map[string]StageSummary{}, CacheHitRatio: -1}
	for _, stage := range []string{"buffer", "put", "commit", "get"} {
		c1, s1, b1 := after.histogram("runnel_object_stage_seconds", "stage", stage)
		c0, s0, b0 := before.histogram("runnel_object_stage_seconds", "stage", stage)
		if c1 <= c0 {
			continue
		}
		n := c1 - c0
		bounds := make([]float64, 0, len(b1))
		for ub := range b1 {
			bounds = append(bounds, ub)
		}
		sort.Float64s(bounds)
		delta := make([]uint64, len(bounds))
		for i, ub := range bounds {
			delta[i] = b1[ub] - b0[ub]
		}
		st.Stages[stage] = StageSummary{Count: n, MeanMs: (s1 - s0) / float64(n) * 1000,
			P50Ms: bucketQuantile(bounds, delta, n, 0.5) * 1000, P99Ms: bucketQuantile(bounds, delta, n, 0.99) * 1000}
	}
	rate := func(name, key, value string) float64 {
		return (after.counter(name, key, value) - before.counter(name, key, value)) / secs
	}
	st.PutsPerSec = rate("runnel_object_requests_total", "op", "put")
	st.GetsPerSec = rate("runnel_object_requests_total", "op", "get")
	st.WrittenMBPerSec = rate("runnel_object_bytes_total", "dir", "written") / 1e6
	st.ReadMBPerSec = rate("runnel_object_bytes_total", "dir", "read") / 1e6
	hits, misses := rate("runnel_object_cache_requests_total", "result", "hit"), rate("runnel_object_cache_requests_total", "result", "miss")
	if hits+misses > 0 {
		st.CacheHitRatio = hits / (hits + misses)
	}
	return st
}

// bucketQuantile interpolates quantile q within cumulative buckets (upper bounds ascending,
// the last +Inf), as Prometheus' histogram_quantile does.
func bucketQuantile(bounds []float64, cum []uint64, n uint64, q float64) float64 {
	rank := q * float64(n)
	lower, below := 0.0, uint64(0)
	for i, ub := range bounds {
		if float64(cum[i]) >= rank {
			if math.IsInf(ub, 1) {
				return lower
			}
			inBucket := cum[i] - below
			if inBucket == 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-float64(below))/float64(inBucket)
		}
		lower, below = ub, cum[i]
	}
	return lower
}

// writeServerStats prints the object topics' stages and requests.
func writeServerStats(out io.Writer, st *ServerStats) {
	if st == nil {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tcount\tmean\tp50\tp99\t\n", label("object stage"))
	for _, stage := range []string{"buffer", "put", "commit", "get"} {
		if s, ok := st.Stages[stage]; ok {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", label(stage), s.Count, formatMs(s.MeanMs), formatMs(s.P50Ms), formatMs(s.P99Ms))
		}
	}
	tw.Flush()
	hit := "n/a"
	if st.CacheHitRatio >= 0 {
		hit = fmt.Sprintf("%.1f%%", st.CacheHitRatio*100)
	}
	fmt.Fprintf(out, "object store: %.2f PUT/s, %.2f GET/s, %.2f MB/s written, %.2f MB/s read, read cache hits %s\n",
		st.PutsPerSec, st.GetsPerSec, st.WrittenMBPerSec, st.ReadMBPerSec, hit)
}

// scrapeWindow scrapes the metrics at the window's start and end.
func (r *run) scrapeWindow(ctx context.Context) {
	defer close(r.scraped)
	wait := func(t time.Time) bool {
		select {
		case <-time.After(time.Until(t)):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !wait(r.window.start) {
		return
	}
	before, err := scrapeMetrics(ctx, r.opts.Metrics)
	if err != nil {
		r.errs.add(err.Error())
		return
	}
	if !wait(r.window.end) {
		return
	}
	after, err := scrapeMetrics(ctx, r.opts.Metrics)
	if err != nil {
		r.errs.add(err.Error())
		return
	}
	r.server = serverStats(before, after, r.window.end.Sub(r.window.start).Seconds())
}
