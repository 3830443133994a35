package cli

import (
	"crypto/rand"
	"log/slog"
	"math/big"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runnel-dev/runnel/internal/gctune"
)

// registerAgent registers the flags of `runnel agent`: a serve node's, minus what an agent
// does not have (a lasting data dir, a controller vote, local topics), with its defaults.
func (f *serveFlags) registerAgent(flags *pflag.FlagSet) {
	flags.StringVar(&f.dataDir, "data-dir", "", "directory for the agent's copy of the metadata log (default: a new temporary directory, removed at exit)")
	flags.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "host:port the Kafka listener binds")
	flags.StringVar(&f.advertisedKafkaAddr, "advertised-kafka-addr", "", "host:port clients are told to connect to (default: --kafka-addr)")
	flags.StringVar(&f.clusterAddr, "cluster-addr", "127.0.0.1:0", "host:port of the agent's internal listener (metadata log, requests between nodes)")
	flags.StringVar(&f.voters, "controller-voters", "", "the controller quorum as ID@HOST:PORT,... (required)")
	flags.StringVar(&f.objectStore, "object-store", "", "the object store the cluster shares: file:///dir or s3://bucket/prefix?endpoint=URL&region=R (required)")
	flags.DurationVar(&f.objectBatchTimeout, "object-batch-timeout", 250*time.Millisecond, "write the agent's buffer as one file this long after its first batch")
	flags.IntVar(&f.objectBatchBytes, "object-batch-bytes", 4<<20, "write the agent's buffer as one file once it holds this many bytes")
	flags.Int64Var(&f.objectCacheMiB, "object-cache-mib", 256, "MiB of the read cache")
	flags.BoolVar(&f.objectPeerReads, "object-peer-reads", true, "read a file another node owns (its writer, or the one of this rack it hashes to) through that node's cache; false: read the object store itself")
	flags.BoolVar(&f.ripcord, "ripcord", false, "keep accepting produce while the controller is unreachable (sequenced lazily, committed when it returns)")
	flags.BoolVar(&f.faultInjection, "enable-fault-injection", false, "serve POST /v1/debug/faults on the admin listener (tests only)")
	flags.StringVar(&f.rack, "rack", "", "the agent's rack, shown to clients in Metadata")
	flags.StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:9644", "host:port of the admin HTTP server (metrics, health)")
	flags.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	flags.StringVar(&f.logFormat, "log-format", "text", "text or json")
	flags.DurationVar(&f.slowRequest, "slow-request-threshold", 500*time.Millisecond, "log Kafka requests that take longer (0: none)")
	flags.Uint64Var(&f.gcHeadroomMiB, "gc-headroom-mib", 256, "MiB the Go heap may grow past its live size before a GC cycle (0: plain GOGC; a set GOGC wins)")
	f.registerSecurity(flags)
	flags.String("config", "", `file of "flag-name: value" lines; flags and environment variables win over it`)
	flags.SetAnnotation("config", configFileAnnotation, []string{"true"})
	f.sessionTimeout = 1500 * time.Millisecond
	f.autoCreateTopics = true // as before the flag existed: agents create topics as serve nodes do
	f.autoLeaderRebalance = true
	f.agent = true
}

func newAgentCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a stateless agent that serves object-storage topics",
		Long: `An agent serves produce and fetch for object-storage topics (runnel.storage=object) from the
object store the cluster shares. It keeps nothing on local disk that matters, registers with the
controller under a new random broker id at every start, and may be started and killed at any
time; Kafka clients see it as one more broker.
Consumer groups, transactions and local topics stay on the runnel serve nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A new broker id at every start: the agent keeps no Raft log, so it must not take
			// the place of an earlier run the controller still remembers (expired after 30 s).
			n, err := rand.Int(rand.Reader, big.NewInt(1<<31-1-1000000))
			if err != nil {
				return err
			}
			f.nodeID = int32(1000000 + n.Int64())
			cfg, err := f.config(cmd.ErrOrStderr(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.GivenConfigs = givenConfigs(cmd.Flags())
			slog.SetDefault(cfg.Logger)
			defer gctune.Start(f.gcHeadroomMiB << 20).Stop()
			return serve(cmd.Context(), cfg)
		},
	}
	f.registerAgent(cmd.Flags())
	return cmd
}
