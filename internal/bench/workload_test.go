package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStandardWorkloadsMatchTheIssue(t *testing.T) {
	names := StandardWorkloads()
	if got, want := strings.Join(names, ","), "latency-1kb,many-partitions,object-1kb,sparse-feed,throughput-1kb"; got != want {
		t.Fatalf("StandardWorkloads() = %s; want %s", got, want)
	}
	load := func(name string) Workload {
		w, err := LoadWorkload(name)
		if err != nil {
			t.Fatalf("LoadWorkload(%q) = %v", name, err)
		}
		if w.Name != name || w.Idempotence {
			t.Errorf("%s: name %q, idempotence %v; want name %q, idempotence false", name, w.Name, w.Idempotence, name)
		}
		return w
	}
	if w, err := LoadWorkload("object-1kb"); err != nil || w.TopicConfigs["runnel.storage"] != "object" || !w.Idempotence {
		t.Errorf("object-1kb: %+v, %v; want runnel.storage=object, idempotent", w, err)
	}
	w := load("latency-1kb")
	if w.Partitions != 1 || w.RecordSize != 1024 || w.TotalRate() != 10000 || w.Acks != "all" || w.Linger != Duration(time.Millisecond) {
		t.Errorf("latency-1kb = %s; want 1 partition, 1024 B, 10000 rec/s, acks all, linger 1ms", w.Describe())
	}
	w = load("throughput-1kb")
	if w.Partitions != 8 || w.TotalRate() != 0 {
		t.Errorf("throughput-1kb = %s; want 8 partitions at maximum rate", w.Describe())
	}
	w = load("sparse-feed")
	perPartition := w.TotalRate() / float64(w.Partitions)
	if w.Partitions < 64 || w.Partitions > 256 || perPartition > 10 || w.Linger != Duration(10*time.Millisecond) || w.Keys != KeysRoundRobin {
		t.Errorf("sparse-feed = %s; want 64-256 partitions, a few rec/s each, linger 10ms, round robin", w.Describe())
	}
	w = load("many-partitions")
	if w.Partitions != 1000 || w.TotalRate() != 20000 {
		t.Errorf("many-partitions = %s; want 1000 partitions at 20000 rec/s", w.Describe())
	}
}

// workloads/ at the repository root links to the embedded files: one source of truth.
func TestRepositoryWorkloadsAreTheEmbeddedOnes(t *testing.T) {
	for _, name := range StandardWorkloads() {
		root, err := os.ReadFile(filepath.Join("..", "..", "workloads", name+".yaml"))
		if err != nil {
			t.Errorf("workloads/%s.yaml: %v", name, err)
			continue
		}
		embedded, _ := standardWorkloads.ReadFile("workloads/" + name + ".yaml")
		if string(root) != string(embedded) {
			t.Errorf("workloads/%s.yaml differs from internal/bench/workloads/%s.yaml", name, name)
		}
	}
}

func TestLoadWorkloadFromFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(name, []byte("name: mine\npartitions: 3\nlinger: 0\nrate: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := LoadWorkload(name)
	if err != nil {
		t.Fatalf("LoadWorkload(file) = %v", err)
	}
	want := DefaultWorkload()
	want.Name, want.Partitions, want.Linger, want.Rate = "mine", 3, 0, 5
	if w.Describe() != want.Describe() || w.Warmup != want.Warmup || w.Duration != want.Duration {
		t.Errorf("LoadWorkload(file) = %s; want %s", w.Describe(), want.Describe())
	}
	if _, err := LoadWorkload("no-such-workload"); err == nil || !strings.Contains(err.Error(), "latency-1kb") {
		t.Errorf("LoadWorkload(unknown) = %v; want an error listing the shipped workloads", err)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"partitons: 3", "field partitons not found"},
		{"linger: 10", "not a duration"},
		{"linger: fast", "not a duration"},
		{"acks: 1\nidempotence: true", "idempotence needs acks all"},
		{"acks: 2", "acks"},
		{"record_size: 4", "record_size 4"},
		{"rate: 10\nproducer_rate: 5", "not both"},
		{"keys: sorted", "keys"},
		{"compression: brotli", "compression"},
		{"partitions: 2\nconsumers: 3", "more than the 2 partitions"},
		{"duration: 0s", "duration"},
		{"batch_max_bytes: 100", "batch_max_bytes"},
	} {
		_, err := ParseWorkload([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseWorkload(%q) = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	w, err := ParseWorkload(nil)
	if err != nil || w.Describe() != DefaultWorkload().Describe() {
		t.Errorf("ParseWorkload(empty) = %s, %v; want the defaults", w.Describe(), err)
	}
}
