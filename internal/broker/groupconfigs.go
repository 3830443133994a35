package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/group"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Group configs (ConfigResource GROUP; internal/group/configs.go): a group's overrides of the
// group coordinator's defaults, kept in the controller's image, read by every node's
// coordinators and shares from it.

// groupConfigs returns a group's configs (nil: none). It does not block.
func (b *Broker) groupConfigs(groupID string) map[string]string {
	return b.cl.Image().GroupConfigs[groupID]
}

// groupSettings returns a group's effective settings.
func (b *Broker) groupSettings(groupID string) group.Settings {
	return b.cfg.Groups.Settings(b.groupConfigs(groupID))
}

// lookupGroupConfigDef is the group configs' definitions in the form applyIncremental takes
// (none is a list: APPEND and SUBTRACT are refused).
func lookupGroupConfigDef(name string) (*topics.ConfigDef, bool) {
	d, ok := group.LookupGroupConfig(name)
	if !ok {
		return nil, false
	}
	typ := topics.TypeString
	if d.Int {
		typ = topics.TypeInt
	}
	return &topics.ConfigDef{Name: d.Name, Type: typ, Doc: d.Doc}, true
}

// setGroupConfigs validates a group's complete new configs and, unless validateOnly, has the
// controller set them if the group's configs are still base. It reports whether they were not
// (another change came first: compute again).
func (b *Broker) setGroupConfigs(groupID string, configs, base map[string]string, validateOnly bool) (*adminError, bool) {
	if groupID == "" {
		return adminErr(kerr.InvalidRequest, "Group name must not be empty"), false
	}
	if err := b.cfg.Groups.CheckGroupConfigs(configs); err != nil {
		return adminErr(kerr.InvalidConfig, "%v", err), false
	}
	if validateOnly {
		return nil, false
	}
	res, aerr := b.propose(b.ctx, &controller.Command{Op: controller.OpSetGroupConfigs,
		SetGroupConfigs: &controller.SetGroupConfigs{Group: groupID, Configs: configs, Conditional: true, Base: base}})
	return aerr, errors.Is(res.Err, controller.ErrConfigsChanged)
}

// changeGroupConfigs computes a group's new configs from its current ones and sets them, again
// if another change came first.
func (b *Broker) changeGroupConfigs(groupID string, validateOnly bool, change func(configs, base map[string]string) *adminError) *adminError {
	return b.changeConfigs(func() map[string]string { return b.groupConfigs(groupID) },
		func(configs, base map[string]string) (*adminError, bool) {
			return b.setGroupConfigs(groupID, configs, base, validateOnly)
		}, change)
}

// changeConfigs computes a resource's new configs from its current ones (current) with change
// and sets them (set reports whether another change came first: compute again), at most
// configAttempts times.
func (b *Broker) changeConfigs(current func() map[string]string, set func(configs, base map[string]string) (*adminError, bool),
	change func(configs, base map[string]string) *adminError) *adminError {
	for attempt := 1; ; attempt++ {
		base := current()
		configs := maps.Clone(base)
		if configs == nil {
			configs = map[string]string{}
		}
		if aerr := change(configs, base); aerr != nil {
			return aerr
		}
		aerr, changed := set(configs, base)
		if !changed || attempt == configAttempts {
			return aerr
		}
		b.adminBarrier(b.ctx)
	}
}

// incrementalAlterGroupConfigs applies IncrementalAlterConfigs operations to a group's configs.
func (b *Broker) incrementalAlterGroupConfigs(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *adminError {
	return b.changeGroupConfigs(rr.ResourceName, validateOnly, func(configs, base map[string]string) *adminError {
		current := func(name string) string { return b.cfg.Groups.Values(base)[name].Value }
		return applyIncremental(configs, rr.Configs, lookupGroupConfigDef, current)
	})
}

// alterGroupConfigs replaces a group's configs (the legacy AlterConfigs).
func (b *Broker) alterGroupConfigs(rr kmsg.AlterConfigsRequestResource, validateOnly bool) *adminError {
	return b.changeGroupConfigs(rr.ResourceName, validateOnly, replaceConfigs(rr.Configs))
}

// replaceConfigs is the change of the legacy AlterConfigs: the resource's configs become cs.
func replaceConfigs(cs []kmsg.AlterConfigsRequestResourceConfig) func(configs, base map[string]string) *adminError {
	return func(configs, _ map[string]string) *adminError {
		clear(configs)
		for _, c := range cs {
			if c.Value == nil {
				return adminErr(kerr.InvalidRequest, "Null value not supported for : %s", c.Name)
			}
			configs[c.Name] = *c.Value
		}
		return nil
	}
}

func init() { register(kmsg.ListConfigResources, 0, 1, handleListConfigResources) }

// handleListConfigResources lists the config resources of the requested types (KIP-1142; v0
// is KIP-714's ListClientMetricsResources): groups with configs, topics, the live brokers,
// this node's loggers (a node describes and alters only its own, as Kafka's) and client-metrics
// subscriptions, in Kafka's order. A type not listed is UNSUPPORTED_VERSION, as in Kafka.
func handleListConfigResources(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !r.allowedCluster(kmsg.ACLOperationDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}
	}
	supported := []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	if req.Version >= 1 {
		supported = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker,
			kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeGroupConfig}
	}
	types := supported
	if len(req.ResourceTypes) > 0 {
		types = nil
		for _, t := range req.ResourceTypes {
			if !slices.Contains(supported, kmsg.ConfigResourceType(t)) {
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				return reply{resp: resp}
			}
			types = append(types, kmsg.ConfigResourceType(t))
		}
	}
	add := func(typ kmsg.ConfigResourceType, name string) {
		c := kmsg.NewListConfigResourcesResponseConfigResource()
		c.Name, c.Type = name, int8(typ)
		resp.ConfigResources = append(resp.ConfigResources, c)
	}
	b := r.conn.b
	if slices.Contains(types, kmsg.ConfigResourceTypeGroupConfig) {
		for _, g := range slices.Sorted(maps.Keys(b.cl.Image().GroupConfigs)) {
			add(kmsg.ConfigResourceTypeGroupConfig, g)
		}
	}
	if slices.Contains(types, kmsg.ConfigResourceTypeClientMetrics) {
		for _, name := range slices.Sorted(maps.Keys(b.cl.Image().ClientMetrics)) {
			add(kmsg.ConfigResourceTypeClientMetrics, name)
		}
	}
	if slices.Contains(types, kmsg.ConfigResourceTypeBrokerLogger) {
		add(kmsg.ConfigResourceTypeBrokerLogger, strconv.Itoa(int(b.cfg.NodeID)))
	}
	if slices.Contains(types, kmsg.ConfigResourceTypeBroker) {
		for _, id := range b.cl.Image().LiveNodes() {
			add(kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(id)))
		}
	}
	if slices.Contains(types, kmsg.ConfigResourceTypeTopic) {
		for _, t := range b.topics.List() {
			add(kmsg.ConfigResourceTypeTopic, t.Name)
		}
	}
	return reply{resp: resp}
}
