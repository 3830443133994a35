package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each test asserts Apache Kafka 4.x's answer where Runnel's differed (found by review,
// 2026-12-06).

// Kafka's AutoTopicCreationManager.creatableTopic creates __consumer_offsets (and
// __transaction_state) with offsets.topic.num.partitions (50) and the group coordinator's topic
// configs (cleanup.policy=compact, ...) whoever asks for it, Metadata included. Runnel's Metadata
// auto-creation made it an ordinary topic: num.partitions (1), cleanup.policy=delete, so group
// offsets are deleted by retention after 7 days and every group maps to the one partition.
func TestMetadataAutoCreatesOffsetsTopicAsOrdinaryTopic(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, _ := adminClients(t, addr)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(OffsetsTopic)
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tp, ok := reg.Get(OffsetsTopic)
	if !ok {
		t.Skip("Metadata did not auto-create __consumer_offsets")
	}
	policy, _ := tp.Effective("cleanup.policy")
	if len(tp.Partitions) != 50 || policy != "compact" {
		t.Errorf("Metadata auto-created %s with %d partitions, cleanup.policy=%s; Kafka: 50 partitions (offsets.topic.num.partitions), compact",
			OffsetsTopic, len(tp.Partitions), policy)
	}
}

// Kafka's controller refuses a topic whose name differs from an existing one only by '.' and
// '_' (their metric names collide: a Java consumer of both throws from poll), whether
// CreateTopics or a Metadata auto-creation asks (ReplicationControlManager.createTopic).
// Runnel checked it on CreateTopics only: producing to coll_x created it next to coll.x.
func TestMetadataAutoCreateRefusesACollidingName(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "coll.x")
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("coll_x")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Get("coll_x"); ok || resp.Topics[0].ErrorCode == 0 {
		t.Errorf("Metadata with auto-creation of coll_x beside coll.x: created %v, error %v; want not created, an error",
			ok, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
}

// Kafka's DescribeTopicPartitionsRequestHandler takes max(min(2000, ResponsePartitionLimit), 1):
// a limit of 0 still describes one partition and moves the cursor on. Runnel described nothing
// and answered a NextCursor at the first topic, partition 0: a client paging on it never ends.
func TestDescribeTopicPartitionsZeroLimitMakesNoProgress(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "dtp-zero")
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 0
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "dtp-zero"
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, tp := range resp.Topics {
		parts += len(tp.Partitions)
	}
	nc := resp.NextCursor
	if parts != 1 || nc == nil || nc.Topic != "dtp-zero" || nc.Partition != 1 {
		t.Errorf("limit 0: %d partitions described, next cursor %+v; Kafka: 1 partition, cursor dtp-zero/1", parts, nc)
	}
}

// Kafka refuses a cursor with a negative partition (InvalidRequestException: every topic named
// answered INVALID_REQUEST). Runnel treated it as partition 0.
func TestDescribeTopicPartitionsNegativeCursorPartition(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "dtp-neg")
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 100
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "dtp-neg"
	req.Topics = append(req.Topics, rt)
	req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-neg", Partition: -1}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		var codes []string
		for _, tp := range resp.Topics {
			codes = append(codes, errName(tp.ErrorCode))
		}
		t.Errorf("cursor partition -1: topics answered %v; Kafka: INVALID_REQUEST", codes)
	}
}

// Kafka's ConfigAdminManager.preprocess refuses a SET (or APPEND / SUBTRACT) with a null value
// before anything is applied: INVALID_REQUEST "Null value not supported for : retention.ms".
// Runnel took SET null as a DELETE and dropped the override.
func TestIncrementalAlterConfigsSetNullDeletes(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")}, "iac-null")
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "iac-null"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, nil
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := reg.Get("iac-null")
	v, isDefault := tp.Effective("retention.ms")
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code || v != "1000" {
		t.Errorf("SET retention.ms=null: %s (%s), retention.ms now %s (default %v); Kafka: INVALID_REQUEST, 1000 kept",
			errName(resp.Resources[0].ErrorCode), msg(resp.Resources[0].ErrorMessage), v, isDefault)
	}
}

// Kafka's ReplicationControlManager.validateTotalNumberOfPartitions refuses a CreateTopics asking
// for more than 10000 partitions in all (MAX_PARTITIONS_PER_BATCH) with POLICY_VIOLATION for every
// topic, validate-only included. Runnel checked each topic alone against 10000 (INVALID_PARTITIONS)
// and accepted 5000 + 5001.
func TestCreateTopicsPartitionsPerRequestCap(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, _ := adminClients(t, addr)
	create := func(counts ...int32) []kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis, req.ValidateOnly = 5000, true
		for i, n := range counts {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "cap-"+string(rune('a'+i)), n, 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics
	}
	for _, counts := range [][]int32{{10001}, {5000, 5001}} {
		for _, st := range create(counts...) {
			if st.ErrorCode != kerr.PolicyViolation.Code {
				t.Errorf("CreateTopics %v partitions: %s = %s (%s); Kafka: POLICY_VIOLATION (Excessively large number of partitions per request.)",
					counts, st.Topic, errName(st.ErrorCode), msg(st.ErrorMessage))
			}
		}
	}
}

