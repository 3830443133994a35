package server_test

import (
	"path/filepath"
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
	scriptClientChecks(t, "kafka-python", func(args ...string) string {
		return runClient(t, 90*time.Second, "", python, append([]string{script}, args...)...)
	}, []string{"read_committed"})
}
