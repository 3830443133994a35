package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/runnel-dev/runnel/internal/bench"
	"github.com/runnel-dev/runnel/internal/gctune"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure latency and throughput of any Kafka-compatible cluster, or compare Runnel with Kafka",
		Long: `Run a workload (a YAML file, or a shipped one by name) with open-loop producers and
measure produce and end-to-end latency from each record's intended send time.
See docs/bench.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchRunCommand(), newBenchCompareCommand(), newBenchWorkloadsCommand(), newBenchFsyncCommand(), newBenchFailoverCommand(),
		newBenchTxnCommand(), newBenchShareCommand(), newBenchSpecLogCommand())
	return cmd
}

// benchFlags are the flags `bench run` and `bench compare` share: the workload, the fields that
// override it, and the output.
type benchFlags struct {
	workload     string
	json         bool
	quiet        bool
	dryRun       bool
	keepTopics   bool
	drainTimeout time.Duration

	// Overrides of workload fields; each applies only if its flag was set.
	rate, producerRate                                      float64
	duration, warmup, linger, fetchMaxWait                  time.Duration
	topics, producers, consumers, subscriptions, recordSize int
	maxInFlight, maxBuffered                                int
	partitions, batchMaxBytes                               int32
	replicationFactor                                       int16
	acks, keys, compression                                 string
	idempotence                                             bool
	topicConfigs                                            []string
}

func (f *benchFlags) register(flags *pflag.FlagSet) {
	flags.StringVar(&f.workload, "workload", "", "workload file, or the name of a shipped one (runnel bench workloads)")
	flags.BoolVar(&f.json, "json", false, "print the result as JSON instead of a table")
	flags.BoolVar(&f.quiet, "quiet", false, "no progress line every second")
	flags.BoolVar(&f.dryRun, "dry-run", false, "print the workload after overrides and exit")
	flags.BoolVar(&f.keepTopics, "keep-topics", false, "leave the benchmark's topics behind")
	flags.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "after the run, how long to wait for a backlog, acks and consumers")

	flags.Float64Var(&f.rate, "rate", 0, "target records/s across all producers; 0: maximum rate")
	flags.Float64Var(&f.producerRate, "producer-rate", 0, "target records/s per producer")
	flags.DurationVar(&f.duration, "duration", 0, "length of the measured window")
	flags.DurationVar(&f.warmup, "warmup", 0, "warm-up before the measured window")
	flags.DurationVar(&f.linger, "linger", 0, "producer linger per partition (kgo.ProducerLinger)")
	flags.DurationVar(&f.fetchMaxWait, "fetch-max-wait", 0, "consumer fetch max wait")
	flags.IntVar(&f.topics, "topics", 0, "number of topics")
	flags.Int32Var(&f.partitions, "partitions", 0, "partitions per topic")
	flags.Int16Var(&f.replicationFactor, "replication-factor", 0, "replicas per partition; -1: the cluster's default")
	flags.IntVar(&f.producers, "producers", 0, "number of producers (one client each)")
	flags.IntVar(&f.consumers, "consumers", 0, "consumers per subscription; 0: none (no end-to-end latency)")
	flags.IntVar(&f.subscriptions, "subscriptions", 0, "subscriptions, each receiving every record")
	flags.IntVar(&f.recordSize, "record-size", 0, "bytes of each record's value (at least 8)")
	flags.Int32Var(&f.batchMaxBytes, "batch-max-bytes", 0, "largest record batch the producer builds")
	flags.IntVar(&f.maxInFlight, "max-in-flight", 0, "produce requests in flight per broker (without idempotence)")
	flags.IntVar(&f.maxBuffered, "max-buffered-records", 0, "records the producer buffers before Produce blocks")
	flags.StringVar(&f.acks, "acks", "", "all, 1 or 0")
	flags.StringVar(&f.keys, "keys", "", "none, random or round-robin")
	flags.StringVar(&f.compression, "compression", "", "none, gzip, snappy, lz4 or zstd")
	flags.BoolVar(&f.idempotence, "idempotence", false, "idempotent producer (the broker must support InitProducerId)")
	flags.StringArrayVar(&f.topicConfigs, "topic-config", nil, "topic config key=value for the created topics (repeatable)")
}

// loadWorkload reads the workload named by the argument or --workload and applies the flags
// that were set (on the command line or in the environment).
func (f *benchFlags) loadWorkload(flags *pflag.FlagSet, args []string) (bench.Workload, error) {
	name := f.workload
	if len(args) == 1 {
		if name != "" && name != args[0] {
			return bench.Workload{}, fmt.Errorf("workload given twice: %q and --workload %q", args[0], name)
		}
		name = args[0]
	}
	if name == "" {
		return bench.Workload{}, fmt.Errorf("name a workload file or one of: %s", strings.Join(bench.StandardWorkloads(), ", "))
	}
	w, err := bench.LoadWorkload(name)
	if err != nil {
		return bench.Workload{}, err
	}
	if flags.Changed("rate") && flags.Changed("producer-rate") {
		return bench.Workload{}, errors.New("give --rate (total) or --producer-rate, not both")
	}
	set := func(flag string, apply func()) {
		if flags.Changed(flag) {
			apply()
		}
	}
	set("rate", func() { w.Rate, w.ProducerRate = f.rate, 0 })
	set("producer-rate", func() { w.ProducerRate, w.Rate = f.producerRate, 0 })
	set("duration", func() { w.Duration = bench.Duration(f.duration) })
	set("warmup", func() { w.Warmup = bench.Duration(f.warmup) })
	set("linger", func() { w.Linger = bench.Duration(f.linger) })
	set("fetch-max-wait", func() { w.FetchMaxWait = bench.Duration(f.fetchMaxWait) })
	set("topics", func() { w.Topics = f.topics })
	set("partitions", func() { w.Partitions = f.partitions })
	set("replication-factor", func() { w.ReplicationFactor = f.replicationFactor })
	set("producers", func() { w.Producers = f.producers })
	set("consumers", func() { w.Consumers = f.consumers })
	set("subscriptions", func() { w.Subscriptions = f.subscriptions })
	set("record-size", func() { w.RecordSize = f.recordSize })
	set("batch-max-bytes", func() { w.BatchMaxBytes = f.batchMaxBytes })
	set("max-in-flight", func() { w.MaxInFlight = f.maxInFlight })
	set("max-buffered-records", func() { w.MaxBuffered = f.maxBuffered })
	set("acks", func() { w.Acks = f.acks })
	set("keys", func() { w.Keys = f.keys })
	set("compression", func() { w.Compression = f.compression })
	set("idempotence", func() { w.Idempotence = f.idempotence })
	if w.TopicConfigs, err = withConfigs(w.TopicConfigs, f.topicConfigs); err != nil {
		return bench.Workload{}, err
	}
	return w, w.Validate()
}

// withConfigs returns base with the key=value pairs kvs set; base is not changed.
func withConfigs(base map[string]string, kvs []string) (map[string]string, error) {
	set, err := parseConfigs(kvs)
	if err != nil || len(set) == 0 && len(base) == 0 {
		return base, err
	}
	out := make(map[string]string, len(base)+len(set))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range set {
		out[k] = *v
	}
	return out, nil
}

// options are the run options the flags give.
func (f *benchFlags) options(progress io.Writer) bench.Options {
	o := bench.Options{KeepTopics: f.keepTopics, DrainTimeout: f.drainTimeout}
	if !f.quiet {
		o.Progress = progress
	}
	return o
}

// printDryRun prints the effective workload as YAML.
func printDryRun(w io.Writer, wl bench.Workload) error {
	b, err := yaml.Marshal(wl)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeOutput prints v as indented JSON if asJSON, else calls text.
func writeOutput(w io.Writer, asJSON bool, v any, text func(io.Writer)) error {
	if asJSON {
		return bench.WriteJSON(w, v)
	}
	text(w)
	return nil
}

// splitAddrs splits a comma-separated address list, dropping empty entries.
func splitAddrs(flag, s string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("--%s is empty", flag)
	}
	return addrs, nil
}

// signalContext ends on SIGINT or SIGTERM, so an interrupted run still reports and cleans up.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// benchGCHeadroom is the heap headroom the harness gives its own garbage collector
// (internal/gctune), so the client's GC cycles stay out of the latencies it measures; a set GOGC
// wins. It is the same for every broker under test.
const benchGCHeadroom = 256 << 20

func newBenchRunCommand() *cobra.Command {
	var f benchFlags
	var sec clientSecurity
	var bootstrap, label, metricsAddrs string
	cmd := &cobra.Command{
		Use:   "run [WORKLOAD]",
		Short: "Run a workload against one cluster",
		Example: `  runnel bench run latency-1kb --bootstrap 127.0.0.1:9092
  runnel bench run workloads/sparse-feed.yaml --duration 20s --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := f.loadWorkload(cmd.Flags(), args)
			if err != nil {
				return err
			}
			if f.dryRun {
				return printDryRun(cmd.OutOrStdout(), w)
			}
			opts := f.options(cmd.ErrOrStderr())
			if opts.Bootstrap, err = splitAddrs("bootstrap", bootstrap); err != nil {
				return err
			}
			opts.Label = label
			secOpts, err := sec.opts()
			if err != nil {
				return err
			}
			opts.ClientOpts = append(opts.ClientOpts, secOpts...)
			if metricsAddrs != "" {
				if opts.Metrics, err = splitAddrs("metrics", metricsAddrs); err != nil {
					return err
				}
			}
			defer gctune.Start(benchGCHeadroom).Stop()
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			res, err := bench.Run(ctx, w, opts)
			if err != nil {
				return err
			}
			return writeOutput(cmd.OutOrStdout(), f.json, res, res.WriteText)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&bootstrap, "bootstrap", "127.0.0.1:9092", "comma-separated host:port of the cluster's brokers")
	cmd.Flags().StringVar(&label, "label", "", "name of the target in the report (e.g. runnel, kafka)")
	cmd.Flags().StringVar(&metricsAddrs, "metrics", "", "comma-separated admin host:port of Runnel brokers: report object topics' stage times and object store requests from their /metrics")
	sec.register(cmd.Flags())
	return cmd
}