// Kafka 4.0 (KIP-1030) raised segment.bytes' minimum from 14 bytes to 1 MiB: LogConfig refuses
// less with INVALID_CONFIG. Runnel accepted down to 14.
func TestSegmentBytesBelowKafka4Minimum(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	resps, err := adm.ValidateCreateTopics(ctx, 1, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")}, "seg-small")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["seg-small"]; r.Err != kerr.InvalidConfig {
		t.Errorf("segment.bytes=1024: %v; Kafka 4: INVALID_CONFIG (at least 1048576)", r.Err)
	}
}

// Kafka 4.0 (KIP-1030) changed log.message.timestamp.after.max.ms' default to 3600000 (one hour):
// a topic's message.timestamp.after.max.ms is 3600000 unless set. Runnel kept Long.MAX.
func TestTimestampAfterMaxDefault(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "ts-after")
	rcs, err := adm.DescribeTopicConfigs(ctx, "ts-after")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("ts-after", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "message.timestamp.after.max.ms" && (c.Value == nil || *c.Value != "3600000") {
			t.Errorf("message.timestamp.after.max.ms default = %s; Kafka 4: 3600000", msg(c.Value))
		}
	}
}

// Kafka's ConfigDef parses a BOOLEAN config case-insensitively (and trims it): "TRUE" is valid.
// Runnel refused anything but "true" / "false" with INVALID_CONFIG. It stores the value in
// lower case, as every reader compares "true".
func TestBooleanConfigCaseInsensitive(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	resps, err := adm.ValidateCreateTopics(ctx, 1, 1, map[string]*string{"unclean.leader.election.enable": kmsg.StringPtr("TRUE")}, "bool-case")
	if err != nil {
		t.Fatal(err)
	}
	if r := resps["bool-case"]; r.Err != nil {
		t.Errorf("unclean.leader.election.enable=TRUE: %v; Kafka: accepted", r.Err)
	}
	mustCreate(t, ctx, adm, 1, map[string]*string{"write.caching": kmsg.StringPtr(" True ")}, "bool-case")
	rcs, err := adm.DescribeTopicConfigs(ctx, "bool-case")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rcs[0].Configs {
		if c.Key == "write.caching" && (c.Value == nil || *c.Value != "true") {
			t.Errorf("write.caching given as %q is stored as %v; want true", " True ", c.Value)
		}
	}
}

// Kafka's ControllerApis.deleteTopics: a topic given both by id and by name is answered once,
// INVALID_REQUEST "The provided topic name maps to an ID that was already supplied.", and is not
// deleted (its id is removed from the ids to delete). Runnel refused the name's entry but deleted
// the topic through the id's.
func TestDeleteTopicsByNameAndIDDeletes(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "dt-both")
	tp, _ := reg.Get("dt-both")
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: tp.ID}, {Topic: kmsg.StringPtr("dt-both")}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range resp.Topics {
		got = append(got, msg(st.Topic)+":"+errName(st.ErrorCode))
	}
	if _, ok := reg.Get("dt-both"); !ok || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DeleteTopics by id and by name: answers %v, topic still there %v; Kafka: one INVALID_REQUEST, not deleted", got, ok)
	}
}

// Kafka's handleTopicMetadataRequest fills the authorized operations of every row it built,
// an unknown or invalid topic's too (only denied rows, appended afterwards, go without), and
// getTopicMetadata marks an unknown internal topic's row internal. Runnel filled operations
// only for topics without an error, and never marked a missing __consumer_offsets internal.
func TestMetadataErrorRowsCarryOperationsAndInternal(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "ops-known")
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.IncludeTopicAuthorizedOperations = 12, true
	for _, name := range []string{"ops-known", "ops-missing", "bad/name", OffsetsTopic} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]kmsg.MetadataResponseTopic{}
	for _, rt := range resp.Topics {
		rows[*rt.Topic] = rt
	}
	known := rows["ops-known"].AuthorizedOperations
	if known == notRequested || known == 0 {
		t.Fatalf("an existing topic's operations: %d; want them listed", known)
	}
	for _, name := range []string{"ops-missing", "bad/name", OffsetsTopic} {
		if r := rows[name]; r.ErrorCode == 0 || r.AuthorizedOperations != known {
			t.Errorf("%s: error %v, operations %d; want an error and the same operations as an existing topic (%d), as Kafka",
				name, kerr.ErrorForCode(r.ErrorCode), r.AuthorizedOperations, known)
		}
	}
	if r := rows[OffsetsTopic]; !r.IsInternal || rows["ops-missing"].IsInternal {
		t.Errorf("missing %s internal %v, ops-missing internal %v; want true, false", OffsetsTopic, r.IsInternal, rows["ops-missing"].IsInternal)
	}
}
