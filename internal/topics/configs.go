package topics

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runnel-dev/runnel/internal/logstore"
)

// ConfigType is a config value's type, as DescribeConfigs v3+ reports it.
type ConfigType int8

// Kafka's config types (DescribeConfigsResponse ConfigType).
const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeShort   ConfigType = 4
	TypeLong    ConfigType = 5
	TypeDouble  ConfigType = 6
	TypeList    ConfigType = 7
)

// ConfigDef describes one topic config.
type ConfigDef struct {
	Name       string
	Type       ConfigType
	Default    string
	BrokerName string // the broker-level config that sets the default, as in Kafka
	Doc        string
	Allowed    []string // for strings and lists: the values accepted
	Min, Max   float64  // for numbers
	// Overrides are values the broker-level config may take beyond the topic config's own: a
	// broker default set to one of them overrides every topic's value with the mapped value.
	Overrides map[string]string
	// BrokerOnly marks a broker config that has no topic config (it is listed here to share the
	// dynamic broker config machinery); Name equals BrokerName.
	BrokerOnly bool
	// ClusterOnly marks a topic config whose broker-level default is cluster-wide only (it is
	// read by the active controller, whichever node it runs on), not per node.
	ClusterOnly bool
	// Check, if set, validates a value beyond the type (for values of a form of their own).
	Check func(string) error
}

