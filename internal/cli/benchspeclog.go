package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel-dev/runnel/internal/bench"
)

func newBenchSpecLogCommand() *cobra.Command {
	var o bench.SpecLogOptions
	var brokers, shards, sweep, plot, plotFrom, timeline, admin string
	var configs []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "speclog",
		Short: "Measure total-order topics with speculation on and off: the SpecLog paper's workload (seed 002)",
		Long: `Runs the SpecLog paper's workload on a fresh total-order topic, with speculative delivery
and then without it (records delivered once confirmed: the Scalog baseline): per shard
--appenders open-loop appenders of --rate appends/s of --record-size bytes through the SpecLog
API, and one subscriber per shard that is busy --compute per delivered batch. Reports delivery,
confirmation, end-to-end and append latency (mean, p50, p99, µs), the no-op fraction, and the
ratios; --sweep adds the end-to-end latency of other compute times (from the same runs: the
compute time is modelled, see docs/speclog.md), and --plot draws it against C.`,
		Example: `  runnel serve &
  runnel bench speclog --brokers 127.0.0.1:9092 --shards 2 --compute 1.5ms --duration 60s
  runnel bench speclog --shards 2,4 --sweep 0.1ms,0.5ms,1ms,1.5ms,2ms,5ms --plot speclog-e2e.png --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if plotFrom != "" { // draw earlier results, run nothing
				var results []*bench.SpecLogResult
				for _, f := range strings.Split(plotFrom, ",") {
					rs, err := readSpecLogResults(f)
					if err != nil {
						return err
					}
					results = append(results, rs...)
				}
				if plot == "" {
					return fmt.Errorf("--plot-from needs --plot FILE")
				}
				return bench.PlotSpecLogSweep(plot, results)
			}
			var err error
			if o.Brokers, err = splitAddrs("brokers", brokers); err != nil {
				return err
			}
			if o.TopicConfigs, err = withConfigs(nil, configs); err != nil {
				return err
			}
			var counts []int
			for _, s := range strings.Split(shards, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n < 1 {
					return fmt.Errorf("--shards %q: a list of shard counts", shards)
				}
				counts = append(counts, n)
			}
			if sweep != "" {
				for _, s := range strings.Split(sweep, ",") {
					d, err := time.ParseDuration(strings.TrimSpace(s))
					if err != nil || d < 0 {
						return fmt.Errorf("--sweep %q: a list of durations", sweep)
					}
					o.Sweep = append(o.Sweep, d)
				}
			}
			o.Progress = cmd.ErrOrStderr()
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if timeline != "" {
				o.Shards = counts[0]
				res, err := bench.SpecLogTimeline(ctx, o, timeline, admin)
				if err != nil {
					return err
				}
				if plot != "" {
					if err := res.WritePNG(plot); err != nil {
						return err
					}
				}
				return writeOutput(cmd.OutOrStdout(), asJSON, res, res.WriteText)
			}
			var results []*bench.SpecLogResult
			for _, n := range counts {
				o.Shards = n
				res, err := bench.SpecLog(ctx, o)
				if err != nil {
					return err
				}
				results = append(results, res)
				if !asJSON {
					res.WriteText(cmd.OutOrStdout())
				}
			}
			if plot != "" {
				if err := bench.PlotSpecLogSweep(plot, results); err != nil {
					return err
				}
			}
			if asJSON {
				var v any = results
				if len(results) == 1 {
					v = results[0]
				}
				return bench.WriteJSON(cmd.OutOrStdout(), v)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated host:port of the cluster's brokers")
	fl.StringVar(&o.SpecLogAddr, "speclog", "", "the SpecLog address (default: the one the brokers describe as runnel.speclog.addr)")
	fl.StringVar(&shards, "shards", "2", "shards (partitions) of the topic; a comma-separated list runs each")
	fl.DurationVar(&o.Compute, "compute", 1500*time.Microsecond, "the subscriber's work per delivered batch (C)")
	fl.StringVar(&sweep, "sweep", "", "more compute times to report the end-to-end latency of, e.g. 0.1ms,0.5ms,1ms,1.5ms,2ms,5ms")
	fl.DurationVar(&o.Duration, "duration", 60*time.Second, "measured time per mode (the paper's 60 s)")
	fl.DurationVar(&o.Warmup, "warmup", 2*time.Second, "time per round before measuring")
	fl.IntVar(&o.Rounds, "rounds", 0, "rounds per mode, alternating the modes (default: rounds of at most 15 s)")
	fl.IntVar(&o.Appenders, "appenders", 10, "appenders per shard")
	fl.Float64Var(&o.Rate, "rate", 1000, "appends/s per appender")
	fl.IntVar(&o.RecordSize, "record-size", 4096, "bytes per record")
	fl.IntVar(&o.IdleShards, "idle-shards", 0, "the last this many shards get no appenders (busy shards next to idle ones)")
	fl.IntVar(&o.ReplicationFactor, "replication-factor", 0, "replicas per shard (0: the cluster's default; the paper's shards have 2)")
	fl.BoolVar(&o.UnaryAppends, "unary-appends", false, "send each append as its own Append call instead of on one AppendStream per connection (what the Go client library does)")
	fl.BoolVar(&o.ClosedLoop, "closed-loop", false, "each appender waits for its append's answer before the next (the paper's clients; the offered load falls when appends are slow) instead of sending at fixed times")
	fl.BoolVar(&o.Spin, "spin", false, "busy-wait the compute time instead of modelling it (burns a core per shard)")
	fl.StringArrayVar(&configs, "topic-config", nil, "topic config key=value (repeatable), e.g. write.caching=true")
	fl.StringVar(&plot, "plot", "", "write a PNG of end-to-end latency against the compute time (needs --sweep)")
	fl.StringVar(&timeline, "timeline", "", "instead of the comparison, a run over time (speculative mode) around an event at a third of --duration: burst (shard 0 at 5x for 2 s), rate (shard 0 at 3x from then on), fail (shard 1 frozen for 1 s; needs --admin)")
	fl.StringVar(&admin, "admin", "", "the node's admin address, for --timeline fail (the node runs with --enable-fault-injection)")
	fl.StringVar(&plotFrom, "plot-from", "", "comma-separated JSON outputs of earlier runs to draw with --plot, instead of running")
	fl.BoolVar(&asJSON, "json", false, "print JSON: one object with a speculative and a baseline member (an array for several --shards)")
	return cmd
}

// readSpecLogResults reads a `bench speclog --json` output: one result or an array of them.
func readSpecLogResults(path string) ([]*bench.SpecLogResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var many []*bench.SpecLogResult
	if err := json.Unmarshal(b, &many); err == nil {
		return many, nil
	}
	var one bench.SpecLogResult
	if err := json.Unmarshal(b, &one); err != nil {
		return nil, fmt.Errorf("%s: not a bench speclog --json output: %w", path, err)
	}
	return []*bench.SpecLogResult{&one}, nil
}
