package broker

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/topics"
)

// adminClients returns a kgo client and a kadm client of the broker at addr.
func adminClients(t *testing.T, addr string) (context.Context, *kgo.Client, *kadm.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return ctx, cl, kadm.NewClient(cl)
}

// rawRequest sends req at exactly its version on a fresh connection and decodes the response.
func rawRequest(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("admin-test")).AppendRequest(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("%s v%d: reading the response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 7 {
		t.Fatalf("correlation id = %d; want 7", corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // empty response header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func msg(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

// produceN produces n records to partition 0 of topic, one batch each.
func produceN(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func mustCreate(t *testing.T, ctx context.Context, adm *kadm.Client, partitions int32, configs map[string]*string, names ...string) {
	t.Helper()
	resps, err := adm.CreateTopics(ctx, partitions, -1, configs, names...)
	if err != nil {
		t.Fatal(err)
	}
	if err := resps.Error(); err != nil {
		t.Fatal(err)
	}
}

func TestApiVersionsAdvertisesAdminAPIs(t *testing.T) {
	addr, _ := testBroker(t)
	resp := rawRequest(t, addr, &kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "t", ClientSoftwareVersion: "1"}).(*kmsg.ApiVersionsResponse)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for _, tc := range []struct {
		key      kmsg.Key
		min, max int16
	}{
		{kmsg.CreateTopics, 0, 7}, {kmsg.DeleteTopics, 0, 6}, {kmsg.CreatePartitions, 0, 3},
		{kmsg.DescribeConfigs, 0, 4}, {kmsg.AlterConfigs, 0, 2}, {kmsg.IncrementalAlterConfigs, 0, 1},
		{kmsg.DescribeCluster, 0, 2}, {kmsg.DeleteRecords, 0, 2}, {kmsg.OffsetForLeaderEpoch, 0, 4},
		{kmsg.DescribeLogDirs, 0, 4},
	} {
		if g, want := got[tc.key.Int16()], [2]int16{tc.min, tc.max}; g != want {
			t.Errorf("ApiVersions(%s) = %v; want %v", kmsg.NameForKey(tc.key.Int16()), g, want)
		}
	}
}

func TestCreateTopics(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "exists", "a.b")

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	add := func(name string, partitions int32, rf int16, configs map[string]string, assignment ...[]int32) {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
		for k, v := range configs {
			rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
		}
		for i, replicas := range assignment {
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(i), Replicas: replicas})
		}
		req.Topics = append(req.Topics, rt)
	}
	type want struct {
		code       int16
		partitions int32 // when created
		configs    map[string]string
	}
	cases := map[string]want{
		"ok":            {0, 3, map[string]string{"retention.ms": "1000"}},
		"default-parts": {0, 1, nil},
		"assigned":      {0, 2, nil},
		"rf3":           {kerr.InvalidReplicationFactor.Code, 0, nil},
		"rf0":           {kerr.InvalidReplicationFactor.Code, 0, nil},
		"zero-parts":    {kerr.InvalidPartitions.Code, 0, nil},
		"bad-config":    {kerr.InvalidConfig.Code, 0, nil},
		"unknown-cfg":   {kerr.InvalidConfig.Code, 0, nil},
		"bad/name":      {kerr.InvalidTopicException.Code, 0, nil},
		"dup":           {kerr.InvalidRequest.Code, 0, nil},
		"exists":        {kerr.TopicAlreadyExists.Code, 0, nil},
		"a_b":           {kerr.InvalidTopicException.Code, 0, nil},
		"other-broker":  {kerr.InvalidReplicaAssignment.Code, 0, nil},
		"assign-count":  {kerr.InvalidRequest.Code, 0, nil},
	}
	add("ok", 3, -1, map[string]string{"retention.ms": "1000"})
	add("default-parts", -1, 1, nil)
	add("assigned", -1, -1, nil, []int32{1}, []int32{1})
	add("rf3", 1, 3, nil)
	add("rf0", 1, 0, nil)
	add("zero-parts", 0, -1, nil)
	add("bad-config", 1, -1, map[string]string{"retention.ms": "soon"})
	add("unknown-cfg", 1, -1, map[string]string{"no.such.config": "1"})
	add("bad/name", 1, -1, nil)
	add("dup", 1, -1, nil)
	add("dup", 2, -1, nil)
	add("exists", 1, -1, nil)
	add("a_b", 1, -1, nil)
	add("other-broker", -1, -1, nil, []int32{2})
	add("assign-count", 2, -1, nil, []int32{1})
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != len(cases) {
		t.Errorf("CreateTopics answered %d topics; want %d (one per distinct name)", len(resp.Topics), len(cases))
	}
	for _, st := range resp.Topics {
		w, ok := cases[st.Topic]
		if !ok {
			t.Errorf("unexpected topic %q in the response", st.Topic)
			continue
		}
		if st.ErrorCode != w.code {
			t.Errorf("CreateTopics(%s) error = %s (%v); want %s", st.Topic, errName(st.ErrorCode), msg(st.ErrorMessage), errName(w.code))
			continue
		}
		if w.code != 0 {
			if st.ErrorMessage == nil || *st.ErrorMessage == "" {
				t.Errorf("CreateTopics(%s) has no error message", st.Topic)
			}
			if _, ok := reg.Get(st.Topic); ok && st.Topic != "exists" && st.Topic != "a.b" {
				t.Errorf("CreateTopics(%s) failed but created the topic", st.Topic)
			}
			continue
		}
		topic, ok := reg.Get(st.Topic)
		if !ok {
			t.Errorf("CreateTopics(%s) succeeded; topic not in the registry", st.Topic)
			continue
		}
		if got := int32(len(topic.Partitions)); got != w.partitions || st.NumPartitions != w.partitions || st.ReplicationFactor != 1 {
			t.Errorf("CreateTopics(%s) = %d partitions (response %d, rf %d); want %d, rf 1", st.Topic, got, st.NumPartitions, st.ReplicationFactor, w.partitions)
		}
		if st.TopicID != topic.ID || st.TopicID == [16]byte{} {
			t.Errorf("CreateTopics(%s) TopicID = %x; want %x", st.Topic, st.TopicID, topic.ID)
		}
		if want := w.configs; !reflect.DeepEqual(topic.Configs, want) && !(len(want) == 0 && len(topic.Configs) == 0) {
			t.Errorf("CreateTopics(%s) configs = %v; want %v", st.Topic, topic.Configs, want)
		}
		if len(st.Configs) != len(topics.Defs()) {
			t.Errorf("CreateTopics(%s) returned %d configs; want %d", st.Topic, len(st.Configs), len(topics.Defs()))
		}
		for _, c := range st.Configs {
			v, isDefault := topic.Effective(c.Name)
			wantSource := int8(5)
			if !isDefault {
				wantSource = 1
			}
			if c.Value == nil || *c.Value != v || c.Source != wantSource || c.ReadOnly || c.IsSensitive {
				t.Errorf("CreateTopics(%s) config %s = %v source %d; want %q source %d", st.Topic, c.Name, c.Value, c.Source, v, wantSource)
			}
		}
	}

	// Metadata shows a created topic with its id.
	md, err := adm.Metadata(ctx, "ok")
	if err != nil {
		t.Fatal(err)
	}
	okTopic, _ := reg.Get("ok")
	if d := md.Topics["ok"]; d.Err != nil || d.ID != kadm.TopicID(okTopic.ID) || len(d.Partitions) != 3 {
		t.Errorf("Metadata(ok) = id %v, %d partitions, err %v; want id %x, 3 partitions", d.ID, len(d.Partitions), d.Err, okTopic.ID)
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	resps, err := adm.ValidateCreateTopics(ctx, 4, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "dry")
	if err != nil {
		t.Fatal(err)
	}
	r := resps["dry"]
	if r.Err != nil || r.NumPartitions != 4 || r.ReplicationFactor != 1 {
		t.Errorf("ValidateCreateTopics(dry) = %d partitions, rf %d, err %v; want 4, 1, nil", r.NumPartitions, r.ReplicationFactor, r.Err)
	}
	if c := r.Configs["cleanup.policy"]; c.Value == nil || *c.Value != "compact" {
		t.Errorf("ValidateCreateTopics(dry) cleanup.policy = %v; want compact", c.Value)
	}
	if _, ok := reg.Get("dry"); ok {
		t.Error("validate-only CreateTopics created the topic")
	}
	if _, err := os.Stat(filepath.Join(reg.Dir(), "dry")); !os.IsNotExist(err) {
		t.Errorf("validate-only CreateTopics left a directory: %v", err)
	}
}

func TestCreateTopicsOldVersions(t *testing.T) {
	addr, reg := testBroker(t)
	for v := int16(0); v <= 7; v++ {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.TimeoutMillis = v, 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "v"+strconv.Itoa(int(v)), 2, 1
		bad := kmsg.NewCreateTopicsRequestTopic()
		bad.Topic, bad.NumPartitions, bad.ReplicationFactor = "bad", 1, 2
		req.Topics = []kmsg.CreateTopicsRequestTopic{rt, bad}
		resp := rawRequest(t, addr, req).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.InvalidReplicationFactor.Code {
			t.Errorf("CreateTopics v%d = %+v; want success then INVALID_REPLICATION_FACTOR", v, resp.Topics)
			continue
		}
		if gotMsg := resp.Topics[1].ErrorMessage != nil; gotMsg != (v >= 1) {
			t.Errorf("CreateTopics v%d error message present = %v; want %v", v, gotMsg, v >= 1)
		}
		if tp, ok := reg.Get(rt.Topic); !ok || len(tp.Partitions) != 2 {
			t.Errorf("CreateTopics v%d did not create %s with 2 partitions", v, rt.Topic)
		}
	}
}

func TestDeleteTopics(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "by-name", "by-id", "both", "old")

	resps, err := adm.DeleteTopics(ctx, "by-name", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["by-name"]; r.Err != nil {
		t.Errorf("DeleteTopics(by-name) = %v; want success", r.Err)
	}
	if r := resps["missing"]; r.Err != kerr.UnknownTopicOrPartition {
		t.Errorf("DeleteTopics(missing) = %v; want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
	if _, ok := reg.Get("by-name"); ok {
		t.Error("by-name is still in the registry")
	}
	if _, err := os.Stat(filepath.Join(reg.Dir(), "by-name")); !os.IsNotExist(err) {
		t.Errorf("by-name's directory is still there: %v", err)
	}

	byID, _ := reg.Get("by-id")
	both, _ := reg.Get("both")
	unknownID := [16]byte{1, 2, 3}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		{TopicID: byID.ID},
		{TopicID: unknownID},
		{Topic: kmsg.StringPtr("both"), TopicID: both.ID},
		{},
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	wants := []struct {
		name *string
		id   [16]byte
		code int16
	}{
		{nil, unknownID, kerr.UnknownTopicID.Code},
		{kmsg.StringPtr("both"), both.ID, kerr.InvalidRequest.Code},
		{nil, [16]byte{}, kerr.InvalidRequest.Code},
		{kmsg.StringPtr("by-id"), byID.ID, 0},
	}
	if len(resp.Topics) != len(wants) {
		t.Fatalf("DeleteTopics v%d answered %d topics; want %d", resp.Version, len(resp.Topics), len(wants))
	}
	for i, w := range wants {
		got := resp.Topics[i]
		if !reflect.DeepEqual(got.Topic, w.name) || got.TopicID != w.id || got.ErrorCode != w.code {
			t.Errorf("DeleteTopics result %d = %q %x %s; want %q %x %s", i, msg(got.Topic), got.TopicID, errName(got.ErrorCode), msg(w.name), w.id, errName(w.code))
		}
	}
	if _, ok := reg.GetByID(byID.ID); ok {
		t.Error("by-id is still in the registry")
	}
	if _, ok := reg.Get("both"); !ok {
		t.Error("both was deleted by an invalid request")
	}

	old := rawRequest(t, addr, &kmsg.DeleteTopicsRequest{Version: 0, TopicNames: []string{"old"}, TimeoutMillis: 5000}).(*kmsg.DeleteTopicsResponse)
	if len(old.Topics) != 1 || old.Topics[0].ErrorCode != 0 {
		t.Errorf("DeleteTopics v0 = %+v; want success", old.Topics)
	}
	// A deleted topic's name can be created again.
	mustCreate(t, ctx, adm, 1, nil, "by-name")
}

func TestCreatePartitions(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "grow")

	if r, err := adm.ValidateUpdatePartitions(ctx, 5, "grow"); err != nil || r["grow"].Err != nil {
		t.Fatalf("ValidateUpdatePartitions = %v, %v", r, err)
	}
	if tp, _ := reg.Get("grow"); len(tp.Partitions) != 2 {
		t.Errorf("validate-only CreatePartitions grew the topic to %d", len(tp.Partitions))
	}
	if r, err := adm.UpdatePartitions(ctx, 4, "grow"); err != nil || r["grow"].Err != nil {
		t.Fatalf("UpdatePartitions(4) = %v, %v", r, err)
	}
	if tp, _ := reg.Get("grow"); len(tp.Partitions) != 4 {
		t.Errorf("after UpdatePartitions(4), the topic has %d partitions", len(tp.Partitions))
	}

	for _, tc := range []struct {
		name       string
		count      int32
		assignment [][]int32
		want       int16
	}{
		{"same", 4, nil, kerr.InvalidPartitions.Code},
		{"shrink", 3, nil, kerr.InvalidPartitions.Code},
		{"other-broker", 5, [][]int32{{2}}, kerr.InvalidReplicaAssignment.Code},
		{"two-replicas", 5, [][]int32{{1, 1}}, kerr.InvalidReplicaAssignment.Code},
		{"assignment-count", 6, [][]int32{{1}}, kerr.InvalidReplicaAssignment.Code},
		{"self", 5, [][]int32{{1}}, 0},
		{"unknown-topic", 5, nil, kerr.UnknownTopicOrPartition.Code},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "grow", tc.count
		if tc.name == "unknown-topic" {
			rt.Topic = "nope"
		}
		for _, rs := range tc.assignment {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: rs})
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].ErrorCode; got != tc.want {
			t.Errorf("CreatePartitions(%s) = %s; want %s", tc.name, errName(got), errName(tc.want))
		}
	}
	if tp, _ := reg.Get("grow"); len(tp.Partitions) != 5 {
		t.Errorf("the topic has %d partitions; want 5", len(tp.Partitions))
	}
	// The new partitions work.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: 4, Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("producing to a new partition: %v", err)
	}
}

