package broker

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BROKER_LOGGER config resources (KIP-412, `kafka-configs --entity-type broker-loggers`): a
// node's loggers and their levels, described with DescribeConfigs and changed with
// IncrementalAlterConfigs on the node itself, for as long as it runs (not kept, as Kafka keeps no
// log4j level). A node logs through one log/slog logger, whose records name their package in the
// message ("broker: ...") rather than as an attribute, so it has one logger, root, whose level
// is Config.LogLevel.
//
// Kafka's level names map onto slog's levels: TRACE is DEBUG-4, DEBUG, INFO, WARN and ERROR are
// slog's, FATAL is ERROR+4 (Runnel logs nothing above ERROR, so it silences the node) and OFF,
// which describes a logger that logs nothing but cannot be set (Kafka's VALID_LOG_LEVELS lacks
// it), is above every level. A level between two names is described by the lower one.

// rootLogger is the name of the node's only logger, Kafka's name for log4j's root logger.
const rootLogger = "root"

// logLevels are Kafka's log level names, lowest first: LogLevelConfig.VALID_LOG_LEVELS, then OFF.
var logLevels = []struct {
	name  string
	level slog.Level
}{
	{"TRACE", slog.LevelDebug - 4},
	{"DEBUG", slog.LevelDebug},
	{"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn},
	{"ERROR", slog.LevelError},
	{"FATAL", slog.LevelError + 4},
	{"OFF", math.MaxInt32},
}

// logLevelName is the Kafka name of level l: the highest one at or below it.
func logLevelName(l slog.Level) string {
	name := logLevels[0].name
	for _, ll := range logLevels {
		if l >= ll.level {
			name = ll.name
		}
	}
	return name
}

// lookupLogLevel finds a level a logger may be set to; as in Kafka, only the upper-case names
// of VALID_LOG_LEVELS (not OFF).
func lookupLogLevel(name string) (slog.Level, bool) {
	for _, ll := range logLevels[:len(logLevels)-1] {
		if ll.name == name {
			return ll.level, true
		}
	}
	return 0, false
}

// lowestEnabled is the lowest Kafka level logger logs at (OFF if none).
func lowestEnabled(logger *slog.Logger) slog.Level {
	for _, ll := range logLevels {
		if logger.Enabled(context.Background(), ll.level) {
			return ll.level
		}
	}
	return logLevels[len(logLevels)-1].level
}

// levelFilter drops the records below level, for a logger built without a LevelVar.
type levelFilter struct {
	slog.Handler
	level *slog.LevelVar
}

func (h *levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.Handler.Enabled(ctx, l)
}

func (h *levelFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &levelFilter{h.Handler.WithAttrs(attrs), h.level}
}

func (h *levelFilter) WithGroup(name string) slog.Handler {
	return &levelFilter{h.Handler.WithGroup(name), h.level}
}

// describeLoggers answers DescribeConfigs of a BROKER_LOGGER resource, as Kafka's ConfigHelper:
// the resource names this node; each logger is a DYNAMIC_BROKER_LOGGER_CONFIG without synonyms.
func (b *Broker) describeLoggers(name string, wanted func(string) bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *adminError) {
	if name == "" {
		return nil, adminErr(kerr.InvalidRequest, "Broker id must not be empty")
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return nil, adminErr(kerr.InvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.cfg.NodeID {
		return nil, adminErr(kerr.InvalidRequest, "Unexpected broker id, expected %d but received %s", b.cfg.NodeID, name)
	}
	if !wanted(rootLogger) {
		return nil, nil
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value = rootLogger, strp(logLevelName(b.cfg.LogLevel.Level()))
	c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
	return []kmsg.DescribeConfigsResponseResourceConfig{c}, nil
}

// alterLoggers applies an IncrementalAlterConfigs of a BROKER_LOGGER resource with Kafka's checks
// (ConfigAdminManager.validateLogLevelConfigs): the resource names this node, a logger that
// exists, a known level; DELETE of root, APPEND and SUBTRACT refused.
func (b *Broker) alterLoggers(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *adminError {
	var nulls []string
	for _, c := range rr.Configs {
		if c.Op != kmsg.IncrementalAlterConfigOpDelete && c.Value == nil {
			nulls = append(nulls, c.Name)
		}
	}
	if len(nulls) > 0 {
		return adminErr(kerr.InvalidRequest, "Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	id, err := strconv.ParseInt(rr.ResourceName, 10, 32)
	if err != nil {
		return adminErr(kerr.InvalidRequest, "Node id must be an integer, but it is: %s", rr.ResourceName)
	}
	if int32(id) != b.cfg.NodeID {
		return adminErr(kerr.InvalidRequest, "Unexpected broker id, expected %d, but received %s", b.cfg.NodeID, rr.ResourceName)
	}
	levels := make([]slog.Level, len(rr.Configs))
	for i, c := range rr.Configs {
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete:
			if c.Name != rootLogger {
				return adminErr(kerr.InvalidConfig, "Logger %s does not exist!", c.Name)
			}
		default:
			return adminErr(kerr.InvalidRequest, "%s operation is not allowed for the BROKER_LOGGER resource", c.Op)
		}
		if c.Op == kmsg.IncrementalAlterConfigOpDelete {
			return adminErr(kerr.InvalidRequest, "Removing the log level of the %s logger is not allowed", rootLogger)
		}
		l, ok := lookupLogLevel(*c.Value)
		if !ok {
			var names []string
			for _, ll := range logLevels[:len(logLevels)-1] {
				names = append(names, ll.name)
			}
			slices.Sort(names) // as Kafka's message lists them
			return adminErr(kerr.InvalidConfig, "Cannot set the log level of %s to %s as it is not a supported log level. Valid log levels are %s",
				c.Name, *c.Value, strings.Join(names, ", "))
		}
		levels[i] = l
	}
	if validateOnly {
		return nil
	}
	for i, c := range rr.Configs {
		b.logger.Info("broker: updating the log level", "logger", c.Name, "level", *c.Value)
		b.cfg.LogLevel.Set(levels[i])
	}
	return nil
}