// defs lists every topic config Runnel accepts, with Kafka's names and defaults. Configs that
// belong to later features accept only the values that work today.
var defs = []ConfigDef{
	{Name: "cleanup.policy", Type: TypeList, Default: "delete", BrokerName: "log.cleanup.policy", Allowed: []string{"delete", "compact"},
		Doc: "delete old segments, compact by key, both, or neither (empty: records are kept until DeleteRecords, as Kafka 4.1's KIP-1161)"},
	{Name: "retention.ms", Type: TypeLong, Default: "604800000", BrokerName: "log.retention.ms", Min: -1, Max: math.MaxInt64, Doc: "delete segments whose newest record is older; -1 keeps all"},
	{Name: "retention.bytes", Type: TypeLong, Default: "-1", BrokerName: "log.retention.bytes", Min: -1, Max: math.MaxInt64, Doc: "delete oldest segments while the partition stays at or above this size without them; -1: no limit"},
	{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", BrokerName: "log.segment.bytes", Min: 1048576, Max: math.MaxInt32, Doc: "segment file size before a roll"},
	{Name: "segment.ms", Type: TypeLong, Default: "604800000", BrokerName: "log.roll.ms", Min: 1, Max: math.MaxInt64, Doc: "segment age before a roll"},
	{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", BrokerName: "log.index.interval.bytes", Min: 0, Max: math.MaxInt32, Doc: "log bytes between offset index entries"},
	{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", BrokerName: "log.cleaner.delete.retention.ms", Min: 0, Max: math.MaxInt64, Doc: "how long tombstones survive compaction"},
	{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", BrokerName: "log.cleaner.min.cleanable.ratio", Min: 0, Max: 1, Doc: "compact when this share of the log is dirty"},
	{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", BrokerName: "log.cleaner.min.compaction.lag.ms", Min: 0, Max: math.MaxInt64, Doc: "compact a record only once it is this old (by its segment's or extent's newest timestamp)"},
	{Name: "max.compaction.lag.ms", Type: TypeLong, Default: "9223372036854775807", BrokerName: "log.cleaner.max.compaction.lag.ms", Min: 1, Max: math.MaxInt64, Doc: "compact a record at the latest once it is this old, whatever the dirty ratio (caps segment.ms on compacted topics)"},
	{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", BrokerName: "message.max.bytes", Min: 0, Max: math.MaxInt32, Doc: "largest record batch accepted"},
	{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", BrokerName: "log.message.timestamp.type", Allowed: []string{"CreateTime", "LogAppendTime"}, Doc: "use the producer's timestamps or the broker's append time"},
	{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: "9223372036854775807", BrokerName: "log.message.timestamp.before.max.ms", Min: 0, Max: math.MaxInt64,
		Doc: "CreateTime: refuse a record whose timestamp is more than this before the broker's clock (KIP-937; INVALID_TIMESTAMP)"},
	{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", BrokerName: "log.message.timestamp.after.max.ms", Min: 0, Max: math.MaxInt64,
		Doc: "CreateTime: refuse a record whose timestamp is more than this after the broker's clock (KIP-937; INVALID_TIMESTAMP)"},
	{Name: "min.insync.replicas", Type: TypeInt, Default: "1", BrokerName: "min.insync.replicas", Min: 1, Max: math.MaxInt32, Doc: "replicas that must have a record for acks=all"},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", BrokerName: "unclean.leader.election.enable", ClusterOnly: true,
		Doc: "elect a replica outside the majority once a majority of the replicas is not live (records only the lost replicas held are gone); set per topic or cluster-wide"},
	{Name: "compression.type", Type: TypeString, Default: "producer", BrokerName: "compression.type", Allowed: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}, Doc: "keep the producer's compression (producer), or store every batch with this codec, recompressing on append"},
	// KIP-390's levels, with Kafka's ranges (CompressionType.levelValidator): they apply when the
	// broker recompresses a batch for compression.type.
	{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", BrokerName: "compression.gzip.level", Min: -1, Max: 9, Check: checkGzipLevel,
		Doc: "the level of compression.type=gzip: 1 to 9, or -1 (the codec's default)"},
	{Name: "compression.lz4.level", Type: TypeInt, Default: "9", BrokerName: "compression.lz4.level", Min: 1, Max: 17,
		Doc: "the level of compression.type=lz4: 1 (fast) to 17 (high compression)"},
	{Name: "compression.zstd.level", Type: TypeInt, Default: "3", BrokerName: "compression.zstd.level", Min: -131072, Max: 22,
		Doc: "the level of compression.type=zstd: -131072 to 22"},
	{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", BrokerName: "log.roll.jitter.ms", Min: 0, Max: math.MaxInt64,
		Doc: "each segment rolls up to this much (at random, at most segment.ms) before segment.ms, so the partitions do not all roll at once"},
	// Kafka configs of mechanisms Runnel does not have: taken, validated and described as Kafka
	// does, without effect (docs/configuration.md says why for each).
	{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", BrokerName: "log.index.size.max.bytes", Min: 4, Max: math.MaxInt32,
		Doc: "Kafka's preallocated offset index size; no effect (Runnel's offset index has no fixed size)"},
	{Name: "preallocate", Type: TypeBoolean, Default: "false", BrokerName: "log.preallocate",
		Doc: "Kafka's whole-segment preallocation; no effect (Runnel preallocates space ahead of the appends of fast logs on its own)"},
	{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", BrokerName: "log.segment.delete.delay.ms", Min: 0, Max: math.MaxInt64,
		Doc: "Kafka's delay before a deleted segment's files are removed; no effect (Runnel removes them once no reader holds them)"},
	{Name: "remote.storage.enable", Type: TypeBoolean, Default: "false", Check: checkRemoteStorage,
		Doc: "Kafka's tiered storage; only false (Runnel has no tiered storage of Kafka's kind, as a Kafka broker with remote.log.storage.system.enable=false)"},
	{Name: "local.retention.ms", Type: TypeLong, Default: "-2", BrokerName: "log.local.retention.ms", Min: -2, Max: math.MaxInt64,
		Doc: "tiered storage's local retention (-2: retention.ms); no effect without tiered storage"},
	{Name: "local.retention.bytes", Type: TypeLong, Default: "-2", BrokerName: "log.local.retention.bytes", Min: -2, Max: math.MaxInt64,
		Doc: "tiered storage's local retention (-2: retention.bytes); no effect without tiered storage"},
	{Name: "remote.log.copy.disable", Type: TypeBoolean, Default: "false",
		Doc: "tiered storage: stop copying to remote storage; no effect without tiered storage"},
	{Name: "remote.log.delete.on.disable", Type: TypeBoolean, Default: "false",
		Doc: "tiered storage: delete remote data when it is turned off; no effect without tiered storage"},
	{Name: "write.caching", Type: TypeBoolean, Default: "false", BrokerName: "write_caching_default", Doc: "acks=all waits for the page cache (true) or an fsync (false); write_caching_default=disabled forces false on every topic",
		Overrides: map[string]string{"disabled": "false"}},
	{Name: "flush.ms", Type: TypeLong, Default: "100", BrokerName: "log.flush.interval.ms", Min: 0, Max: math.MaxInt64, Doc: "sync unsynced data at least this often (bounds what write caching can lose)"},
	{Name: "flush.bytes", Type: TypeLong, Default: "262144", BrokerName: "flush.bytes", Min: 0, Max: math.MaxInt64, Doc: "sync once this many bytes are unsynced"},
	{Name: "flush.messages", Type: TypeLong, Default: "9223372036854775807", BrokerName: "log.flush.interval.messages", Min: 1, Max: math.MaxInt64, Doc: "sync once this many records are unsynced"},
	{Name: "producer.id.expiration.ms", BrokerName: "producer.id.expiration.ms", BrokerOnly: true, Type: TypeInt, Default: "86400000", Min: 1, Max: math.MaxInt32,
		Doc: "forget an idempotent producer this long after its last batch"},
	{Name: "transaction.max.timeout.ms", BrokerName: "transaction.max.timeout.ms", BrokerOnly: true, Type: TypeInt, Default: "900000", Min: 1, Max: math.MaxInt32,
		Doc: "the longest transaction.timeout.ms a producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT beyond it)"},
	{Name: "transactional.id.expiration.ms", BrokerName: "transactional.id.expiration.ms", BrokerOnly: true, Type: TypeInt, Default: "604800000", Min: 1, Max: math.MaxInt32,
		Doc: "forget a transactional id this long after its last transaction completed"},
	{Name: "leader.replication.throttled.rate", BrokerName: "leader.replication.throttled.rate", BrokerOnly: true, Type: TypeLong, Default: "9223372036854775807", Min: 0, Max: math.MaxInt64,
		Doc: "bytes/s this node sends, as leader, to the out-of-sync followers of the replicas listed in leader.replication.throttled.replicas (replication quota)"},
	{Name: "follower.replication.throttled.rate", BrokerName: "follower.replication.throttled.rate", BrokerOnly: true, Type: TypeLong, Default: "9223372036854775807", Min: 0, Max: math.MaxInt64,
		Doc: "bytes/s this node receives, as an out-of-sync follower, of the replicas listed in follower.replication.throttled.replicas (each leader holds its sends to it to this rate)"},
	{Name: "max.connections", BrokerName: "max.connections", BrokerOnly: true, Type: TypeInt, Default: "2147483647", Min: 1, Max: math.MaxInt32,
		Doc: "Kafka connections this node keeps open; at the limit its listeners accept no more until one closes (KIP-402)"},
	{Name: "max.connection.creation.rate", BrokerName: "max.connection.creation.rate", BrokerOnly: true, Type: TypeInt, Default: "2147483647", Min: 1, Max: math.MaxInt32,
		Doc: "new Kafka connections per second this node accepts; over it, accepting waits until the rate is back within it (KIP-612)"},
	{Name: "max.connections.per.ip", BrokerName: "max.connections.per.ip", BrokerOnly: true, Type: TypeInt, Default: "2147483647", Min: 0, Max: math.MaxInt32,
		Doc: "Kafka connections this node keeps open from one client IP; one more is closed at once (KIP-402)"},
	{Name: "max.connections.per.ip.overrides", BrokerName: "max.connections.per.ip.overrides", BrokerOnly: true, Type: TypeString, Default: "", Check: CheckConnectionOverrides,
		Doc: "per-IP exceptions to max.connections.per.ip: ip:count pairs, comma-separated"},
	{Name: "quota.window.num", BrokerName: "quota.window.num", BrokerOnly: true, Type: TypeInt, Default: "11", Min: 1, Max: 3600,
		Doc: "samples a client quota's rate (and max.connection.creation.rate) is measured over; a change starts the rates afresh"},
	{Name: "quota.window.size.seconds", BrokerName: "quota.window.size.seconds", BrokerOnly: true, Type: TypeInt, Default: "1", Min: 1, Max: 86400,
		Doc: "seconds each of those samples spans; a request or connection quota holds a client at most one of them"},
	{Name: "controller.quota.window.num", BrokerName: "controller.quota.window.num", BrokerOnly: true, Type: TypeInt, Default: "11", Min: 1, Max: 3600,
		Doc: "controller_mutation_rate: its bucket holds this many windows of the quota (KIP-599's burst)"},
	{Name: "controller.quota.window.size.seconds", BrokerName: "controller.quota.window.size.seconds", BrokerOnly: true, Type: TypeInt, Default: "1", Min: 1, Max: 86400,
		Doc: "controller_mutation_rate: seconds each of those windows spans"},
	{Name: "runnel.command.level.auto", BrokerName: "runnel.command.level.auto", BrokerOnly: true, ClusterOnly: true, Type: TypeBoolean, Default: "true",
		Doc: "the active controller raises the command level once every node runs a version that applies it; false: an operator raises it (kafka-features upgrade --feature runnel.command.level=N)"},
	{Name: "runnel.default.storage", BrokerName: "runnel.default.storage", BrokerOnly: true, Type: TypeString, Default: "local", Allowed: []string{"local", "object"},
		Doc: "the runnel.storage of topics created without one (it does not move existing topics)"},
	{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "", Check: CheckThrottledReplicas,
		Doc: "partition:broker pairs (or *) whose leader's sends to out-of-sync followers are held to the leader's leader.replication.throttled.rate"},
	{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "", Check: CheckThrottledReplicas,
		Doc: "partition:broker pairs (or *) of followers that, while out of sync, are sent at most their broker's follower.replication.throttled.rate"},
	{Name: "runnel.storage", Type: TypeString, Default: "local", Allowed: []string{"local", "object"},
		Doc: "local: replicated segment logs on the nodes; object: files in the object store, any node serves any partition (fixed when the topic is created)"},
	{Name: "runnel.sequencing", Type: TypeString, Default: "eager", Allowed: []string{"eager", "lazy"},
		Doc: "object topics: eager acknowledges a produce with its offsets once committed; lazy acknowledges once the file is written (offset -1), sequencing right after"},
	{Name: "runnel.ordering", Type: TypeString, Default: "partition", Allowed: []string{"partition", "total"},
		Doc: "partition: order within each partition; total: the partitions are the shards of one totally ordered log with speculative delivery (docs/speclog.md; fixed when the topic is created)"},
	{Name: "runnel.order.window.cuts", Type: TypeInt, Default: "100", Min: 2, Max: 100000,
		Doc: "total order: cuts per window W, the speculation lease (fixed at creation)"},
	{Name: "runnel.order.interval.us", Type: TypeInt, Default: "1000", Min: 100, Max: 10000000,
		Doc: "total order: T_ord, the target interval between a shard's reports, in microseconds (fixed at creation)"},
	{Name: "runnel.order.initial.quota", Type: TypeInt, Default: "10", Min: 1, Max: 65536,
		Doc: "total order: a shard's positions per cut in its first window (fixed at creation)"},
	{Name: "runnel.order.lag.fix.cuts", Type: TypeInt, Default: "3", Min: 1, Max: 100000,
		Doc: "total order: cuts behind the most advanced shard that get a shard signalled to report at once (fixed at creation)"},
	{Name: "runnel.order.drain.cuts", Type: TypeInt, Default: "4", Min: 0, Max: 100000,
		Doc: "total order: a shard whose records waiting for slots exceed this many cuts of its quota reports them all at once (the others fill the cuts between with no-ops); 0 never (fixed at creation)"},
	{Name: "runnel.order.fail.ms", Type: TypeInt, Default: "50", Min: 1, Max: 3600000,
		Doc: "total order: a signalled shard that has not caught up after this long is declared failed (fixed at creation)"},
	{Name: "runnel.order.takeover.ms", Type: TypeInt, Default: "5000", Min: 0, Max: 3600000,
		Doc: "total order: a lagging shard with a replica on another live node waits this long for a replica to take it over (no view change) before it is declared failed; 0: failed after runnel.order.fail.ms like any other (fixed at creation)"},
	{Name: "runnel.order.stagger.from", Type: TypeInt, Default: "6", Min: 0, Max: 1000000,
		Doc: "total order: staggered cuts (two groups) from this many shards on; 0 never (fixed at creation)"},
	{Name: "runnel.order.idle.ms", Type: TypeInt, Default: "50", Min: 0, Max: 3600000,
		Doc: "total order: a shard with no records of its own for twice this long pads a cut only this often, and is signalled as soon as another shard is a cut ahead, so an idle topic costs a cut per this interval instead of one per 1.5 T_ord; 0: the paper's pace always (fixed at creation)"},
}

var defsByName = func() map[string]*ConfigDef {
	m := map[string]*ConfigDef{}
	for i := range defs {
		if !defs[i].BrokerOnly {
			m[defs[i].Name] = &defs[i]
		}
	}
	return m
}()

// Defs returns every topic config definition, sorted by name. The caller must not modify them.
func Defs() []ConfigDef {
	var out []ConfigDef
	for _, d := range defs {
		if !d.BrokerOnly {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BrokerDefs returns the definition of every dynamic broker config (those that set a topic
// config's default and the broker-only ones), sorted by broker config name.
func BrokerDefs() []ConfigDef {
	var out []ConfigDef
	for _, d := range defs {
		if d.BrokerName != "" {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerName < out[j].BrokerName })
	return out
}

// LookupDef returns the definition of a topic config.
func LookupDef(name string) (*ConfigDef, bool) {
	d, ok := defsByName[name]
	return d, ok
}

// NormalizeValue is the form a config value given by a client is stored in: a boolean's
// (topic or broker config name) trimmed and in lower case, as Kafka's ConfigDef parses
// booleans ("TRUE" is true); any other value as given. Every reader compares "true" exactly.
func NormalizeValue(name, value string) string {
	d, ok := defsByName[name]
	if !ok {
		d, ok = LookupBrokerDef(name)
	}
	if ok && d.Type == TypeBoolean {
		return strings.ToLower(strings.TrimSpace(value))
	}
	return value
}

// ConfigError is an invalid config name or value (Kafka's INVALID_CONFIG).
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

func configErr(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// CheckConfig validates one topic config value.
func CheckConfig(name, value string) error {
	d, ok := defsByName[name]
	if !ok {
		return configErr("unknown topic config %q", name)
	}
	return checkValue(d, value)
}

func checkValue(d *ConfigDef, value string) error {
	name := d.Name
	switch d.Type {
	case TypeBoolean:
		if value != "true" && value != "false" {
			return configErr("%s: %q is not true or false", name, value)
		}
		if d.Check != nil {
			if err := d.Check(value); err != nil {
				return configErr("%s: %v", name, err)
			}
		}
	case TypeInt, TypeLong, TypeDouble:
		v, err := strconv.ParseFloat(value, 64)
		if d.Type != TypeDouble {
			var n int64
			n, err = strconv.ParseInt(value, 10, 64)
			v = float64(n)
		}
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return configErr("%s: %q is not a valid number", name, value)
		}
		if v < d.Min || v > d.Max {
			return configErr("%s: %s is outside [%v, %v]", name, value, d.Min, d.Max)
		}
		if d.Check != nil {
			if err := d.Check(value); err != nil {
				return configErr("%s: %v", name, err)
			}
		}
	case TypeString:
		if d.Check != nil {
			if err := d.Check(value); err != nil {
				return configErr("%s: %v", name, err)
			}
			return nil
		}
		if !contains(d.Allowed, value) {
			return configErr("%s: %q is not one of %s", name, value, strings.Join(d.Allowed, ", "))
		}
	case TypeList:
		if d.Check != nil {
			if err := d.Check(value); err != nil {
				return configErr("%s: %v", name, err)
			}
			return nil
		}
		if strings.TrimSpace(value) == "" {
			return nil // the empty list, which Kafka's ValidList.in allows (cleanup.policy: neither)
		}
		items := strings.Split(value, ",")
		for _, it := range items {
			if !contains(d.Allowed, strings.TrimSpace(it)) {
				return configErr("%s: %q is not one of %s", name, it, strings.Join(d.Allowed, ", "))
			}
		}
	}
	return nil
}

// checkGzipLevel refuses 0, which compression.gzip.level's range [-1, 9] holds but Kafka's
// validator does not: 1 to 9, or -1 for the codec's default.
func checkGzipLevel(value string) error {
	if n, _ := strconv.ParseInt(value, 10, 64); n == 0 {
		return fmt.Errorf("0 is not a level: 1 to 9, or -1 (the default)")
	}
	return nil
}

// checkRemoteStorage refuses remote.storage.enable=true with the message of a Kafka broker whose
// remote.log.storage.system.enable is false: Runnel has no tiered storage of Kafka's kind.
func checkRemoteStorage(value string) error {
	if value == "true" {
		return fmt.Errorf("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Effective returns a config's value for the topic: its own if set, else the dynamic broker
// default, else the static default; isDefault is true unless the topic sets it.
func (t *Topic) Effective(name string) (value string, isDefault bool) {
	v, src := t.EffectiveSource(name)
	return v, src != SourceTopic
}

// EffectiveSource is Effective with the value's source.
func (t *Topic) EffectiveSource(name string) (string, Source) {
	return effectiveIn(t.Configs, name, t.defaults)
}

// CompressionLevel is the level a batch recompressed for compression.type=compressionType is
// compressed at: the effective compression.<type>.level of gzip, lz4 and zstd (KIP-390), else 0
// (snappy and uncompressed have none). For batch.RecompressLevel.
func (t *Topic) CompressionLevel(compressionType string) int {
	switch compressionType {
	case "gzip", "lz4", "zstd":
		v, _ := t.Effective("compression." + compressionType + ".level")
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}

// EffectiveIn is Effective for a candidate set of topic configs (an update being checked).
func (t *Topic) EffectiveIn(set map[string]string, name string) (string, bool) {
	v, src := effectiveIn(set, name, t.defaults)
	return v, src != SourceTopic
}

func effectiveIn(set map[string]string, name string, d *defaults) (string, Source) {
	if name == "cleanup.policy" && set["runnel.ordering"] == "total" {
		// A total-order topic is never compacted (its offsets are the shard's slots, and a slot
		// compaction emptied would read as a no-op): its own cleanup.policy can only be delete,
		// and a cluster's or broker's default of compact does not reach it.
		if v, ok := set[name]; ok {
			return v, SourceTopic
		}
		return "delete", SourceDefault
	}
	def := defsByName[name]
	if def == nil { // a broker-only setting (producer.id.expiration.ms): the cluster's value
		if def = defsByBrokerName[name]; def == nil || !def.BrokerOnly {
			return "", SourceDefault
		}
		if d == nil {
			return def.Default, SourceDefault
		}
		return d.lookup(def)
	}
	if d != nil && def.Overrides != nil { // a broker-level override beats the topic's value
		if v, src := d.lookup(def); src != SourceDefault {
			if o, ok := def.Overrides[v]; ok {
				return o, src
			}
		}
	}
	if v, ok := set[name]; ok {
		return v, SourceTopic
	}
	if d == nil {
		return def.Default, SourceDefault
	}
	return d.lookup(def)
}

func num(set map[string]string, name string, d *defaults) int64 {
	v, _ := effectiveIn(set, name, d)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// logConfig turns topic configs, over the given defaults, into the log store's configuration.
func logConfig(set map[string]string, d *defaults) logstore.Config {
	c := logstore.DefaultConfig()
	c.SegmentBytes = num(set, "segment.bytes", d)
	c.SegmentMs = time.Duration(num(set, "segment.ms", d)) * time.Millisecond
	c.SegmentJitter = time.Duration(min(num(set, "segment.jitter.ms", d), math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
	c.IndexIntervalBytes = int(num(set, "index.interval.bytes", d))
	c.RetentionMs = time.Duration(num(set, "retention.ms", d)) * time.Millisecond
	if num(set, "retention.ms", d) < 0 {
		c.RetentionMs = -1
	}
	c.RetentionBytes = num(set, "retention.bytes", d)
	policy, _ := effectiveIn(set, "cleanup.policy", d)
	c.Delete = strings.Contains(policy, "delete")
	c.Compact = strings.Contains(policy, "compact")
	c.DeleteRetentionMs = time.Duration(num(set, "delete.retention.ms", d)) * time.Millisecond
	ratio, _ := effectiveIn(set, "min.cleanable.dirty.ratio", d)
	c.MinCleanableDirtyRatio, _ = strconv.ParseFloat(ratio, 64)
	c.MinCompactionLagMs = num(set, "min.compaction.lag.ms", d)
	c.MaxCompactionLagMs = num(set, "max.compaction.lag.ms", d)
	if c.Compact && c.MaxCompactionLagMs < c.SegmentMs.Milliseconds() { // as Kafka: the active segment rolls in time
		c.SegmentMs = time.Duration(c.MaxCompactionLagMs) * time.Millisecond
	}
	c.FlushInterval = time.Duration(num(set, "flush.ms", d)) * time.Millisecond
	c.FlushBytes = num(set, "flush.bytes", d)
	c.FlushMessages = num(set, "flush.messages", d)
	caching, _ := effectiveIn(set, "write.caching", d)
	c.WriteCaching = caching == "true"
	if d != nil {
		v, _ := d.lookup(defsByBrokerName["producer.id.expiration.ms"])
		ms, _ := strconv.ParseInt(v, 10, 64)
		c.ProducerIDExpiration = time.Duration(ms) * time.Millisecond
	}
	return c
}

// ThrottledReplicas is a parsed leader/follower.replication.throttled.replicas value: every
// replica (All), or partition → the brokers listed for it.
type ThrottledReplicas struct {
	All      bool
	Replicas map[int32][]int32
}

// Has reports whether the replica of partition on broker is listed.
func (t ThrottledReplicas) Has(partition, broker int32) bool {
	return t.All || slices.Contains(t.Replicas[partition], broker)
}

// ParseThrottledReplicas parses Kafka's throttled replica list: "" (none), "*" (all), or
// comma-separated partition:broker pairs, blanks around them allowed.
func ParseThrottledReplicas(value string) (ThrottledReplicas, error) {
	var t ThrottledReplicas
	if strings.TrimSpace(value) == "" {
		return t, nil
	}
	if strings.TrimSpace(value) == "*" {
		t.All = true
		return t, nil
	}
	t.Replicas = map[int32][]int32{}
	for _, item := range strings.Split(value, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		pi, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if !ok || err1 != nil || err2 != nil || pi < 0 || bi < 0 {
			return ThrottledReplicas{}, fmt.Errorf("%q is not partition:broker (the list is * or partition:broker pairs separated by commas)", strings.TrimSpace(item))
		}
		t.Replicas[int32(pi)] = append(t.Replicas[int32(pi)], int32(bi))
	}
	return t, nil
}

// CheckThrottledReplicas validates a throttled replica list.
func CheckThrottledReplicas(value string) error {
	_, err := ParseThrottledReplicas(value)
	return err
}

// ParseConnectionOverrides reads max.connections.per.ip.overrides: comma-separated ip:count
// pairs (an IPv6 address in brackets or bare, as Kafka takes it), keyed by the canonical IP.
func ParseConnectionOverrides(value string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return nil, fmt.Errorf("%q is not ip:count", item)
		}
		addr, err := netip.ParseAddr(strings.Trim(item[:i], "[]"))
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not an IP address", item, item[:i])
		}
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: %q is not a count", item, item[i+1:])
		}
		out[addr.Unmap().String()] = n
	}
	return out, nil
}

// CheckConnectionOverrides validates max.connections.per.ip.overrides.
func CheckConnectionOverrides(value string) error {
	_, err := ParseConnectionOverrides(value)
	return err
}
