package group

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Group configs (Kafka's ConfigResource GROUP, KIP-848 and KIP-932): a group's overrides of
// the coordinator's defaults, set with IncrementalAlterConfigs (kafka-configs --entity-type
// groups) and kept by the controller. Kafka's names, types, ranges and messages (Kafka 4.3's
// set, less the share assignor offload and interval, and the RENEW switch: Runnel assigns share
// groups at once, and serves ShareFetch v1 without RENEW).
const (
	ConsumerSessionTimeoutConfig       = "consumer.session.timeout.ms"
	ConsumerHeartbeatIntervalConfig    = "consumer.heartbeat.interval.ms"
	ShareSessionTimeoutConfig          = "share.session.timeout.ms"
	ShareHeartbeatIntervalConfig       = "share.heartbeat.interval.ms"
	ShareRecordLockDurationConfig      = "share.record.lock.duration.ms"
	ShareDeliveryCountLimitConfig      = "share.delivery.count.limit"
	SharePartitionMaxRecordLocksConfig = "share.partition.max.record.locks"
	ShareAutoOffsetResetConfig         = "share.auto.offset.reset"
	ShareIsolationLevelConfig          = "share.isolation.level"
	StreamsSessionTimeoutConfig        = "streams.session.timeout.ms"
	StreamsHeartbeatIntervalConfig     = "streams.heartbeat.interval.ms"
	StreamsNumStandbyReplicasConfig    = "streams.num.standby.replicas"
	StreamsInitialRebalanceDelayConfig = "streams.initial.rebalance.delay.ms"
	StreamsAssignmentIntervalConfig    = "streams.assignment.interval.ms"
)

// GroupConfigDef is one group config's definition.
type GroupConfigDef struct {
	Name string
	Int  bool // Kafka's INT; else a STRING
	Doc  string
}

// GroupConfigDefs are the group configs, sorted by name.
var GroupConfigDefs = []GroupConfigDef{
	{ConsumerHeartbeatIntervalConfig, true, "The heartbeat interval given to the members of a consumer group."},
	{ConsumerSessionTimeoutConfig, true, "The timeout to detect client failures when using the consumer group protocol."},
	{ShareAutoOffsetResetConfig, false, "The strategy to initialize the share-partition start offset: earliest, latest or by_duration:<PnDTnHnMn.nS> (that long before the current time)."},
	{ShareDeliveryCountLimitConfig, true, "The maximum number of delivery attempts for a record delivered to a share group."},
	{ShareHeartbeatIntervalConfig, true, "The heartbeat interval given to the members of a share group."},
	{ShareIsolationLevelConfig, false, "Controls how to read records written transactionally: read_committed delivers only committed transactional records, read_uncommitted every record."},
	{SharePartitionMaxRecordLocksConfig, true, "Share-group record lock limit per share-partition."},
	{ShareRecordLockDurationConfig, true, "The record acquisition lock duration in milliseconds for share groups."},
	{ShareSessionTimeoutConfig, true, "The timeout to detect client failures when using the share group protocol."},
	{StreamsAssignmentIntervalConfig, true, "The minimum time between two computations of a streams group's target assignment."},
	{StreamsHeartbeatIntervalConfig, true, "The heartbeat interval given to the members."},
	{StreamsInitialRebalanceDelayConfig, true, "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance."},
	{StreamsNumStandbyReplicasConfig, true, "The number of standby replicas for each task."},
	{StreamsSessionTimeoutConfig, true, "The timeout to detect client failures when using the streams group protocol."},
}

// LookupGroupConfig returns a group config's definition.
func LookupGroupConfig(name string) (GroupConfigDef, bool) {
	i, ok := slices.BinarySearchFunc(GroupConfigDefs, name, func(d GroupConfigDef, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return GroupConfigDef{}, false
	}
	return GroupConfigDefs[i], true
}

// OffsetReset is a share group's share.auto.offset.reset: where a share-partition starts.
type OffsetReset struct {
	Earliest bool
	// By, if positive, starts at the first record of timestamp at least now - By
	// (by_duration:<ISO 8601>); neither: latest.
	By time.Duration
}

// Settings are a group's effective configs: its overrides over the coordinator's defaults.
type Settings struct {
	ConsumerSessionTimeout       time.Duration
	ConsumerHeartbeatInterval    time.Duration
	ShareSessionTimeout          time.Duration
	ShareHeartbeatInterval       time.Duration
	ShareRecordLockDuration      time.Duration
	ShareDeliveryCountLimit      int16
	SharePartitionMaxRecordLocks int64
	ShareAutoOffsetReset         OffsetReset
	ShareReadCommitted           bool
	StreamsSessionTimeout        time.Duration
	StreamsHeartbeatInterval     time.Duration
	StreamsStandbyReplicas       int
	StreamsInitialRebalanceDelay time.Duration
	StreamsAssignmentInterval    time.Duration
}

// intConfig is one INT group config: its value in Settings, its least value, and the
// coordinator's limits (Kafka's group.*.min/max.* broker configs, at their defaults), which take
// the coordinator's own default too.
type intConfig struct {
	name     string
	least    int64 // ConfigDef's atLeast
	min, max int64
	broker   string // the limits' broker config names, with %s for min or max
	ms       bool   // milliseconds
	get      func(*Settings) int64
	set      func(*Settings, int64)
}

func msConfig(name string, least, min, max time.Duration, broker string, field func(*Settings) *time.Duration) intConfig {
	return intConfig{name, least.Milliseconds(), min.Milliseconds(), max.Milliseconds(), broker, true,
		func(s *Settings) int64 { return field(s).Milliseconds() },
		func(s *Settings, v int64) { *field(s) = time.Duration(v) * time.Millisecond }}
}

var intConfigs = []intConfig{
	msConfig(ConsumerHeartbeatIntervalConfig, time.Millisecond, 5*time.Second, 15*time.Second, "group.consumer.%s.heartbeat.interval.ms",
		func(s *Settings) *time.Duration { return &s.ConsumerHeartbeatInterval }),
	msConfig(ConsumerSessionTimeoutConfig, time.Millisecond, 45*time.Second, 60*time.Second, "group.consumer.%s.session.timeout.ms",
		func(s *Settings) *time.Duration { return &s.ConsumerSessionTimeout }),
	msConfig(ShareHeartbeatIntervalConfig, time.Millisecond, 5*time.Second, 15*time.Second, "group.share.%s.heartbeat.interval.ms",
		func(s *Settings) *time.Duration { return &s.ShareHeartbeatInterval }),
	msConfig(ShareSessionTimeoutConfig, time.Millisecond, 45*time.Second, 60*time.Second, "group.share.%s.session.timeout.ms",
		func(s *Settings) *time.Duration { return &s.ShareSessionTimeout }),
	msConfig(ShareRecordLockDurationConfig, time.Second, 15*time.Second, 60*time.Second, "group.share.%s.record.lock.duration.ms",
		func(s *Settings) *time.Duration { return &s.ShareRecordLockDuration }),
	{ShareDeliveryCountLimitConfig, 2, 2, 10, "group.share.%s.delivery.count.limit", false,
		func(s *Settings) int64 { return int64(s.ShareDeliveryCountLimit) }, func(s *Settings, v int64) { s.ShareDeliveryCountLimit = int16(v) }},
	{SharePartitionMaxRecordLocksConfig, 100, 100, 4000, "group.share.%s.partition.max.record.locks", false,
		func(s *Settings) int64 { return s.SharePartitionMaxRecordLocks }, func(s *Settings, v int64) { s.SharePartitionMaxRecordLocks = v }},
	msConfig(StreamsHeartbeatIntervalConfig, time.Millisecond, 5*time.Second, 15*time.Second, "group.streams.%s.heartbeat.interval.ms",
		func(s *Settings) *time.Duration { return &s.StreamsHeartbeatInterval }),
	msConfig(StreamsSessionTimeoutConfig, time.Millisecond, 45*time.Second, 60*time.Second, "group.streams.%s.session.timeout.ms",
		func(s *Settings) *time.Duration { return &s.StreamsSessionTimeout }),
	msConfig(StreamsAssignmentIntervalConfig, 0, 0, 15*time.Second, "group.streams.%s.assignment.interval.ms",
		func(s *Settings) *time.Duration { return &s.StreamsAssignmentInterval }),
	msConfig(StreamsInitialRebalanceDelayConfig, 0, 0, math.MaxInt32*time.Millisecond, "group.streams.%s.initial.rebalance.delay.ms",
		func(s *Settings) *time.Duration { return &s.StreamsInitialRebalanceDelay }),
	{StreamsNumStandbyReplicasConfig, 0, 0, 2, "group.streams.%s.standby.replicas", false,
		func(s *Settings) int64 { return int64(s.StreamsStandbyReplicas) }, func(s *Settings, v int64) { s.StreamsStandbyReplicas = int(v) }},
}

// defaults returns the coordinator's settings.
func (c Config) defaults() Settings {
	return Settings{
		ConsumerSessionTimeout: c.ConsumerSessionTimeout, ConsumerHeartbeatInterval: c.ConsumerHeartbeatInterval,
		ShareSessionTimeout: c.ShareSessionTimeout, ShareHeartbeatInterval: c.ShareHeartbeatInterval,
		ShareRecordLockDuration: c.ShareRecordLockDuration, ShareDeliveryCountLimit: c.ShareDeliveryCountLimit,
		SharePartitionMaxRecordLocks: c.SharePartitionMaxRecordLocks,
		StreamsSessionTimeout:        c.StreamsSessionTimeout, StreamsHeartbeatInterval: c.StreamsHeartbeatInterval,
		StreamsStandbyReplicas: c.StreamsStandbyReplicas, StreamsInitialRebalanceDelay: c.StreamsInitialRebalanceDelay,
		StreamsAssignmentInterval: c.StreamsAssignmentInterval,
	}
}

// Settings returns a group's settings: overrides (valid ones, as CheckGroupConfigs took them)
// over c's defaults. An override that does not parse is ignored.
func (c Config) Settings(overrides map[string]string) Settings {
	s := c.defaults()
	for _, ic := range intConfigs {
		if v, ok := overrides[ic.name]; ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil && n >= ic.least {
				ic.set(&s, n)
			}
		}
	}
	if v, ok := overrides[ShareAutoOffsetResetConfig]; ok {
		if r, err := ParseOffsetReset(v); err == nil {
			s.ShareAutoOffsetReset = r
		}
	}
	s.ShareReadCommitted = strings.TrimSpace(overrides[ShareIsolationLevelConfig]) == "read_committed"
	return s
}

// groupSettings returns a group's settings from the Overrides hook.
func (c Config) groupSettings(groupID string) Settings {
	var o map[string]string
	if c.Overrides != nil {
		o = c.Overrides(groupID)
	}
	return c.Settings(o)
}

// ConfigValue is a group config's value, and whether the group set it (else it is the
// coordinator's default).
type ConfigValue struct {
	Value string
	Set   bool
}

// Values returns every group config's value for a group of these overrides, by name.
func (c Config) Values(overrides map[string]string) map[string]ConfigValue {
	d := c.defaults()
	defaults := map[string]string{ShareAutoOffsetResetConfig: "latest", ShareIsolationLevelConfig: "read_uncommitted"}
	for _, ic := range intConfigs {
		defaults[ic.name] = strconv.FormatInt(ic.get(&d), 10)
	}
	out := make(map[string]ConfigValue, len(defaults))
	for name, d := range defaults {
		v, set := overrides[name]
		if !set {
			v = d
		}
		out[name] = ConfigValue{v, set}
	}
	return out
}

// CheckGroupConfigs validates a group's complete set of overrides as Kafka's GroupConfig does:
// known names, values of their type and range, a session timeout above its heartbeat interval.
// The error text is Kafka's (INVALID_CONFIG).
func (c Config) CheckGroupConfigs(overrides map[string]string) error {
	names := slices.Sorted(maps.Keys(overrides))
	for _, name := range names {
		if _, ok := LookupGroupConfig(name); !ok {
			return fmt.Errorf("Unknown group config name: %s", name)
		}
	}
	s, d := c.defaults(), c.defaults()
	for _, name := range names {
		v := strings.TrimSpace(overrides[name])
		switch name {
		case ShareAutoOffsetResetConfig:
			if _, err := ParseOffsetReset(v); err != nil {
				return fmt.Errorf("Invalid value `%s` for configuration %s. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.", overrides[name], name)
			}
		case ShareIsolationLevelConfig:
			if v != "read_committed" && v != "read_uncommitted" {
				return fmt.Errorf("Invalid value %s for configuration %s: String must be one of: read_committed, read_uncommitted", overrides[name], name)
			}
		}
	}
	for _, ic := range intConfigs {
		raw, ok := overrides[ic.name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
		if err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", raw, ic.name)
		}
		if n < ic.least {
			return fmt.Errorf("Invalid value %d for configuration %s: Value must be at least %d", n, ic.name, ic.least)
		}
		ic.set(&s, n)
	}
	for _, ic := range intConfigs {
		v, own := ic.get(&s), ic.get(&d)
		if lo := min(ic.min, own); v < lo {
			return fmt.Errorf("%s must be greater than or equal to %s (%d)", ic.name, fmt.Sprintf(ic.broker, "min"), lo)
		}
		if hi := max(ic.max, own); v > hi {
			return fmt.Errorf("%s must be less than or equal to %s (%d)", ic.name, fmt.Sprintf(ic.broker, "max"), hi)
		}
	}
	if s.ConsumerSessionTimeout <= s.ConsumerHeartbeatInterval {
		return fmt.Errorf("%s must be greater than %s", ConsumerSessionTimeoutConfig, ConsumerHeartbeatIntervalConfig)
	}
	if s.ShareSessionTimeout <= s.ShareHeartbeatInterval {
		return fmt.Errorf("%s must be greater than %s", ShareSessionTimeoutConfig, ShareHeartbeatIntervalConfig)
	}
	if s.StreamsSessionTimeout <= s.StreamsHeartbeatInterval {
		return fmt.Errorf("%s must be greater than %s", StreamsSessionTimeoutConfig, StreamsHeartbeatIntervalConfig)
	}
	return nil
}

// ParseOffsetReset parses a share.auto.offset.reset value as Kafka's
// ShareGroupAutoOffsetResetStrategy.fromString: earliest, latest or by_duration:<ISO 8601
// duration, not negative>, in lower case (Kafka refuses EARLIEST; the duration itself is read
// in any case, as java.time.Duration.parse reads it). Kafka's config definition trims the
// value first.
func ParseOffsetReset(v string) (OffsetReset, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "latest":
		return OffsetReset{}, nil
	case v == "earliest":
		return OffsetReset{Earliest: true}, nil
	case strings.HasPrefix(v, "by_duration:"):
		d, err := ParseISODuration(v[len("by_duration:"):])
		if err != nil {
			return OffsetReset{}, err
		}
		if d < 0 {
			return OffsetReset{}, fmt.Errorf("negative duration %s", v)
		}
		return OffsetReset{By: d}, nil
	}
	return OffsetReset{}, fmt.Errorf("unknown strategy %q", v)
}

