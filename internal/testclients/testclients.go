// Package testclients finds the real Kafka clients the tests drive (installed or built by
// .ci/run), and holds franz-go steps several packages' tests share: test code only.
package testclients

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RepoRoot is the directory of the repository's go.mod, found upwards from the working
// directory (a test's is its package's).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// SkipOutsideCI skips the test, or fails it under CI (CI set), where every client must run.
func SkipOutsideCI(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Java returns the command line prefix that runs test/clients/java's JavaClient (the Apache
// Kafka Java client 4.1.1), which .ci/run builds with Maven (target/classes and target/lib).
func Java(t testing.TB) []string {
	t.Helper()
	return javaMain(t, "java", "JavaClient")
}

// Java43 returns the command line prefix that runs test/clients/java43's ShareClient43 (a
// share consumer of the Apache Kafka Java client 4.3.1), which .ci/run builds with Maven.
func Java43(t testing.TB) []string {
	t.Helper()
	return javaMain(t, "java43", "ShareClient43")
}

// Java43Streams returns the command line prefix that runs test/clients/java43's StreamsApp43 (a
// Kafka Streams 4.3.1 application: a repartition, a persistent store and its changelog).
func Java43Streams(t testing.TB) []string {
	t.Helper()
	return javaMain(t, "java43", "StreamsApp43")
}

// Java43Connect returns the command line prefix that runs a Kafka Connect 4.3.1 distributed
// worker (org.apache.kafka.connect.cli.ConnectDistributed, with the FileStream connectors on
// its class path) from test/clients/java43's dependencies; its argument is the worker's
// properties file.
func Java43Connect(t testing.TB) []string {
	t.Helper()
	java := javaMain(t, "java43", "StreamsApp43") // the module is built
	return append(java[:len(java)-1], "org.apache.kafka.connect.cli.ConnectDistributed")
}

// javaMain returns the command line prefix that runs class dev.runnel.<class> of the Maven
// module test/clients/<module>.
func javaMain(t testing.TB, module, class string) []string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "test", "clients", module, "target")
	if _, err := os.Stat(filepath.Join(dir, "classes", "dev", "runnel", class+".class")); err != nil {
		SkipOutsideCI(t, fmt.Sprintf("the Java test client is not built (mvn -q -B -f test/clients/%s/pom.xml package; .ci/run does it)", module))
	}
	java, err := exec.LookPath("java")
	if err != nil {
		SkipOutsideCI(t, "no java on PATH")
	}
	cp := filepath.Join(dir, "classes") + string(os.PathListSeparator) + filepath.Join(dir, "lib", "*")
	return []string{java, "-cp", cp, "dev.runnel." + class}
}

// ReadValues reads a topic from the start at an isolation level until it has want record
// values, or wait passes, and then polls once more to catch extra ones; it returns the values in
// the order read.
func ReadValues(t testing.TB, ctx context.Context, seeds []string, topic string, level kgo.IsolationLevel, want int, wait time.Duration) []string {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []string
	poll := func() {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		c.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline) && len(got) < want; {
		poll()
	}
	poll()
	return got
}

// AddPartitionsToTxn adds partitions of topic to a transaction with a raw AddPartitionsToTxn
// (version 3, as a transaction-version-1 client sends it; cl routes it to the coordinator),
// without producing to them. It returns the first partition's error, if any.
func AddPartitionsToTxn(ctx context.Context, cl *kgo.Client, txnID string, pid int64, epoch int16, topic string, partitions ...int32) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, partitions
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("adding %s[%d]: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
