package broker

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs) }

// handleIncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT operations to a topic's
// explicitly set configs (KIP-339).
func handleIncrementalAlterConfigs(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	r.conn.b.adminBarrier(ctx)
	alterEach(req.Resources,
		func(rr kmsg.IncrementalAlterConfigsRequestResource) (configResource, []string) {
			keys := make([]string, 0, len(rr.Configs))
			for _, c := range rr.Configs {
				keys = append(keys, c.Name)
			}
			return configResource{rr.ResourceType, rr.ResourceName}, keys
		},
		func(rr kmsg.IncrementalAlterConfigsRequestResource, keys []string) *adminError {
			if aerr := r.configAuthz(rr.ResourceType, rr.ResourceName, kmsg.ACLOperationAlterConfigs); aerr != nil {
				return aerr
			}
			return r.conn.b.incrementalAlterConfigs(rr, keys, req.ValidateOnly)
		},
		func(rr kmsg.IncrementalAlterConfigsRequestResource, aerr *adminError) {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			if aerr != nil {
				sr.ErrorCode, sr.ErrorMessage = aerr.code.Code, &aerr.msg
			}
			resp.Resources = append(resp.Resources, sr)
		})
	return reply{resp: resp}
}

func (b *Broker) incrementalAlterConfigs(rr kmsg.IncrementalAlterConfigsRequestResource, keys []string, validateOnly bool) *adminError {
	for _, c := range rr.Configs {
		if c.Op < kmsg.IncrementalAlterConfigOpSet || c.Op > kmsg.IncrementalAlterConfigOpSubtract {
			return adminErr(kerr.InvalidRequest, "Unknown alter config operation type %d for %s", int8(c.Op), c.Name)
		}
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		// Computed from this node's view of the topic's configs, and set only if the controller
		// still has those (another node may have changed them meanwhile): else again.
		for attempt := 1; ; attempt++ {
			t, aerr := b.lookupAlteredTopicResource(rr.ResourceName)
			if aerr != nil {
				if aerr.code == kerr.UnknownTopicOrPartition {
					// As Kafka's controller: the values first, then whether the topic exists.
					configs := map[string]string{}
					current := func(name string) string {
						if d, ok := topics.LookupDef(name); ok {
							return d.Default
						}
						return ""
					}
					if verr := applyIncremental(configs, rr.Configs, topics.LookupDef, current); verr != nil {
						return verr
					}
					return b.missingTopicConfigError(configs, aerr)
				}
				return aerr
			}
			base := t.Configs
			if base == nil {
				base = map[string]string{}
			}
			configs := maps.Clone(base)
			current := func(name string) string { v, _ := t.EffectiveIn(configs, name); return v }
			if aerr := applyIncremental(configs, rr.Configs, topics.LookupDef, current); aerr != nil {
				return aerr
			}
			aerr, changed := b.setTopicConfigsFrom(rr.ResourceName, configs, base, validateOnly)
			if !changed || attempt == configAttempts {
				return aerr
			}
			b.adminBarrier(b.ctx)
		}
	case kmsg.ConfigResourceTypeBroker:
		perBroker, aerr := b.checkBrokerResource(rr.ResourceName)
		if aerr != nil {
			return aerr
		}
		keys, ops, aerr := brokerKeysToCheck(rr.Configs)
		if aerr != nil {
			return aerr
		}
		if aerr := checkDynamicBrokerKeys(keys); aerr != nil {
			return aerr
		}
		configs := b.topics.BrokerConfigs(perBroker)
		current := func(name string) string {
			if v, ok := configs[name]; ok {
				return v
			}
			d, _ := topics.LookupBrokerDef(name)
			return d.Default
		}
		if aerr := applyIncremental(configs, ops, topics.LookupBrokerDef, current); aerr != nil {
			return aerr
		}
		return brokerConfigError(b.setBrokerConfigs(perBroker, configs, validateOnly))
	case kmsg.ConfigResourceTypeBrokerLogger:
		return b.alterLoggers(rr, validateOnly)
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.incrementalAlterGroupConfigs(rr, validateOnly)
	case kmsg.ConfigResourceTypeClientMetrics:
		return b.incrementalAlterClientMetrics(rr, validateOnly)
	}
	return adminErr(kerr.InvalidRequest, "Unsupported resource type: %s", rr.ResourceType)
}

// applyIncremental applies SET, DELETE, APPEND and SUBTRACT to configs. lookup finds a config's
// definition (APPEND and SUBTRACT need a list); current is a config's value before the change.
func applyIncremental(configs map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig,
	lookup func(string) (*topics.ConfigDef, bool), current func(string) string) *adminError {
	for _, c := range ops {
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil { // as Kafka's ConfigAdminManager.preprocess: DELETE removes
				return adminErr(kerr.InvalidRequest, "Null value not supported for : %s", c.Name)
			}
			configs[c.Name] = topics.NormalizeValue(c.Name, *c.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(configs, c.Name)
		default: // APPEND, SUBTRACT
			d, ok := lookup(c.Name)
			if !ok {
				return adminErr(kerr.InvalidConfig, "Unknown config name: %s", c.Name)
			}
			if d.Type != topics.TypeList {
				return adminErr(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.", c.Op, c.Name)
			}
			if c.Value == nil {
				return adminErr(kerr.InvalidRequest, "Null value not supported for : %s", c.Name)
			}
			list := splitList(current(c.Name))
			for _, v := range splitList(*c.Value) {
				if c.Op == kmsg.IncrementalAlterConfigOpAppend {
					if !slices.Contains(list, v) {
						list = append(list, v)
					}
				} else {
					list = slices.DeleteFunc(list, func(x string) bool { return x == v })
				}
			}
			configs[c.Name] = strings.Join(list, ",")
		}
	}
	return nil
}

// splitList splits a list config value into its trimmed, non-empty items.
func splitList(v string) []string {
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}
