package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientMetricsSubscriptions: client-metrics subscriptions (ConfigResource CLIENT_METRICS,
// KIP-714) over the Kafka API as Kafka's controller keeps them: validated with Kafka's errors,
// changed incrementally (APPEND and SUBTRACT to their lists) and replaced, described (every
// config, those not set at their defaults, as Kafka 4.1.1 answers), listed, kept across a restart, and gone once their last config is deleted.
func TestClientMetricsSubscriptions(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client()
	type op struct {
		name  string
		value *string
		op    kmsg.IncrementalAlterConfigOp
	}
	set := func(name, value string) op { return op{name, &value, kmsg.IncrementalAlterConfigOpSet} }
	alter := func(name string, validate bool, ops ...op) error {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validate
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
		for _, o := range ops {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value, c.Op = o.name, o.value, o.op
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.Resources[0]; r.ErrorCode != 0 {
			return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
		}
		return nil
	}
	describe := func(name string) map[string]string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs of subscription %s: %v %+v", name, err, resp)
		}
		// Every config, as Kafka: the set ones from CLIENT_METRICS_CONFIG, the others at their
		// defaults. out holds the set ones.
		out, names := map[string]string{}, []string{}
		defaults := map[string]string{"interval.ms": "300000", "match": "", "metrics": ""}
		for _, c := range resp.Resources[0].Configs {
			names = append(names, c.Name)
			switch c.Source {
			case kmsg.ConfigSourceClientMetricsConfig:
				out[c.Name] = *c.Value
			case kmsg.ConfigSourceDefaultConfig:
				if *c.Value != defaults[c.Name] {
					t.Errorf("%s of %s at its default: %q; want %q", c.Name, name, *c.Value, defaults[c.Name])
				}
			default:
				t.Errorf("%s of %s: source %v; want CLIENT_METRICS_CONFIG or DEFAULT_CONFIG", c.Name, name, c.Source)
			}
		}
		if !slices.Equal(names, []string{"interval.ms", "match", "metrics"}) {
			t.Errorf("subscription %s described with %v; want interval.ms, match, metrics", name, names)
		}
		return out
	}
	list := func() []string {
		t.Helper()
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListConfigResources: %v %+v", err, resp)
		}
		var names []string
		for _, r := range resp.ConfigResources {
			if r.Type != int8(kmsg.ConfigResourceTypeClientMetrics) {
				t.Errorf("listed %s of type %d; asked for CLIENT_METRICS only", r.Name, r.Type)
			}
			names = append(names, r.Name)
		}
		return names
	}

	for _, bad := range []struct {
		name string
		ops  []op
		want error
	}{
		{"", []op{set("interval.ms", "1000")}, kerr.InvalidRequest},
		{"s", []op{set("color", "red")}, kerr.InvalidRequest},
		{"s", []op{set("interval.ms", "99")}, kerr.InvalidRequest},
		{"s", []op{set("interval.ms", "3600001")}, kerr.InvalidRequest},
		{"s", []op{set("interval.ms", "soon")}, kerr.InvalidConfig},
		{"s", []op{set("match", "client_colour=red")}, kerr.InvalidConfig},
		{"s", []op{set("match", "client_id")}, kerr.InvalidConfig},
		{"s", []op{set("match", "client_id=a=b")}, kerr.InvalidConfig},
		{"s", []op{set("match", "client_id=(")}, kerr.InvalidConfig},
		{"s", []op{{"interval.ms", nil, kmsg.IncrementalAlterConfigOpSet}}, kerr.InvalidRequest},
		{"s", []op{{"interval.ms", new("1000"), kmsg.IncrementalAlterConfigOpAppend}}, kerr.InvalidConfig},
	} {
		if err := alter(bad.name, false, bad.ops...); !isKerr(err, bad.want) {
			t.Errorf("alter %q %s: %v; want %v", bad.name, bad.ops[0].name, err, bad.want)
		}
	}
	if err := alter("s", true, set("interval.ms", "1000")); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after refused and validate-only changes, subscriptions %v; want none", got)
	}

	if err := alter("prod", false, set("metrics", "org.apache.kafka.producer."), set("interval.ms", "1000"),
		set("match", "client_software_name=apache-kafka-java, client_id=app-.*")); err != nil {
		t.Fatal(err)
	}
	if err := alter("prod", false, op{"metrics", new("org.apache.kafka.consumer.,org.apache.kafka.producer."), kmsg.IncrementalAlterConfigOpAppend}); err != nil {
		t.Fatal(err)
	}
	if err := alter("all", false, set("metrics", "*")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "interval.ms": "1000",
		"match": "client_software_name=apache-kafka-java, client_id=app-.*"}
	if got := describe("prod"); !mapsEqual(got, want) {
		t.Fatalf("subscription prod: %v; want %v", got, want)
	}
	if got := describe("none"); len(got) != 0 {
		t.Fatalf("a name no subscription has: %v; want no configs", got)
	}
	if got := list(); !slices.Equal(got, []string{"all", "prod"}) {
		t.Fatalf("ListConfigResources: %v; want [all prod]", got)
	}

	// The controller keeps them: across a restart.
	b = b.restart()
	cl = b.client()
	if got := describe("prod"); !mapsEqual(got, want) {
		t.Fatalf("after a restart, subscription prod: %v; want %v", got, want)
	}
	if err := alter("prod", false, op{"metrics", new("org.apache.kafka.producer."), kmsg.IncrementalAlterConfigOpSubtract},
		op{"match", nil, kmsg.IncrementalAlterConfigOpDelete}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000"}
	if got := describe("prod"); !mapsEqual(got, want) {
		t.Fatalf("after SUBTRACT and DELETE, subscription prod: %v; want %v", got, want)
	}

	// The legacy AlterConfigs replaces a subscription's configs whole.
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "prod"
	ac := kmsg.NewAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "interval.ms", new("60000")
	ar.Configs = append(ar.Configs, ac)
	areq.Resources = append(areq.Resources, ar)
	aresp, err := areq.RequestWith(ctx, cl)
	if err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, aresp)
	}
	if got := describe("prod"); !mapsEqual(got, map[string]string{"interval.ms": "60000"}) {
		t.Fatalf("after AlterConfigs, subscription prod: %v; want only interval.ms=60000", got)
	}

	// Deleting the last config removes the subscription.
	if err := alter("all", false, op{"metrics", nil, kmsg.IncrementalAlterConfigOpDelete}); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Equal(got, []string{"prod"}) {
		t.Fatalf("after deleting all's last config: %v; want [prod]", got)
	}
}