func TestDescribeConfigs(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")}, "cfg")

	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	for _, r := range []struct {
		typ   kmsg.ConfigResourceType
		name  string
		names []string
	}{
		{kmsg.ConfigResourceTypeTopic, "cfg", nil},
		{kmsg.ConfigResourceTypeTopic, "cfg", []string{"segment.bytes", "no.such"}},
		{kmsg.ConfigResourceTypeTopic, "missing", nil},
		{kmsg.ConfigResourceTypeBroker, "1", nil},
		{kmsg.ConfigResourceTypeBroker, "", nil},
		{kmsg.ConfigResourceTypeBroker, "2", nil},
		{kmsg.ConfigResourceTypeBrokerLogger, "1", nil},
	} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = r.typ, r.name, r.names
		req.Resources = append(req.Resources, rr)
	}
	req.Version = 4
	resp := rawRequest(t, addr, req).(*kmsg.DescribeConfigsResponse)

	if len(resp.Resources) != 7 {
		t.Fatalf("DescribeConfigs answered %d resources; want 7", len(resp.Resources))
	}
	byName := func(r kmsg.DescribeConfigsResponseResource) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		m := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range r.Configs {
			m[c.Name] = c
		}
		return m
	}
	type syn struct {
		name, value string
		source      kmsg.ConfigSource
	}
	synonyms := func(c kmsg.DescribeConfigsResponseResourceConfig) []syn {
		var out []syn
		for _, s := range c.ConfigSynonyms {
			out = append(out, syn{s.Name, *s.Value, s.Source})
		}
		return out
	}

	all := byName(resp.Resources[0])
	if resp.Resources[0].ErrorCode != 0 || len(all) != len(topics.Defs()) {
		t.Errorf("DescribeConfigs(cfg) = %s, %d configs; want every one of %d", errName(resp.Resources[0].ErrorCode), len(all), len(topics.Defs()))
	}
	for _, tc := range []struct {
		name     string
		value    string
		source   kmsg.ConfigSource
		typ      kmsg.ConfigType
		synonyms []syn
	}{
		{"retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigTypeLong,
			// No default synonym: Kafka's log.retention.ms has none (log.retention.hours has).
			[]syn{{"retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig}}},
		{"segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt,
			[]syn{{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig}}},
		{"cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeList,
			[]syn{{"log.cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig}}},
		{"runnel.storage", "local", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeString, nil},
	} {
		c, ok := all[tc.name]
		if !ok {
			t.Errorf("DescribeConfigs(cfg) lacks %s", tc.name)
			continue
		}
		if c.Value == nil || *c.Value != tc.value || c.Source != tc.source || c.ConfigType != tc.typ || c.ReadOnly || c.Documentation == nil {
			t.Errorf("DescribeConfigs(cfg)[%s] = %v source %v type %v readOnly %v doc %v; want %q source %v type %v", tc.name, c.Value, c.Source, c.ConfigType, c.ReadOnly, c.Documentation, tc.value, tc.source, tc.typ)
		}
		if got := synonyms(c); !reflect.DeepEqual(got, tc.synonyms) {
			t.Errorf("DescribeConfigs(cfg)[%s] synonyms = %v; want %v", tc.name, got, tc.synonyms)
		}
	}
	if got := byName(resp.Resources[1]); len(got) != 1 || got["segment.bytes"].Name == "" {
		t.Errorf("DescribeConfigs(cfg, [segment.bytes no.such]) = %v; want only segment.bytes", got)
	}
	if got := resp.Resources[2].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("DescribeConfigs(missing) = %s; want UNKNOWN_TOPIC_OR_PARTITION", errName(got))
	}
	brk := byName(resp.Resources[3])
	for _, tc := range []struct {
		name, value string
		source      kmsg.ConfigSource
		readOnly    bool
	}{
		{"broker.id", "1", kmsg.ConfigSourceStaticBrokerConfig, true},
		{"node.id", "1", kmsg.ConfigSourceStaticBrokerConfig, true}, // as Kafka's KRaft nodes (it used to be left out)
		// Static configs left at their defaults are DEFAULT_CONFIG, as Kafka's not named in
		// server.properties (they used to be STATIC_BROKER_CONFIG: TestStaticBrokerConfigSources).
		{"auto.create.topics.enable", "true", kmsg.ConfigSourceDefaultConfig, true},
		// Listed for the tools that read it before deleting topics (it used to be left out).
		{"delete.topic.enable", "true", kmsg.ConfigSourceDefaultConfig, true},
		{"num.partitions", "1", kmsg.ConfigSourceDefaultConfig, true},
		{"socket.request.max.bytes", "104857600", kmsg.ConfigSourceDefaultConfig, true},
		{"fetch.max.bytes", "57671680", kmsg.ConfigSourceDefaultConfig, true},
		{"replica.lag.time.max.ms", "30000", kmsg.ConfigSourceDefaultConfig, true}, // Kafka's default since 2.5
		// Left automatic (0), a replication factor is described as what it is now (one node: 1).
		{"offsets.topic.replication.factor", "1", kmsg.ConfigSourceDefaultConfig, true},
		{"transaction.state.log.replication.factor", "1", kmsg.ConfigSourceDefaultConfig, true},
		{"default.replication.factor", "1", kmsg.ConfigSourceDefaultConfig, true},
		{"message.max.bytes", "1048588", kmsg.ConfigSourceDefaultConfig, false}, // dynamic: topic defaults
		{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig, false},
		{"log.cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig, false},
		{"write_caching_default", "false", kmsg.ConfigSourceDefaultConfig, false},
		// As Kafka: the hours and scheduler configs that give the defaults of the ms ones,
		// read-only, and log.retention.ms itself null while unset (below).
		{"log.retention.hours", "168", kmsg.ConfigSourceDefaultConfig, true},
		{"log.roll.hours", "168", kmsg.ConfigSourceDefaultConfig, true},
		{"log.roll.jitter.hours", "0", kmsg.ConfigSourceDefaultConfig, true},
		{"log.flush.scheduler.interval.ms", "9223372036854775807", kmsg.ConfigSourceDefaultConfig, true},
		// The group coordinator's, as tools read them.
		{"offsets.retention.minutes", "10080", kmsg.ConfigSourceDefaultConfig, true},
		{"group.initial.rebalance.delay.ms", "3000", kmsg.ConfigSourceDefaultConfig, true},
		{"group.min.session.timeout.ms", "6000", kmsg.ConfigSourceDefaultConfig, true},
		{"group.max.session.timeout.ms", "1800000", kmsg.ConfigSourceDefaultConfig, true},
		{"offset.metadata.max.bytes", "4096", kmsg.ConfigSourceDefaultConfig, true},
	} {
		c, ok := brk[tc.name]
		if !ok || c.Value == nil || *c.Value != tc.value || c.Source != tc.source || c.ReadOnly != tc.readOnly {
			t.Errorf("DescribeConfigs(broker 1)[%s] = %v source %v readOnly %v; want %q source %v readOnly %v", tc.name, c.Value, c.Source, c.ReadOnly, tc.value, tc.source, tc.readOnly)
		}
	}
	for _, name := range []string{"log.retention.ms", "log.retention.minutes", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"} {
		if c, ok := brk[name]; !ok || c.Value != nil || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("DescribeConfigs(broker 1)[%s] = %v (listed %v) source %v; want null, DEFAULT_CONFIG, as Kafka", name, c.Value, ok, c.Source)
		}
	}
	if want := 24 + len(dynamicBrokerConfigNames()); len(brk) != want {
		t.Errorf("DescribeConfigs(broker 1) has %d configs; want %d (24 static + every dynamic one)", len(brk), want)
	}
	if r := resp.Resources[4]; r.ErrorCode != 0 || len(r.Configs) != 0 {
		t.Errorf("DescribeConfigs(broker \"\") = %s, %d configs; want no error and no dynamic defaults", errName(r.ErrorCode), len(r.Configs))
	}
	if got := resp.Resources[5].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("DescribeConfigs(broker \"2\") = %s; want INVALID_REQUEST", errName(got))
	}
	// BROKER_LOGGER used to be INVALID_REQUEST; it lists the node's root logger (brokerloggers_test.go).
	if r := resp.Resources[6]; r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Name != "root" {
		t.Errorf("DescribeConfigs(BROKER_LOGGER \"1\") = %s, %d configs; want NONE with root", errName(r.ErrorCode), len(r.Configs))
	}

	// kadm, at the newest version, and v0 (IsDefault, no synonyms).
	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On("cfg", nil); err != nil || len(rc.Configs) != len(topics.Defs()) {
		t.Errorf("kadm DescribeTopicConfigs(cfg) = %d configs, %v", len(rc.Configs), err)
	}
	v0 := rawRequest(t, addr, &kmsg.DescribeConfigsRequest{Version: 0, Resources: []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "cfg", ConfigNames: []string{"retention.ms", "segment.bytes"}},
	}}).(*kmsg.DescribeConfigsResponse)
	got := map[string]bool{}
	for _, c := range v0.Resources[0].Configs {
		got[c.Name] = c.IsDefault
	}
	if want := map[string]bool{"retention.ms": false, "segment.bytes": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("DescribeConfigs v0 IsDefault = %v; want %v", got, want)
	}
}

// reopenConfigs reads a topic's configs from a registry opened on a copy of reg's data dir: what
// a restart would see.
func reopenConfigs(t *testing.T, reg *topics.Registry, topic string) map[string]string {
	t.Helper()
	dataDir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dataDir, "topics", topic), os.DirFS(filepath.Join(reg.Dir(), topic))); err != nil {
		t.Fatal(err)
	}
	flusher := logstore.NewFlusher(0)
	defer flusher.Close()
	r2, err := topics.Open(topics.Options{DataDir: dataDir, Flusher: flusher, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	local, err := r2.LocalTopics()
	if err != nil || len(local) != 1 {
		t.Fatalf("reopened registry: %v, %v; want topic %s", local, err, topic)
	}
	return maps.Clone(local[0].Configs)
}

func TestAlterConfigsReplaces(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")}, "alt")

	set := func(kvs ...string) []kadm.AlterConfig {
		var out []kadm.AlterConfig
		for i := 0; i < len(kvs); i += 2 {
			out = append(out, kadm.AlterConfig{Name: kvs[i], Value: kmsg.StringPtr(kvs[i+1])})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		configs  []kadm.AlterConfig
		validate bool
		wantErr  error
		want     map[string]string
	}{
		{"replace", set("segment.bytes", "2000000", "cleanup.policy", "compact"), false, nil, map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"validate-only", set("retention.ms", "5"), true, nil, map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"invalid", set("segment.bytes", "1"), false, kerr.InvalidConfig, map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"unknown", set("bogus", "1"), false, kerr.InvalidConfig, map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"null", []kadm.AlterConfig{{Name: "retention.ms"}}, false, kerr.InvalidRequest, map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"duplicate-key", set("retention.ms", "5", "retention.ms", "6"), false, kerr.InvalidRequest, map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"replace-again", set("retention.ms", "5"), false, nil, map[string]string{"retention.ms": "5"}},
		{"clear", nil, false, nil, map[string]string{}},
	} {
		alter := adm.AlterTopicConfigsState
		if tc.validate {
			alter = adm.ValidateAlterTopicConfigsState
		}
		resps, err := alter(ctx, tc.configs, "alt")
		if err != nil {
			t.Fatal(err)
		}
		if got := resps[0].Err; got != tc.wantErr {
			t.Errorf("AlterConfigs(%s) = %v (%s); want %v", tc.name, got, resps[0].ErrMessage, tc.wantErr)
		}
		tp, _ := reg.Get("alt")
		if !reflect.DeepEqual(tp.Configs, tc.want) {
			t.Errorf("after AlterConfigs(%s), configs = %v; want %v", tc.name, tp.Configs, tc.want)
		}
	}
	if _, err := adm.AlterTopicConfigsState(ctx, set("retention.ms", "7", "cleanup.policy", "delete,compact"), "alt"); err != nil {
		t.Fatal(err)
	}
	if got, want := reopenConfigs(t, reg, "alt"), map[string]string{"retention.ms": "7", "cleanup.policy": "delete,compact"}; !reflect.DeepEqual(got, want) {
		t.Errorf("configs after a reopen = %v; want %v", got, want)
	}
	tp, _ := reg.Get("alt")
	if got := tp.Partitions[0].Log.Config(); !got.Compact || !got.Delete {
		t.Errorf("log config after altering cleanup.policy: compact %v, delete %v; want both", got.Compact, got.Delete)
	}

	for _, tc := range []struct {
		broker  string
		configs []kadm.AlterConfig
		want    error
	}{
		{"1", set("num.partitions", "3"), kerr.InvalidRequest},
		{"1", set("log.retention.ms", "abc"), kerr.InvalidRequest}, // a bad value: as Kafka, not INVALID_CONFIG
		{"2", nil, kerr.InvalidRequest},
		{"1", nil, nil},
	} {
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, tc.broker
		for _, c := range tc.configs {
			rr.Configs = append(rr.Configs, kmsg.AlterConfigsRequestResourceConfig{Name: c.Name, Value: c.Value})
		}
		req.Resources = append(req.Resources, rr)
		resp := rawRequest(t, addr, req).(*kmsg.AlterConfigsResponse)
		if got := kerr.ErrorForCode(resp.Resources[0].ErrorCode); got != tc.want {
			t.Errorf("AlterConfigs(broker %s, %d configs) = %v; want %v", tc.broker, len(tc.configs), got, tc.want)
		}
	}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "inc")

	op := func(o kadm.IncrementalOp, name string, value ...string) kadm.AlterConfig {
		c := kadm.AlterConfig{Op: o, Name: name}
		if len(value) > 0 {
			c.Value = kmsg.StringPtr(value[0])
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		ops      []kadm.AlterConfig
		validate bool
		wantErr  error
		want     map[string]string
	}{
		{"set", []kadm.AlterConfig{op(kadm.SetConfig, "retention.ms", "1000"), op(kadm.SetConfig, "segment.bytes", "2000000")}, false, nil,
			map[string]string{"retention.ms": "1000", "segment.bytes": "2000000"}},
		{"append to the default", []kadm.AlterConfig{op(kadm.AppendConfig, "cleanup.policy", "compact")}, false, nil,
			map[string]string{"retention.ms": "1000", "segment.bytes": "2000000", "cleanup.policy": "delete,compact"}},
		{"append present", []kadm.AlterConfig{op(kadm.AppendConfig, "cleanup.policy", "delete")}, false, nil,
			map[string]string{"retention.ms": "1000", "segment.bytes": "2000000", "cleanup.policy": "delete,compact"}},
		{"subtract", []kadm.AlterConfig{op(kadm.SubtractConfig, "cleanup.policy", "delete")}, false, nil,
			map[string]string{"retention.ms": "1000", "segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"delete", []kadm.AlterConfig{op(kadm.DeleteConfig, "retention.ms"), op(kadm.DeleteConfig, "flush.ms")}, false, nil,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"validate-only", []kadm.AlterConfig{op(kadm.DeleteConfig, "segment.bytes")}, true, nil,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"append to a non-list", []kadm.AlterConfig{op(kadm.AppendConfig, "retention.ms", "5")}, false, kerr.InvalidConfig,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		// An empty cleanup.policy is valid, as in Kafka 4.1 (KIP-1161; TestEmptyCleanupPolicyAccepted).
		{"subtract to empty", []kadm.AlterConfig{op(kadm.SubtractConfig, "cleanup.policy", "compact")}, true, nil,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"set unknown", []kadm.AlterConfig{op(kadm.SetConfig, "bogus", "1")}, false, kerr.InvalidConfig,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"set invalid (all or nothing)", []kadm.AlterConfig{op(kadm.SetConfig, "retention.ms", "5"), op(kadm.SetConfig, "segment.bytes", "x")}, false, kerr.InvalidConfig,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
		{"duplicate key", []kadm.AlterConfig{op(kadm.SetConfig, "retention.ms", "5"), op(kadm.DeleteConfig, "retention.ms")}, false, kerr.InvalidRequest,
			map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}},
	} {
		alter := adm.AlterTopicConfigs
		if tc.validate {
			alter = adm.ValidateAlterTopicConfigs
		}
		resps, err := alter(ctx, tc.ops, "inc")
		if err != nil {
			t.Fatal(err)
		}
		if got := resps[0].Err; got != tc.wantErr {
			t.Errorf("IncrementalAlterConfigs(%s) = %v (%s); want %v", tc.name, got, resps[0].ErrMessage, tc.wantErr)
		}
		tp, _ := reg.Get("inc")
		if !reflect.DeepEqual(tp.Configs, tc.want) {
			t.Errorf("after IncrementalAlterConfigs(%s), configs = %v; want %v", tc.name, tp.Configs, tc.want)
		}
	}
	if got, want := reopenConfigs(t, reg, "inc"), map[string]string{"segment.bytes": "2000000", "cleanup.policy": "compact"}; !reflect.DeepEqual(got, want) {
		t.Errorf("configs after a reopen = %v; want %v", got, want)
	}

	// Unknown topics, broker resources and duplicate resources, in one request.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		set  bool
	}{
		{kmsg.ConfigResourceTypeTopic, "missing", true},
		{kmsg.ConfigResourceTypeBroker, "1", true},
		{kmsg.ConfigResourceTypeTopic, "inc", true},
		{kmsg.ConfigResourceTypeTopic, "inc", true},
	} {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("9")}}
		req.Resources = append(req.Resources, rr)
	}
	req.Version = 1
	resp := rawRequest(t, addr, req).(*kmsg.IncrementalAlterConfigsResponse)

	// Each mention of the duplicated resource is answered, as Kafka's ConfigAdminManager.preprocess.
	wantCodes := []int16{kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	var got []int16
	for _, r := range resp.Resources {
		got = append(got, r.ErrorCode)
	}
	if !reflect.DeepEqual(got, wantCodes) {
		t.Errorf("IncrementalAlterConfigs(missing, broker, dup, dup) = %v; want %v", got, wantCodes)
	}
}

func TestDescribeCluster(t *testing.T) {
	addr, _ := testBroker(t)
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		version  int16
		endpoint int8
		ops      bool
		wantCode int16
		wantOps  int32
	}{
		{0, 0, false, 0, notRequested},
		{0, 0, true, 0, 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12}, // no authorizer: every cluster operation
		{1, 1, false, 0, notRequested},
		// The controllers type is another endpoint's (it used to be answered
		// UNSUPPORTED_ENDPOINT_TYPE, as the unknown types are), as Kafka's broker answers.
		{1, 2, false, kerr.MismatchedEndpointType.Code, notRequested},
		{1, 0, false, kerr.UnsupportedEndpointType.Code, notRequested},
		{1, 3, false, kerr.UnsupportedEndpointType.Code, notRequested},
	} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.IncludeClusterAuthorizedOperations = tc.version, tc.ops
		if tc.version >= 1 {
			req.EndpointType = tc.endpoint
		}
		resp := rawRequest(t, addr, req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != tc.wantCode || resp.ClusterAuthorizedOperations != tc.wantOps {
			t.Errorf("DescribeCluster v%d(endpoint %d, ops %v) = %s, ops %d; want %s, ops %d", tc.version, tc.endpoint, tc.ops,
				errName(resp.ErrorCode), resp.ClusterAuthorizedOperations, errName(tc.wantCode), tc.wantOps)
		}
		if tc.wantCode != 0 {
			continue
		}
		want := []kmsg.DescribeClusterResponseBroker{{NodeID: 1, Host: "127.0.0.1", Port: int32(atoi(t, port))}}
		if len(resp.ClusterID) != 22 || resp.ControllerID != 1 || !reflect.DeepEqual(resp.Brokers, want) {
			t.Errorf("DescribeCluster v%d = cluster %q, controller %d, brokers %+v; want a 22-character id, 1, %+v", tc.version, resp.ClusterID, resp.ControllerID, resp.Brokers, want)
		}
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDeleteRecords(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "dr")
	mustCreate(t, ctx, adm, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "compacted")
	produceN(t, ctx, cl, "dr", 10)
	const end = 10

	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	addP := func(topic string, parts ...[2]int64) {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: int32(p[0]), Offset: p[1]})
		}
		req.Topics = append(req.Topics, rt)
	}
	addP("dr", [2]int64{0, 5}, [2]int64{1, end + 1}, [2]int64{7, 0})
	addP("compacted", [2]int64{0, -1})
	addP("missing", [2]int64{0, -1})
	req.Version = 2
	resp := rawRequest(t, addr, req).(*kmsg.DeleteRecordsResponse)

	type res struct {
		code int16
		low  int64
	}
	var got []res
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			got = append(got, res{sp.ErrorCode, sp.LowWatermark})
		}
	}
	want := []res{{0, 5}, {kerr.OffsetOutOfRange.Code, -1}, {kerr.UnknownTopicOrPartition.Code, -1},
		{kerr.PolicyViolation.Code, -1}, {kerr.UnknownTopicOrPartition.Code, -1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DeleteRecords = %v; want %v", got, want)
	}

	// ListOffsets earliest moved; a fetch below it is out of range.
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 5 {
		t.Errorf("ListStartOffsets(dr, 0) = %d; want 5", o.Offset)
	}
	fetch := func(offset int64) int16 {
		freq := kmsg.NewPtrFetchRequest()
		freq.Version, freq.MaxWaitMillis, freq.MaxBytes, freq.SessionEpoch = 12, 10, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "dr"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, offset, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		freq.Topics = append(freq.Topics, ft)
		fresp := rawRequest(t, addr, freq).(*kmsg.FetchResponse)
		return fresp.Topics[0].Partitions[0].ErrorCode
	}
	if got := fetch(2); got != kerr.OffsetOutOfRange.Code {
		t.Errorf("Fetch(dr, 0, offset 2) after DeleteRecords(5) = %s; want OFFSET_OUT_OF_RANGE", errName(got))
	}
	if got := fetch(5); got != 0 {
		t.Errorf("Fetch(dr, 0, offset 5) after DeleteRecords(5) = %s; want no error", errName(got))
	}

	// -1 deletes up to the high watermark; an older offset does nothing; -2 is out of range.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: -1})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("dr", 0); r.Err != nil || r.LowWatermark != end {
		t.Errorf("DeleteRecords(dr, 0, -1) = %d, %v; want %d", r.LowWatermark, r.Err, end)
	}
	for _, tc := range []struct {
		offset int64
		code   int16
		low    int64
	}{{3, 0, end}, {-2, kerr.OffsetOutOfRange.Code, -1}} {
		r := rawRequest(t, addr, &kmsg.DeleteRecordsRequest{Version: 0, TimeoutMillis: 5000, Topics: []kmsg.DeleteRecordsRequestTopic{
			{Topic: "dr", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: tc.offset}}},
		}}).(*kmsg.DeleteRecordsResponse)
		if sp := r.Topics[0].Partitions[0]; sp.ErrorCode != tc.code || sp.LowWatermark != tc.low {
			t.Errorf("DeleteRecords v0(dr, 0, %d) = %s, %d; want %s, %d", tc.offset, errName(sp.ErrorCode), sp.LowWatermark, errName(tc.code), tc.low)
		}
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "ep")
	produceN(t, ctx, cl, "ep", 3)

	for _, tc := range []struct {
		version           int16
		current, epoch    int32
		code              int16
		wantEpoch         int32
		wantEnd           int64
		partition         int32
		topic             string
		skipEpochInResult bool
	}{
		{4, -1, 0, 0, 0, 3, 0, "ep", false},
		{4, 0, 0, 0, 0, 3, 0, "ep", false},
		{4, -1, 1, 0, -1, -1, 0, "ep", false},
		{4, -1, -1, 0, -1, -1, 0, "ep", false},
		{4, 1, 0, kerr.UnknownLeaderEpoch.Code, -1, -1, 0, "ep", false},
		{4, -2, 0, kerr.FencedLeaderEpoch.Code, -1, -1, 0, "ep", false},
		{4, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1, 1, "ep", false},
		{4, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1, 0, "missing", false},
		{2, 0, 0, 0, 0, 3, 0, "ep", false},
		{0, 5, 0, 0, 0, 3, 0, "ep", true}, // v0-v1 carry no current epoch
	} {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = tc.version, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = tc.topic
		rt.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: tc.partition, CurrentLeaderEpoch: tc.current, LeaderEpoch: tc.epoch}}
		req.Topics = append(req.Topics, rt)
		resp := rawRequest(t, addr, req).(*kmsg.OffsetForLeaderEpochResponse)
		sp := resp.Topics[0].Partitions[0]
		if tc.skipEpochInResult {
			sp.LeaderEpoch = tc.wantEpoch // v0 has no leader epoch in the response
		}
		if sp.ErrorCode != tc.code || sp.LeaderEpoch != tc.wantEpoch || sp.EndOffset != tc.wantEnd {
			t.Errorf("OffsetForLeaderEpoch v%d(%s/%d, current %d, epoch %d) = %s, epoch %d, end %d; want %s, %d, %d", tc.version, tc.topic, tc.partition,
				tc.current, tc.epoch, errName(sp.ErrorCode), sp.LeaderEpoch, sp.EndOffset, errName(tc.code), tc.wantEpoch, tc.wantEnd)
		}
	}
}

