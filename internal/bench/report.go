package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is the outcome of one run, or of several merged (Rounds > 1). Latencies count records
// whose intended send time fell in the measured window; throughput is those records over the
// window's length. MB are 10^6 bytes of record values.
type Result struct {
	Label           string    `json:"label,omitempty"`
	Bootstrap       string    `json:"bootstrap"`
	Workload        Workload  `json:"workload"`
	Started         time.Time `json:"started"`
	Rounds          int       `json:"rounds"`
	MeasuredSeconds float64   `json:"measured_seconds"` // summed over rounds
	TargetRate      float64   `json:"target_records_per_sec"`

	Produce LatencySummary `json:"produce_latency"` // intended send -> ack
	E2E     LatencySummary `json:"e2e_latency"`     // intended send -> consumer receipt
	SendLag LatencySummary `json:"send_lag"`        // intended send -> Produce call (part of both)

	Throughput Throughput   `json:"throughput"`
	Records    Counts       `json:"records"`
	Errors     []ErrorCount `json:"errors,omitempty"`
	Notes      []string     `json:"notes,omitempty"`
	Topics     []string     `json:"topics,omitempty"`    // the topics of the runs
	Intervals  []Interval   `json:"intervals,omitempty"` // one per second; not merged over rounds
	Server     *ServerStats `json:"server,omitempty"`    // from the brokers' metrics (Options.Metrics); not merged over rounds

	produceHist, e2eHist, lagHist *hdrhistogram.Histogram
}

// Throughput is measured records and value bytes per second of the measured window.
type Throughput struct {
	ProduceRecordsPerSec float64 `json:"produce_records_per_sec"`
	ProduceMBPerSec      float64 `json:"produce_mb_per_sec"`
	ConsumeRecordsPerSec float64 `json:"consume_records_per_sec"` // summed over subscriptions
	ConsumeMBPerSec      float64 `json:"consume_mb_per_sec"`
}

// Counts are the run's record counters, warm-up and drain included unless named Measured.
type Counts struct {
	Sent                  int64 `json:"sent"`
	Acked                 int64 `json:"acked"`
	ProduceErrors         int64 `json:"produce_errors"`
	Unsent                int64 `json:"unsent"` // scheduled but not sent by the hard deadline
	Consumed              int64 `json:"consumed"`
	FetchErrors           int64 `json:"fetch_errors"`
	Foreign               int64 `json:"foreign,omitempty"` // consumed values without a send time
	Clamped               int64 `json:"clamped,omitempty"` // latencies above 60 s, recorded as 60 s
	AckedMeasured         int64 `json:"acked_measured"`
	AckedBytesMeasured    int64 `json:"acked_bytes_measured"`
	ConsumedMeasured      int64 `json:"consumed_measured"`
	ConsumedBytesMeasured int64 `json:"consumed_bytes_measured"`
}

func (c *Counts) add(o Counts) {
	c.Sent += o.Sent
	c.Acked += o.Acked
	c.ProduceErrors += o.ProduceErrors
	c.Unsent += o.Unsent
	c.Consumed += o.Consumed
	c.FetchErrors += o.FetchErrors
	c.Foreign += o.Foreign
	c.Clamped += o.Clamped
	c.AckedMeasured += o.AckedMeasured
	c.AckedBytesMeasured += o.AckedBytesMeasured
	c.ConsumedMeasured += o.ConsumedMeasured
	c.ConsumedBytesMeasured += o.ConsumedBytesMeasured
}

// ErrorCount is one distinct error message and how often it occurred.
type ErrorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// Interval is one second of progress: rates and latencies of the records acked and received in
// it, whatever their phase.
type Interval struct {
	Seconds      float64 `json:"t_s"` // since the first intended send time, at the interval's end
	Phase        string  `json:"phase"`
	ProduceRate  float64 `json:"produce_records_per_sec"`
	ProduceP50Ms float64 `json:"produce_p50_ms"`
	ProduceP99Ms float64 `json:"produce_p99_ms"`
	E2ERate      float64 `json:"e2e_records_per_sec"`
	E2EP50Ms     float64 `json:"e2e_p50_ms"`
	E2EP99Ms     float64 `json:"e2e_p99_ms"`
	Errors       int64   `json:"errors"` // so far
}

// summarize fills the summaries and throughput from the histograms and counts.
func (r *Result) summarize() {
	r.Produce, r.E2E, r.SendLag = Summarize(r.produceHist), Summarize(r.e2eHist), Summarize(r.lagHist)
	secs, c := r.MeasuredSeconds, &r.Records
	if secs <= 0 {
		return
	}
	r.Throughput = Throughput{
		ProduceRecordsPerSec: round3(float64(c.AckedMeasured) / secs),
		ProduceMBPerSec:      round3(float64(c.AckedBytesMeasured) / 1e6 / secs),
		ConsumeRecordsPerSec: round3(float64(c.ConsumedMeasured) / secs),
		ConsumeMBPerSec:      round3(float64(c.ConsumedBytesMeasured) / 1e6 / secs),
	}
}

