package bench

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Workload is one benchmark, as read from a YAML file. Field names in the file are the yaml
// tags; a field left out keeps its DefaultWorkload value. See docs/bench.md for each field.
type Workload struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`

	Topics            int   `yaml:"topics" json:"topics"`
	Partitions        int32 `yaml:"partitions" json:"partitions"` // per topic
	ReplicationFactor int16 `yaml:"replication_factor" json:"replication_factor"`
	// TopicConfigs are passed to CreateTopics as they are (e.g. write.caching: "true" on Runnel,
	// flush.messages: "1" on Kafka).
	TopicConfigs map[string]string `yaml:"topic_configs,omitempty" json:"topic_configs,omitempty"`

	RecordSize int `yaml:"record_size" json:"record_size"` // bytes of each record's value, >= 8

	Producers int `yaml:"producers" json:"producers"` // one franz-go client each
	// Rate is the target across all producers, records/s; ProducerRate is per producer. Set at
	// most one; both 0 means as fast as the client takes records (a closed loop).
	Rate         float64 `yaml:"rate" json:"rate"`
	ProducerRate float64 `yaml:"producer_rate,omitempty" json:"producer_rate,omitempty"`

	// Subscriptions each receive every record; Consumers per subscription split its partitions.
	Consumers     int `yaml:"consumers" json:"consumers"`
	Subscriptions int `yaml:"subscriptions" json:"subscriptions"`

	Keys          string   `yaml:"keys" json:"keys"`               // none, random or round-robin
	Acks          string   `yaml:"acks" json:"acks"`               // all, 1 or 0
	Idempotence   bool     `yaml:"idempotence" json:"idempotence"` // needs InitProducerId on the broker
	Compression   string   `yaml:"compression" json:"compression"` // none, gzip, snappy, lz4 or zstd
	Linger        Duration `yaml:"linger" json:"linger"`           // kgo.ProducerLinger: per partition
	BatchMaxBytes int32    `yaml:"batch_max_bytes" json:"batch_max_bytes"`
	MaxInFlight   int      `yaml:"max_in_flight" json:"max_in_flight"` // produce requests per broker; without idempotence only
	MaxBuffered   int      `yaml:"max_buffered_records" json:"max_buffered_records"`
	FetchMaxWait  Duration `yaml:"fetch_max_wait" json:"fetch_max_wait"`

	Warmup   Duration `yaml:"warmup" json:"warmup"`
	Duration Duration `yaml:"duration" json:"duration"`
}

// Key placements.
const (
	KeysNone       = "none"        // no key; franz-go's default (sticky, uniform-bytes) partitioner
	KeysRandom     = "random"      // a random 16-byte key per record, murmur2-hashed to a partition
	KeysRoundRobin = "round-robin" // record i goes to partition i mod partitions, keyed with it
)

// DefaultWorkload is what a workload file starts from.
func DefaultWorkload() Workload {
	return Workload{
		Name: "custom", Topics: 1, Partitions: 1, ReplicationFactor: -1, RecordSize: 1024,
		Producers: 1, Consumers: 1, Subscriptions: 1, Keys: KeysNone, Acks: "all",
		Compression: "none",
		// Linger is always handed to the client, never left to its default: franz-go v1.22's
		// is 10 ms, the Java producer's 5 ms since Kafka 4.0 (0 before).
		Linger:        Duration(5 * time.Millisecond),
		BatchMaxBytes: 1000012,                          // franz-go's default, below every broker's max.message.bytes
		MaxInFlight:   5,                                // the Java producer's max.in.flight.requests.per.connection
		MaxBuffered:   50000,                            // franz-go's default MaxBufferedRecords
		FetchMaxWait:  Duration(500 * time.Millisecond), // the Java consumer's fetch.max.wait.ms
		Warmup:        Duration(10 * time.Second),
		Duration:      Duration(60 * time.Second),
	}
}

// Validate reports the first field that is out of range or inconsistent.
func (w *Workload) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("workload %s: "+format, append([]any{w.Name}, args...)...))
		}
	}
	check(w.Name != "", "name is empty")
	check(w.Topics >= 1, "topics %d: want at least 1", w.Topics)
	check(w.Partitions >= 1, "partitions %d: want at least 1", w.Partitions)
	check(w.ReplicationFactor == -1 || w.ReplicationFactor >= 1, "replication_factor %d: want -1 (broker default) or at least 1", w.ReplicationFactor)
	check(w.RecordSize >= valueHeaderSize, "record_size %d: want at least %d (the send time rides in the value)", w.RecordSize, valueHeaderSize)
	check(w.RecordSize <= maxRecordSize, "record_size %d: want at most %d", w.RecordSize, maxRecordSize)
	check(w.Producers >= 1, "producers %d: want at least 1", w.Producers)
	check(w.Rate >= 0 && w.ProducerRate >= 0, "rate %v, producer_rate %v: want >= 0", w.Rate, w.ProducerRate)
	check(w.Rate == 0 || w.ProducerRate == 0, "set rate (total) or producer_rate, not both")
	check(w.Consumers >= 0, "consumers %d: want >= 0", w.Consumers)
	check(w.Consumers <= w.Topics*int(w.Partitions), "consumers %d: more than the %d partitions to share", w.Consumers, w.Topics*int(w.Partitions))
	check(w.Subscriptions >= 1, "subscriptions %d: want at least 1", w.Subscriptions)
	check(oneOf(w.Keys, KeysNone, KeysRandom, KeysRoundRobin), "keys %q: want none, random or round-robin", w.Keys)
	check(oneOf(w.Acks, "all", "-1", "1", "0"), "acks %q: want all, 1 or 0", w.Acks)
	check(!w.Idempotence || w.Acks == "all" || w.Acks == "-1", "idempotence needs acks all, not %s", w.Acks)
	check(oneOf(w.Compression, "none", "gzip", "snappy", "lz4", "zstd"), "compression %q: want none, gzip, snappy, lz4 or zstd", w.Compression)
	check(w.Linger >= 0 && time.Duration(w.Linger) <= time.Minute, "linger %v: want 0 to 1m", w.Linger)
	check(w.BatchMaxBytes >= int32(w.RecordSize)+batchOverhead, "batch_max_bytes %d: too small for one %d-byte record", w.BatchMaxBytes, w.RecordSize)
	check(w.MaxInFlight >= 1, "max_in_flight %d: want at least 1", w.MaxInFlight)
	check(w.MaxBuffered >= 1, "max_buffered_records %d: want at least 1", w.MaxBuffered)
	check(w.FetchMaxWait >= 0, "fetch_max_wait %v: want >= 0", w.FetchMaxWait)
	check(w.Warmup >= 0, "warmup %v: want >= 0", w.Warmup)
	check(w.Duration > 0, "duration %v: want > 0", w.Duration)
	return errors.Join(errs...)
}

const (
	maxRecordSize = 64 << 20
	batchOverhead = 128 // a record batch header and one record's framing, rounded up
)

func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

// TotalRate is the target records/s across all producers; 0 means maximum rate.
func (w *Workload) TotalRate() float64 {
	if w.ProducerRate > 0 {
		return w.ProducerRate * float64(w.Producers)
	}
	return w.Rate
}

// ParseWorkload reads a workload from YAML over DefaultWorkload. Unknown fields are errors.
func ParseWorkload(data []byte) (Workload, error) {
	w := DefaultWorkload()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return Workload{}, fmt.Errorf("bench: parsing workload: %w", err)
	}
	return w, w.Validate()
}

// standardWorkloads are the workloads shipped in the repository (workloads/ links to them).
//
//go:embed workloads/*.yaml
var standardWorkloads embed.FS

// StandardWorkloads lists the names of the shipped workloads, sorted.
func StandardWorkloads() []string {
	entries, _ := fs.ReadDir(standardWorkloads, "workloads")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// LoadWorkload reads a workload from a file, or, if no such file exists, the shipped workload
// of that name ("latency-1kb" or "latency-1kb.yaml").
func LoadWorkload(nameOrPath string) (Workload, error) {
	data, err := os.ReadFile(nameOrPath)
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsRune(nameOrPath, os.PathSeparator) {
		name := strings.TrimSuffix(nameOrPath, ".yaml")
		data, err = standardWorkloads.ReadFile(path.Join("workloads", name+".yaml"))
		if err != nil {
			return Workload{}, fmt.Errorf("bench: no workload file %q and no standard workload of that name (have: %s)",
				nameOrPath, strings.Join(StandardWorkloads(), ", "))
		}
	}
	if err != nil {
		return Workload{}, fmt.Errorf("bench: %w", err)
	}
	w, err := ParseWorkload(data)
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", nameOrPath, err)
	}
	return w, nil
}

// Duration is a time.Duration written as "10ms" in YAML and JSON.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a Go duration string ("1ms", "1m30s") or 0.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 10ms", n.Line)
	}
	if n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 10ms", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}