func TestDescribeLogDirs(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "ld", "ld2")
	produceN(t, ctx, cl, "ld", 5)

	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[1]
	if len(dirs) != 1 {
		t.Fatalf("DescribeAllLogDirs = %d dirs on broker 1; want 1", len(dirs))
	}
	d, ok := dirs[reg.Dir()]
	if !ok {
		t.Fatalf("DescribeAllLogDirs dirs = %v; want %s", dirs, reg.Dir())
	}
	if d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
		t.Errorf("log dir = err %v, total %d, usable %d; want sizes", d.Err, d.TotalBytes, d.UsableBytes)
	}
	tp, _ := reg.Get("ld")
	var size int64
	for _, p := range tp.Partitions {
		got := d.Topics["ld"][p.Index]
		if got.Size != p.Log.Size() || got.OffsetLag != 0 || got.IsFuture {
			t.Errorf("log dir ld/%d = size %d, lag %d; want %d, 0", p.Index, got.Size, got.OffsetLag, p.Log.Size())
		}
		size += got.Size
	}
	if size == 0 {
		t.Error("log dir sizes of ld are all 0 after producing")
	}
	if len(d.Topics["ld2"]) != 2 {
		t.Errorf("log dir lists %d partitions of ld2; want 2", len(d.Topics["ld2"]))
	}

	// Requested partitions only; ones the node lacks are left out.
	resp := rawRequest(t, addr, &kmsg.DescribeLogDirsRequest{Version: 0, Topics: []kmsg.DescribeLogDirsRequestTopic{
		{Topic: "ld", Partitions: []int32{1, 9}}, {Topic: "missing", Partitions: []int32{0}},
	}}).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) != 1 || resp.Dirs[0].Topics[0].Topic != "ld" ||
		len(resp.Dirs[0].Topics[0].Partitions) != 1 || resp.Dirs[0].Topics[0].Partitions[0].Partition != 1 {
		t.Errorf("DescribeLogDirs v0(ld [1 9], missing [0]) = %+v; want only ld/1", resp.Dirs)
	}
}