// MergeResults combines rounds of the same workload against the same target: histograms and
// counts add up, throughput is over the summed measured time. rs must not be empty; they are
// not changed.
func MergeResults(rs []*Result) *Result {
	first := rs[0]
	m := &Result{Label: first.Label, Bootstrap: first.Bootstrap, Workload: first.Workload,
		Started: first.Started, TargetRate: first.TargetRate}
	var ph, eh, lh []*hdrhistogram.Histogram
	seen := map[string]int{}
	for _, r := range rs {
		m.Rounds += r.Rounds
		m.MeasuredSeconds += r.MeasuredSeconds
		m.Records.add(r.Records)
		ph, eh, lh = append(ph, r.produceHist), append(eh, r.e2eHist), append(lh, r.lagHist)
		for _, e := range r.Errors {
			if i, ok := seen[e.Error]; ok {
				m.Errors[i].Count += e.Count
				continue
			}
			seen[e.Error] = len(m.Errors)
			m.Errors = append(m.Errors, e)
		}
		m.Notes = append(m.Notes, r.Notes...)
		m.Topics = append(m.Topics, r.Topics...)
	}
	m.produceHist, m.e2eHist, m.lagHist = MergeHistograms(ph...), MergeHistograms(eh...), MergeHistograms(lh...)
	m.summarize()
	return m
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// formatMs writes a latency in milliseconds with about three significant digits.
func formatMs(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

// formatRate writes a rate with thousands separators ("10,000").
func formatRate(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatProgress is the line printed every second.
func formatProgress(label string, iv Interval) string {
	var b strings.Builder
	if label != "" {
		fmt.Fprintf(&b, "%s ", label)
	}
	fmt.Fprintf(&b, "%5.0fs %-6s produce %8s rec/s p50 %8s p99 %8s", iv.Seconds, iv.Phase,
		formatRate(iv.ProduceRate), formatMs(iv.ProduceP50Ms), formatMs(iv.ProduceP99Ms))
	fmt.Fprintf(&b, " | e2e %8s rec/s p50 %8s p99 %8s | errors %d",
		formatRate(iv.E2ERate), formatMs(iv.E2EP50Ms), formatMs(iv.E2EP99Ms), iv.Errors)
	return b.String()
}

// Describe is a one-line summary of the workload's shape.
func (w Workload) Describe() string {
	rate := "maximum rate"
	if t := w.TotalRate(); t > 0 {
		rate = formatRate(t) + " rec/s"
	}
	return fmt.Sprintf("%d topic(s) x %d partition(s), %d-byte records, %d producer(s) at %s, %d consumer(s) x %d subscription(s), keys %s, acks=%s, idempotence %v, linger %v, batch max %d B, compression %s, in-flight %d",
		w.Topics, w.Partitions, w.RecordSize, w.Producers, rate, w.Consumers, w.Subscriptions, w.Keys,
		w.Acks, w.Idempotence, w.Linger, w.BatchMaxBytes, w.Compression, w.MaxInFlight)
}

// WriteText writes the final table of one result.
func (r *Result) WriteText(out io.Writer) {
	target := r.Bootstrap
	if r.Label != "" {
		target = r.Label + " at " + r.Bootstrap
	}
	fmt.Fprintf(out, "workload %s against %s\n  %s\n", r.Workload.Name, target, r.Workload.Describe())
	if len(r.Workload.TopicConfigs) > 0 {
		fmt.Fprintf(out, "  topic configs %s\n", formatConfigs(r.Workload.TopicConfigs))
	}
	fmt.Fprintf(out, "  measured %v after %v warm-up", time.Duration(r.MeasuredSeconds*float64(time.Second)).Round(time.Millisecond), r.Workload.Warmup)
	if r.Rounds > 1 {
		fmt.Fprintf(out, " (%d rounds)", r.Rounds)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tcount\tp50\tp90\tp99\tp99.9\tmax\t\n", label("latency"))
	row := func(name string, s LatencySummary) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", label(name), s.Count, formatMs(s.P50Ms), formatMs(s.P90Ms),
			formatMs(s.P99Ms), formatMs(s.P999Ms), formatMs(s.MaxMs))
	}
	row("produce", r.Produce)
	row("end-to-end", r.E2E)
	row("send lag", r.SendLag)
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\trecords/s\tMB/s\t\n", label("throughput"))
	t := r.Throughput
	fmt.Fprintf(tw, "%s\t%s\t%.2f\t\n", label("produce"), formatRate(t.ProduceRecordsPerSec), t.ProduceMBPerSec)
	fmt.Fprintf(tw, "%s\t%s\t%.2f\t\n", label("consume"), formatRate(t.ConsumeRecordsPerSec), t.ConsumeMBPerSec)
	tw.Flush()
	writeServerStats(out, r.Server)
	c := r.Records
	fmt.Fprintf(out, "\nrecords: %d sent, %d acked, %d produce errors, %d unsent, %d consumed, %d fetch errors\n",
		c.Sent, c.Acked, c.ProduceErrors, c.Unsent, c.Consumed, c.FetchErrors)
	for _, e := range r.Errors {
		fmt.Fprintf(out, "error (%dx): %s\n", e.Count, e.Error)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}

func formatConfigs(m map[string]string) string {
	if len(m) == 0 {
		return "(defaults)"
	}
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

// WriteJSON writes v as indented JSON.
func WriteJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
