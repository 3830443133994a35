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
// idempotently and two group consumers take turns, together reading every record exactly once.
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
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("js", 3)
	if out := runClient(t, 90*time.Second, "", node, script, "produce", b.addr, "js", "600"); !strings.Contains(out, "acked 600") {
		t.Fatalf("kafkajs produce: %s", out)
	}
	if got := endOffsets(b); got != 600 {
		t.Fatalf("the topic holds %d records after 600 idempotent sends; want 600", got)
	}
	seen := map[string]int{}
	for _, want := range []string{"350", "250"} {
		out := runClient(t, 90*time.Second, "", node, script, "consume", b.addr, "js", "jsgroup", want)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				seen[f[2]]++
			}
		}
	}
	for i := range 600 {
		if n := seen[fmt.Sprintf("n/%d", i)]; n != 1 {
			t.Errorf("n/%d read %d times; want exactly once", i, n)
		}
	}
}
