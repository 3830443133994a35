package broker

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Client-metrics subscriptions (ConfigResource CLIENT_METRICS, KIP-714): named sets of configs
// (metrics, interval.ms, match) kept in the controller's image, managed as Kafka manages them
// (kafka-client-metrics, kafka-configs --entity-type client-metrics). As in a Kafka broker with
// no client telemetry receiver plugin, clients are not asked for their metrics: the telemetry
// APIs (GetTelemetrySubscriptions, PushTelemetry) are not served, so clients never push.

// The client-metrics configs, as Kafka's ClientMetricsConfigs defines them.
var clientMetricsDefs = []topics.ConfigDef{
	{Name: "interval.ms", Type: topics.TypeInt, Default: "300000", Doc: "Metrics push interval in milliseconds"},
	{Name: "match", Type: topics.TypeList, Default: "", Doc: "Client match criteria"},
	{Name: "metrics", Type: topics.TypeList, Default: "", Doc: "Telemetry metric name prefix list"},
}

// clientMatchSelectors are the client attributes a subscription's match patterns may select on.
var clientMatchSelectors = []string{"client_instance_id", "client_id", "client_software_name",
	"client_software_version", "client_source_address", "client_source_port"}

func lookupClientMetricsDef(name string) (*topics.ConfigDef, bool) {
	for i := range clientMetricsDefs {
		if clientMetricsDefs[i].Name == name {
			return &clientMetricsDefs[i], true
		}
	}
	return nil, false
}

// checkClientMetrics validates a subscription's complete configs as Kafka's
// ClientMetricsConfigs.validate: the name is not empty, every config is known (INVALID_REQUEST
// otherwise), interval.ms is an integer (INVALID_CONFIG) from 100 ms to an hour
// (INVALID_REQUEST), and each match entry is selector=pattern with a known selector and a
// pattern that compiles (INVALID_CONFIG). Patterns are RE2 expressions (Go's regexp), where
// Kafka compiles them as java.util.regex ones.
func checkClientMetrics(name string, configs map[string]string) *adminError {
	if name == "" {
		return adminErr(kerr.InvalidRequest, "Subscription name can't be empty")
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		if _, ok := lookupClientMetricsDef(k); !ok {
			return adminErr(kerr.InvalidRequest, "Unknown client metrics configuration: %s", k)
		}
	}
	if v, ok := configs["interval.ms"]; ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return adminErr(kerr.InvalidConfig, "Invalid value %s for configuration interval.ms: Not a number of type INT", v)
		}
		if ms < 100 || ms > 3600000 {
			return adminErr(kerr.InvalidRequest, "Invalid value %d for interval.ms, interval must be between 100 and 3600000 (1 hour)", ms)
		}
	}
	if v, ok := configs["match"]; ok {
		for _, pattern := range configList(v) {
			if !validClientMatch(pattern) {
				return adminErr(kerr.InvalidConfig, "Illegal client matching pattern: %s", pattern)
			}
		}
	}
	return nil
}

// validClientMatch reports whether pattern is selector=regex, split at '=' as Java's
// String.split("=") splits it (trailing empty parts dropped: "client_id=a=" is client_id and
// a, "client_id=" nothing to match).
func validClientMatch(pattern string) bool {
	parts := strings.Split(pattern, "=")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) != 2 || !slices.Contains(clientMatchSelectors, strings.TrimSpace(parts[0])) {
		return false
	}
	_, err := regexp.Compile(strings.TrimSpace(parts[1]))
	return err == nil
}

// configList splits a LIST config's value as Kafka's ConfigDef parses one: empty is no items,
// else the items between commas, trimmed.
func configList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// clientMetrics returns a subscription's configs (nil: no such subscription).
func (b *Broker) clientMetrics(name string) map[string]string {
	return b.cl.Image().ClientMetrics[name]
}