func dynamicBrokerConfigNames() []string {
	var out []string
	for _, d := range topics.BrokerDefs() {
		out = append(out, d.BrokerName)
	}
	return out
}

// TestDynamicBrokerConfigs: the cluster-wide default (entity "") and this broker's own dynamic
// configs become the defaults of topic configs, in Kafka's precedence (topic > broker > cluster
// default > static), reach the logs, and survive a restart.
func TestDynamicBrokerConfigs(t *testing.T) {
	addr, reg := testBroker(t)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": strp("2000000")}, "dyn"); err != nil {
		t.Fatal(err)
	}
	alter := func(entity string, ops ...kadm.AlterConfig) error {
		var brokers []int32 // none: the cluster-wide default entity
		if entity != "" {
			brokers = append(brokers, 1)
		}
		resps, err := adm.AlterBrokerConfigs(ctx, ops, brokers...)
		if err != nil {
			return err
		}
		return resps[0].Err
	}
	if err := alter("", kadm.AlterConfig{Name: "log.retention.ms", Value: strp("3600000")},
		kadm.AlterConfig{Name: "log.segment.bytes", Value: strp("3000000")}); err != nil {
		t.Fatalf("alter cluster default = %v", err)
	}
	if err := alter("1", kadm.AlterConfig{Name: "log.retention.ms", Value: strp("7200000")}); err != nil {
		t.Fatalf("alter broker 1 = %v", err)
	}
	tp, _ := reg.Get("dyn")
	for _, tc := range []struct {
		name, value string
		src         topics.Source
	}{
		{"retention.ms", "7200000", topics.SourceDynamicBroker}, // broker beats cluster default
		{"segment.bytes", "2000000", topics.SourceTopic},        // topic beats both
		{"max.message.bytes", "1048588", topics.SourceDefault},  // nothing set
	} {
		if v, src := tp.EffectiveSource(tc.name); v != tc.value || src != tc.src {
			t.Errorf("Effective(%s) = %q, %v; want %q, %v", tc.name, v, src, tc.value, tc.src)
		}
	}
	if got := tp.Partitions[0].Log.Config().RetentionMs; got != 2*time.Hour {
		t.Errorf("log retention = %v; want the broker's dynamic 2h", got)
	}
	if err := alter("1", kadm.AlterConfig{Name: "broker.id", Value: strp("5")}); err == nil {
		t.Errorf("altering static broker.id = nil; want an error")
	}
	if err := alter("", kadm.AlterConfig{Name: "log.retention.ms", Value: strp("-7")}); err == nil {
		t.Errorf("invalid log.retention.ms = nil; want an error")
	}
	// Replication throttles are dynamic broker configs (what kafka-reassign-partitions
	// --throttle sets and --verify clears); the log-dir move throttle is refused, its deletion a
	// no-op.
	if err := alter("1", kadm.AlterConfig{Name: "leader.replication.throttled.rate", Value: strp("1000")},
		kadm.AlterConfig{Name: "follower.replication.throttled.rate", Value: strp("2000")}); err != nil {
		t.Errorf("setting replication throttles = %v; want nil", err)
	}
	// A bad value of a broker config is INVALID_REQUEST, as Kafka answers (it used to be
	// INVALID_CONFIG, as for a topic).
	if err := alter("1", kadm.AlterConfig{Name: "leader.replication.throttled.rate", Value: strp("-1")}); err != kerr.InvalidRequest {
		t.Errorf("a negative replication throttle = %v; want INVALID_REQUEST", err)
	}
	if err := alter("1", kadm.AlterConfig{Name: "log.retention.ms", Value: strp("abc")}); err != kerr.InvalidRequest {
		t.Errorf("log.retention.ms=abc on broker 1 = %v; want INVALID_REQUEST", err)
	}
	if err := alter("", kadm.AlterConfig{Name: "min.insync.replicas", Value: strp("0")}); err != kerr.InvalidRequest {
		t.Errorf("min.insync.replicas=0 on the cluster default = %v; want INVALID_REQUEST", err)
	}
	if err := alter("1", kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "leader.replication.throttled.rate"},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "follower.replication.throttled.rate"},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "replica.alter.log.dirs.io.max.bytes.per.second"}); err != nil {
		t.Errorf("deleting replication throttles = %v; want nil", err)
	}
	if err := alter("1", kadm.AlterConfig{Name: "replica.alter.log.dirs.io.max.bytes.per.second", Value: strp("1000")}); err != kerr.InvalidConfig {
		t.Errorf("setting the log-dir move throttle = %v; want INVALID_CONFIG", err)
	}
	// The quotas' windows: dynamic here (read-only in Kafka), checked, and read by the node.
	if err := alter("", kadm.AlterConfig{Name: "quota.window.num", Value: strp("5")},
		kadm.AlterConfig{Name: "controller.quota.window.size.seconds", Value: strp("2")}); err != nil {
		t.Errorf("setting the quota windows = %v; want nil", err)
	}
	if err := alter("", kadm.AlterConfig{Name: "quota.window.size.seconds", Value: strp("0")}); err != kerr.InvalidRequest {
		t.Errorf("a quota window of 0 s = %v; want INVALID_REQUEST", err)
	}
	br, _ := testBrokers.Load(reg)
	if w, mw := br.(*Broker).quotaWindows(); w != (windows{n: 5, size: time.Second}) || mw != (windows{n: 11, size: 2 * time.Second}) {
		t.Errorf("the node's quota windows = %+v, %+v; want 5 × 1s and 11 × 2s", w, mw)
	}
	// The dynamic configs live in the controller's log, which survives restarts.
	b, _ := testBrokers.Load(reg)
	if got := b.(*Broker).cl.Image().ClusterConfigs["log.segment.bytes"]; got != "3000000" {
		t.Errorf("cluster default in the controller's image = %q; want 3000000", got)
	}
}

