package broker

import (
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestLogLevelNames(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		name  string
	}{
		{slog.LevelDebug - 4, "TRACE"},
		{slog.LevelDebug - 8, "TRACE"},
		{slog.LevelDebug, "DEBUG"},
		{slog.LevelDebug + 2, "DEBUG"},
		{slog.LevelInfo, "INFO"},
		{slog.LevelWarn, "WARN"},
		{slog.LevelError, "ERROR"},
		{slog.LevelError + 4, "FATAL"},
		{math.MaxInt32, "OFF"},
	} {
		if got := logLevelName(tc.level); got != tc.name {
			t.Errorf("logLevelName(%v) = %s; want %s", tc.level, got, tc.name)
		}
	}
	for _, name := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"} {
		l, ok := lookupLogLevel(name)
		if !ok || logLevelName(l) != name {
			t.Errorf("lookupLogLevel(%s) = %v, %v; want the level named %s", name, l, ok, name)
		}
	}
	if _, ok := lookupLogLevel("info"); ok { // as Kafka's VALID_LOG_LEVELS: upper case only
		t.Errorf("lookupLogLevel(info) = ok; want unknown")
	}
	if _, ok := lookupLogLevel("OFF"); ok { // describes a silent logger, but Kafka sets no logger to it
		t.Errorf("lookupLogLevel(OFF) = ok; want unknown")
	}
}

