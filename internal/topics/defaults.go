package topics

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync/atomic"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// Dynamic broker configs set the defaults of topic configs, as in Kafka: a topic config that is
// not set on the topic takes this broker's dynamic value (kafka-configs --entity-name <id>), else
// the cluster-wide dynamic default (--entity-default), else the static default. They are keyed by
// the broker config name (log.retention.ms for retention.ms, ...) and persisted in
// <data-dir>/broker-configs.json: {"cluster": {...}, "broker": {...}}, replaced atomically.

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

func loadDefaults(fsys vfs.FS, dataDir string) (*defaults, error) {
	d := &defaults{}
	dc := &dynamicConfigs{Cluster: map[string]string{}, Broker: map[string]string{}}
	b, err := vfs.ReadFile(fsys, filepath.Join(dataDir, "broker-configs.json"))
	if err == nil {
		if err := json.Unmarshal(b, dc); err != nil {
			return nil, fmt.Errorf("topics: broker-configs.json: %w", err)
		}
	} else if !errors.Is(err, vfs.ErrNotExist) {
		return nil, err
	}
	if dc.Cluster == nil {
		dc.Cluster = map[string]string{}
	}
	if dc.Broker == nil {
		dc.Broker = map[string]string{}
	}
	d.p.Store(dc)
	return d, nil
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

// SetBrokerConfigs replaces the dynamic broker configs of one scope, validating each as the
// topic config it is the default of, persists them, and applies the new defaults to every log.
func (r *Registry) SetBrokerConfigs(perBroker bool, configs map[string]string, validateOnly bool) error {
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
		if _, ok := d.Overrides[configs[k]]; ok {
			continue
		}
		if err := checkValue(d, configs[k]); err != nil {
			return configErr("%s: %v", k, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.defaults.p.Load()
	next := &dynamicConfigs{Cluster: old.Cluster, Broker: old.Broker}
	if perBroker {
		next.Broker = cloneMap(configs)
	} else {
		next.Cluster = cloneMap(configs)
	}
	trial := &defaults{}
	trial.p.Store(next)
	for _, t := range r.byName { // every topic's resulting log config must be valid
		if err := logConfig(t.Configs, trial).Validate(); err != nil {
			return configErr("topic %s: %v", t.Name, err)
		}
	}
	if validateOnly {
		return nil
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(r.fs, filepath.Dir(r.dir), "broker-configs.json", b); err != nil {
		return err
	}
	r.defaults.p.Store(next)
	for _, t := range r.byName {
		cfg := logConfig(t.Configs, r.defaults)
		for _, p := range t.Partitions {
			if err := p.Log.SetConfig(cfg); err != nil {
				return err
			}
		}
	}
	return nil
}