// compareFlags are the flags of `bench compare` beyond benchFlags.
type compareFlags struct {
	runnel, kafka              string
	rounds                     int
	pairs                      []string
	runnelConfigs, kafkaConfs  []string
	startRunnel, startKafka    bool
	runnelBin, runnelDataDir   string
	kafkaScript, clusterScript string
	kafkaProps                 []string
	nodes                      int
}

func (c *compareFlags) register(flags *pflag.FlagSet) {
	flags.StringVar(&c.runnel, "runnel-bootstrap", "127.0.0.1:9092", "Runnel's host:port (comma-separated)")
	flags.StringVar(&c.kafka, "kafka-bootstrap", "127.0.0.1:19092", "Kafka's host:port (comma-separated)")
	flags.IntVar(&c.rounds, "rounds", 1, "runs per broker and pair, alternating which broker goes first")
	flags.StringSliceVar(&c.pairs, "pairs", []string{"no-fsync", "fsync"}, "fairness pairs to run: no-fsync, fsync")
	flags.StringArrayVar(&c.runnelConfigs, "runnel-topic-config", nil, "topic config key=value for Runnel only (repeatable)")
	flags.StringArrayVar(&c.kafkaConfs, "kafka-topic-config", nil, "topic config key=value for Kafka only (repeatable)")
	flags.BoolVar(&c.startRunnel, "start-runnel", false, "start `runnel serve` on --runnel-bootstrap for the comparison and stop it after")
	flags.StringVar(&c.runnelBin, "runnel-bin", "", "runnel binary for --start-runnel (default: this one)")
	flags.StringVar(&c.runnelDataDir, "runnel-data-dir", "", "data dir for --start-runnel (default: a new temporary dir, deleted after)")
	flags.BoolVar(&c.startKafka, "start-kafka", false, "install and start Kafka with --kafka-script on --kafka-bootstrap's port on a fresh data dir, and stop it and delete the data after")
	flags.StringVar(&c.kafkaScript, "kafka-script", "scripts/kafka.sh", "the script for --start-kafka")
	flags.StringArrayVar(&c.kafkaProps, "kafka-broker-property", nil, "extra server.properties key=value for --start-kafka (repeatable)")
	flags.IntVar(&c.nodes, "nodes", 1, "with --start-runnel / --start-kafka: start clusters of this many nodes (scripts/cluster.sh, scripts/kafka.sh cluster-start), node 1 on the bootstrap's port and node I 100*(I-1) above it")
	flags.StringVar(&c.clusterScript, "cluster-script", "scripts/cluster.sh", "the script that starts a Runnel cluster for --start-runnel --nodes N")
}

