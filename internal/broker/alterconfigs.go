package broker

import (
	"context"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

func init() { register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs) }

// configMu serializes config changes, so an incremental change is applied to the configs it
// read (the registry replaces a topic's configs as a whole).
var configMu sync.Mutex

type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// duplicateResources returns the resources named more than once in a request: Kafka answers
// each once, with INVALID_REQUEST.
func duplicateResources(rs []configResource) map[configResource]bool {
	seen, dup := map[configResource]bool{}, map[configResource]bool{}
	for _, r := range rs {
		if seen[r] {
			dup[r] = true
		}
		seen[r] = true
	}
	return dup
}

// checkDuplicateKeys rejects a resource that names a config more than once.
func checkDuplicateKeys(names []string) *adminError {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return adminErr(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		seen[n] = true
	}
	return nil
}

// checkDynamicBrokerKeys refuses broker configs that cannot change at run time, with Kafka's
// answer. The dynamic ones are the broker-level defaults of topic configs (log.retention.ms, ...).
func checkDynamicBrokerKeys(keys []string) *adminError {
	var static []string
	for _, k := range keys {
		if _, ok := topics.LookupBrokerDef(k); !ok {
			static = append(static, k)
		}
	}
	if len(static) > 0 {
		return adminErr(kerr.InvalidRequest, "Cannot update these configs dynamically: %s", strings.Join(static, ", "))
	}
	return nil
}

// brokerConfigError answers a broker config change its validation refuses with INVALID_REQUEST,
// as Kafka's ConfigAdminManager.validateBrokerConfigChange does (KAFKA-13609: Kafka keeps that
// code for a bad value of a known dynamic config, as clients expect it).
func brokerConfigError(aerr *adminError) *adminError {
	if aerr != nil && aerr.code == kerr.InvalidConfig {
		return adminErr(kerr.InvalidRequest, "%s", aerr.msg)
	}
	return aerr
}

// replicationThrottleKeys are Kafka's dynamic broker configs of throttles Runnel does not
// implement (moving replicas between a node's log dirs: it has one). Deleting one is a no-op (it
// can never be set), so tools that clear throttles after a reassignment
// (kafka-reassign-partitions --verify) work; setting one is refused with a message that says
// why. The replication throttles themselves (leader/follower.replication.throttled.rate) are
// dynamic broker configs like the others.
var replicationThrottleKeys = map[string]bool{
	"replica.alter.log.dirs.io.max.bytes.per.second": true,
}

// brokerKeysToCheck returns the keys of a broker config change that must be dynamic: a DELETE of
// a replication throttle is dropped (a no-op), a SET of one is refused.
func brokerKeysToCheck(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) ([]string, []kmsg.IncrementalAlterConfigsRequestResourceConfig, *adminError) {
	var keys []string
	var kept []kmsg.IncrementalAlterConfigsRequestResourceConfig
	for _, c := range ops {
		if replicationThrottleKeys[c.Name] {
			if c.Op == kmsg.IncrementalAlterConfigOpDelete {
				continue
			}
			return nil, nil, adminErr(kerr.InvalidConfig, "Runnel has one log dir per node and moves no replica between log dirs: %s cannot be set", c.Name)
		}
		if _, dynamic := topics.LookupBrokerDef(c.Name); !dynamic && c.Op == kmsg.IncrementalAlterConfigOpDelete {
			// A key that cannot be set dynamically is never set: deleting it changes nothing,
			// as in Kafka, whose ConfigAdminManager validates only the configs that result.
			continue
		}
		keys = append(keys, c.Name)
		kept = append(kept, c)
	}
	return keys, kept, nil
}

