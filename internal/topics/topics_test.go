package topics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/vfs"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true}, {"a.b_c-D9", true}, {strings.Repeat("x", 249), true},
		{"", false}, {".", false}, {"..", false}, {strings.Repeat("x", 250), false},
		{"bad/name", false}, {"sp ace", false}, {"ü", false},
	}
	for _, tt := range tests {
		if err := ValidateName(tt.name); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidTopic)) {
			t.Errorf("ValidateName(%q) = %v; want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name, value string
		ok          bool
	}{
		{"retention.ms", "-1", true}, {"retention.ms", "-2", false}, {"retention.ms", "1.5", false},
		{"retention.ms", "9223372036854775807", true}, {"retention.ms", "x", false},
		{"segment.bytes", "1048575", false}, {"segment.bytes", "1048576", true}, {"segment.bytes", "2147483648", false},
		{"min.cleanable.dirty.ratio", "0.25", true}, {"min.cleanable.dirty.ratio", "1.5", false},
		{"min.cleanable.dirty.ratio", "NaN", false}, {"min.cleanable.dirty.ratio", "-Inf", false},
		{"cleanup.policy", "compact,delete", true}, {"cleanup.policy", "compact, delete", true}, {"cleanup.policy", "gone", false},
		{"message.timestamp.type", "LogAppendTime", true}, {"message.timestamp.type", "logappendtime", false},
		{"write.caching", "true", true}, {"write.caching", "yes", false},
		{"runnel.storage", "local", true}, {"runnel.storage", "object", true}, {"runnel.storage", "s3", false},
		{"min.compaction.lag.ms", "0", true}, {"min.compaction.lag.ms", "-1", false},
		{"max.compaction.lag.ms", "1", true}, {"max.compaction.lag.ms", "0", false},
		{"cleanup.policy", "", true}, {"cleanup.policy", " ", true}, {"cleanup.policy", "delete,", false},
		{"compression.gzip.level", "-1", true}, {"compression.gzip.level", "1", true}, {"compression.gzip.level", "9", true},
		{"compression.gzip.level", "0", false}, {"compression.gzip.level", "-2", false}, {"compression.gzip.level", "10", false},
		{"compression.lz4.level", "1", true}, {"compression.lz4.level", "17", true}, {"compression.lz4.level", "0", false}, {"compression.lz4.level", "18", false},
		{"compression.zstd.level", "-131072", true}, {"compression.zstd.level", "22", true}, {"compression.zstd.level", "0", true},
		{"compression.zstd.level", "-131073", false}, {"compression.zstd.level", "23", false},
		{"segment.jitter.ms", "0", true}, {"segment.jitter.ms", "1000", true}, {"segment.jitter.ms", "-1", false},
		{"segment.index.bytes", "4", true}, {"segment.index.bytes", "3", false}, {"segment.index.bytes", "2147483648", false},
		{"preallocate", "true", true}, {"preallocate", "on", false},
		{"file.delete.delay.ms", "0", true}, {"file.delete.delay.ms", "-1", false},
		{"local.retention.ms", "-2", true}, {"local.retention.ms", "-3", false}, {"local.retention.bytes", "-2", true}, {"local.retention.bytes", "-3", false},
		{"remote.storage.enable", "false", true}, {"remote.storage.enable", "true", false},
		{"remote.log.copy.disable", "true", true}, {"remote.log.delete.on.disable", "true", true}, {"remote.log.delete.on.disable", "1", false},
		{"no.such.config", "1", false},
	}
	for _, tt := range tests {
		err := CheckConfig(tt.name, tt.value)
		var ce *ConfigError
		if (err == nil) != tt.ok || (err != nil && !errors.As(err, &ce)) {
			t.Errorf("CheckConfig(%s, %q) = %v; want ok=%v (a *ConfigError when not)", tt.name, tt.value, err, tt.ok)
		}
	}
}

// TestCompactionLagConfigs: the lags reach the log store's config, max.compaction.lag.ms caps
// segment.ms on a compacted topic (as Kafka rolls the active segment in time for it), and a
// minimum above the maximum is refused.
func TestCompactionLagConfigs(t *testing.T) {
	c := logConfig(map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "500", "max.compaction.lag.ms": "60000"}, nil)
	if c.MinCompactionLagMs != 500 || c.MaxCompactionLagMs != 60000 || c.SegmentMs != time.Minute {
		t.Fatalf("min %d, max %d, segment.ms %v; want 500, 60000, 1m", c.MinCompactionLagMs, c.MaxCompactionLagMs, c.SegmentMs)
	}
	if c := logConfig(map[string]string{"max.compaction.lag.ms": "60000"}, nil); c.SegmentMs != 7*24*time.Hour {
		t.Fatalf("segment.ms %v on a delete topic; want the default", c.SegmentMs)
	}
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: t.TempDir(), Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateConfigs(map[string]string{"min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "1000"}); err == nil {
		t.Fatal("min.compaction.lag.ms above max.compaction.lag.ms accepted")
	}
}

func all(int32) bool { return true }