// TestWriteCachingDisabledOverKafka: write_caching_default=disabled, set cluster-wide with
// IncrementalAlterConfigs as kafka-configs would, turns write caching off in the log of a topic
// that asks for it (acks=all then waits for the fsync, consumers see only durable data);
// removing it turns the topic's own setting back on.
func TestWriteCachingDisabledOverKafka(t *testing.T) {
	addr, reg := testBroker(t)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"write.caching": strp("true")}, "wc"); err != nil {
		t.Fatal(err)
	}
	caching := func() bool {
		tp, _ := reg.Get("wc")
		return tp.Partitions[0].Log.Config().WriteCaching
	}
	if !caching() {
		t.Fatal("write.caching=true topic does not cache")
	}
	set := func(op kadm.IncrementalOp) {
		t.Helper()
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "write_caching_default", Value: strp("disabled")}})
		if err == nil {
			err = resps[0].Err
		}
		if err != nil {
			t.Fatalf("write_caching_default: %v", err)
		}
	}
	set(kadm.SetConfig)
	if caching() {
		t.Error("write_caching_default=disabled left write caching on for a write.caching=true topic")
	}
	described, err := adm.DescribeTopicConfigs(ctx, "wc")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range described[0].Configs {
		if c.Key == "write.caching" && (c.Value == nil || *c.Value != "false") {
			t.Errorf("DescribeConfigs write.caching = %v; want false while disabled", c.MaybeValue())
		}
	}
	set(kadm.DeleteConfig)
	if !caching() {
		t.Error("removing write_caching_default did not give the topic its write caching back")
	}
}