// handleAlterConfigs is the legacy AlterConfigs: a resource's explicitly set configs are
// replaced by exactly the given ones.
func handleAlterConfigs(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	r.conn.b.adminBarrier(ctx)
	alterEach(req.Resources,
		func(rr kmsg.AlterConfigsRequestResource) (configResource, []string) {
			keys := make([]string, 0, len(rr.Configs))
			for _, c := range rr.Configs {
				keys = append(keys, c.Name)
			}
			return configResource{rr.ResourceType, rr.ResourceName}, keys
		},
		func(rr kmsg.AlterConfigsRequestResource, keys []string) *adminError {
			if aerr := r.configAuthz(rr.ResourceType, rr.ResourceName, kmsg.ACLOperationAlterConfigs); aerr != nil {
				return aerr
			}
			return r.conn.b.alterConfigs(rr, keys, req.ValidateOnly)
		},
		func(rr kmsg.AlterConfigsRequestResource, aerr *adminError) {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			if aerr != nil {
				sr.ErrorCode, sr.ErrorMessage = aerr.code.Code, &aerr.msg
			}
			resp.Resources = append(resp.Resources, sr)
		})
	return reply{resp: resp}
}

// missingTopicConfigError answers an alteration of a topic that does not exist: INVALID_CONFIG
// if the configs it sets are invalid, as Kafka's ConfigurationControlManager validates them
// before it checks that the resource exists, else missing (UNKNOWN_TOPIC_OR_PARTITION).
func (b *Broker) missingTopicConfigError(configs map[string]string, missing *adminError) *adminError {
	if err := b.topics.ValidateConfigs(configs); err != nil {
		return toAdminError(err)
	}
	return missing
}

// alterEach applies an alter request's resources one by one under configMu, answering each
// one: a resource named twice (each mention, as Kafka's ConfigAdminManager.preprocess), or one
// naming a config twice, gets INVALID_REQUEST.
func alterEach[R any](resources []R, describe func(R) (configResource, []string), apply func(R, []string) *adminError, answer func(R, *adminError)) {
	rs := make([]configResource, len(resources))
	keys := make([][]string, len(resources))
	for i, rr := range resources {
		rs[i], keys[i] = describe(rr)
	}
	dup := duplicateResources(rs)
	configMu.Lock()
	defer configMu.Unlock()
	for i, rr := range resources {
		var aerr *adminError
		if dup[rs[i]] {
			aerr = adminErr(kerr.InvalidRequest, "Each resource must appear at most once.")
		} else if aerr = checkDuplicateKeys(keys[i]); aerr == nil {
			aerr = apply(rr, keys[i])
		}
		answer(rr, aerr)
	}
}

func (b *Broker) alterConfigs(rr kmsg.AlterConfigsRequestResource, keys []string, validateOnly bool) *adminError {
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		_, missing := b.lookupAlteredTopicResource(rr.ResourceName)
		if missing != nil && missing.code != kerr.UnknownTopicOrPartition {
			return missing
		}
		configs := map[string]string{}
		for _, c := range rr.Configs {
			if c.Value == nil {
				return adminErr(kerr.InvalidRequest, "Null value not supported for : %s", c.Name)
			}
			configs[c.Name] = topics.NormalizeValue(c.Name, *c.Value)
		}
		if missing != nil {
			return b.missingTopicConfigError(configs, missing)
		}
		return b.setTopicConfigs(rr.ResourceName, configs, validateOnly)
	case kmsg.ConfigResourceTypeBroker: // replaces the scope's dynamic configs, as for topics
		perBroker, aerr := b.checkBrokerResource(rr.ResourceName)
		if aerr != nil {
			return aerr
		}
		if aerr := checkDynamicBrokerKeys(keys); aerr != nil {
			return aerr
		}
		configs := map[string]string{}
		for _, c := range rr.Configs {
			if c.Value == nil {
				return adminErr(kerr.InvalidRequest, "Null value not supported for : %s", c.Name)
			}
			configs[c.Name] = topics.NormalizeValue(c.Name, *c.Value)
		}
		return brokerConfigError(b.setBrokerConfigs(perBroker, configs, validateOnly))
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.alterGroupConfigs(rr, validateOnly)
	case kmsg.ConfigResourceTypeClientMetrics:
		return b.alterClientMetrics(rr, validateOnly)
	}
	return adminErr(kerr.InvalidRequest, "Unsupported resource type: %s", rr.ResourceType)
}