// isoDuration is java.time.Duration.parse's grammar: PnDTnHnMn.nS, each part optional and
// signed, the whole signed, in any case.
var isoDuration = regexp.MustCompile(`^([-+]?)p(?:([-+]?[0-9]+)d)?(t(?:([-+]?[0-9]+)h)?(?:([-+]?[0-9]+)m)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?s)?)?$`)

// ParseISODuration parses an ISO 8601 duration as java.time.Duration.parse does.
func ParseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(strings.ToLower(s))
	if m == nil || (m[2] == "" && m[3] == "") || m[3] == "t" {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration (PnDTnHnMn.nS)", s)
	}
	var total time.Duration
	add := func(d time.Duration) bool { // false on overflow
		sum := total + d
		if (d > 0 && sum < total) || (d < 0 && sum > total) {
			return false
		}
		total = sum
		return true
	}
	for _, part := range []struct {
		i    int
		unit time.Duration
	}{{2, 24 * time.Hour}, {4, time.Hour}, {5, time.Minute}, {6, time.Second}} {
		if m[part.i] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[part.i], 10, 64)
		if err != nil || n > int64(1<<62)/int64(part.unit) || n < -int64(1<<62)/int64(part.unit) || !add(time.Duration(n)*part.unit) {
			return 0, fmt.Errorf("%q: out of range", s)
		}
	}
	if m[7] != "" {
		frac, _ := strconv.ParseInt((m[7] + "000000000")[:9], 10, 64)
		if strings.HasPrefix(m[6], "-") {
			frac = -frac
		}
		if !add(time.Duration(frac)) {
			return 0, fmt.Errorf("%q: out of range", s)
		}
	}
	if m[1] == "-" {
		total = -total
	}
	return total, nil
}
