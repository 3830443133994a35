package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKafkaJS: kafkajs 2.2 (npm, installed by .ci/run into test/clients/node) produces
// idempotently and two group consumers take turns, together reading every record exactly once;
// its transactional producer commits and aborts on a local and on an object topic, and its
// (read_committed) group consumer reads exactly the committed records.
func TestKafkaJS(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "test", "clients", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		skipOutsideCI(t, "kafkajs is not installed (npm install in test/clients/node; .ci/run does it)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOutsideCI(t, "no node on PATH")
	}
	script := filepath.Join(dir, "kafkajs_roundtrip.js")
	scriptClientChecks(t, "kafkajs", func(args ...string) string {
		return runClient(t, 90*time.Second, "", node, append([]string{script}, args...)...)
	}, nil) // kafkajs consumers read committed records only by default
}

// scriptClientChecks runs a client script's commands (test/clients: "produce BOOTSTRAP TOPIC N",
// "consume BOOTSTRAP TOPIC GROUP WANT [readCommitted...]", "txn BOOTSTRAP TOPIC T") against one
// broker: an idempotent producer's 600 records read exactly once by two group consumers in
// turn, then 9 transactions (every third aborted) on a local and on an object topic, read back
// read_committed by a group consumer.
func scriptClientChecks(t *testing.T, name string, run func(args ...string) string, readCommitted []string) {
	t.Helper()
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("plain", 3)
	if out := run("produce", b.addr, "plain", "600"); !strings.Contains(out, "acked 600") {
		t.Fatalf("%s produce: %s", name, out)
	}
	if got := endOffsets(b); got != 600 {
		t.Fatalf("the topic holds %d records after 600 idempotent sends; want 600", got)
	}
	var outs []string
	for _, want := range []string{"350", "250"} {
		outs = append(outs, run("consume", b.addr, "plain", "group", want))
	}
	valuesOnce(t, name+" group consumers in turn", "n", 600, outs...)

	createObjectTopic(t, b.addr, "txn-object", 3, nil)
	b.createTopic("txn-local", 3)
	for _, topic := range []string{"txn-local", "txn-object"} {
		if out := run("txn", b.addr, topic, "9"); !strings.Contains(out, "committed 60 of 90") {
			t.Fatalf("%s transactions on %s: %s", name, topic, out)
		}
		out := run(append([]string{"consume", b.addr, topic, topic + "-group", "60"}, readCommitted...)...)
		committedOnce(t, name+" read_committed on "+topic, 9, out)
	}
}

// committedOnce checks a consumer's output, lines "PARTITION OFFSET VALUE", against a client's
// txn run of n transactions of 10 values "t/<i>/<j>", every third aborted: each committed value
// exactly once, no aborted one.
func committedOnce(t *testing.T, name string, n int, out string) {
	t.Helper()
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			seen[f[2]]++
		}
	}
	for i := range n {
		for j := range 10 {
			v, want := fmt.Sprintf("t/%d/%d", i, j), 1
			if i%3 == 1 {
				want = 0
			}
			if seen[v] != want {
				t.Fatalf("%s: %s read %d times; want %d", name, v, seen[v], want)
			}
		}
	}
}
