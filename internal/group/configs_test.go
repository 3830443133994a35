package group

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCheckGroupConfigs: Kafka's GroupConfig validation: names, types, ranges widened to the
// coordinator's defaults, a session timeout above its heartbeat interval, the offset reset and
// isolation values.
func TestCheckGroupConfigs(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		configs map[string]string
		err     string // a part of the error; "" valid
	}{
		{nil, ""},
		{map[string]string{ConsumerSessionTimeoutConfig: "50000", ConsumerHeartbeatIntervalConfig: "6000"}, ""},
		{map[string]string{ShareAutoOffsetResetConfig: "earliest", ShareIsolationLevelConfig: "read_committed", ShareRecordLockDurationConfig: "15000"}, ""},
		{map[string]string{ShareAutoOffsetResetConfig: "by_duration:PT1H30M"}, ""},
		{map[string]string{"session.timeout.ms": "1"}, "Unknown group config name: session.timeout.ms"},
		{map[string]string{"streams.assignor.offload": "true"}, "Unknown group config name"},
		{map[string]string{StreamsAssignmentIntervalConfig: "15001"}, "group.streams.max.assignment.interval.ms (15000)"},
		{map[string]string{StreamsInitialRebalanceDelayConfig: "0"}, ""},
		{map[string]string{StreamsNumStandbyReplicasConfig: "1", StreamsSessionTimeoutConfig: "50000"}, ""},
		{map[string]string{StreamsNumStandbyReplicasConfig: "3"}, "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas (2)"},
		{map[string]string{StreamsHeartbeatIntervalConfig: "4999"}, "group.streams.min.heartbeat.interval.ms"},
		{map[string]string{ConsumerSessionTimeoutConfig: "abc"}, "Not a number of type INT"},
		{map[string]string{ConsumerSessionTimeoutConfig: "0"}, "Value must be at least 1"},
		{map[string]string{ShareRecordLockDurationConfig: "999"}, "Value must be at least 1000"},
		{map[string]string{ConsumerSessionTimeoutConfig: "44999"}, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{map[string]string{ShareSessionTimeoutConfig: "60001"}, "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"},
		{map[string]string{ConsumerHeartbeatIntervalConfig: "4999"}, "group.consumer.min.heartbeat.interval.ms"},
		{map[string]string{ShareRecordLockDurationConfig: "60001"}, "group.share.max.record.lock.duration.ms"},
		{map[string]string{ShareAutoOffsetResetConfig: "none"}, "must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'"},
		// Kafka's ShareGroupAutoOffsetResetStrategy reads the strategy in lower case only, and
		// refuses an empty one; the ISO duration is read in any case (Duration.parse).
		{map[string]string{ShareAutoOffsetResetConfig: "EARLIEST"}, "must be either 'earliest'"},
		{map[string]string{ShareAutoOffsetResetConfig: "Latest"}, "must be either 'earliest'"},
		{map[string]string{ShareAutoOffsetResetConfig: "BY_DURATION:PT1H"}, "must be either 'earliest'"},
		{map[string]string{ShareAutoOffsetResetConfig: ""}, "must be either 'earliest'"},
		{map[string]string{ShareAutoOffsetResetConfig: " earliest "}, ""},
		{map[string]string{ShareAutoOffsetResetConfig: "by_duration:pt1h"}, ""},
		{map[string]string{ShareAutoOffsetResetConfig: "by_duration:-PT1H"}, "by_duration"},
		{map[string]string{ShareAutoOffsetResetConfig: "by_duration:1h"}, "by_duration"},
		{map[string]string{ShareIsolationLevelConfig: "committed"}, "String must be one of: read_committed, read_uncommitted"},
		{map[string]string{ShareDeliveryCountLimitConfig: "10", SharePartitionMaxRecordLocksConfig: "100"}, ""},
		{map[string]string{ShareDeliveryCountLimitConfig: "1"}, "Value must be at least 2"},
		{map[string]string{ShareDeliveryCountLimitConfig: "11"}, "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit (10)"},
		{map[string]string{SharePartitionMaxRecordLocksConfig: "4001"}, "group.share.max.partition.max.record.locks (4000)"},
	} {
		err := c.CheckGroupConfigs(tc.configs)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v; want valid", tc.configs, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: %v; want an error with %q", tc.configs, err, tc.err)
		}
	}
	// The limits take the coordinator's own defaults: one configured at 10 s allows 10 s.
	c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval = 10*time.Second, time.Second
	if err := c.CheckGroupConfigs(map[string]string{ConsumerSessionTimeoutConfig: "10000", ConsumerHeartbeatIntervalConfig: "1000"}); err != nil {
		t.Errorf("the coordinator's own defaults as group configs: %v", err)
	}
	// The session timeout must exceed the heartbeat interval, whichever of them is set.
	c = DefaultConfig()
	c.ShareSessionTimeout = 15 * time.Second
	if err := c.CheckGroupConfigs(map[string]string{ShareHeartbeatIntervalConfig: "15000"}); err == nil || !strings.Contains(err.Error(), "share.session.timeout.ms must be greater than share.heartbeat.interval.ms") {
		t.Errorf("a heartbeat interval as long as the session: %v", err)
	}
}

