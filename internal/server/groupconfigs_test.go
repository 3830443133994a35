package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupConfigs: group configs (ConfigResource GROUP) over the Kafka API: set, refused with
// Kafka's messages, described with their sources, listed, kept across a restart, and in force:
// a share group with share.auto.offset.reset=earliest reads the records written before it
// existed, with its own lock duration; one with share.isolation.level=read_committed never gets
// an aborted transaction's records, nor an open one's.
func TestGroupConfigs(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, "127.0.0.1:0")
	b.createTopic("q", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("q"))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	alter := func(group string, validate bool, ops ...kadm.AlterConfig) error {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validate
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		for _, o := range ops {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value, c.Op = o.Name, o.Value, kmsg.IncrementalAlterConfigOp(o.Op)
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.Resources[0]
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.ErrorCode), msg)
		}
		return nil
	}
	describe := func(group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources, req.IncludeSynonyms = append(req.Resources, rr), true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs of group %s: %v %+v", group, err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	set := func(name, value string) kadm.AlterConfig { return kadm.AlterConfig{Name: name, Value: &value} }

	for _, bad := range []struct {
		op   kadm.AlterConfig
		code *kerr.Error
		msg  string
	}{
		{set("session.timeout.ms", "1000"), kerr.InvalidConfig, "Unknown group config name: session.timeout.ms"},
		{set("share.auto.offset.reset", "none"), kerr.InvalidConfig, "by_duration:<PnDTnHnMn.nS>"},
		{set("consumer.session.timeout.ms", "1000"), kerr.InvalidConfig, "group.consumer.min.session.timeout.ms"},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "share.isolation.level", Value: new(string)}, kerr.InvalidConfig, "not LIST"},
	} {
		err := alter("g1", false, bad.op)
		if !errors.Is(err, bad.code) || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s=%v: %v; want %v with %q", bad.op.Name, bad.op.Value, err, bad.code, bad.msg)
		}
	}
	if err := alter("g1", true, set("share.auto.offset.reset", "earliest")); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if c := describe("g1")["share.auto.offset.reset"]; *c.Value != "latest" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after a validate-only change: %s from %v; want the default latest", *c.Value, c.Source)
	}
	if err := alter("g1", false, set("share.auto.offset.reset", "earliest"), set("share.record.lock.duration.ms", "15000"),
		set("share.delivery.count.limit", "2")); err != nil {
		t.Fatal(err)
	}
	if err := alter("g2", false, set("share.auto.offset.reset", "earliest"), set("share.isolation.level", "read_committed")); err != nil {
		t.Fatal(err)
	}
	d := describe("g1")
	if c := d["share.auto.offset.reset"]; *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig || c.IsDefault {
		t.Fatalf("share.auto.offset.reset: %s from %v; want earliest from GROUP_CONFIG", *c.Value, c.Source)
	}
	if c := d["consumer.heartbeat.interval.ms"]; *c.Value != "5000" || c.Source != kmsg.ConfigSourceDefaultConfig || c.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("consumer.heartbeat.interval.ms: %+v; want the default 5000, an INT", c)
	}
	if len(d) != 14 {
		t.Fatalf("group configs described: %d; want 14", len(d))
	}
	if c := d["streams.num.standby.replicas"]; *c.Value != "0" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("streams.num.standby.replicas: %+v; want the default 0", c)
	}
	lr := kmsg.NewPtrListConfigResourcesRequest()
	lr.Version, lr.ResourceTypes = 1, []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
	listed, err := lr.RequestWith(ctx, cl)
	if err != nil || listed.ErrorCode != 0 || len(listed.ConfigResources) != 2 || listed.ConfigResources[0].Name != "g1" || listed.ConfigResources[1].Name != "g2" {
		t.Fatalf("ListConfigResources of groups: %v %+v; want g1 and g2", err, listed)
	}

	// Every type, in Kafka's order: this node's loggers come before the brokers (one here).
	lra := kmsg.NewPtrListConfigResourcesRequest()
	lra.Version = 1
	all, err := lra.RequestWith(ctx, cl)
	if err != nil || all.ErrorCode != 0 {
		t.Fatalf("ListConfigResources of every type: %v %+v", err, all)
	}
	var kinds []string
	for _, c := range all.ConfigResources {
		kinds = append(kinds, fmt.Sprintf("%v:%s", kmsg.ConfigResourceType(c.Type), c.Name))
	}
	if want := []string{"GROUP_CONFIG:g1", "GROUP_CONFIG:g2", "BROKER_LOGGER:0", "BROKER:0", "TOPIC:q"}; !slices.Equal(kinds, want) {
		t.Fatalf("ListConfigResources of every type: %v; want %v", kinds, want)
	}
	lru := kmsg.NewPtrListConfigResourcesRequest()
	lru.Version, lru.ResourceTypes = 1, []int8{int8(kmsg.ConfigResourceTypeBrokerLogger), 99}
	if r, err := lru.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ListConfigResources of an unknown type: %v %+v; want UNSUPPORTED_VERSION", err, r)
	}

	// g1 reads what was written before it existed, with its own lock duration.
	topicID := topicIDOf(t, ctx, cl, "q")
	m := &shareClient{t: t, cl: cl, group: "g1", member: "m1", topic: topicID}
	if r := m.heartbeat(ctx, 0, []string{"q"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	var got string
	var lock int32
	for got == "" && ctx.Err() == nil {
		r := m.fetch(ctx, 200*time.Millisecond)
		got, lock = acquired(r), r.AcquisitionLockTimeoutMillis
	}
	if got != "0-9/1" || lock != 15000 {
		t.Fatalf("g1 acquired %q with a %d ms lock; want 0-9/1 (earliest) and 15000", got, lock)
	}
	// share.delivery.count.limit=2: offset 0 released twice is archived, not offered a third time.
	if got := acquired(m.fetch(ctx, time.Second, [3]int64{0, 0, 2}, [3]int64{1, 9, 1})); got != "0-0/2" {
		t.Fatalf("after releasing 0: acquired %q; want 0-0/2", got)
	}
	if got := acquired(m.fetch(ctx, 300*time.Millisecond, [3]int64{0, 0, 2})); got != "" {
		t.Fatalf("after releasing 0 a second time: acquired %q; want nothing (archived at the group's limit of 2)", got)
	}
	// The share metrics: 11 deliveries, 9 accepted, 0 released twice; all done (start 10, lag 0).
	metrics := scrape(t, b.s.AdminAddr())
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"runnel_share_delivered_records_total", `group="g1"`, 11},
		{"runnel_share_acknowledged_records_total", `type="accept"`, 9},
		{"runnel_share_acknowledged_records_total", `type="release"`, 2},
		{"runnel_share_start_offset", `group="g1"`, 10},
		{"runnel_share_lag_records", `group="g1"`, 0},
		{"runnel_share_acquired_records", `group="g1"`, 0},
	} {
		if got := sumSeries(metrics, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v; want %v", c.name, c.labels, got, c.want)
		}
	}

	// Transactions: one aborted, one committed, one left open.
	writeShareTxns(t, ctx, b.addr, "q")
	m2 := &shareClient{t: t, cl: cl, group: "g2", member: "m2", topic: topicID}
	if r := m2.heartbeat(ctx, 0, []string{"q"}); r.ErrorCode != 0 {
		t.Fatalf("join g2: %+v", r)
	}
	if s := acquiredWithin(ctx, m2, 3*time.Second); s != "0-9/1 12-14/1" {
		t.Fatalf("read_committed g2 acquired %q; want 0-9/1 12-14/1 (10-11 aborted, 15 on open, markers acquired for the client to skip)", s)
	}

	// Configs are the controller's: kept across a restart; removing the last one forgets the group.
	b = b.restart()
	cl2 := b.client()
	cl = cl2
	if c := describe("g2")["share.isolation.level"]; *c.Value != "read_committed" {
		t.Fatalf("after a restart: share.isolation.level=%s", *c.Value)
	}
	if err := alter("g2", false, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "share.isolation.level"}, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "share.auto.offset.reset"}); err != nil {
		t.Fatal(err)
	}
	if listed, err := lr.RequestWith(ctx, cl); err != nil || len(listed.ConfigResources) != 1 {
		t.Fatalf("ListConfigResources after g2's configs were deleted: %v %+v; want g1 only", err, listed)
	}
}