// TestBrokerLoggerConfigs: the node's root logger is a BROKER_LOGGER resource, described and
// changed as Kafka's log4j loggers (KIP-412), and its level is the one the node logs at. All
// three used to be answered INVALID_REQUEST.
func TestBrokerLoggerConfigs(t *testing.T) {
	var out syncBuffer
	lv := new(slog.LevelVar)
	b, addr, _ := ctBroker(t, func(c *Config) {
		c.Logger, c.LogLevel = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: lv})), lv
	})
	describe := func(name string) kmsg.DescribeConfigsResponseResource {
		t.Helper()
		dc := kmsg.NewPtrDescribeConfigsRequest()
		dc.Version = 4
		dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: name}}
		return rawRequest(t, addr, dc).(*kmsg.DescribeConfigsResponse).Resources[0]
	}
	rootLevel := func() string {
		t.Helper()
		r := describe("1")
		if r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Name != "root" || r.Configs[0].Value == nil ||
			r.Configs[0].Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig || r.Configs[0].ReadOnly {
			t.Fatalf("DescribeConfigs(BROKER_LOGGER 1) = %s %+v; want root, DYNAMIC_BROKER_LOGGER_CONFIG", errName(r.ErrorCode), r.Configs)
		}
		return *r.Configs[0].Value
	}
	if got := rootLevel(); got != "INFO" {
		t.Errorf("root level = %s; want INFO", got)
	}
	for _, name := range []string{"", "x", "2"} {
		if got := describe(name).ErrorCode; got != kerr.InvalidRequest.Code {
			t.Errorf("DescribeConfigs(BROKER_LOGGER %q) = %s; want INVALID_REQUEST", name, errName(got))
		}
	}

	alter := func(validateOnly bool, resource string, op kmsg.IncrementalAlterConfigOp, logger string, value *string) int16 {
		t.Helper()
		iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
		iac.Version, iac.ValidateOnly = 1, validateOnly
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, resource
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: logger, Op: op, Value: value}}
		iac.Resources = append(iac.Resources, res)
		return rawRequest(t, addr, iac).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	set, del, appendOp := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete, kmsg.IncrementalAlterConfigOpAppend
	for _, tc := range []struct {
		name     string
		resource string
		op       kmsg.IncrementalAlterConfigOp
		logger   string
		value    *string
		want     int16
	}{
		{"unknown level", "1", set, "root", strp("NOPE"), kerr.InvalidConfig.Code},
		{"lower-case level", "1", set, "root", strp("debug"), kerr.InvalidConfig.Code},
		{"unknown logger", "1", set, "kafka.server", strp("DEBUG"), kerr.InvalidConfig.Code},
		{"delete root", "1", del, "root", nil, kerr.InvalidRequest.Code},
		{"append", "1", appendOp, "root", strp("DEBUG"), kerr.InvalidRequest.Code},
		{"null value", "1", set, "root", nil, kerr.InvalidRequest.Code},
		{"another node", "2", set, "root", strp("DEBUG"), kerr.InvalidRequest.Code},
		{"no node", "", set, "root", strp("DEBUG"), kerr.InvalidRequest.Code},
		{"validate only", "1", set, "root", strp("DEBUG"), 0},
	} {
		if got := alter(true, tc.resource, tc.op, tc.logger, tc.value); got != tc.want {
			t.Errorf("IncrementalAlterConfigs(%s) = %s; want %s", tc.name, errName(got), errName(tc.want))
		}
	}
	if got := rootLevel(); got != "INFO" || lv.Level() != slog.LevelInfo {
		t.Errorf("root level after refused and validate-only changes = %s (%v); want INFO", got, lv.Level())
	}

	b.logger.Debug("broker: before")
	if got := alter(false, "1", set, "root", strp("DEBUG")); got != 0 {
		t.Fatalf("IncrementalAlterConfigs(root=DEBUG) = %s; want NONE", errName(got))
	}
	b.logger.Debug("broker: after")
	if got := rootLevel(); got != "DEBUG" || lv.Level() != slog.LevelDebug {
		t.Errorf("root level = %s (%v); want DEBUG", got, lv.Level())
	}
	if s := out.String(); strings.Contains(s, "broker: before") || !strings.Contains(s, "broker: after") {
		t.Errorf("logged %q; want the debug record after the change only", s)
	}
	// OFF is not among Kafka's VALID_LOG_LEVELS (Kafka 4.1.1 refuses it); FATAL silences the node.
	if got := alter(false, "1", set, "root", strp("OFF")); got != kerr.InvalidConfig.Code {
		t.Fatalf("IncrementalAlterConfigs(root=OFF) = %s; want INVALID_CONFIG", errName(got))
	}
	if got := alter(false, "1", set, "root", strp("FATAL")); got != 0 {
		t.Fatalf("IncrementalAlterConfigs(root=FATAL) = %s; want NONE", errName(got))
	}
	b.logger.Error("broker: silenced")
	if strings.Contains(out.String(), "broker: silenced") {
		t.Errorf("an error was logged with root=FATAL")
	}

	// The legacy AlterConfigs never took BROKER_LOGGER (as Kafka).
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Version = 2
	ares := kmsg.NewAlterConfigsRequestResource()
	ares.ResourceType, ares.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	ares.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "root", Value: strp("INFO")}}
	ac.Resources = append(ac.Resources, ares)
	if got := rawRequest(t, addr, ac).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("AlterConfigs(BROKER_LOGGER 1) = %s; want INVALID_REQUEST", errName(got))
	}
}

// TestBrokerLoggerWithoutLevelVar: a broker given a logger without its level filters its own
// records by the root logger's level, starting at the lowest level the logger enables.
func TestBrokerLoggerWithoutLevelVar(t *testing.T) {
	var out syncBuffer
	b, addr, _ := ctBroker(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if got := logLevelName(b.cfg.LogLevel.Level()); got != "WARN" {
		t.Errorf("root level = %s; want WARN, the logger's", got)
	}
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "root", Op: kmsg.IncrementalAlterConfigOpSet, Value: strp("ERROR")}}
	iac.Resources = append(iac.Resources, res)
	if got := rawRequest(t, addr, iac).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; got != 0 {
		t.Fatalf("IncrementalAlterConfigs(root=ERROR) = %s; want NONE", errName(got))
	}
	b.logger.Warn("broker: a warning")
	if strings.Contains(out.String(), "broker: a warning") {
		t.Errorf("a warning was logged with root=ERROR")
	}
}
