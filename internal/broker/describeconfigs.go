package broker

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.DescribeConfigs, 0, 4, handleDescribeConfigs) }

// topicConfigSource is a topic config's source: set on the topic, or the default.
func topicConfigSource(isDefault bool) kmsg.ConfigSource {
	if isDefault {
		return kmsg.ConfigSourceDefaultConfig
	}
	return kmsg.ConfigSourceDynamicTopicConfig
}

// brokerConfig is one (read-only) broker config, as DescribeConfigs shows it.
type brokerConfig struct {
	name, value string
	typ         topics.ConfigType
	source      kmsg.ConfigSource
	doc         string
}

// brokerConfigs is the fixed set of broker configs Runnel exposes: from the broker's
// configuration where it has them, else the defaults behind the topic configs.
func (b *Broker) brokerConfigs() []brokerConfig {
	static := kmsg.ConfigSourceStaticBrokerConfig
	out := []brokerConfig{
		{"broker.id", strconv.Itoa(int(b.cfg.NodeID)), topics.TypeInt, static, "the node id of this broker"},
		{"auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), topics.TypeBoolean, static, "create a topic when metadata asks for an unknown one"},
		{"num.partitions", strconv.Itoa(int(b.cfg.DefaultPartitions)), topics.TypeInt, static, "the default number of partitions of a new topic"},
		{"socket.request.max.bytes", strconv.Itoa(int(b.cfg.MaxRequestBytes)), topics.TypeInt, static, "the largest request accepted; larger ones close the connection"},
	}
	for _, name := range []string{"message.max.bytes", "log.retention.ms", "log.segment.bytes", "log.cleanup.policy", "write_caching_default"} {
		for _, d := range topics.Defs() {
			if d.BrokerName == name {
				out = append(out, brokerConfig{name, d.Default, d.Type, kmsg.ConfigSourceDefaultConfig, "the default of the topic config " + d.Name + ": " + d.Doc})
			}
		}
	}
	return out
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
		var aerr *adminError
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			var t *topics.Topic
			if t, aerr = b.lookupTopicResource(rr.ResourceName); aerr != nil {
				break
			}
			for _, d := range topics.Defs() {
				if !wanted(d.Name) {
					continue
				}
				v, isDefault := topics.Effective(t.Configs, d.Name)
				c := entry(d.Name, v, d.Type, topicConfigSource(isDefault), false, d.Doc)
				if !synonyms {
					continue
				}
				if !isDefault {
					c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
						Name: d.Name, Value: strp(v), Source: kmsg.ConfigSourceDynamicTopicConfig})
				}
				if d.BrokerName != "" {
					c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
						Name: d.BrokerName, Value: strp(d.Default), Source: kmsg.ConfigSourceDefaultConfig})
				}
			}
		case kmsg.ConfigResourceTypeBroker:
			var perBroker bool
			if perBroker, aerr = b.checkBrokerResource(rr.ResourceName); aerr != nil || !perBroker {
				break // "" describes the dynamic cluster-wide defaults, of which there are none
			}
			for _, bc := range b.brokerConfigs() {
				if !wanted(bc.name) {
					continue
				}
				c := entry(bc.name, bc.value, bc.typ, bc.source, true, bc.doc)
				if synonyms {
					c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
						Name: bc.name, Value: strp(bc.value), Source: bc.source})
				}
			}
		default:
			aerr = adminErr(kerr.InvalidRequest, "Unsupported resource type: %s", rr.ResourceType)
		}
		if aerr != nil {
			sr.ErrorCode, sr.ErrorMessage, sr.Configs = aerr.code.Code, &aerr.msg, nil
		}
		if sr.Configs == nil {
			sr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{resp: resp}
}
