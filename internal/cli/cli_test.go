package cli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestFlagEnvDefault checks the precedence: a flag given wins over the environment, which wins
// over the default.
func TestFlagEnvDefault(t *testing.T) {
	t.Setenv("RUNNEL_DATA_DIR", "/from/env")
	t.Setenv("RUNNEL_KAFKA_ADDR", "10.0.0.1:9092")
	t.Setenv("RUNNEL_NODE_ID", "7")

	var f serveFlags
	flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(flags)
	if err := flags.Parse([]string{"--kafka-addr", "10.0.0.2:9092"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(flags); err != nil {
		t.Fatalf("applyEnv = %v", err)
	}
	got := []string{f.dataDir, f.kafkaAddr, f.adminAddr}
	want := []string{"/from/env", "10.0.0.2:9092", "127.0.0.1:9644"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("flag %d = %q; want %q", i, got[i], want[i])
		}
	}
	if f.nodeID != 7 {
		t.Errorf("node id = %d; want 7 (from RUNNEL_NODE_ID)", f.nodeID)
	}
}

func TestInvalidEnvIsAnError(t *testing.T) {
	t.Setenv("RUNNEL_NODE_ID", "seven")
	var f serveFlags
	flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(flags)
	if err := applyEnv(flags); err == nil || !strings.Contains(err.Error(), "RUNNEL_NODE_ID") {
		t.Errorf("applyEnv = %v; want an error naming RUNNEL_NODE_ID", err)
	}
}

func TestServeConfigRejectsBadLogSettings(t *testing.T) {
	for _, f := range []serveFlags{
		{dataDir: "d", kafkaAddr: "h:1", adminAddr: "h:2", logLevel: "loud", logFormat: "text"},
		{dataDir: "d", kafkaAddr: "h:1", adminAddr: "h:2", logLevel: "info", logFormat: "xml"},
	} {
		if _, err := f.config(io.Discard, io.Discard); err == nil {
			t.Errorf("config(level %q, format %q) = nil error; want one", f.logLevel, f.logFormat)
		}
	}
}

// TestServeTopicDefaults: --num-partitions, --default-replication-factor and
// --auto-create-topics reach the server's config (Kafka's num.partitions,
// default.replication.factor, auto.create.topics.enable), and bad values are refused.
func TestServeTopicDefaults(t *testing.T) {
	cmd := newServeCommand()
	var got []string
	for _, name := range []string{"num-partitions", "default-replication-factor", "auto-create-topics", "delete-topic-enable", "auto-leader-rebalance", "leader-imbalance-check-interval", "leader-imbalance-per-broker-percentage", "replica-lag-time-max"} {
		got = append(got, cmd.Flags().Lookup(name).DefValue)
	}
	if strings.Join(got, " ") != "1 0 true true true 5s 10 30s" {
		t.Fatalf("defaults %v; want 1 partition, the automatic replication factor, auto-creation, deletion and rebalancing on every 5 s, Kafka's 30 s replica lag", got)
	}
	f := serveFlags{dataDir: "d", kafkaAddr: "h:1", adminAddr: "h:2", logLevel: "info", logFormat: "text",
		numPartitions: 6, defaultRF: 2, autoCreateTopics: false, deleteTopics: false, autoLeaderRebalance: true, leaderBalanceInterval: time.Minute,
		leaderImbalancePct: 25, offsetsRF: 2, txnStateRF: 3, offsetsPartitions: 4, txnStatePartitions: 5, replicaLagTimeMax: 7 * time.Second}
	cfg, err := f.config(io.Discard, io.Discard)
	if err != nil || cfg.NumPartitions != 6 || cfg.ReplicaLagTimeMax != 7*time.Second || cfg.DefaultReplicationFactor != 2 || !cfg.NoAutoCreateTopics || !cfg.NoTopicDeletion || cfg.LeaderBalanceInterval != time.Minute ||
		cfg.LeaderImbalancePercent != 25 || cfg.OffsetsReplicationFactor != 2 || cfg.TxnStateReplicationFactor != 3 ||
		cfg.OffsetsPartitions != 4 || cfg.TxnStatePartitions != 5 {
		t.Fatalf("config = %+v, %v; want 6 partitions, RF 2, no auto-creation, no deletion, rebalancing every minute", cfg, err)
	}
	if cfg.GroupInitialRebalanceDelay >= 0 { // f sets no delay: none, as --group-initial-rebalance-delay 0
		t.Fatalf("--group-initial-rebalance-delay 0: %v; want negative (none)", cfg.GroupInitialRebalanceDelay)
	}
	f.groupDelay = 2 * time.Second
	if cfg, err := f.config(io.Discard, io.Discard); err != nil || cfg.GroupInitialRebalanceDelay != 2*time.Second {
		t.Fatalf("--group-initial-rebalance-delay 2s: %v, %v", cfg.GroupInitialRebalanceDelay, err)
	}
	// Kafka's log.retention.check.interval.ms and log.cleaner.backoff.ms.
	if r, c := cmd.Flags().Lookup("log-retention-check-interval").DefValue, cmd.Flags().Lookup("log-cleaner-backoff").DefValue; r != "5m0s" || c != "15s" {
		t.Fatalf("retention check and cleaner backoff defaults %s, %s; want Kafka's 5m0s, 15s", r, c)
	}
	f.retentionCheck, f.cleanerBackoff = time.Second, 2*time.Second
	if cfg, err := f.config(io.Discard, io.Discard); err != nil || cfg.LogRetentionCheckInterval != time.Second || cfg.LogCleanerBackoff != 2*time.Second {
		t.Fatalf("--log-retention-check-interval 1s --log-cleaner-backoff 2s: %v, %v, %v", cfg.LogRetentionCheckInterval, cfg.LogCleanerBackoff, err)
	}
	for _, bad := range []serveFlags{{retentionCheck: -time.Second}, {cleanerBackoff: time.Microsecond}} {
		g := f
		g.retentionCheck, g.cleanerBackoff = bad.retentionCheck, bad.cleanerBackoff
		if _, err := g.config(io.Discard, io.Discard); err == nil {
			t.Errorf("--log-retention-check-interval %v --log-cleaner-backoff %v: no error; want one", bad.retentionCheck, bad.cleanerBackoff)
		}
	}
	f.retentionCheck, f.cleanerBackoff = 0, 0
	f.leaderImbalancePct = 0
	if cfg, err := f.config(io.Discard, io.Discard); err != nil || cfg.LeaderImbalancePercent >= 0 {
		t.Fatalf("--leader-imbalance-per-broker-percentage 0: %d, %v; want negative (any imbalance)", cfg.LeaderImbalancePercent, err)
	}
	f.autoLeaderRebalance = false
	if cfg, err := f.config(io.Discard, io.Discard); err != nil || cfg.LeaderBalanceInterval >= 0 {
		t.Fatalf("--auto-leader-rebalance=false: interval %v, %v; want negative (never)", cfg.LeaderBalanceInterval, err)
	}
	for _, bad := range []serveFlags{{numPartitions: 0, defaultRF: 0, autoLeaderRebalance: true}, {numPartitions: 1, defaultRF: -1, autoLeaderRebalance: true},
		{numPartitions: 1, autoLeaderRebalance: true, leaderBalanceInterval: -time.Second},
		{numPartitions: 1, autoLeaderRebalance: true, leaderImbalancePct: 101},
		{numPartitions: 1, autoLeaderRebalance: true, offsetsRF: -1},
		{numPartitions: 1, autoLeaderRebalance: true, offsetsPartitions: -1, txnStatePartitions: 50}} {
		bad.dataDir, bad.kafkaAddr, bad.adminAddr, bad.logLevel, bad.logFormat = "d", "h:1", "h:2", "info", "text"
		if _, err := bad.config(io.Discard, io.Discard); err == nil {
			t.Errorf("config(--num-partitions %d --default-replication-factor %d --leader-imbalance-check-interval %v) = nil error; want one", bad.numPartitions, bad.defaultRF, bad.leaderBalanceInterval)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	root := NewRoot("v1.2.3")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("version = %v", err)
	}
	if !strings.HasPrefix(out.String(), "runnel v1.2.3 ") {
		t.Errorf("version printed %q; want it to start with %q", out.String(), "runnel v1.2.3 ")
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "runnel.conf")
	os.WriteFile(file, []byte("# a node\ndata-dir: /from/file\nnode-id = 7\nlog-format: \"json\"\nkafka-addr: 127.0.0.1:1\n"), 0o644)
	t.Setenv("RUNNEL_KAFKA_ADDR", "127.0.0.1:2")
	var f serveFlags
	flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(flags)
	if err := flags.Parse([]string{"--config", file, "--log-format", "text"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(flags); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(flags); err != nil {
		t.Fatalf("applyConfigFile = %v", err)
	}
	got := []string{f.dataDir, fmt.Sprint(f.nodeID), f.logFormat, f.kafkaAddr}
	want := []string{"/from/file", "7", "text", "127.0.0.1:2"} // file < env < flag
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("setting %d = %q; want %q (flag > env > file > default)", i, got[i], want[i])
		}
	}
	os.WriteFile(file, []byte("no-such-flag: 1\n"), 0o644)
	flags = pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(flags)
	flags.Parse([]string{"--config", file})
	if err := applyConfigFile(flags); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("applyConfigFile(unknown key) = %v; want an error naming it", err)
	}
}

// --console-hosts (or RUNNEL_CONSOLE_HOSTS) reaches the server's config as a list.
func TestServeConsoleHosts(t *testing.T) {
	t.Setenv("RUNNEL_CONSOLE_HOSTS", " console.example, kafka.example:9644 ,")
	f := serveFlags{dataDir: "d", kafkaAddr: "h:1", adminAddr: "h:2", logLevel: "info", logFormat: "text", numPartitions: 1, autoLeaderRebalance: true}
	flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(flags)
	if err := applyEnv(flags); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(io.Discard, io.Discard)
	if got := strings.Join(cfg.ConsoleHosts, " "); err != nil || got != "console.example kafka.example:9644" {
		t.Fatalf("RUNNEL_CONSOLE_HOSTS=' console.example, kafka.example:9644 ,': ConsoleHosts %q, %v; want [console.example kafka.example:9644]", cfg.ConsoleHosts, err)
	}
}

// givenConfigs names the static broker configs set by a flag, its environment variable or the
// config file, by Kafka's names, so DescribeConfigs describes them as STATIC_BROKER_CONFIG and
// the others as DEFAULT_CONFIG; every flag staticConfigFlags names exists.
func TestGivenConfigs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "runnel.conf")
	os.WriteFile(file, []byte("fetch-max-bytes: 1048576\n"), 0o644)
	t.Setenv("RUNNEL_NUM_PARTITIONS", "1")
	var f serveFlags
	flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(flags)
	for flag := range staticConfigFlags {
		if flags.Lookup(flag) == nil {
			t.Errorf("staticConfigFlags names --%s, which serve does not have", flag)
		}
	}
	if err := flags.Parse([]string{"--config", file, "--auto-create-topics=true"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(flags); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(flags); err != nil {
		t.Fatal(err)
	}
	got := givenConfigs(flags)
	want := map[string]bool{"auto.create.topics.enable": true, "num.partitions": true, "fetch.max.bytes": true}
	if !maps.Equal(got, want) {
		t.Errorf("givenConfigs = %v; want %v (flag, environment, file)", got, want)
	}
}
