package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/group"
)

// threeRecords is a producer batch of three records (base offset 0).
func threeRecords() []byte {
	var body []byte
	for i := range 3 {
		body = batch.AppendRecord(body, 0, int32(i), []byte{'k', byte('0' + i)}, []byte("value"), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{
		LastOffsetDelta: 2, BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 3,
	}, body)
}

func testConfig(t *testing.T, dataDir string, console *bytes.Buffer) Config {
	return Config{
		DataDir: dataDir, KafkaAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Console: console,
	}
}

func TestOpenRecoversLocksAndCloses(t *testing.T) {
	dataDir := t.TempDir()
	var console bytes.Buffer
	s, err := Open(testConfig(t, dataDir, &console))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	topic := createTopic(t, s, "orders", 3, map[string]string{"retention.ms": "-1"})
	for i, n := range []int{1, 0, 2} {
		r := topic.Partitions[i].Replica
		for range n {
			if _, _, err := r.Append(threeRecords()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}

	s, err = Open(testConfig(t, dataDir, &console))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	waitJoined(t, s)
	got := s.Partitions()
	for i := range got {
		got[i].SizeBytes = 0 // depends on the batch encoding; not what this test is about
	}
	want := []PartitionState{
		{Topic: "orders", Partition: 0, EndOffset: 3},
		{Topic: "orders", Partition: 1, EndOffset: 0},
		{Topic: "orders", Partition: 2, EndOffset: 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Partitions() after reopening = %+v; want %+v", got, want)
	}
	if tp, ok := s.Topics().Get("orders"); !ok || tp.ID != topic.ID || tp.Configs["retention.ms"] != "-1" {
		t.Errorf("topic after reopening = %+v; want the same id and configs", tp)
	}

	if s2, err := Open(testConfig(t, dataDir, &console)); !errors.Is(err, ErrDataDirLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Errorf("second Open = %v; want ErrDataDirLocked", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil { // joined already: serves, then stops at once
		t.Errorf("Run = %v", err)
	}
	if !strings.Contains(console.String(), "serving Kafka on") {
		t.Errorf("console = %q; want the serving notice", console.String())
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

func TestOpenEmptyDataDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "a", "b")
	s, err := Open(testConfig(t, dataDir, &bytes.Buffer{}))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer s.Close()
	waitJoined(t, s)
	if got := s.Partitions(); len(got) != 0 {
		t.Errorf("Partitions() = %+v; want none", got)
	}
	if _, err := os.Stat(filepath.Join(dataDir, lockFileName)); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := Config{DataDir: "d", KafkaAddr: "127.0.0.1:9092", AdminAddr: "127.0.0.1:9644"}
	tests := []struct {
		name   string
		modify func(*Config)
		ok     bool
	}{
		{"valid", func(*Config) {}, true},
		{"advertised", func(c *Config) { c.AdvertisedKafkaAddr = "broker-1.example:9092" }, true},
		{"no data dir", func(c *Config) { c.DataDir = "" }, false},
		{"negative node id", func(c *Config) { c.NodeID = -1 }, false},
		{"kafka addr without port", func(c *Config) { c.KafkaAddr = "localhost" }, false},
		{"bad advertised addr", func(c *Config) { c.AdvertisedKafkaAddr = "x" }, false},
		{"bad admin addr", func(c *Config) { c.AdminAddr = "" }, false},
	}
	for _, tt := range tests {
		c := valid
		tt.modify(&c)
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v; want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// TestGroupConfigDelays: the classic and streams groups' initial rebalance delays and the
// streams assignment interval reach the group coordinator: zero keeps Kafka's default, negative
// is none. A classic group's delay (group.initial.rebalance.delay.ms) could not be set at all.
func TestGroupConfigDelays(t *testing.T) {
	def := group.DefaultConfig()
	if g := groupConfig(Config{}); g.InitialRebalanceDelay != def.InitialRebalanceDelay || g.StreamsInitialRebalanceDelay != def.StreamsInitialRebalanceDelay ||
		g.StreamsAssignmentInterval != def.StreamsAssignmentInterval {
		t.Fatalf("defaults: %v %v %v", g.InitialRebalanceDelay, g.StreamsInitialRebalanceDelay, g.StreamsAssignmentInterval)
	}
	g := groupConfig(Config{GroupInitialRebalanceDelay: -1, StreamsInitialRebalanceDelay: 5 * time.Second, StreamsAssignmentInterval: -1})
	if g.InitialRebalanceDelay != 0 || g.StreamsInitialRebalanceDelay != 5*time.Second || g.StreamsAssignmentInterval != 0 {
		t.Fatalf("none, 5s, none: %v %v %v", g.InitialRebalanceDelay, g.StreamsInitialRebalanceDelay, g.StreamsAssignmentInterval)
	}
	if g := groupConfig(Config{GroupInitialRebalanceDelay: 250 * time.Millisecond}); g.InitialRebalanceDelay != 250*time.Millisecond {
		t.Fatalf("classic delay 250ms: %v", g.InitialRebalanceDelay)
	}
}