// pairs resolves --pairs to the standard pairs.
func (c *compareFlags) resolvePairs() ([]bench.Pair, error) {
	var pairs []bench.Pair
	for _, name := range c.pairs {
		p, ok := bench.PairNamed(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("--pairs: no pair %q (want no-fsync or fsync)", name)
		}
		pairs = append(pairs, p)
	}
	if len(pairs) == 0 {
		return nil, errors.New("--pairs is empty")
	}
	return pairs, nil
}

func newBenchCompareCommand() *cobra.Command {
	var f benchFlags
	var c compareFlags
	cmd := &cobra.Command{
		Use:   "compare [WORKLOAD]",
		Short: "Run a workload against Runnel and Kafka, alternating, and print them side by side",
		Long: `Run the same workload against Runnel and Kafka, alternating between them, for both
fairness pairs: Runnel write.caching=true vs Kafka's default (no fsync), and Runnel
write.caching=false vs Kafka flush.messages=1 (fsync before ack). See docs/bench.md.`,
		Example: `  scripts/kafka.sh install && scripts/kafka.sh start
  runnel serve --data-dir /tmp/runnel-bench --kafka-addr 127.0.0.1:9092 &
  runnel bench compare latency-1kb --duration 30s --rounds 2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := f.loadWorkload(cmd.Flags(), args)
			if err != nil {
				return err
			}
			if f.dryRun {
				return printDryRun(cmd.OutOrStdout(), w)
			}
			opts := bench.CompareOptions{Rounds: c.rounds, Run: f.options(cmd.ErrOrStderr())}
			if opts.Runnel, err = splitAddrs("runnel-bootstrap", c.runnel); err != nil {
				return err
			}
			if opts.Kafka, err = splitAddrs("kafka-bootstrap", c.kafka); err != nil {
				return err
			}
			if opts.Pairs, err = c.resolvePairs(); err != nil {
				return err
			}
			if opts.RunnelConfigs, err = withConfigs(nil, c.runnelConfigs); err != nil {
				return err
			}
			if opts.KafkaConfigs, err = withConfigs(nil, c.kafkaConfs); err != nil {
				return err
			}
			defer gctune.Start(benchGCHeadroom).Stop()
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			stopBrokers, err := c.startBrokers(ctx, &opts, cmd.ErrOrStderr())
			defer func() {
				if serr := stopBrokers(); serr != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "runnel: %v\n", serr)
				}
			}()
			if err != nil {
				return err
			}
			cmp, err := bench.Compare(ctx, w, opts)
			if err != nil {
				return err
			}
			return writeOutput(cmd.OutOrStdout(), f.json, cmp, cmp.WriteText)
		},
	}
	f.register(cmd.Flags())
	c.register(cmd.Flags())
	return cmd
}

// startBrokers starts the brokers --start-runnel and --start-kafka ask for. The returned
// function stops those it started, even after an error.
func (c *compareFlags) startBrokers(ctx context.Context, opts *bench.CompareOptions, logOut io.Writer) (func() error, error) {
	runnelAddr, kafkaAddr := opts.Runnel[0], opts.Kafka[0]
	var started []*bench.Process
	var cleanups []func() error
	stopAll := func() error {
		var errs []error
		for _, p := range started {
			errs = append(errs, p.Stop())
		}
		for _, f := range cleanups {
			errs = append(errs, f())
		}
		return errors.Join(errs...)
	}
	if c.startRunnel {
		bin := c.runnelBin
		if bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return stopAll, fmt.Errorf("--start-runnel: finding this binary: %w", err)
			}
			bin = exe
		}
		dir := c.runnelDataDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "runnel-bench-")
			if err != nil {
				return stopAll, err
			}
			dir = tmp
			cleanups = append(cleanups, func() error { return os.RemoveAll(tmp) })
		}
		if c.nodes > 1 {
			p, addrs, err := bench.StartRunnelCluster(ctx, c.clusterScript, bin, filepath.Clean(dir), runnelAddr, c.nodes, false, logOut)
			if err != nil {
				return stopAll, err
			}
			started, opts.Runnel = append(started, p), addrs
		} else {
			p, err := bench.StartRunnel(ctx, bin, filepath.Clean(dir), runnelAddr, logOut)
			if err != nil {
				return stopAll, err
			}
			started = append(started, p)
		}
	}
	if c.startKafka {
		if c.nodes > 1 {
			p, addrs, err := bench.StartKafkaCluster(ctx, c.kafkaScript, kafkaAddr, c.nodes, c.kafkaProps, logOut)
			if err != nil {
				return stopAll, err
			}
			started, opts.Kafka = append(started, p), addrs
		} else {
			p, err := bench.StartKafka(ctx, c.kafkaScript, kafkaAddr, c.kafkaProps, logOut)
			if err != nil {
				return stopAll, err
			}
			started = append(started, p)
		}
	}
	return stopAll, nil
}

// clusterFlags are the flags of a benchmark of a running cluster (failover, txn, share): where
// it is, the configs of the topics it creates, and JSON output.
type clusterFlags struct {
	bootstrap string
	configs   []string
	asJSON    bool
}

// addBootstrap registers --bootstrap (listed first in the help).
func (f *clusterFlags) addBootstrap(fl *pflag.FlagSet) {
	fl.StringVar(&f.bootstrap, "bootstrap", "127.0.0.1:9092", "comma-separated host:port of the cluster's brokers")
}

// addOutput registers --topic-config and --json (listed last).
func (f *clusterFlags) addOutput(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.configs, "topic-config", nil, "topic config key=value (repeatable)")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
}

// parse returns the bootstrap addresses and the topic configs.
func (f *clusterFlags) parse() ([]string, map[string]string, error) {
	addrs, err := splitAddrs("bootstrap", f.bootstrap)
	if err != nil {
		return nil, nil, err
	}
	configs, err := withConfigs(nil, f.configs)
	return addrs, configs, err
}

func newBenchFailoverCommand() *cobra.Command {
	var o bench.FailoverOptions
	var cf clusterFlags
	var killCmd, restartCmd string
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure the time from kill -9 of a partition leader to the next acknowledged produce",
		Example: `  scripts/cluster.sh start 3
  runnel bench failover --bootstrap $(scripts/cluster.sh brokers) --label runnel \
    --kill-cmd 'scripts/cluster.sh kill {node}' --restart-cmd 'scripts/cluster.sh restart {node}'
  scripts/kafka.sh cluster-start 3
  runnel bench failover --bootstrap $(scripts/kafka.sh cluster-brokers) --label kafka \
    --kill-cmd 'scripts/kafka.sh cluster-kill {node}' --restart-cmd 'scripts/kafka.sh cluster-restart {node}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bootstrap, o.TopicConfigs, err = cf.parse(); err != nil {
				return err
			}
			if killCmd == "" || restartCmd == "" {
				return errors.New("bench failover: --kill-cmd and --restart-cmd are required")
			}
			o.Progress = cmd.ErrOrStderr()
			o.Kill, o.Restart = bench.Shell(killCmd, o.Progress), bench.Shell(restartCmd, o.Progress)
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			res, err := bench.Failover(ctx, o)
			if res != nil && len(res.Rounds) > 0 {
				if werr := writeOutput(cmd.OutOrStdout(), cf.asJSON, res, res.WriteText); err == nil {
					err = werr
				}
			}
			return err
		},
	}
	fl := cmd.Flags()
	cf.addBootstrap(fl)
	fl.StringVar(&o.Label, "label", "cluster", "name of the cluster in the report")
	fl.StringVar(&killCmd, "kill-cmd", "", "shell command that kills node {node} (kill -9)")
	fl.StringVar(&restartCmd, "restart-cmd", "", "shell command that starts node {node} again")
	fl.IntVar(&o.Rounds, "rounds", 3, "how many times the leader is killed")
	fl.Float64Var(&o.Rate, "rate", 1000, "records/s produced")
	fl.DurationVar(&o.Settle, "settle", 15*time.Second, "wait after a restart before the next round")
	cf.addOutput(fl)
	return cmd
}