// TestShareGroupAdminTools: a share group in the console (its list and page, the lag API) and
// in `runnel group describe`: its members and assignments, its start offsets and lag per
// partition; a reset of its start offsets (AlterShareGroupOffsets) once it has no members.
func TestShareGroupAdminTools(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("sq", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("sq"))
	m := &shareClient{t: t, cl: cl, group: "sg", member: "sm", topic: topicIDOf(t, ctx, cl, "sq")}
	if r := m.heartbeat(ctx, 0, []string{"sq"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	m.fetch(ctx, 0) // the share-partition starts at the end, 0
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var got string
	for got == "" && ctx.Err() == nil {
		got = acquired(m.fetch(ctx, 200*time.Millisecond))
	}
	if r := m.ack(ctx, m.epoch, [3]int64{0, 1, 1}); r.ErrorCode != 0 { // 0-1 accepted; 2-4 held
		t.Fatalf("ack: %+v", r)
	}
	// The start is 2; three records left.
	code, body, err := adminGet(t, b.s.AdminAddr(), "/api/v1/groups/sg/lag")
	if err != nil || code != 200 || !strings.Contains(body, `"total":3`) {
		t.Fatalf("lag API of the share group: %d %v %s; want a total of 3", code, err, body)
	}
	code, body, err = adminGet(t, b.s.AdminAddr(), "/groups")
	if err != nil || code != 200 || !strings.Contains(body, ">sg</a></td><td>Stable</td><td>share</td><td>1</td><td>3") {
		t.Fatalf("groups page: %d %v\n%s", code, err, body)
	}
	code, body, err = adminGet(t, b.s.AdminAddr(), "/groups/sg")
	if err != nil || code != 200 || !strings.Contains(body, "Start offset") || !strings.Contains(body, "sq/0") ||
		!strings.Contains(body, "<td>sq</td><td>0</td><td>2</td><td>5</td>") {
		t.Fatalf("share group page: %d %v\n%s", code, err, body)
	}
	out := runGroup(t, b.addr, "describe", "sg")
	if !strings.Contains(out, `protocol "share"`) || !strings.Contains(out, "sm") || !strings.Contains(out, "START") {
		t.Fatalf("runnel group describe of a share group:\n%s", out)
	}
	// A reset needs the members gone.
	if _, err := runCommand("group", b.addr, "reset-offsets", "sg", "--topic", "sq", "--to-earliest"); err == nil {
		t.Fatal("a reset of a share group with a member succeeded")
	}
	m.epoch = -1
	if r := m.fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("closing the session: %+v", r)
	}
	if r := m.heartbeat(ctx, -1, nil); r.ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	runGroup(t, b.addr, "reset-offsets", "sg", "--topic", "sq", "--to-earliest")
	code, body, _ = adminGet(t, b.s.AdminAddr(), "/api/v1/groups/sg/lag")
	if code != 200 || !strings.Contains(body, `"total":5`) {
		t.Fatalf("lag after a reset to the earliest offset: %d %s; want 5", code, body)
	}
}