// TestMetadataByTopicIDWithAnEmptyName: a Metadata v12 entry naming a topic by id alongside the
// empty name (what the Java client's describeTopics(TopicCollection.ofTopicIds(...)) and
// kafka-topics --describe --topic-id send) describes that topic, as Kafka looks only at the id;
// Runnel looked up a topic named "" and answered it unknown. An unknown id is UNKNOWN_TOPIC_ID.
func TestMetadataByTopicIDWithAnEmptyName(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "byid")
	tp, _ := reg.Get("byid")
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: tp.ID, Topic: kmsg.StringPtr("")}, {TopicID: [16]byte{9}, Topic: kmsg.StringPtr("")}}
	resp := rawRequest(t, addr, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics; want 2", len(resp.Topics))
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "byid" || len(got.Partitions) != 2 {
		t.Errorf("by id with an empty name: %v %v, %d partitions; want byid with 2", errName(got.ErrorCode), msg(got.Topic), len(got.Partitions))
	}
	if got := resp.Topics[1]; got.ErrorCode != kerr.UnknownTopicID.Code || got.Topic != nil {
		t.Errorf("an unknown id: %v %v; want UNKNOWN_TOPIC_ID without a name", errName(got.ErrorCode), msg(got.Topic))
	}
}

// TestStaticBrokerConfigSources: a static broker config is STATIC_BROKER_CONFIG, with its default
// as a DEFAULT_CONFIG synonym, when the operator gave it (even at its default value) or it is
// not at its default; else DEFAULT_CONFIG with that one synonym, as Kafka describes a config
// server.properties names or not. Every static config was STATIC_BROKER_CONFIG, so tools
// listing what an operator set (kafka-configs --all, a console) showed every default as set.
func TestStaticBrokerConfigSources(t *testing.T) {
	_, addr, _ := ctBroker(t, func(c *Config) {
		c.DefaultPartitions, c.OffsetsReplicationFactor = 3, 1
		c.GivenConfigs = map[string]bool{"auto.create.topics.enable": true}
	})
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, rr)
	req.Version = 4
	resp := rawRequest(t, addr, req).(*kmsg.DescribeConfigsResponse)
	if m := resp.Resources[0].ErrorMessage; m == nil || *m != "" {
		t.Errorf("error message of a described resource: %v; want \"\", as Kafka's", m)
	}
	brk := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		brk[c.Name] = c
	}
	type syn struct {
		value  string
		source kmsg.ConfigSource
	}
	static, def := kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig
	for _, tc := range []struct {
		name, value string
		source      kmsg.ConfigSource
		synonyms    []syn
	}{
		{"num.partitions", "3", static, []syn{{"3", static}, {"1", def}}},                     // not at its default
		{"auto.create.topics.enable", "true", static, []syn{{"true", static}, {"true", def}}}, // given at its default
		{"offsets.topic.replication.factor", "1", static, []syn{{"1", static}, {"1", def}}},   // given: not automatic
		{"transaction.state.log.replication.factor", "1", def, []syn{{"1", def}}},             // automatic
		{"delete.topic.enable", "true", def, []syn{{"true", def}}},                            // neither
		{"fetch.max.bytes", "57671680", def, []syn{{"57671680", def}}},
		{"broker.id", "1", static, []syn{{"1", static}, {"-1", def}}}, // Kafka's default -1
		{"node.id", "1", static, []syn{{"1", static}}},                // required: no default
	} {
		c, ok := brk[tc.name]
		if !ok || c.Value == nil || *c.Value != tc.value || c.Source != tc.source {
			t.Errorf("%s = %v source %v; want %q source %v", tc.name, c.Value, c.Source, tc.value, tc.source)
			continue
		}
		var got []syn
		for _, s := range c.ConfigSynonyms {
			if s.Name != tc.name || s.Value == nil {
				t.Errorf("%s: synonym %s = %v", tc.name, s.Name, s.Value)
				continue
			}
			got = append(got, syn{*s.Value, s.Source})
		}
		if !slices.Equal(got, tc.synonyms) {
			t.Errorf("%s synonyms = %v; want %v", tc.name, got, tc.synonyms)
		}
	}
}

// TestDeleteOfAStaticBrokerConfigIsANoOp: IncrementalAlterConfigs DELETE of a broker config
// that cannot be set dynamically (num.partitions) changes nothing and is no error, as Kafka's
// ConfigAdminManager validates only the configs that result; setting it stays INVALID_REQUEST.
func TestDeleteOfAStaticBrokerConfigIsANoOp(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	alter := func(op kmsg.IncrementalAlterConfigOp) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, ""
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = "num.partitions", op
		if op == kmsg.IncrementalAlterConfigOpSet {
			c.Value = kmsg.StringPtr("3")
		}
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return ctRoundTrip(t, addr, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	if code := alter(kmsg.IncrementalAlterConfigOpDelete); code != 0 {
		t.Errorf("DELETE num.partitions = %s; want NONE (nothing to delete), as Kafka", errName(code))
	}
	if code := alter(kmsg.IncrementalAlterConfigOpSet); code != kerr.InvalidRequest.Code {
		t.Errorf("SET num.partitions = %s; want INVALID_REQUEST", errName(code))
	}
}