func newBenchTxnCommand() *cobra.Command {
	var o bench.TxnOptions
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Measure transactions against plain writes: seed 004's streaming cycle and bulk insert",
		Long: `Measures, on topics of the cluster's default replication factor:

  stream  consume-transform-produce one record at a time (closed loop): the transactional cycle
          (begin, produce, the consumer's offset into the transaction, commit) against the
          plain cycle (produce acks=all and wait, commit the offset); median and p99 of each
          and their ratio (Redpanda reported 4.6x, Kafka 6.3x)
  bulk    N records in one transaction, committed, against N acks=all records; records/s`,
		Example: `  scripts/cluster.sh start 3
  runnel bench txn --bootstrap $(scripts/cluster.sh brokers) --label runnel --topic-config write.caching=false
  scripts/kafka.sh cluster-start 3
  runnel bench txn --bootstrap $(scripts/kafka.sh cluster-brokers) --label kafka-fsync --topic-config flush.messages=1
  runnel bench txn --bootstrap $(scripts/kafka.sh cluster-brokers) --label kafka`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bootstrap, o.TopicConfigs, err = cf.parse(); err != nil {
				return err
			}
			o.Progress = cmd.ErrOrStderr()
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			res, err := bench.Txn(ctx, o)
			if err != nil {
				return err
			}
			return writeOutput(cmd.OutOrStdout(), cf.asJSON, res, res.WriteText)
		},
	}
	fl := cmd.Flags()
	cf.addBootstrap(fl)
	fl.StringVar(&o.Label, "label", "cluster", "name of the cluster in the report")
	fl.IntVar(&o.Cycles, "cycles", 2000, "stream: cycles of each kind")
	fl.IntVar(&o.Bulk, "bulk", 10000, "bulk: records per round")
	fl.IntVar(&o.BulkRounds, "bulk-rounds", 3, "bulk: rounds of each kind")
	fl.IntVar(&o.BulkBatchBytes, "bulk-batch-bytes", 16384, "bulk: the producers' batch size (the Java client's batch.size default; linger 5 ms and 5 requests in flight, its defaults too)")
	fl.IntVar(&o.RecordSize, "record-size", 100, "bytes per record")
	cf.addOutput(fl)
	return cmd
}

