package topics

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// Dynamic broker configs set the defaults of topic configs, as in Kafka: a topic config that is
// not set on the topic takes this broker's dynamic value (kafka-configs --entity-name <id>), else
// the cluster-wide dynamic default (--entity-default), else the static default. They are keyed by
// the broker config name (log.retention.ms for retention.ms, ...) and persisted in
// the controller's image (ClusterConfigs and the node's Configs); a one-node data dir of an
// older version kept them in <data-dir>/broker-configs.json, which the controller imports.

// Source is where a config's value comes from (Kafka's DescribeConfigs ConfigSource).
type Source int8

// Config sources, numbered as in Kafka.
const (
	SourceTopic                Source = 1 // DYNAMIC_TOPIC_CONFIG
	SourceDynamicBroker        Source = 2 // DYNAMIC_BROKER_CONFIG
	SourceDynamicDefaultBroker Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	SourceDefault              Source = 5 // DEFAULT_CONFIG
)

type dynamicConfigs struct {
	Cluster map[string]string `json:"cluster"`
	Broker  map[string]string `json:"broker"`
}

// defaults holds the dynamic broker configs; topics share one and read it lock-free.
type defaults struct {
	p atomic.Pointer[dynamicConfigs]
}

var defsByBrokerName = func() map[string]*ConfigDef {
	m := map[string]*ConfigDef{}
	for i := range defs {
		if defs[i].BrokerName != "" {
			m[defs[i].BrokerName] = &defs[i]
		}
	}
	return m
}()

// LookupBrokerDef returns the topic config a dynamic broker config is the default of.
func LookupBrokerDef(brokerName string) (*ConfigDef, bool) {
	d, ok := defsByBrokerName[brokerName]
	return d, ok
}

// lookup returns the default of a topic config and its source.
func (d *defaults) lookup(def *ConfigDef) (string, Source) {
	if dc := d.p.Load(); dc != nil && def.BrokerName != "" {
		if v, ok := dc.Broker[def.BrokerName]; ok {
			return v, SourceDynamicBroker
		}
		if v, ok := dc.Cluster[def.BrokerName]; ok {
			return v, SourceDynamicDefaultBroker
		}
	}
	return def.Default, SourceDefault
}

func newDefaults() *defaults {
	d := &defaults{}
	d.p.Store(&dynamicConfigs{Cluster: map[string]string{}, Broker: map[string]string{}})
	return d
}

// set replaces the dynamic configs and reports whether they changed.
func (d *defaults) set(cluster, node map[string]string) bool {
	old := d.p.Load()
	if maps.Equal(old.Cluster, cluster) && maps.Equal(old.Broker, node) {
		return false
	}
	next := &dynamicConfigs{Cluster: maps.Clone(cluster), Broker: maps.Clone(node)}
	if next.Cluster == nil {
		next.Cluster = map[string]string{}
	}
	if next.Broker == nil {
		next.Broker = map[string]string{}
	}
	d.p.Store(next)
	return true
}

// LegacyBrokerConfigs reads the dynamic broker configs a one-node data dir kept in
// <data-dir>/broker-configs.json before they moved to the controller (for its import).
func LegacyBrokerConfigs(fsys vfs.FS, dataDir string) (cluster, node map[string]string, err error) {
	dc := &dynamicConfigs{}
	b, err := vfs.ReadFile(fsys, filepath.Join(dataDir, "broker-configs.json"))
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(b, dc); err != nil {
		return nil, nil, fmt.Errorf("topics: broker-configs.json: %w", err)
	}
	return dc.Cluster, dc.Broker, nil
}

// BrokerConfigs returns the dynamic broker configs set per broker (perBroker) or cluster-wide.
// The caller owns the map.
func (r *Registry) BrokerConfigs(perBroker bool) map[string]string {
	dc := r.defaults.p.Load()
	if perBroker {
		return cloneMap(dc.Broker)
	}
	return cloneMap(dc.Cluster)
}

// CheckBrokerConfigs validates a new set of dynamic broker configs of one scope: each as the
// topic config it is the default of, and every topic's resulting log config.
func (r *Registry) CheckBrokerConfigs(perBroker bool, configs map[string]string) error {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d, ok := defsByBrokerName[k]
		if !ok {
			return configErr("%s is not a dynamic broker config", k)
		}
		if perBroker && d.ClusterOnly {
			return configErr("%s can only be set cluster-wide (--entity-default): the active controller reads it, whichever node it runs on", k)
		}
		if _, ok := d.Overrides[configs[k]]; ok {
			continue
		}
		if err := checkValue(d, configs[k]); err != nil {
			return configErr("%s: %v", k, err)
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(configs[k]), 10, 64); k == "log.retention.ms" && err == nil && v == 0 {
			// Kafka's KafkaConfig validation: 0 is a topic's own value only (a cluster default
			// of 0 would empty every topic without one at the next retention check).
			return configErr("log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
		}
	}
	old := r.defaults.p.Load()
	// The node's resulting connection limits, as Kafka's KafkaConfig validation requires: no
	// connection per IP at all only with exceptions (else no client could connect).
	brokerLayer, clusterLayer := old.Broker, configs
	if perBroker {
		brokerLayer, clusterLayer = configs, old.Cluster
	}
	effective := func(name string) string {
		if v, ok := brokerLayer[name]; ok {
			return v
		}
		if v, ok := clusterLayer[name]; ok {
			return v
		}
		return defsByBrokerName[name].Default
	}
	if v, err := strconv.ParseInt(strings.TrimSpace(effective("max.connections.per.ip")), 10, 64); err == nil && v == 0 &&
		strings.TrimSpace(effective("max.connections.per.ip.overrides")) == "" {
		return configErr("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.")
	}
	next := &dynamicConfigs{Cluster: old.Cluster, Broker: old.Broker}
	if perBroker {
		next.Broker = configs
	} else {
		next.Cluster = configs
	}
	trial := &defaults{}
	trial.p.Store(next)
	for _, t := range r.List() { // every topic's resulting log config must be valid
		if err := logConfig(t.Configs, trial).Validate(); err != nil {
			return configErr("topic %s: %v", t.Name, err)
		}
	}
	return nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
