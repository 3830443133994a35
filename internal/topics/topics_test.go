package topics

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/logstore"
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
		{"segment.bytes", "13", false}, {"segment.bytes", "14", true}, {"segment.bytes", "2147483648", false},
		{"min.cleanable.dirty.ratio", "0.25", true}, {"min.cleanable.dirty.ratio", "1.5", false},
		{"cleanup.policy", "compact,delete", true}, {"cleanup.policy", "compact, delete", true}, {"cleanup.policy", "gone", false},
		{"message.timestamp.type", "LogAppendTime", true}, {"message.timestamp.type", "logappendtime", false},
		{"write.caching", "true", true}, {"write.caching", "yes", false},
		{"runnel.storage", "local", true}, {"runnel.storage", "object", false},
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

func TestRegistryPersistsTopicsAndPrecedence(t *testing.T) {
	dir := t.TempDir()
	f := logstore.NewFlusher(0)
	defer f.Close()
	r, err := Open(Options{DataDir: dir, Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := r.Create("t", 2, map[string]string{"retention.ms": "1000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create("t", 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Errorf("Create(existing) = %v; want ErrTopicExists", err)
	}
	if _, err := r.Create("v", 1, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Get("v"); ok {
		t.Errorf("validate-only Create made a topic")
	}
	if err := r.SetBrokerConfigs(false, map[string]string{"log.retention.ms": "5000", "log.segment.bytes": "70000"}, false); err != nil {
		t.Fatal(err)
	}
	if err := r.SetBrokerConfigs(true, map[string]string{"log.segment.bytes": "80000"}, false); err != nil {
		t.Fatal(err)
	}
	if err := r.SetBrokerConfigs(false, map[string]string{"broker.id": "3"}, false); err == nil {
		t.Errorf("SetBrokerConfigs(broker.id) = nil; want an error (not dynamic)")
	}
	if err := r.CreatePartitions("t", 3, false); err != nil {
		t.Fatal(err)
	}
	if err := r.CreatePartitions("t", 2, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Errorf("CreatePartitions(shrink) = %v; want ErrInvalidPartitions", err)
	}
	r.Close()

	r, err = Open(Options{DataDir: dir, Flusher: f, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, ok := r.Get("t")
	if !ok || got.ID != tp.ID || len(got.Partitions) != 3 {
		t.Fatalf("after reopening: %+v, %v; want topic t with id %x and 3 partitions", got, ok, tp.ID)
	}
	if byID, ok := r.GetByID(tp.ID); !ok || byID.Name != "t" {
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
	if err := r.Delete("t"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Get("t"); ok {
		t.Errorf("topic still there after Delete")
	}
	if err := r.Delete("t"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("Delete(missing) = %v; want ErrUnknownTopic", err)
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
	on, err := r.Create("on", 1, map[string]string{"write.caching": "true"}, false)
	if err != nil {
		t.Fatal(err)
	}
	unset, err := r.Create("unset", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create("bad", 1, map[string]string{"write.caching": "disabled"}, false); err == nil {
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
		if err := r.SetBrokerConfigs(false, configs, false); err != nil {
			t.Fatalf("write_caching_default=%q: %v", tc.brokerDefault, err)
		}
		v, src := on.EffectiveSource("write.caching")
		if v != tc.wantOn || src != tc.wantSrc {
			t.Errorf("write_caching_default=%q: topic with write.caching=true is %q (source %v); want %q (%v)",
				tc.brokerDefault, v, src, tc.wantOn, tc.wantSrc)
		}
		if v, _ := unset.Effective("write.caching"); v != tc.wantOff {
			t.Errorf("write_caching_default=%q: topic without write.caching is %q; want %q", tc.brokerDefault, v, tc.wantOff)
		}
	}
	if err := r.SetBrokerConfigs(false, map[string]string{"write_caching_default": "maybe"}, false); err == nil {
		t.Errorf("write_caching_default=maybe accepted")
	}
}
