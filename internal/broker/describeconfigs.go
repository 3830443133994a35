package broker

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.DescribeConfigs, 0, 4, handleDescribeConfigs) }

// brokerConfig is one broker config, as DescribeConfigs shows it.
type brokerConfig struct {
	name, value string
	typ         topics.ConfigType
	source      kmsg.ConfigSource
	readOnly    bool
	doc         string
	null        bool // no value (Kafka's null default), value unused
	// def is a static config's default, its DEFAULT_CONFIG synonym below a STATIC_BROKER_CONFIG
	// value; hasDef tells a default "" from none.
	def    string
	hasDef bool
}

// brokerConfigs lists the broker configs: for this node (perBroker), the static ones from its
// configuration and every dynamic one (the broker-level defaults of topic configs) with its
// effective value; for the cluster-wide entity (""), the dynamic defaults that are set.
func (b *Broker) brokerConfigs(perBroker bool) []brokerConfig {
	cluster, own := b.topics.BrokerConfigs(false), b.topics.BrokerConfigs(true)
	if !perBroker {
		var out []brokerConfig
		for _, name := range slices.Sorted(maps.Keys(cluster)) {
			d, _ := topics.LookupBrokerDef(name)
			out = append(out, brokerConfig{name: name, value: cluster[name], typ: d.Type, source: kmsg.ConfigSourceDynamicDefaultBrokerConfig,
				doc: "the default of the topic config " + d.Name + ": " + d.Doc})
		}
		return out
	}
	// A static config is STATIC_BROKER_CONFIG when given (a flag, its environment variable or
	// the config file: Config.GivenConfigs) or set to another value than its default, as
	// Kafka's are when server.properties names them; else DEFAULT_CONFIG.
	static := func(name, value, def string, typ topics.ConfigType, doc string) brokerConfig {
		c := brokerConfig{name: name, value: value, typ: typ, source: kmsg.ConfigSourceDefaultConfig, readOnly: true, doc: doc}
		if b.cfg.GivenConfigs[name] || value != def {
			c.source, c.def, c.hasDef = kmsg.ConfigSourceStaticBrokerConfig, def, true
		}
		return c
	}
	// A replication factor left automatic (0) is described as what it is now (3 once three
	// nodes are registered, else 1), a default: a tool reading it gets one CreateTopics takes.
	rf := func(name string, set int16, doc string) brokerConfig {
		typ := topics.TypeShort // Kafka's types: default.replication.factor an INT, the others SHORTs
		if name == "default.replication.factor" {
			typ = topics.TypeInt
		}
		auto := strconv.Itoa(int(b.autoReplicationFactor()))
		if set > 0 {
			c := static(name, strconv.Itoa(int(set)), auto, typ, doc)
			c.source, c.def, c.hasDef = kmsg.ConfigSourceStaticBrokerConfig, auto, true // given, whatever its value
			return c
		}
		return static(name, auto, auto, typ, doc+" (automatic: 3 once three nodes are registered, else 1)")
	}
	itoa := func(v int32) string { return strconv.Itoa(int(v)) }
	// An agent has no SpecLog service ("") unless given one: its default.
	specLog, specLogDefault := b.cl.SpecLogAddr(b.cfg.NodeID), DefaultSpecLogAddr
	if specLog == "" {
		specLogDefault = ""
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	out := []brokerConfig{
		// The node id, always given (Kafka's node.id is required in KRaft, and broker.id, whose
		// default is -1, follows it).
		{name: "broker.id", value: itoa(b.cfg.NodeID), typ: topics.TypeInt, source: kmsg.ConfigSourceStaticBrokerConfig, readOnly: true,
			doc: "the node id of this broker", def: "-1", hasDef: true},
		{name: "node.id", value: itoa(b.cfg.NodeID), typ: topics.TypeInt, source: kmsg.ConfigSourceStaticBrokerConfig, readOnly: true,
			doc: "the node id of this node"},
		static("auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), "true", topics.TypeBoolean, "create a topic when metadata asks for an unknown one"),
		static("delete.topic.enable", strconv.FormatBool(!b.cfg.NoTopicDeletion), "true", topics.TypeBoolean, "let DeleteTopics delete topics (false: TOPIC_DELETION_DISABLED)"),
		static("num.partitions", itoa(b.cfg.DefaultPartitions), "1", topics.TypeInt, "the default number of partitions of a new topic"),
		rf("default.replication.factor", b.cfg.DefaultReplicationFactor, "the replication factor of a topic created without one"),
		rf("offsets.topic.replication.factor", b.cfg.OffsetsReplicationFactor, "the replication factor __consumer_offsets is created with"),
		static("offsets.topic.num.partitions", itoa(b.cfg.OffsetsTopicPartitions), "50", topics.TypeInt, "the partitions __consumer_offsets is created with (once it exists, groups are mapped over its own count)"),
		static("transaction.state.log.num.partitions", itoa(b.cfg.TxnStatePartitions), "50", topics.TypeInt, "the partitions __transaction_state is created with (once it exists, transactional ids are mapped over its own count)"),
		rf("transaction.state.log.replication.factor", b.cfg.TxnStateReplicationFactor, "the replication factor __transaction_state is created with"),
		static("socket.request.max.bytes", itoa(b.cfg.MaxRequestBytes), itoa(defaultMaxRequestBytes), topics.TypeInt, "the largest request accepted; larger ones close the connection"),
		static("fetch.max.bytes", itoa(b.cfg.FetchMaxBytes), itoa(defaultFetchMaxBytes), topics.TypeInt, "the most record bytes a fetch response carries whatever the client asks (its first batch always goes)"),
		static("replica.lag.time.max.ms", ms(b.cfg.ReplicaLagTimeMax), "30000", topics.TypeLong, "a follower not caught up with its leader for this long leaves the ISR"),
		static("runnel.speclog.addr", specLog, specLogDefault, topics.TypeString, "the node's SpecLog gRPC address for total-order topics (\"\": none)"),
		// The group coordinator's, as tools read them (Kafka's defaults; the initial delay is
		// --group-initial-rebalance-delay).
		static("offsets.retention.minutes", strconv.FormatInt(int64(b.cfg.Groups.OffsetsRetention/time.Minute), 10), "10080", topics.TypeInt,
			"how long a group's committed offsets are kept once it is empty (KIP-211)"),
		static("group.initial.rebalance.delay.ms", ms(b.cfg.Groups.InitialRebalanceDelay), "3000", topics.TypeInt,
			"how long a classic group a member joins empty waits for more members before its first rebalance"),
		static("group.min.session.timeout.ms", ms(b.cfg.Groups.MinSessionTimeout), "6000", topics.TypeInt, "the shortest session timeout a classic group member may ask for"),
		static("group.max.session.timeout.ms", ms(b.cfg.Groups.MaxSessionTimeout), "1800000", topics.TypeInt, "the longest session timeout a classic group member may ask for"),
		static("offset.metadata.max.bytes", strconv.Itoa(b.cfg.Groups.MaxMetadataBytes), "4096", topics.TypeInt, "the longest metadata an offset commit may carry"),
	}
	// The configs whose defaults give those of the broker configs without one (Kafka's hours
	// and scheduler configs; read-only, as in Kafka, where they are not dynamic), and
	// log.retention.minutes, unset between the two.
	def := kmsg.ConfigSourceDefaultConfig
	for name, fb := range brokerNamesWithoutDefault {
		out = append(out, brokerConfig{name: fb.name, value: fb.value, typ: fb.typ, source: def, readOnly: true, doc: "the default of " + name + " while it is unset"})
	}
	out = append(out, brokerConfig{name: "log.retention.minutes", typ: topics.TypeInt, source: def, readOnly: true,
		doc: "the default of retention.ms, in minutes (unset: log.retention.hours)", null: true})
	for _, d := range topics.BrokerDefs() {
		value, source := d.Default, kmsg.ConfigSourceDefaultConfig
		_, null := brokerNamesWithoutDefault[d.BrokerName] // Kafka's default is null (the fallback's gives it)
		if v, ok := cluster[d.BrokerName]; ok {
			value, source, null = v, kmsg.ConfigSourceDynamicDefaultBrokerConfig, false
		}
		if v, ok := own[d.BrokerName]; ok {
			value, source, null = v, kmsg.ConfigSourceDynamicBrokerConfig, false
		}
		doc := "the default of the topic config " + d.Name + ": " + d.Doc
		if d.BrokerOnly {
			doc = d.Doc
		}
		out = append(out, brokerConfig{name: d.BrokerName, value: value, typ: d.Type, source: source, doc: doc, null: null})
	}
	slices.SortFunc(out, func(x, y brokerConfig) int { return strings.Compare(x.name, y.name) })
	return out
}

// configSynonyms lists where a topic config's value can come from, highest precedence first:
// the topic (if set in topicSet), this broker's dynamic config, the cluster-wide dynamic
// default, the static default.
func (b *Broker) configSynonyms(d *topics.ConfigDef, topicSet map[string]string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	type syn = kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	var out []syn
	if v, ok := topicSet[d.Name]; ok {
		out = append(out, syn{Name: d.Name, Value: strp(v), Source: kmsg.ConfigSourceDynamicTopicConfig})
	}
	if d.BrokerName == "" {
		return out
	}
	if v, ok := b.topics.BrokerConfigs(true)[d.BrokerName]; ok {
		out = append(out, syn{Name: d.BrokerName, Value: strp(v), Source: kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if v, ok := b.topics.BrokerConfigs(false)[d.BrokerName]; ok {
		out = append(out, syn{Name: d.BrokerName, Value: strp(v), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	if fallback, ok := brokerNamesWithoutDefault[d.BrokerName]; ok {
		// Kafka's broker config of that name has no default: its fallback's default gives it.
		// ConfigHelper.configSynonyms lists the synonyms level by level (dynamic per broker,
		// dynamic default, static, default) from the first of the config's own name on: none
		// while it is set nowhere, else the fallback's default after it.
		if len(out) > 0 && out[len(out)-1].Name == d.BrokerName {
			out = append(out, syn{Name: fallback.name, Value: strp(fallback.value), Source: kmsg.ConfigSourceDefaultConfig})
		}
		return out
	}
	return append(out, syn{Name: d.BrokerName, Value: strp(d.Default), Source: kmsg.ConfigSourceDefaultConfig})
}

// brokerNamesWithoutDefault are the broker configs that set topic configs' defaults in Kafka but
// have no default of their own, each with the config whose default gives it.
var brokerNamesWithoutDefault = map[string]struct {
	name, value string
	typ         topics.ConfigType
}{
	"log.retention.ms":      {"log.retention.hours", "168", topics.TypeInt},
	"log.roll.ms":           {"log.roll.hours", "168", topics.TypeInt},
	"log.roll.jitter.ms":    {"log.roll.jitter.hours", "0", topics.TypeInt},
	"log.flush.interval.ms": {"log.flush.scheduler.interval.ms", "9223372036854775807", topics.TypeLong},
}

// checkBrokerResource checks a BROKER config resource's name: "" (the cluster-wide dynamic
// defaults) or this node's id. It reports whether the name is this node.
func (b *Broker) checkBrokerResource(name string) (perBroker bool, _ *adminError) {
	if name == "" {
		return false, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return false, adminErr(kerr.InvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.cfg.NodeID {
		return false, adminErr(kerr.InvalidRequest, "Unexpected broker id, expected %d or empty string, but received %s", b.cfg.NodeID, name)
	}
	return true, nil
}

// lookupAlteredTopicResource resolves a TOPIC config resource to alter: "" (the cluster's
// default topic, which Kafka has no configs for) is INVALID_REQUEST, as Kafka's
// ControllerConfigurationValidator answers it.
func (b *Broker) lookupAlteredTopicResource(name string) (*topics.Topic, *adminError) {
	if name == "" {
		return nil, adminErr(kerr.InvalidRequest, "Default topic resources are not allowed.")
	}
	return b.lookupTopicResource(name)
}

// lookupTopicResource resolves a TOPIC config resource.
func (b *Broker) lookupTopicResource(name string) (*topics.Topic, *adminError) {
	if err := topics.ValidateName(name); err != nil {
		return nil, adminErr(kerr.InvalidTopicException, "%v", err)
	}
	t, ok := b.topics.Get(name)
	if !ok {
		return nil, adminErr(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
	}
	return t, nil
}

func handleDescribeConfigs(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	b := r.conn.b
	synonyms := req.Version >= 1 && req.IncludeSynonyms
	docs := req.Version >= 3 && req.IncludeDocumentation
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		wanted := func(name string) bool {
			if len(rr.ConfigNames) == 0 { // null (or empty): every config
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		entry := func(name, value string, typ topics.ConfigType, source kmsg.ConfigSource, readOnly bool, doc string) *kmsg.DescribeConfigsResponseResourceConfig {
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly, c.Source = name, strp(value), readOnly, source
			c.IsDefault = source == kmsg.ConfigSourceDefaultConfig
			c.ConfigType = kmsg.ConfigType(typ)
			if docs {
				c.Documentation = strp(doc)
			}
			sr.Configs = append(sr.Configs, c)
			return &sr.Configs[len(sr.Configs)-1]
		}
		aerr := r.configAuthz(rr.ResourceType, rr.ResourceName, kmsg.ACLOperationDescribeConfigs)
		switch {
		case aerr != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			var t *topics.Topic
			if t, aerr = b.lookupTopicResource(rr.ResourceName); aerr != nil {
				break
			}
			for _, d := range topics.Defs() {
				if !wanted(d.Name) {
					continue
				}
				v, src := t.EffectiveSource(d.Name)
				c := entry(d.Name, v, d.Type, kmsg.ConfigSource(src), false, d.Doc)
				if synonyms { // in precedence order, as Kafka lists them
					c.ConfigSynonyms = b.configSynonyms(&d, t.Configs)
				}
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			var perBroker bool
			if perBroker, aerr = b.checkBrokerResource(rr.ResourceName); aerr != nil {
				break
			}
			for _, bc := range b.brokerConfigs(perBroker) {
				if !wanted(bc.name) {
					continue
				}
				c := entry(bc.name, bc.value, bc.typ, bc.source, bc.readOnly, bc.doc)
				if bc.null {
					c.Value = nil
				}
				if synonyms {
					if d, ok := topics.LookupBrokerDef(bc.name); ok && perBroker {
						c.ConfigSynonyms = b.configSynonyms(d, nil)
					} else if !bc.null {
						type syn = kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
						c.ConfigSynonyms = append(c.ConfigSynonyms, syn{Name: bc.name, Value: strp(bc.value), Source: bc.source})
						if bc.hasDef {
							c.ConfigSynonyms = append(c.ConfigSynonyms, syn{Name: bc.name, Value: strp(bc.def), Source: kmsg.ConfigSourceDefaultConfig})
						}
					}
				}
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeBrokerLogger:
			sr.Configs, aerr = b.describeLoggers(rr.ResourceName, wanted)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			if rr.ResourceName == "" {
				aerr = adminErr(kerr.InvalidRequest, "Group name must not be empty")
				break
			}
			values := b.cfg.Groups.Values(b.groupConfigs(rr.ResourceName))
			for _, d := range group.GroupConfigDefs {
				if !wanted(d.Name) {
					continue
				}
				v, typ, source := values[d.Name], topics.TypeString, kmsg.ConfigSourceDefaultConfig
				if d.Int {
					typ = topics.TypeInt
				}
				if v.Set {
					source = kmsg.ConfigSourceGroupConfig
				}
				c := entry(d.Name, v.Value, typ, source, false, d.Doc)
				if synonyms {
					c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
						Name: d.Name, Value: strp(v.Value), Source: source})
				}
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeClientMetrics:
			sr.Configs, aerr = b.describeClientMetrics(rr.ResourceName, wanted, docs, synonyms)
		default:
			aerr = adminErr(kerr.InvalidRequest, "Unsupported resource type: %s", rr.ResourceType)
		}
		if aerr != nil {
			sr.ErrorCode, sr.ErrorMessage, sr.Configs = aerr.code.Code, &aerr.msg, nil
		} else {
			sr.ErrorMessage = strp("") // as Kafka's, which leaves the field at its default
		}
		if sr.Configs == nil {
			sr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{resp: resp}
}