// TestKafkaClientMetricsTool: kafka-client-metrics (Kafka's ClientMetricsCommand) creates,
// describes, lists and deletes a subscription.
func TestKafkaClientMetricsTool(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.ClientMetricsCommand")
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 90*time.Second, "", tool[0], append(tool[1:], append([]string{"--bootstrap-server", b.addr}, args...)...)...)
	}
	out := run("--alter", "--name", "java-producers", "--metrics", "org.apache.kafka.producer.", "--interval", "5000",
		"--match", "client_software_name=apache-kafka-java")
	if !strings.Contains(out, "Altered client metrics config for java-producers") {
		t.Fatalf("kafka-client-metrics --alter: %s", out)
	}
	out = run("--describe", "--name", "java-producers")
	for _, s := range []string{"interval.ms=5000", "metrics=org.apache.kafka.producer.", "match=client_software_name=apache-kafka-java"} {
		if !strings.Contains(out, s) {
			t.Fatalf("kafka-client-metrics --describe: no %s in\n%s", s, out)
		}
	}
	if out = run("--list"); strings.TrimSpace(out) != "java-producers" {
		t.Fatalf("kafka-client-metrics --list: %q; want java-producers", out)
	}
	out = run("--delete", "--name", "java-producers")
	if !strings.Contains(out, "Deleted client metrics config for java-producers") {
		t.Fatalf("kafka-client-metrics --delete: %s", out)
	}
	if out = run("--list"); strings.TrimSpace(out) != "" {
		t.Fatalf("kafka-client-metrics --list after --delete: %q; want nothing", out)
	}
}

func isKerr(err, want error) bool {
	return err != nil && strings.HasPrefix(err.Error(), want.Error())
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