func newBenchShareCommand() *cobra.Command {
	var o bench.ShareOptions
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "share",
		Short: "Measure one share-group consumer (KIP-932) acknowledging as it polls",
		Long: `Fills a topic, then reads it all with one share consumer of a new group, once per poll
size and way of acknowledging:

  sync   each poll's records accepted and flushed (ShareAcknowledge, waited for) before the
         next poll: Java's explicit mode with commitSync
  async  each poll's records accepted when the next poll begins, the acknowledgements riding on
         the next ShareFetch: Java's implicit mode

Fetches are strict (at most the poll's records locked per fetch, KIP-1206), so every
acknowledgement covers one poll. Reported per run: records/s, a poll cycle's and an
acknowledgement's p50/p99, and records delivered more than once. Both Kafka and Runnel write the share-partition's state for each
acknowledgement, so small polls measure that write.`,
		Example: `  runnel serve &
  runnel bench share --bootstrap 127.0.0.1:9092 --label runnel
  RUNNEL_KAFKA_VERSION=4.3.1 scripts/kafka.sh install && RUNNEL_KAFKA_VERSION=4.3.1 scripts/kafka.sh start
  runnel bench share --bootstrap 127.0.0.1:19092 --label kafka`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bootstrap, o.TopicConfigs, err = cf.parse(); err != nil {
				return err
			}
			o.Progress = cmd.ErrOrStderr()
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			res, err := bench.Share(ctx, o)
			if err != nil {
				return err
			}
			return writeOutput(cmd.OutOrStdout(), cf.asJSON, res, res.WriteText)
		},
	}
	fl := cmd.Flags()
	cf.addBootstrap(fl)
	fl.StringVar(&o.Label, "label", "cluster", "name of the cluster in the report")
	fl.IntVar(&o.Records, "records", 20000, "records in the topic, read once per run")
	fl.IntVar(&o.RecordSize, "record-size", 100, "bytes per record")
	fl.Int32Var(&o.Partitions, "partitions", 1, "partitions of the topic")
	fl.IntSliceVar(&o.MaxRecords, "max-records", []int{10, 500}, "records per poll (ShareMaxRecords and PollRecords), one run per value")
	fl.StringSliceVar(&o.Modes, "modes", bench.ShareModes, "ways of acknowledging: sync, async")
	fl.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "longest a run may take")
	cf.addOutput(fl)
	return cmd
}

func newBenchWorkloadsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "workloads",
		Short: "List the shipped workloads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDESCRIPTION")
			for _, name := range bench.StandardWorkloads() {
				w, err := bench.LoadWorkload(name)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\n", name, w.Description)
			}
			return tw.Flush()
		},
	}
}

func newBenchFsyncCommand() *cobra.Command {
	var dir string
	var count, size int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fsync",
		Short: "Measure the disk's own fsync latency (append, then fsync), the floor of acks=all without write caching",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := bench.FsyncProbe(dir, count, size)
			if err != nil {
				return err
			}
			return writeOutput(cmd.OutOrStdout(), asJSON, s, func(w io.Writer) {
				fmt.Fprintf(w, "fsync of a %d-byte append in %s, %d times: p50 %.3f ms, p90 %.3f, p99 %.3f, p99.9 %.3f, max %.3f\n",
					size, dir, s.Count, s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs)
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory on the disk to measure (use the data dir's)")
	cmd.Flags().IntVar(&count, "count", 2000, "fsyncs to time")
	cmd.Flags().IntVar(&size, "size", 1100, "bytes appended before each fsync (a 1 KiB record's batch)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
