package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicValidateOnly sends a validate-only CreateTopics of one topic with one config and
// returns the topic's error code and message.
func createTopicValidateOnly(t *testing.T, addr, topic, name, value string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis, req.ValidateOnly = 7, 10000, true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: name, Value: &value}}
	req.Topics = append(req.Topics, rt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.CreateTopicsResponse)
	return resp.Topics[0].ErrorCode, msg(resp.Topics[0].ErrorMessage)
}

// TestKafkaTopicConfigsAccepted: the topic configs of Kafka 4.1's LogConfig that Runnel used to
// refuse as unknown (INVALID_CONFIG "unknown topic config") are taken by CreateTopics and
// described with Kafka's defaults, as a Kafka 4.1.1 broker does; remote.storage.enable=true is
// refused as by a Kafka broker without tiered storage (remote.log.storage.system.enable=false).
func TestKafkaTopicConfigsAccepted(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "described", 1, nil)
	for _, c := range []struct{ name, value, def string }{
		{"compression.gzip.level", "5", "-1"},
		{"compression.lz4.level", "9", "9"},
		{"compression.zstd.level", "3", "3"},
		{"segment.jitter.ms", "1000", "0"},
		{"segment.index.bytes", "1048576", "10485760"},
		{"preallocate", "true", "false"},
		{"file.delete.delay.ms", "1000", "60000"},
		{"local.retention.ms", "-2", "-2"},
		{"local.retention.bytes", "-2", "-2"},
		{"remote.storage.enable", "false", "false"},
		{"remote.log.copy.disable", "false", "false"},
		{"remote.log.delete.on.disable", "false", "false"},
	} {
		if code, m := createTopicValidateOnly(t, addr, "kafka-cfg", c.name, c.value); code != 0 {
			t.Errorf("CreateTopics(validate only, %s=%s) = %s (%s); want no error, as Kafka 4.1.1", c.name, c.value, errName(code), m)
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "described", []string{c.name}
		req.Resources = append(req.Resources, res)
		resp := ctRoundTrip(t, addr, req).(*kmsg.DescribeConfigsResponse)
		if r := resp.Resources[0]; r.ErrorCode != 0 || len(r.Configs) != 1 || msg(r.Configs[0].Value) != c.def ||
			r.Configs[0].Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("DescribeConfigs(%s) = %s, %+v; want %q, DEFAULT_CONFIG", c.name, errName(r.ErrorCode), r.Configs, c.def)
		}
	}
	code, m := createTopicValidateOnly(t, addr, "kafka-cfg", "remote.storage.enable", "true")
	if code != kerr.InvalidConfig.Code {
		t.Errorf("CreateTopics(remote.storage.enable=true) = %s (%s); want INVALID_CONFIG (no tiered storage)", errName(code), m)
	}
}

// TestEmptyCleanupPolicyAccepted: an empty cleanup.policy (Kafka 4.1's KIP-1161: neither delete
// nor compact, records are kept) is taken from CreateTopics and left by an IncrementalAlterConfigs
// SUBTRACT of a topic's last policy, which then describes as "" DYNAMIC_TOPIC_CONFIG, as Kafka
// 4.1.1 does. Runnel used to refuse both: INVALID_CONFIG `cleanup.policy: "" is not one of
// delete, compact`.
func TestEmptyCleanupPolicyAccepted(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "policy", 1, map[string]string{"cleanup.policy": "compact"})

	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "policy"
	compact := "compact"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "cleanup.policy",
		Op: kmsg.IncrementalAlterConfigOpSubtract, Value: &compact}}
	iac.Resources = append(iac.Resources, res)
	got := ctRoundTrip(t, addr, iac).(*kmsg.IncrementalAlterConfigsResponse)
	if c := got.Resources[0].ErrorCode; c != 0 {
		t.Fatalf("IncrementalAlterConfigs(SUBTRACT cleanup.policy compact from [compact]) = %s (%s); want no error, as Kafka 4.1.1",
			errName(c), msg(got.Resources[0].ErrorMessage))
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName, dres.ConfigNames = kmsg.ConfigResourceTypeTopic, "policy", []string{"cleanup.policy"}
	dc.Resources = append(dc.Resources, dres)
	dresp := ctRoundTrip(t, addr, dc).(*kmsg.DescribeConfigsResponse)
	if r := dresp.Resources[0]; r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Value == nil || *r.Configs[0].Value != "" ||
		r.Configs[0].Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("DescribeConfigs(cleanup.policy) after the SUBTRACT = %s, %+v; want \"\" DYNAMIC_TOPIC_CONFIG", errName(r.ErrorCode), r.Configs)
	}

	if code, m := createTopicValidateOnly(t, addr, "policy2", "cleanup.policy", ""); code != 0 {
		t.Errorf("CreateTopics(cleanup.policy=\"\") = %s (%s); want no error, as Kafka 4.1.1", errName(code), m)
	}
}