// TestGroupSettings: a group's settings are its overrides over the coordinator's defaults, and
// Values shows which are its own.
func TestGroupSettings(t *testing.T) {
	c := DefaultConfig()
	s := c.Settings(map[string]string{ConsumerHeartbeatIntervalConfig: "7000", ShareAutoOffsetResetConfig: "by_duration:P1DT2S",
		ShareIsolationLevelConfig: "read_committed", ShareRecordLockDurationConfig: "20000", ShareDeliveryCountLimitConfig: "3"})
	if s.ConsumerHeartbeatInterval != 7*time.Second || s.ConsumerSessionTimeout != 45*time.Second || s.ShareRecordLockDuration != 20*time.Second ||
		s.ShareDeliveryCountLimit != 3 || s.SharePartitionMaxRecordLocks != 2000 ||
		s.ShareAutoOffsetReset.By != 24*time.Hour+2*time.Second || !s.ShareReadCommitted {
		t.Fatalf("settings %+v", s)
	}
	if d := c.Settings(nil); d.ShareAutoOffsetReset != (OffsetReset{}) || d.ShareReadCommitted || d.ShareRecordLockDuration != 30*time.Second {
		t.Fatalf("defaults %+v", d)
	}
	v := c.Values(map[string]string{ShareAutoOffsetResetConfig: "earliest"})
	if len(v) != len(GroupConfigDefs) || v[ShareAutoOffsetResetConfig] != (ConfigValue{"earliest", true}) ||
		v[ShareIsolationLevelConfig] != (ConfigValue{"read_uncommitted", false}) || v[ConsumerSessionTimeoutConfig] != (ConfigValue{"45000", false}) {
		t.Fatalf("values %+v", v)
	}
}

// TestParseISODuration: java.time.Duration.parse's forms.
func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT0S": 0, "PT20.345S": 20*time.Second + 345*time.Millisecond, "PT15M": 15 * time.Minute, "PT10H": 10 * time.Hour,
		"P2D": 48 * time.Hour, "P2DT3H4M": 51*time.Hour + 4*time.Minute, "pt1h": time.Hour, "PT-6H3M": -6*time.Hour + 3*time.Minute,
		"-PT6H3M": -6*time.Hour - 3*time.Minute, "PT-0.5S": -500 * time.Millisecond, "PT1,5S": 1500 * time.Millisecond,
	} {
		if got, err := ParseISODuration(in); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "P1H", "PT1D", "1h", "P1DT", "PT1.5M", "P1Y", "PT99999999999999999999S",
		"-P53375DT1281000H76860000M4611686018S", "P53375DT1281000H76860000M4611686018S"} { // parts in range, the sum not
		if got, err := ParseISODuration(in); err == nil {
			t.Errorf("%q parsed as %v; want an error", in, got)
		}
	}
}

// FuzzParseOffsetReset: any value parses or is refused without a panic, and a parsed
// by_duration is never negative.
func FuzzParseOffsetReset(f *testing.F) {
	for _, s := range []string{"earliest", "latest", "by_duration:PT1H", "by_duration:-P1D", "by_duration:PT1.123456789S", "x",
		"by_duration:-P53375DT1281000H76860000M4611686018S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseOffsetReset(s)
		if err == nil && r.By < 0 {
			t.Fatalf("%q: negative duration %v", s, r.By)
		}
		// A duration's sign is its text's: a leading minus (of the whole or of every part)
		// never parses as a positive duration.
		if lv := strings.ToLower(s); err == nil && r.By > 0 && strings.HasPrefix(lv, "by_duration:-") && !strings.Contains(lv[len("by_duration:-"):], "-") {
			t.Fatalf("%q: a negated duration parsed as %v", s, r.By)
		}
	})
}

// TestGroupConfigsApply: a group's own session timeout and heartbeat interval are what its
// members get (ConsumerGroupHeartbeat, ShareGroupHeartbeat), and when they expire; another
// group keeps the coordinator's defaults.
func TestGroupConfigsApply(t *testing.T) {
	h := newConsumerHarness(t)
	overrides := map[string]map[string]string{
		"g": {ConsumerSessionTimeoutConfig: "50000", ConsumerHeartbeatIntervalConfig: "7000"},
		"s": {ShareSessionTimeoutConfig: "60000", ShareHeartbeatIntervalConfig: "9000"},
	}
	h.c.cfg.Overrides = func(g string) map[string]string { return overrides[g] }
	if r := h.hb("c1", 0, []string{"t"}, map[string][]int32{}, ""); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("consumer heartbeat: error %d interval %d; want the group's 7000 ms", r.ErrorCode, r.HeartbeatIntervalMillis)
	}
	if r := h.shb("s1", 0, []string{"t"}); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 9000 {
		t.Fatalf("share heartbeat: error %d interval %d; want the group's 9000 ms", r.ErrorCode, r.HeartbeatIntervalMillis)
	}
	h.advance(47 * time.Second) // past the default 45 s, within both groups' own
	if r := h.hb("c1", 1, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("consumer member after 47 s: %v; want alive (its group's session is 50 s)", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := h.shb("s1", 1, nil); r.ErrorCode != 0 {
		t.Fatalf("share member after 47 s: %v; want alive (its group's session is 60 s)", kerr.ErrorForCode(r.ErrorCode))
	}
	h.advance(55 * time.Second)
	if r := h.hb("c1", 1, nil, nil, ""); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("consumer member 55 s after its heartbeat: %v; want UNKNOWN_MEMBER_ID (expired at 50 s)", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := h.shb("s1", 1, nil); r.ErrorCode != 0 {
		t.Fatalf("share member 55 s after its heartbeat: %v; want alive", kerr.ErrorForCode(r.ErrorCode))
	}
	h.advance(61 * time.Second)
	if r := h.shb("s1", 1, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("share member 61 s after its heartbeat: %v; want UNKNOWN_MEMBER_ID (expired at 60 s)", kerr.ErrorForCode(r.ErrorCode))
	}
	delete(overrides, "g") // configs removed: the defaults again
	if r := h.hb("c2", 0, []string{"t"}, map[string][]int32{}, ""); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("after the group's configs were removed: interval %d; want 5000", r.HeartbeatIntervalMillis)
	}
}
