package server_test

import (
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
	var outs []string
	for _, want := range []string{"350", "250"} {
		outs = append(outs, runClient(t, 90*time.Second, "", node, script, "consume", b.addr, "js", "jsgroup", want))
	}
	valuesOnce(t, "kafkajs group consumers in turn", "n", 600, outs...)
}