func TestSyncOpensClosesAndPrecedence(t *testing.T) {
	dir := t.TempDir()
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: dir, Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte{7}
	spec := TopicSpec{Name: "t", ID: id, Configs: map[string]string{"retention.ms": "1000"}, Partitions: 2, Hosted: all}
	cluster := map[string]string{"log.retention.ms": "5000", "log.segment.bytes": "70000"}
	node := map[string]string{"log.segment.bytes": "80000"}
	r.Sync([]TopicSpec{spec}, cluster, node, Hooks{})
	if err := r.CheckBrokerConfigs(false, map[string]string{"broker.id": "3"}); err == nil {
		t.Errorf("CheckBrokerConfigs(broker.id) = nil; want an error (not dynamic)")
	}
	// Grow to 3 partitions, of which this node hosts only 0 and 2.
	spec.Partitions, spec.Hosted = 3, func(i int32) bool { return i != 1 }
	r.Sync([]TopicSpec{spec}, cluster, node, Hooks{})
	got, ok := r.Get("t")
	if !ok || got.ID != id || len(got.Partitions) != 3 {
		t.Fatalf("after growing: %+v, %v; want topic t with 3 partitions", got, ok)
	}
	if got.Partitions[1].Hosted() || !got.Partitions[2].Hosted() {
		t.Errorf("hosted = %v, %v; want partition 1 not hosted, 2 hosted", got.Partitions[1].Hosted(), got.Partitions[2].Hosted())
	}
	if _, err := os.Stat(filepath.Join(dir, "topics", "t", "1")); !os.IsNotExist(err) {
		t.Errorf("the directory of partition 1, no longer hosted, is still there: %v", err)
	}
	if byID, ok := r.GetByID(id); !ok || byID.Name != "t" {
		t.Errorf("GetByID = %v, %v; want t", byID, ok)
	}
	for _, tc := range []struct {
		name, value string
		src         Source
	}{
		{"retention.ms", "1000", SourceTopic},
		{"segment.bytes", "80000", SourceDynamicBroker},
		{"max.message.bytes", "1048588", SourceDefault},
	} {
		if v, src := got.EffectiveSource(tc.name); v != tc.value || src != tc.src {
			t.Errorf("EffectiveSource(%s) = %q, %v; want %q, %v", tc.name, v, src, tc.value, tc.src)
		}
	}
	if cfg := got.Partitions[2].Log.Config(); cfg.RetentionMs != time.Second || cfg.SegmentBytes != 80000 {
		t.Errorf("log config = retention %v segment %d; want 1s and 80000", cfg.RetentionMs, cfg.SegmentBytes)
	}
	r.Close()

	// A restart: topic.json tells which topic the directory holds, for an upgrade import.
	r, err = Open(Options{DataDir: dir, Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	local, err := r.LocalTopics()
	if err != nil || len(local) != 1 || local[0].ID != id || local[0].Partitions != 3 || local[0].Configs["retention.ms"] != "1000" {
		t.Fatalf("LocalTopics = %+v, %v", local, err)
	}
	// The topic was deleted and created again under the same name while this node was down: the
	// old directory goes, a new log starts.
	spec.ID = [16]byte{8}
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	if got, _ := r.Get("t"); got.ID != spec.ID || got.Partitions[0].Log.EndOffset() != 0 {
		t.Fatalf("recreated topic: id %x", got.ID)
	}
	r.Sync(nil, nil, nil, Hooks{})
	if _, ok := r.Get("t"); ok {
		t.Errorf("topic still there after a Sync without it")
	}
	if _, err := os.Stat(filepath.Join(dir, "topics", "t")); !os.IsNotExist(err) {
		t.Errorf("the deleted topic's directory is still there: %v", err)
	}
}

// TestRemovalsAcrossRestarts: a partition moved away from this node while it was down is
// removed at the first Sync after the restart; a removal a crash interrupted is finished on
// open; a topic whose name looks like an earlier build's removal name survives a restart.
func TestRemovalsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	f := logstore.NewFlusher(0)
	defer f.Close()
	open := func() *Registry {
		t.Helper()
		r, err := Open(Options{DataDir: dir, Flusher: f, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	exists := func(parts ...string) bool {
		_, err := os.Stat(filepath.Join(append([]string{dir, "topics"}, parts...)...))
		return err == nil
	}
	moved := TopicSpec{Name: "moved", ID: [16]byte{1}, Partitions: 2, Hosted: all}
	odd := TopicSpec{Name: "odd.deleted", ID: [16]byte{2}, Partitions: 1, Hosted: all}
	r := open()
	r.Sync([]TopicSpec{moved, odd}, nil, nil, Hooks{})
	r.Close()
	// A crash left a removal half done.
	half := filepath.Join(dir, "topics", "gone.0700000000000000000000000000000000.0"+removedSuffix)
	if err := os.MkdirAll(filepath.Join(half, "00000000000000000000.log"), 0o755); err != nil {
		t.Fatal(err)
	}

	r = open()
	defer r.Close()
	r.WaitRemovals() // removed in the background
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Errorf("an interrupted removal is still there after open: %v", err)
	}
	if !exists("odd.deleted", "0") {
		t.Fatal("open removed topic odd.deleted")
	}
	// While this node was down, partition 1 of moved was moved to other nodes.
	moved.Hosted = func(i int32) bool { return i == 0 }
	r.Sync([]TopicSpec{moved, odd}, nil, nil, Hooks{})
	if exists("moved", "1") {
		t.Error("the copy of a partition moved away while the node was down is still there")
	}
	if !exists("moved", "0") || !exists("odd.deleted", "0") {
		t.Error("a hosted partition's directory is gone")
	}
	names, err := os.ReadDir(filepath.Join(dir, "topics"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if strings.HasSuffix(e.Name(), removedSuffix) {
			t.Errorf("%s left behind", e.Name())
		}
	}
}

// TestEffectiveBrokerOnly: a topic's effective value of a broker-only setting
// (producer.id.expiration.ms) is the cluster's, its default without one; an unknown name has
// none. (Object topics' retention pass asks a topic for it; it used to dereference nil.)
func TestEffectiveBrokerOnly(t *testing.T) {
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: t.TempDir(), Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	specs := []TopicSpec{{Name: "t", ID: [16]byte{1}, Partitions: 1, Hosted: all}}
	for _, tc := range []struct {
		broker map[string]string
		want   string
	}{{nil, "86400000"}, {map[string]string{"producer.id.expiration.ms": "60000"}, "60000"}} {
		r.Sync(specs, tc.broker, nil, Hooks{})
		topic, _ := r.Get("t")
		if v, _ := topic.Effective("producer.id.expiration.ms"); v != tc.want {
			t.Errorf("broker configs %v: producer.id.expiration.ms is %q; want %q", tc.broker, v, tc.want)
		}
		if v, _ := topic.Effective("no.such.config"); v != "" {
			t.Errorf("an unknown config is %q; want none", v)
		}
	}
}

// TestWriteCachingDefault checks write_caching_default: true and false are defaults a topic's
// write.caching overrides; disabled turns write caching off on every topic, whatever it says.
func TestWriteCachingDefault(t *testing.T) {
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: t.TempDir(), Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	specs := []TopicSpec{
		{Name: "on", ID: [16]byte{1}, Configs: map[string]string{"write.caching": "true"}, Partitions: 1, Hosted: all},
		{Name: "unset", ID: [16]byte{2}, Partitions: 1, Hosted: all},
	}
	if err := r.ValidateConfigs(map[string]string{"write.caching": "disabled"}); err == nil {
		t.Errorf("topic write.caching=disabled accepted; want an error (only the broker default takes it)")
	}
	for _, tc := range []struct {
		brokerDefault   string // "" leaves it unset
		wantOn, wantOff string // effective write.caching of the two topics
		wantSrc         Source // of the topic that sets it
	}{
		{"", "true", "false", SourceTopic},
		{"true", "true", "true", SourceTopic},
		{"false", "true", "false", SourceTopic},
		{"disabled", "false", "false", SourceDynamicDefaultBroker},
	} {
		configs := map[string]string{}
		if tc.brokerDefault != "" {
			configs["write_caching_default"] = tc.brokerDefault
		}
		if err := r.CheckBrokerConfigs(false, configs); err != nil {
			t.Fatalf("write_caching_default=%q: %v", tc.brokerDefault, err)
		}
		r.Sync(specs, configs, nil, Hooks{})
		on, _ := r.Get("on")
		unset, _ := r.Get("unset")
		v, src := on.EffectiveSource("write.caching")
		if v != tc.wantOn || src != tc.wantSrc {
			t.Errorf("write_caching_default=%q: topic with write.caching=true is %q (source %v); want %q (%v)",
				tc.brokerDefault, v, src, tc.wantOn, tc.wantSrc)
		}
		if got := on.Partitions[0].Log.WriteCaching(); got != (tc.wantOn == "true") {
			t.Errorf("write_caching_default=%q: the log's write caching is %v", tc.brokerDefault, got)
		}
		if v, _ := unset.Effective("write.caching"); v != tc.wantOff {
			t.Errorf("write_caching_default=%q: topic without write.caching is %q; want %q", tc.brokerDefault, v, tc.wantOff)
		}
	}
	if err := r.CheckBrokerConfigs(false, map[string]string{"write_caching_default": "maybe"}); err == nil {
		t.Errorf("write_caching_default=maybe accepted")
	}
}

// TestConnectionOverrides: max.connections.per.ip.overrides parses ip:count pairs (IPv6 bare or
// in brackets, IPv4-mapped folded to IPv4) and refuses anything else.
func TestConnectionOverrides(t *testing.T) {
	got, err := ParseConnectionOverrides(" 10.0.0.1:5,[::1]:0, ::ffff:10.0.0.2:7 ,")
	if err != nil || len(got) != 3 || got["10.0.0.1"] != 5 || got["::1"] != 0 || got["10.0.0.2"] != 7 {
		t.Fatalf("parsed %v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.1:-1", "host.example:3", "10.0.0.1:x", "10.0.0.300:1"} {
		if _, err := ParseConnectionOverrides(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	d, _ := LookupBrokerDef("max.connections.per.ip.overrides")
	if err := checkValue(d, "10.0.0.1:2"); err != nil {
		t.Errorf("a valid override refused: %v", err)
	}
	if err := checkValue(d, "10.0.0.1"); err == nil {
		t.Error("an override without a count passed the config check")
	}
}

// FuzzCheckConfig: every topic and broker config either refuses a value with a *ConfigError or
// takes it within its bounds, and a taken topic config turns into a log store configuration.
func FuzzCheckConfig(f *testing.F) {
	topicDefs := len(Defs())
	defs := append(Defs(), BrokerDefs()...)
	for i, d := range defs {
		f.Add(uint16(i), d.Default)
	}
	f.Add(uint16(0), "NaN")
	f.Add(uint16(0), "1e400")
	f.Add(uint16(0), " 1:2 , 3:4")
	f.Add(uint16(0), "[::1]:5,127.0.0.1:3")
	f.Fuzz(func(t *testing.T, i uint16, value string) {
		n := int(i) % len(defs)
		d := &defs[n]
		err := checkValue(d, value)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%s = %q: %v is not a *ConfigError", d.Name, value, err)
			}
			return
		}
		switch d.Type {
		case TypeInt, TypeLong, TypeDouble:
			v, perr := strconv.ParseFloat(value, 64)
			if perr != nil || math.IsNaN(v) || v < d.Min || v > d.Max {
				t.Fatalf("%s = %q taken, outside [%v, %v]", d.Name, value, d.Min, d.Max)
			}
		}
		if n < topicDefs {
			logConfig(map[string]string{d.Name: value}, nil)
		}
	})
}

// TestOfflinePartition: a partition whose log fails to open is offline on its own; the rest of
// its topic opens and is published, the failed one is tried again once its retry is due (the
// wait doubling while it keeps failing), opens when the failure is gone, and one moved away
// while offline has its directory removed.
func TestOfflinePartition(t *testing.T) {
	mem, rules, fsys := faultyFS()
	now := time.Unix(1000, 0)
	r := openAt(t, fsys, &now)
	defer r.Close()
	spec := TopicSpec{Name: "t", ID: [16]byte{9}, Partitions: 3, Hosted: all}
	// Partition 1's directory cannot be listed: its recovery fails.
	rules.Add(vfs.Rule{Op: vfs.OpList, PathContains: "/topics/t/1"})
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	state := func() (offline []bool) {
		t.Helper()
		got, ok := r.Get("t")
		if !ok || len(got.Partitions) != 3 {
			t.Fatalf("topic t: %v, %v; want it published with 3 partitions", got, ok)
		}
		for _, p := range got.Partitions {
			if p.Offline() != nil && p.Hosted() {
				t.Fatalf("partition %d is hosted and offline (%v)", p.Index, p.Offline())
			}
			offline = append(offline, p.Offline() != nil)
		}
		return offline
	}
	if got := state(); got[0] || !got[1] || got[2] {
		t.Fatalf("offline = %v; want only partition 1", got)
	}
	if tp, _ := r.Get("t"); !tp.Partitions[0].Hosted() || !tp.Partitions[2].Hosted() {
		t.Fatal("the topic's other partitions are not open")
	}
	if at, ok := r.RetryAt(); !ok || !at.Equal(now.Add(offlineRetryFirst)) {
		t.Fatalf("RetryAt = %v, %v; want %v", at, ok, now.Add(offlineRetryFirst))
	}
	// Before its retry is due, a Sync does not try it.
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	if at, _ := r.RetryAt(); !at.Equal(now.Add(offlineRetryFirst)) {
		t.Fatalf("a Sync before the retry was due moved it to %v", at)
	}
	// Due, it fails again: the wait doubles.
	now = now.Add(offlineRetryFirst)
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	if at, _ := r.RetryAt(); !at.Equal(now.Add(2 * offlineRetryFirst)) {
		t.Fatalf("after a second failure RetryAt = %v; want %v", at, now.Add(2*offlineRetryFirst))
	}
	// The failure is gone: the next due retry opens it.
	rules.Clear()
	now = now.Add(2 * offlineRetryFirst)
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	if got := state(); got[0] || got[1] || got[2] {
		t.Fatalf("offline = %v after the failure ended; want none", got)
	}
	if _, ok := r.RetryAt(); ok {
		t.Fatal("RetryAt with no partition offline")
	}
	// Offline, then moved away: its directory goes.
	away := TopicSpec{Name: "t", ID: spec.ID, Partitions: 3, Hosted: func(i int32) bool { return i != 2 }}
	r.Sync([]TopicSpec{away}, nil, nil, Hooks{})
	rules.Add(vfs.Rule{Op: vfs.OpList, PathContains: "/topics/t/2"})
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{}) // back, and its new log fails to open
	if got := state(); !got[2] {
		t.Fatalf("offline = %v; want partition 2 offline", got)
	}
	if _, err := mem.Stat("/data/topics/t/2"); err != nil {
		t.Fatal(err)
	}
	rules.Clear()
	r.Sync([]TopicSpec{away}, nil, nil, Hooks{})
	if _, err := mem.Stat("/data/topics/t/2"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("the directory of an offline partition moved away is still there: %v", err)
	}
	if got := state(); got[2] {
		t.Fatalf("offline = %v; want partition 2 not hosted", got)
	}
}

// TestPoisonedLogOpensAgain: a hosted partition whose log a failed write poisoned (a full disk)
// counts as offline (Offline, Unopened) and is opened again by a Sync once its wait is over: 1 s
// after the first Sync that saw it poisoned (RetryAt says a Sync is due at once before that), the
// wait doubling each time the log opened again is poisoned again. The log opened again keeps
// what was written before and takes writes.
func TestPoisonedLogOpensAgain(t *testing.T) {
	_, rules, fsys := faultyFS()
	now := time.Unix(1000, 0)
	r := openAt(t, fsys, &now)
	defer r.Close()
	spec := TopicSpec{Name: "p", ID: [16]byte{7}, Partitions: 1, Hosted: all}
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	part := func() *Partition { tp, _ := r.Get("p"); return tp.Partitions[0] }
	if _, _, err := part().Log.Append(testBatch(t), 0); err != nil {
		t.Fatal(err)
	}
	poison := func() {
		t.Helper()
		rules.Add(vfs.Rule{Op: vfs.OpWrite, PathContains: "/topics/p/", Err: syscall.ENOSPC, PartialWrite: true})
		if _, _, err := part().Log.Append(testBatch(t), 0); err == nil {
			t.Fatal("an append on a full disk succeeded")
		}
		if part().Log.Err() == nil || r.Offline() != 1 || !r.Unopened(spec.ID, 0) {
			t.Fatalf("poisoned: log error %v, %d offline, unopened %v; want poisoned, 1, true", part().Log.Err(), r.Offline(), r.Unopened(spec.ID, 0))
		}
		if at, ok := r.RetryAt(); !ok || !at.Equal(now) {
			t.Fatalf("RetryAt = %v, %v before a Sync saw the poisoning; want now", at, ok)
		}
	}
	reopenAfter := func(wait time.Duration) {
		t.Helper()
		before := part()
		r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
		if at, ok := r.RetryAt(); !ok || !at.Equal(now.Add(wait)) {
			t.Fatalf("RetryAt = %v, %v; want %v", at, ok, now.Add(wait))
		}
		now = now.Add(wait - time.Millisecond)
		r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
		if part() != before {
			t.Fatalf("opened again %v before its wait of %v was over", wait-time.Millisecond, wait)
		}
		rules.Clear()
		now = now.Add(time.Millisecond)
		r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
		if p := part(); p == before || !p.Hosted() || p.Log.Err() != nil || r.Offline() != 0 || r.Unopened(spec.ID, 0) {
			t.Fatalf("after the wait: the same partition %v, log error %v, %d offline; want a new healthy log", p == before, p.Log.Err(), r.Offline())
		}
		if _, ok := r.RetryAt(); ok {
			t.Fatal("RetryAt with no partition poisoned")
		}
	}
	poison()
	reopenAfter(offlineRetryFirst)
	if end := part().Log.EndOffset(); end < 1 {
		t.Fatalf("the log opened again ends at %d; want the first batch kept", end)
	}
	if _, _, err := part().Log.Append(testBatch(t), 0); err != nil {
		t.Fatalf("append to the log opened again: %v", err)
	}
	poison()
	reopenAfter(2 * offlineRetryFirst) // poisoned again: the wait doubles
	now = now.Add(poisonedHealthy)
	poison()
	reopenAfter(offlineRetryFirst) // healthy long enough: a new series

	// Still full at each retry: the log is opened again (and poisoned again by the next
	// append) or offline, never a closed log left published, and the next retry is later.
	poison()
	for round := range 4 {
		r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
		if p := part(); p.Hosted() {
			if _, err := p.Log.Read(nil, p.Log.StartOffset(), 1); errors.Is(err, logstore.ErrClosed) {
				t.Fatalf("still full, round %d: a closed log is published", round)
			}
			if p.Log.Err() == nil {
				p.Log.Append(testBatch(t), 0) // a producer's next write poisons it again
				r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
			}
		}
		at, ok := r.RetryAt()
		if !ok || !at.After(now) {
			t.Fatalf("still full, round %d: RetryAt = %v, %v at %v; want a later retry", round, at, ok, now)
		}
		now = at
	}
	rules.Clear()
	now = now.Add(offlineRetryMax)
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	if p := part(); !p.Hosted() || p.Log.Err() != nil || r.Offline() != 0 {
		t.Fatalf("room again: hosted %v, offline %d", p.Hosted(), r.Offline())
	}

	// A failed fsync may have lost pages the page cache still shows: that log waits for a
	// restart, counted offline, and no retry is due for it.
	rules.Add(vfs.Rule{Op: vfs.OpSync, PathContains: "/topics/p/"})
	if _, _, err := part().Log.Append(testBatch(t), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	part().Log.SyncSoon()
	if err := part().Log.WaitDurable(ctx, part().Log.EndOffset()); err == nil {
		t.Fatal("a failed fsync made the log durable")
	}
	before := part()
	rules.Clear()
	for range 3 {
		now = now.Add(time.Minute)
		r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	}
	if part() != before || before.Log.Reopenable() || r.Offline() != 1 {
		t.Fatalf("after a failed fsync: reopened %v, reopenable %v, %d offline; want the same poisoned log, 1", part() != before, before.Log.Reopenable(), r.Offline())
	}
	if _, ok := r.RetryAt(); ok {
		t.Fatal("RetryAt for a log a failed fsync poisoned")
	}
}

// TestTopicSyncFailure: a topic whose topic.json cannot be read (an I/O error, or garbage) is
// neither deleted nor opened: its partitions count as unopened, it is tried again when due,
// and once the file reads it opens on the data it had. Other topics are synced meanwhile.
func TestTopicSyncFailure(t *testing.T) {
	mem, rules, fsys := faultyFS()
	now := time.Unix(1000, 0)
	open := func() *Registry { return openAt(t, fsys, &now) }
	u := TopicSpec{Name: "u", ID: [16]byte{5}, Partitions: 2, Hosted: all}
	v := TopicSpec{Name: "v", ID: [16]byte{6}, Partitions: 1, Hosted: all}
	r := open()
	r.Sync([]TopicSpec{u}, nil, nil, Hooks{})
	tp, _ := r.Get("u")
	if _, _, err := tp.Partitions[1].Log.Append(testBatch(t), 0); err != nil {
		t.Fatal(err)
	}
	r.Close()

	for _, bad := range []string{"unreadable", "garbage"} {
		r := open()
		switch bad {
		case "unreadable":
			rules.Add(vfs.Rule{Op: vfs.OpOpen, PathContains: "/topics/u/topic.json"})
		case "garbage":
			if err := vfs.WriteFileAtomic(mem, "/data/topics/u", "topic.json", []byte("{not json")); err != nil {
				t.Fatal(err)
			}
		}
		r.Sync([]TopicSpec{u, v}, nil, nil, Hooks{})
		if got, ok := r.Get("u"); !ok || got.Partitions[0].Hosted() || got.Partitions[0].Offline() == nil {
			t.Fatalf("%s: topic u is %v, %v; want it known with its partitions offline", bad, got, ok)
		}
		if got, ok := r.Get("v"); !ok || !got.Partitions[0].Hosted() {
			t.Fatalf("%s: topic v not synced", bad)
		}
		if _, err := mem.Stat("/data/topics/u/1"); err != nil {
			t.Fatalf("%s: the directory of topic u is gone: %v", bad, err)
		}
		if n := r.Offline(); n != 2 || !r.Unopened(u.ID, 0) || !r.Unopened(u.ID, 1) || r.Unopened(v.ID, 0) {
			t.Fatalf("%s: Offline = %d, Unopened = %v %v %v; want 2, true true false", bad, n,
				r.Unopened(u.ID, 0), r.Unopened(u.ID, 1), r.Unopened(v.ID, 0))
		}
		at, ok := r.RetryAt()
		if !ok || !at.Equal(now.Add(offlineRetryFirst)) {
			t.Fatalf("%s: RetryAt = %v, %v", bad, at, ok)
		}
		r.Sync([]TopicSpec{u, v}, nil, nil, Hooks{}) // not due: not tried
		now = now.Add(offlineRetryFirst)
		r.Sync([]TopicSpec{u, v}, nil, nil, Hooks{}) // due: fails again, the wait doubles
		if at, _ := r.RetryAt(); !at.Equal(now.Add(2 * offlineRetryFirst)) {
			t.Fatalf("%s: RetryAt after a second failure = %v; want %v", bad, at, now.Add(2*offlineRetryFirst))
		}
		// Mended: the next due retry opens it on its data.
		rules.Clear()
		if bad == "garbage" {
			if err := vfs.WriteFileAtomic(mem, "/data/topics/u", "topic.json", []byte(`{"id":"05000000000000000000000000000000","partitions":2}`)); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(2 * offlineRetryFirst)
		r.Sync([]TopicSpec{u, v}, nil, nil, Hooks{})
		got, ok := r.Get("u")
		if !ok || !got.Partitions[1].Hosted() || got.Partitions[1].Log.EndOffset() != 1 {
			t.Fatalf("%s: after the mend topic u is %v, %v; want it open with its record", bad, got, ok)
		}
		if n := r.Offline(); n != 0 {
			t.Fatalf("%s: Offline = %d after the mend", bad, n)
		}
		if _, ok := r.RetryAt(); ok {
			t.Fatalf("%s: a retry is still due after the mend", bad)
		}
		r.Close()
	}

	// A topic none of whose partitions this node hosts: its unreadable directory goes.
	r = open()
	defer r.Close()
	rules.Add(vfs.Rule{Op: vfs.OpOpen, PathContains: "/topics/u/topic.json"})
	away := TopicSpec{Name: "u", ID: u.ID, Partitions: 2, Hosted: func(int32) bool { return false }}
	r.Sync([]TopicSpec{away}, nil, nil, Hooks{})
	rules.Clear()
	if got, ok := r.Get("u"); !ok || got.Partitions[0].Offline() != nil || r.Offline() != 0 {
		t.Fatalf("a topic not hosted here: %v, %v, Offline %d; want it synced", got, ok, r.Offline())
	}
	if _, err := mem.Stat("/data/topics/u/1"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("the partition directory of a topic not hosted here is still there: %v", err)
	}
}

// testBatch is a producer batch of one record.
func testBatch(t *testing.T) []byte {
	t.Helper()
	body := batch.AppendRecord(nil, 0, 0, []byte("k"), []byte("v"), 0, nil)
	return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: 0, BaseTimestamp: 1, MaxTimestamp: 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, body)
}

// TestFailedSyncOfAPublishedTopic: a topic whose sync fails after it was published keeps its
// published form, and a partition that sync added here counts as unopened until a retry opens
// it.
func TestFailedSyncOfAPublishedTopic(t *testing.T) {
	_, rules, fsys := faultyFS()
	now := time.Unix(1000, 0)
	r := openAt(t, fsys, &now)
	defer r.Close()
	id := [16]byte{3}
	one := TopicSpec{Name: "w", ID: id, Partitions: 1, Hosted: all}
	r.Sync([]TopicSpec{one}, nil, nil, Hooks{})
	rules.Add(vfs.Rule{Op: vfs.OpCreate, PathContains: "/topics/w/topic.json"}) // its topic.json cannot be written
	two := TopicSpec{Name: "w", ID: id, Partitions: 2, Hosted: all}
	r.Sync([]TopicSpec{two}, nil, nil, Hooks{})
	got, _ := r.Get("w")
	if len(got.Partitions) != 1 || !got.Partitions[0].Hosted() {
		t.Fatalf("after the failed sync w has %d partitions; want its published form, 1 open", len(got.Partitions))
	}
	if !r.Unopened(id, 1) || r.Unopened(id, 0) || r.Offline() != 1 {
		t.Fatalf("Unopened = %v %v, Offline = %d; want partition 1 unopened", r.Unopened(id, 0), r.Unopened(id, 1), r.Offline())
	}
	rules.Clear()
	now = now.Add(offlineRetryFirst)
	r.Sync([]TopicSpec{two}, nil, nil, Hooks{})
	if got, _ := r.Get("w"); len(got.Partitions) != 2 || !got.Partitions[1].Hosted() || r.Offline() != 0 {
		t.Fatalf("after the retry: %d partitions, Offline %d; want 2 open, 0", len(got.Partitions), r.Offline())
	}
}

// faultyFS is an in-memory file system whose operations fail as rules say.
func faultyFS() (*vfs.MemFS, *vfs.Rules, vfs.FS) {
	mem := vfs.NewMem()
	rules := &vfs.Rules{}
	return mem, rules, vfs.NewErrorFS(mem, rules)
}

// openAt opens the registry of /data on fsys, whose clock reads *now.
func openAt(t *testing.T, fsys vfs.FS, now *time.Time) *Registry {
	t.Helper()
	f := logstore.NewFlusher(0)
	t.Cleanup(func() { f.Close() })
	r, err := Open(Options{FS: fsys, DataDir: "/data", Flusher: f, Logger: quiet, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDeletionThatCannotRemoveItsDirectory: a deleted topic leaves the registry even when its
// directory cannot be removed, and a later Sync removes what is left.
func TestDeletionThatCannotRemoveItsDirectory(t *testing.T) {
	mem, rules, fsys := faultyFS()
	now := time.Unix(1000, 0)
	r := openAt(t, fsys, &now)
	defer r.Close()
	x := TopicSpec{Name: "x", ID: [16]byte{8}, Partitions: 1, Hosted: all}
	r.Sync([]TopicSpec{x}, nil, nil, Hooks{})
	rules.Add(vfs.Rule{Op: vfs.OpRename, PathContains: "/topics/x"})
	r.Sync(nil, nil, nil, Hooks{})
	if _, ok := r.Get("x"); ok {
		t.Fatal("a deleted topic is still in the registry")
	}
	if _, err := mem.Stat("/data/topics/x"); err != nil {
		t.Fatalf("the directory is gone although its removal failed: %v", err)
	}
	if at, ok := r.RetryAt(); !ok || !at.Equal(now.Add(offlineRetryFirst)) {
		t.Fatalf("RetryAt = %v, %v; want a retry of the removal in %v", at, ok, offlineRetryFirst)
	}
	// The rename works now, the removal after it does not: the renamed leftover stays.
	rules.Clear()
	rules.Add(vfs.Rule{Op: vfs.OpRemove, PathContains: removedSuffix})
	r.Sync(nil, nil, nil, Hooks{})
	r.WaitRemovals() // the removal runs in the background
	leftovers := func() (n int) {
		names, _ := mem.List("/data/topics")
		for _, name := range names {
			if removal(name) || name == "x" {
				n++
			}
		}
		return n
	}
	if n := leftovers(); n != 1 {
		t.Fatalf("%d leftovers; want the renamed directory", n)
	}
	if _, ok := r.RetryAt(); !ok {
		t.Fatal("no retry due while a leftover stays")
	}
	// A restart does not fail on it.
	r2 := openAt(t, fsys, &now)
	r2.Close()
	rules.Clear()
	r.Sync(nil, nil, nil, Hooks{})
	r.WaitRemovals()
	if n := leftovers(); n != 0 {
		t.Fatalf("a later Sync left %d leftovers of the deleted topic", n)
	}
	if _, ok := r.RetryAt(); ok {
		t.Fatal("a retry is still due once the leftovers are gone")
	}
}

// TestTotalOrderTopicIsNeverCompacted: a cluster-wide log.cleanup.policy=compact (a dynamic
// broker config) does not reach a total-order topic, whose own cleanup.policy can only be
// delete: its offsets are the shard's slots, and a record compaction removed read as a no-op
// slot, so acknowledged, confirmed records vanished from Read and subscriptions (found by
// review, 2026-12-06). Other topics take the default.
func TestTotalOrderTopicIsNeverCompacted(t *testing.T) {
	d := newDefaults()
	d.set(map[string]string{"log.cleanup.policy": "compact"}, nil)
	total := map[string]string{"runnel.ordering": "total"}
	if v, src := effectiveIn(total, "cleanup.policy", d); v != "delete" || src != SourceDefault {
		t.Errorf("a total-order topic's cleanup.policy under a cluster default of compact = %q (%v); want delete", v, src)
	}
	if c := logConfig(total, d); c.Compact || !c.Delete {
		t.Errorf("a total-order topic's log config: compact %v, delete %v; want delete only", c.Compact, c.Delete)
	}
	if c := logConfig(map[string]string{}, d); !c.Compact {
		t.Errorf("an ordinary topic under a cluster default of compact is not compacted")
	}
}

// TestKafkaTopicConfigsDescribed: the topic configs of Kafka 4.1's LogConfig that Runnel used to
// refuse as unknown are described with Kafka's defaults and broker synonyms (ServerTopicConfigSynonyms).
func TestKafkaTopicConfigsDescribed(t *testing.T) {
	for _, tt := range []struct{ name, def, broker string }{
		{"compression.gzip.level", "-1", "compression.gzip.level"},
		{"compression.lz4.level", "9", "compression.lz4.level"},
		{"compression.zstd.level", "3", "compression.zstd.level"},
		{"segment.jitter.ms", "0", "log.roll.jitter.ms"},
		{"segment.index.bytes", "10485760", "log.index.size.max.bytes"},
		{"preallocate", "false", "log.preallocate"},
		{"file.delete.delay.ms", "60000", "log.segment.delete.delay.ms"},
		{"local.retention.ms", "-2", "log.local.retention.ms"},
		{"local.retention.bytes", "-2", "log.local.retention.bytes"},
		{"remote.storage.enable", "false", ""},
		{"remote.log.copy.disable", "false", ""},
		{"remote.log.delete.on.disable", "false", ""},
	} {
		d, ok := LookupDef(tt.name)
		if !ok || d.Default != tt.def || d.BrokerName != tt.broker {
			t.Errorf("LookupDef(%s) = %+v, %v; want default %q, broker config %q", tt.name, d, ok, tt.def, tt.broker)
			continue
		}
		if err := checkValue(d, d.Default); err != nil {
			t.Errorf("%s: its default %q is refused: %v", tt.name, d.Default, err)
		}
	}
}

// TestEmptyCleanupPolicy: an empty cleanup.policy (Kafka 4.1, KIP-1161: neither delete nor
// compact) reaches the log store as neither, a valid configuration that keeps every record, and
// so does an empty log.cleanup.policy broker default. Runnel used to refuse it.
func TestEmptyCleanupPolicy(t *testing.T) {
	c := logConfig(map[string]string{"cleanup.policy": ""}, nil)
	if c.Delete || c.Compact {
		t.Errorf("cleanup.policy \"\": delete %v, compact %v; want neither", c.Delete, c.Compact)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("cleanup.policy \"\": Validate() = %v; want nil", err)
	}
	d := newDefaults()
	d.set(map[string]string{"log.cleanup.policy": ""}, nil)
	if c := logConfig(map[string]string{}, d); c.Delete || c.Compact || c.Validate() != nil {
		t.Errorf("log.cleanup.policy \"\": delete %v, compact %v, Validate() = %v; want neither, nil", c.Delete, c.Compact, c.Validate())
	}
}

// TestSegmentJitterAndCompressionLevels: segment.jitter.ms reaches the log store, and a topic's
// compression levels are its own or Kafka's defaults.
func TestSegmentJitterAndCompressionLevels(t *testing.T) {
	if c := logConfig(map[string]string{"segment.jitter.ms": "1500"}, nil); c.SegmentJitter != 1500*time.Millisecond {
		t.Errorf("segment.jitter.ms 1500: SegmentJitter %v; want 1.5s", c.SegmentJitter)
	}
	if c := logConfig(map[string]string{"segment.jitter.ms": "9223372036854775807"}, nil); c.SegmentJitter <= 0 || c.Validate() != nil {
		t.Errorf("segment.jitter.ms Long.MAX: SegmentJitter %v, Validate() = %v; want a positive jitter, nil", c.SegmentJitter, c.Validate())
	}
	tp := &Topic{Configs: map[string]string{"compression.zstd.level": "7"}}
	for _, tt := range []struct {
		typ  string
		want int
	}{{"gzip", -1}, {"lz4", 9}, {"zstd", 7}, {"snappy", 0}, {"uncompressed", 0}} {
		if got := tp.CompressionLevel(tt.typ); got != tt.want {
			t.Errorf("CompressionLevel(%s) = %d; want %d", tt.typ, got, tt.want)
		}
	}
}

// TestDeletionDoesNotWaitForItsFiles: a deleted topic's directory is renamed away at once and
// its files are removed in the background, so the Sync that deletes it (the node's reconcile,
// and the DeleteTopics waiting for it) does not wait for a slow removal, and the name can be
// used again meanwhile. The removal used to run inside the Sync: seconds for a large topic.
func TestDeletionDoesNotWaitForItsFiles(t *testing.T) {
	mem := vfs.NewMem()
	release := make(chan struct{})
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpRemove && strings.Contains(path, removedSuffix) {
			<-release // a removal that takes as long as the test wants
		}
		return nil
	}))
	now := time.Unix(1000, 0)
	r := openAt(t, fsys, &now)
	defer r.Close()
	defer close(release) // before Close, which waits for the removals
	x := TopicSpec{Name: "x", ID: [16]byte{8}, Partitions: 2, Hosted: all}
	r.Sync([]TopicSpec{x}, nil, nil, Hooks{})
	done := make(chan struct{})
	go func() {
		r.Sync(nil, nil, nil, Hooks{})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the Sync deleting a topic waited for its files to be removed")
	}
	if _, ok := r.Get("x"); ok {
		t.Fatal("a deleted topic is still in the registry")
	}
	again := TopicSpec{Name: "x", ID: [16]byte{9}, Partitions: 1, Hosted: all}
	r.Sync([]TopicSpec{again}, nil, nil, Hooks{})
	if tp, ok := r.Get("x"); !ok || tp.ID != again.ID {
		t.Fatal("a topic created again under the name of one being removed is not there")
	}
	names, _ := mem.List("/data/topics")
	var removing []string
	for _, name := range names {
		if removal(name) {
			removing = append(removing, name)
		}
	}
	if len(removing) != 1 {
		t.Fatalf("directories being removed: %v; want the deleted topic's", removing)
	}
}

// TestGenerationFollowsNamesAndIDs: Generation moves when a name comes, goes or names another
// topic id, and stays while Syncs change nothing of that (a config change, a partition added),
// so the group service skips comparing every topic at each tick.
func TestGenerationFollowsNamesAndIDs(t *testing.T) {
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: t.TempDir(), Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec := TopicSpec{Name: "g", ID: [16]byte{1}, Partitions: 1, Hosted: all}
	g0 := r.Generation()
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	g1 := r.Generation()
	if g1 == g0 {
		t.Fatalf("Generation after creating a topic: %d, as before", g1)
	}
	spec.Configs, spec.Partitions = map[string]string{"retention.ms": "1000"}, 2
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	r.Sync([]TopicSpec{spec}, map[string]string{"log.segment.bytes": "70000"}, nil, Hooks{})
	if g := r.Generation(); g != g1 {
		t.Fatalf("Generation after a config change and a new partition: %d; want %d (no name or id changed)", g, g1)
	}
	spec.ID = [16]byte{2} // deleted and created again under the name
	r.Sync([]TopicSpec{spec}, nil, nil, Hooks{})
	g2 := r.Generation()
	if g2 == g1 {
		t.Fatalf("Generation after the name got another id: %d, as before", g2)
	}
	r.Sync(nil, nil, nil, Hooks{})
	if g := r.Generation(); g == g2 {
		t.Fatalf("Generation after deleting the topic: %d, as before", g)
	}
}
