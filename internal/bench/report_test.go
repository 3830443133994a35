package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestFormatMs(t *testing.T) {
	for _, tc := range []struct {
		ms   float64
		want string
	}{
		{0, "0.00 ms"}, {0.081, "0.08 ms"}, {1.96, "1.96 ms"}, {10.5, "10.5 ms"},
		{99.94, "99.9 ms"}, {123.4, "123 ms"}, {9999, "9999 ms"}, {60000, "60.00 s"},
	} {
		if got := formatMs(tc.ms); got != tc.want {
			t.Errorf("formatMs(%v) = %q; want %q", tc.ms, got, tc.want)
		}
	}
}

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {999.6, "1,000"}, {10000, "10,000"}, {1234567, "1,234,567"}, {-1500, "-1,500"}} {
		if got := formatRate(tc.v); got != tc.want {
			t.Errorf("formatRate(%v) = %q; want %q", tc.v, got, tc.want)
		}
	}
}

// fakeResult is a result with every latency at ms (produce) and 2*ms (e2e), n records.
func fakeResult(label string, ms float64, n int64, seconds float64) *Result {
	w := DefaultWorkload()
	w.Name = "fake"
	r := &Result{Label: label, Bootstrap: "127.0.0.1:9092", Workload: w, Rounds: 1, MeasuredSeconds: seconds,
		produceHist: NewHistogram(), e2eHist: NewHistogram(), lagHist: NewHistogram()}
	us := int64(ms * 1000)
	_ = r.produceHist.RecordValues(us, n)
	_ = r.e2eHist.RecordValues(2*us, n)
	_ = r.lagHist.RecordValues(50, n)
	r.Records = Counts{Sent: n, Acked: n, Consumed: n, AckedMeasured: n, AckedBytesMeasured: n * 1024,
		ConsumedMeasured: n, ConsumedBytesMeasured: n * 1024}
	r.summarize()
	return r
}

func TestResultJSON(t *testing.T) {
	r := fakeResult("runnel", 1.5, 10000, 2)
	r.Errors = []ErrorCount{{Error: "boom", Count: 2}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("result JSON does not parse: %v\n%s", err, buf.String())
	}
	produce := got["produce_latency"].(map[string]any)
	if p50 := produce["p50_ms"].(float64); p50 < 1.499 || p50 > 1.501 {
		t.Errorf("JSON produce_latency.p50_ms = %v; want 1.5", p50)
	}
	if c := produce["count"].(float64); c != 10000 {
		t.Errorf("JSON produce_latency.count = %v; want 10000", c)
	}
	tp := got["throughput"].(map[string]any)
	if v := tp["produce_records_per_sec"].(float64); v != 5000 {
		t.Errorf("JSON throughput.produce_records_per_sec = %v; want 5000", v)
	}
	if v := tp["produce_mb_per_sec"].(float64); v != 5.12 {
		t.Errorf("JSON throughput.produce_mb_per_sec = %v; want 5.12", v)
	}
	wl := got["workload"].(map[string]any)
	if v := wl["linger"]; v != "5ms" {
		t.Errorf("JSON workload.linger = %v; want \"5ms\"", v)
	}
	for _, key := range []string{"e2e_latency", "send_lag", "records", "errors"} {
		if _, ok := got[key]; !ok {
			t.Errorf("JSON has no %q", key)
		}
	}
}

func TestResultText(t *testing.T) {
	r := fakeResult("kafka", 2, 1000, 1)
	r.Notes = []string{"a note"}
	var buf bytes.Buffer
	r.WriteText(&buf)
	out := squeeze(buf.String())
	for _, want := range []string{
		"workload fake against kafka at 127.0.0.1:9092",
		"latency count p50 p90 p99 p99.9 max",
		"produce 1000 2.00 ms 2.00 ms 2.00 ms 2.00 ms 2.00 ms",
		"end-to-end 1000 4.00 ms",
		"produce 1,000 1.02",
		"note: a note",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteText output lacks %q:\n%s", want, out)
		}
	}
}

func TestMergeResults(t *testing.T) {
	a, b := fakeResult("runnel", 1, 3000, 1), fakeResult("runnel", 3, 1000, 1)
	a.Errors = []ErrorCount{{Error: "x", Count: 1}}
	b.Errors = []ErrorCount{{Error: "x", Count: 2}, {Error: "y", Count: 1}}
	m := MergeResults([]*Result{a, b})
	if m.Rounds != 2 || m.MeasuredSeconds != 2 {
		t.Errorf("merged rounds %d, seconds %v; want 2, 2", m.Rounds, m.MeasuredSeconds)
	}
	if m.Produce.Count != 4000 || m.Records.Acked != 4000 {
		t.Errorf("merged count %d, acked %d; want 4000, 4000", m.Produce.Count, m.Records.Acked)
	}
	if m.Produce.P50Ms != 1 || m.Produce.MaxMs < 2.99 {
		t.Errorf("merged produce p50 %v, max %v; want 1 (3000 of 4000 values), ~3", m.Produce.P50Ms, m.Produce.MaxMs)
	}
	if m.Throughput.ProduceRecordsPerSec != 2000 {
		t.Errorf("merged throughput %v rec/s; want 2000 (4000 over 2 s)", m.Throughput.ProduceRecordsPerSec)
	}
	if len(m.Errors) != 2 || m.Errors[0].Count != 3 {
		t.Errorf("merged errors %+v; want x:3, y:1", m.Errors)
	}
	if a.Produce.Count != 3000 {
		t.Errorf("MergeResults changed its input: count %d", a.Produce.Count)
	}
}

func TestComparisonText(t *testing.T) {
	c := &Comparison{Workload: DefaultWorkload(), Rounds: 1}
	for _, p := range StandardPairs() {
		rn, kf := fakeResult("runnel", 1, 1000, 1), fakeResult("kafka", 2, 1000, 1)
		rn.Workload.TopicConfigs, kf.Workload.TopicConfigs = p.Runnel, p.Kafka
		c.Pairs = append(c.Pairs, PairResult{Pair: p, Runnel: rn, Kafka: kf})
	}
	var buf bytes.Buffer
	c.WriteText(&buf)
	out := squeeze(buf.String())
	for _, want := range []string{
		"pair no-fsync", "pair fsync", "write.caching=true", "flush.messages=1",
		"kafka 127.0.0.1:9092 topic configs: (defaults)",
		"produce p50 1.00 ms 2.00 ms 0.50",
		"e2e p99 2.00 ms 4.00 ms 0.50",
		"produce rec/s 1,000 1,000 1.00",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison output lacks %q:\n%s", want, out)
		}
	}
	// Without consumers there is no end-to-end latency to show.
	for _, p := range c.Pairs {
		p.Runnel.E2E, p.Kafka.E2E = LatencySummary{}, LatencySummary{}
	}
	buf.Reset()
	c.WriteText(&buf)
	if strings.Contains(buf.String(), "e2e") {
		t.Errorf("comparison without consumers shows end-to-end rows:\n%s", buf.String())
	}
}

// squeeze collapses runs of spaces, so tests do not depend on column widths.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func TestMergeConfigs(t *testing.T) {
	got := mergeConfigs(map[string]string{"a": "1", "b": "1"}, nil, map[string]string{"b": "2"})
	if got["a"] != "1" || got["b"] != "2" || len(got) != 2 {
		t.Errorf("mergeConfigs = %v; want a=1 b=2", got)
	}
}
