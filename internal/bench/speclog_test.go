package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
	root := cli.NewRoot("test")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"bench", "speclog", "--brokers", n.Kafka, "--shards", "2", "--appenders", "2", "--rate", "100",
		"--duration", "2s", "--warmup", "500ms", "--rounds", "2", "--sweep", "0.5ms,5ms", "--plot", plot, "--json"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("bench speclog: %v", err)
	}
	var res bench.SpecLogResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	for name, m := range map[string]bench.SpecLogMode{"speculative": res.Speculative, "baseline": res.Baseline} {
		if m.Records == 0 || m.Delivery.Mean <= 0 || m.Confirmation.Mean < m.Delivery.Mean || m.EndToEnd.Mean < m.Delivery.Mean ||
			m.Append.Mean <= 0 || len(m.EndToEndSweep) != 2 || m.AppendErrors != 0 {
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