// changeClientMetrics computes a subscription's new configs from its current ones with change,
// validates them and, unless validateOnly, has the controller set them (none left: the
// subscription is gone).
func (b *Broker) changeClientMetrics(name string, validateOnly bool, change func(configs, base map[string]string) *adminError) *adminError {
	return b.changeConfigs(func() map[string]string { return b.clientMetrics(name) },
		func(configs, base map[string]string) (*adminError, bool) {
			if aerr := checkClientMetrics(name, configs); aerr != nil {
				return aerr, false
			}
			if !b.awaitLevel(controller.LevelClientMetrics) {
				return adminErr(kerr.InvalidRequest, "Client metrics subscriptions need every node of the cluster at command level %d (now %d)",
					controller.LevelClientMetrics, b.cl.Image().Level), false
			}
			if validateOnly {
				return nil, false
			}
			res, aerr := b.propose(b.ctx, &controller.Command{Op: controller.OpSetClientMetrics,
				SetClientMetrics: &controller.SetClientMetrics{Name: name, Configs: configs, Conditional: true, Base: base}})
			if errors.Is(res.Err, controller.ErrLevelPending) {
				return adminErr(kerr.InvalidRequest, "Client metrics subscriptions need every node of the cluster at command level %d", controller.LevelClientMetrics), false
			}
			return aerr, errors.Is(res.Err, controller.ErrConfigsChanged)
		}, change)
}

// incrementalAlterClientMetrics applies IncrementalAlterConfigs operations to a subscription
// (APPEND and SUBTRACT to its lists).
func (b *Broker) incrementalAlterClientMetrics(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *adminError {
	return b.changeClientMetrics(rr.ResourceName, validateOnly, func(configs, base map[string]string) *adminError {
		current := func(name string) string { return base[name] }
		return applyIncremental(configs, rr.Configs, lookupClientMetricsDef, current)
	})
}

// alterClientMetrics replaces a subscription's configs (the legacy AlterConfigs).
func (b *Broker) alterClientMetrics(rr kmsg.AlterConfigsRequestResource, validateOnly bool) *adminError {
	return b.changeClientMetrics(rr.ResourceName, validateOnly, replaceConfigs(rr.Configs))
}

// describeClientMetrics lists a subscription's configs, as Kafka's ConfigHelper: every config,
// a set one from CLIENT_METRICS_CONFIG (its one synonym), the others at their defaults
// (DEFAULT_CONFIG, no synonym).
func (b *Broker) describeClientMetrics(name string, wanted func(string) bool, docs, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *adminError) {
	if name == "" {
		return nil, adminErr(kerr.InvalidRequest, "Client metrics subscription name must not be empty")
	}
	configs := b.clientMetrics(name)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range clientMetricsDefs {
		if !wanted(d.Name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ConfigType = d.Name, kmsg.ConfigType(d.Type)
		if v, set := configs[d.Name]; set {
			c.Value, c.Source = strp(v), kmsg.ConfigSourceClientMetricsConfig
			if synonyms {
				c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{{Name: d.Name, Value: strp(v), Source: c.Source}}
			}
		} else {
			c.Value, c.Source = strp(d.Default), kmsg.ConfigSourceDefaultConfig
		}
		if docs {
			c.Documentation = strp(d.Doc)
		}
		out = append(out, c)
	}
	return out, nil
}

// levelWait bounds how long a change that needs a command level waits for a new cluster to
// reach it: its active controller raises the level once its nodes have registered.
const levelWait = 5 * time.Second

// awaitLevel reports whether the cluster's command level is at least level. A new cluster's
// (level 0, not raised yet) is waited for, up to levelWait; one at an older level is not
// (its nodes run an older version, or runnel.command.level.auto is false).
func (b *Broker) awaitLevel(level int) bool {
	if lvl := b.cl.Image().Level; lvl >= level || lvl > 0 {
		return lvl >= level
	}
	deadline := time.Now().Add(levelWait)
	for b.cl.Image().Level < level {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-b.ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}
