package shard

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/speclog/order"
)

// Topic configs of total-order topics (internal/topics defines and validates them; the
// controller, which must not depend on this package, names the first two).
const (
	OrderingConfig = controller.OrderingConfig
	OrderingTotal  = controller.OrderingTotal
	orderPrefix    = "runnel.order."
)

// Total reports whether a topic's configs make it a total-order topic.
func Total(configs map[string]string) bool { return configs[OrderingConfig] == OrderingTotal }

// FixedConfig reports whether a config of a total-order topic is fixed at its creation.
func FixedConfig(name string) bool {
	return name == OrderingConfig || strings.HasPrefix(name, orderPrefix)
}

// TopicConfig is the protocol configuration a total-order topic's configs set (the paper's
// defaults for those it does not).
func TopicConfig(configs map[string]string) (order.Config, error) {
	cfg := order.DefaultConfig()
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{"runnel.order.window.cuts", func(v int64) { cfg.W, cfg.DecideAt = int(v), int(v)/2 }},
		{"runnel.order.interval.us", func(v int64) {
			cfg.TOrd = time.Duration(v) * time.Microsecond
			cfg.StragglerGap = 4 * cfg.TOrd
		}},
		{"runnel.order.initial.quota", func(v int64) { cfg.InitialQuota = v }},
		{"runnel.order.lag.fix.cuts", func(v int64) { cfg.LagFix = int(v) }},
		{"runnel.order.drain.cuts", func(v int64) { cfg.DrainAfter = int(v) }},
		{"runnel.order.fail.ms", func(v int64) { cfg.FailAfter = time.Duration(v) * time.Millisecond }},
		{"runnel.order.takeover.ms", func(v int64) { cfg.Takeover = time.Duration(v) * time.Millisecond }},
		{"runnel.order.stagger.from", func(v int64) { cfg.StaggerFrom = int(v) }},
		{"runnel.order.idle.ms", func(v int64) { cfg.IdlePace = time.Duration(v) * time.Millisecond }},
	} {
		s, ok := configs[f.name]
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return order.Config{}, fmt.Errorf("%s=%q: %w", f.name, s, err)
		}
		f.set(v)
	}
	if cfg.StaggerGroups > 1 && cfg.W%cfg.StaggerGroups != 0 {
		cfg.StaggerFrom = 0 // an odd window cannot be staggered in two groups
	}
	return cfg, cfg.Check()
}
