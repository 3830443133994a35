package server_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKafkaPython: kafka-python (pip, installed by .ci/run into .ci/venv) produces idempotently
// and two group consumers take turns, together reading every record exactly once; its
// transactional producer commits and aborts on a local and on an object topic, and a
// read_committed group consumer reads exactly the committed records.
func TestKafkaPython(t *testing.T) {
	root := repoRoot(t)
	python := clientPython(t, root)
	script := filepath.Join(root, "test", "clients", "kafka_python_client.py")
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("py", 3)
	if out := runClient(t, 90*time.Second, "", python, script, "produce", b.addr, "py", "600"); !strings.Contains(out, "acked 600") {
		t.Fatalf("kafka-python produce: %s", out)
	}
	if got := endOffsets(b); got != 600 {
		t.Fatalf("the topic holds %d records after 600 idempotent sends; want 600", got)
	}
	var outs []string
	for _, want := range []string{"350", "250"} {
		outs = append(outs, runClient(t, 90*time.Second, "", python, script, "consume", b.addr, "py", "pygroup", want))
	}
	valuesOnce(t, "kafka-python group consumers in turn", "n", 600, outs...)

	createObjectTopic(t, b.addr, "py-txn-object", 3, nil)
	b.createTopic("py-txn", 3)
	for _, topic := range []string{"py-txn", "py-txn-object"} {
		if out := runClient(t, 90*time.Second, "", python, script, "txn", b.addr, topic, "9"); !strings.Contains(out, "committed 60 of 90") {
			t.Fatalf("kafka-python transactions on %s: %s", topic, out)
		}
		out := runClient(t, 90*time.Second, "", python, script, "consume", b.addr, topic, topic+"-group", "60", "read_committed")
		committedOnce(t, "kafka-python read_committed on "+topic, 9, out)
	}
}
