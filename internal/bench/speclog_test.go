package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/bench"
	"github.com/runnel-dev/runnel/internal/cli"
	"github.com/runnel-dev/runnel/internal/speclog/speclogtest"
)

// TestBenchSpecLogSmoke runs `runnel bench speclog` briefly against a one-node Runnel: both modes
// report latencies for the records they measured, the SpecLog address is found from the
// brokers, and the plot is written. Never how fast anything was.
func TestBenchSpecLogSmoke(t *testing.T) {
	n := speclogtest.Start(t)
	plot := filepath.Join(t.TempDir(), "e2e.png")
	res := benchSpecLog(t, "--brokers", n.Kafka, "--shards", "2", "--appenders", "2", "--rate", "100",
		"--duration", "2s", "--warmup", "500ms", "--rounds", "2", "--sweep", "0.5ms,5ms", "--plot", plot)
	for name, m := range map[string]bench.SpecLogMode{"speculative": res.Speculative, "baseline": res.Baseline} {
		if m.Records == 0 || m.Delivery.Mean <= 0 || m.Confirmation.Mean < m.Delivery.Mean || m.EndToEnd.Mean < m.Delivery.Mean ||
			m.Append.Mean <= 0 || len(m.EndToEndSweep) != 2 || m.AppendErrors != 0 ||
			m.SendLag.Mean <= 0 || m.SendLag.Mean > m.Append.Mean { // the harness's delay is part of every append's latency
			t.Fatalf("%s mode: %+v", name, m)
		}
	}
	if res.Baseline.Confirmation != res.Baseline.Delivery {
		t.Fatalf("the baseline delivers confirmed records: delivery %+v, confirmation %+v", res.Baseline.Delivery, res.Baseline.Confirmation)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
}

// TestBenchSpecLogClosedLoop: with --closed-loop an appender has one append in flight, so by
// Little's law the achieved rate times the mean append latency (appends in flight on average)
// is at most the number of appenders, however high --rate asks; and an append is timed from
// its hand-over.
func TestBenchSpecLogClosedLoop(t *testing.T) {
	n := speclogtest.Start(t)
	res := benchSpecLog(t, "--brokers", n.Kafka, "--shards", "2", "--appenders", "1", "--rate", "100000",
		"--closed-loop", "--duration", "2s", "--warmup", "500ms", "--rounds", "1")
	if !res.ClosedLoop {
		t.Fatalf("the result does not say closed loop: %+v", res)
	}
	for name, m := range map[string]bench.SpecLogMode{"speculative": res.Speculative, "baseline": res.Baseline} {
		inFlight := m.AppendRate * m.Append.Mean / 1e6
		if m.Records == 0 || m.AppendErrors != 0 || inFlight > 2*1.1 || m.SendLag.Mean > m.Append.Mean/2 {
			t.Fatalf("%s mode: %.2f appends in flight on average (2 appenders): %+v", name, inFlight, m)
		}
	}
}

// benchSpecLog runs `runnel bench speclog --json` with args and returns its result.
func benchSpecLog(t *testing.T, args ...string) *bench.SpecLogResult {
	t.Helper()
	root := cli.NewRoot("test")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"bench", "speclog", "--json"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench speclog: %v", err)
	}
	var res bench.SpecLogResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	return &res
}

// TestBenchSpecLogTimelineSmoke runs the burst timeline briefly: every bucket gets a time, the
// burst shows in shard 0's append rate, and the plot is written.
func TestBenchSpecLogTimelineSmoke(t *testing.T) {
	n := speclogtest.Start(t)
	plot := filepath.Join(t.TempDir(), "burst.png")
	root := cli.NewRoot("test")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"bench", "speclog", "--brokers", n.Kafka, "--shards", "2", "--appenders", "2", "--rate", "100",
		"--duration", "6s", "--timeline", "burst", "--plot", plot, "--json"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench speclog --timeline: %v", err)
	}
	var res bench.TimelineResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	var during, before int
	for _, p := range res.Points {
		switch {
		case p.T >= res.EventAt+0.25 && p.T < res.EventEnd-0.25:
			during = max(during, p.AppendsPerS[0])
		case p.T >= 0.5 && p.T < res.EventAt-0.25:
			before = max(before, p.AppendsPerS[0])
		}
	}
	if before == 0 || during < 3*before {
		t.Fatalf("shard 0's appends/s: %d before the burst, %d during", before, during)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
}

// TestTimelineTextSkipsUndescribedBuckets: the buckets after the last Describe (the run's end)
// have no view; the summary must not show them as a return to view 0.
func TestTimelineTextSkipsUndescribedBuckets(t *testing.T) {
	res := bench.TimelineResult{Scenario: "fail", EventAt: 1, EventEnd: 2, Points: []bench.TimelinePoint{
		{T: 0, Quotas: []int64{1, 1}}, {T: 1, View: 1, Quotas: []int64{2, 0}}, {T: 2, View: 1, Quotas: []int64{1, 1}}, {T: 3}, {T: 4}}}
	var out bytes.Buffer
	res.WriteText(&out)
	if !strings.Contains(out.String(), "views seen: [0 1]; quotas at the end: [1 1]") {
		t.Fatalf("summary:\n%s", out.String())
	}
}
