package broker

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWireEdgesAsKafka: hand-built requests that no common client sends, answered as Kafka 4.1
// answers them (a differential run of about 490 request kinds and versions against Kafka
// found each of these answered differently before).
func TestWireEdgesAsKafka(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cl, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "edges")
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "edges", Partition: 0, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a partition fetched twice is fetched once, as its last mention asks", func(t *testing.T) {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 12, 0, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "edges"
		for _, off := range []int64{0, 5} {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := rawRequest(t, addr, req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("answered %d topics (%v); want one topic with one partition", len(resp.Topics), resp.Topics)
		}
		var first int64 = -1
		if b := resp.Topics[0].Partitions[0].RecordBatches; len(b) >= 8 {
			first = int64(binary.BigEndian.Uint64(b)) // the first batch's base offset
		}
		if first != 5 {
			t.Errorf("records from offset %d; want 5 (the last mention)", first)
		}
	})

	t.Run("OFFSET_OUT_OF_RANGE carries no offsets", func(t *testing.T) {
		// librdkafka took the log start sent beside it for its reset position, then waited
		// out fetch.error.backoff.ms (500 ms) before fetching there.
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 12, 0, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "edges"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 100, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		fp := rawRequest(t, addr, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.HighWatermark != -1 || fp.LastStableOffset != -1 || fp.LogStartOffset != -1 {
			t.Errorf("fetch past the end: %s, high watermark %d, last stable %d, log start %d; want OFFSET_OUT_OF_RANGE and -1s, as Kafka",
				errName(fp.ErrorCode), fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset)
		}
	})

	t.Run("a topic asked for twice in Metadata is answered once", func(t *testing.T) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		for range 2 {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("edges")
			req.Topics = append(req.Topics, rt)
		}
		if resp := rawRequest(t, addr, req).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
			t.Errorf("answered %d topics; want 1", len(resp.Topics))
		}
	})

	t.Run("DeleteRecords of a partition named twice answers it once", func(t *testing.T) {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version, req.TimeoutMillis = 2, 5000
		for _, off := range []int64{1, 2} {
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = "edges"
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = 1, off
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp := rawRequest(t, addr, req).(*kmsg.DeleteRecordsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Errorf("answered %v; want one topic with one partition", resp.Topics)
		}
	})

	t.Run("a group deleted twice in one request is answered once, deleted", func(t *testing.T) {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "edges", Partition: 0, At: 3, LeaderEpoch: -1})
		if resps, err := adm.CommitOffsets(ctx, "edges-g", offs); err != nil || resps.Error() != nil {
			t.Fatalf("committing: %v %v", err, resps.Error())
		}
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = 2, []string{"edges-g", "edges-g"}
		resp := rawRequest(t, addr, req).(*kmsg.DeleteGroupsResponse)
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Errorf("answered %v; want one row, NONE", resp.Groups)
		}
	})

	t.Run("each mention of a resource named twice in IncrementalAlterConfigs is INVALID_REQUEST", func(t *testing.T) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		for range 2 {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "edges"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", kmsg.StringPtr("100000")
			rr.Configs = append(rr.Configs, c)
			req.Resources = append(req.Resources, rr)
		}
		resp := rawRequest(t, addr, req).(*kmsg.IncrementalAlterConfigsResponse)
		if len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code || resp.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("answered %v; want two rows, INVALID_REQUEST", resp.Resources)
		}
	})

	t.Run("altering the configs of topic \"\" is INVALID_REQUEST", func(t *testing.T) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		req.Resources = append(req.Resources, rr)
		if got := rawRequest(t, addr, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; got.ErrorCode != kerr.InvalidRequest.Code ||
			msg(got.ErrorMessage) != "Default topic resources are not allowed." {
			t.Errorf("answered %s %q; want INVALID_REQUEST", errName(got.ErrorCode), msg(got.ErrorMessage))
		}
	})

	t.Run("an empty transactional id is INVALID_REQUEST", func(t *testing.T) {
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.Version, add.ProducerID = 3, 1
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic, at.Partitions = "edges", []int32{0}
		add.Topics = append(add.Topics, at)
		if code := rawRequest(t, addr, add).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequest.Code {
			t.Errorf("AddPartitionsToTxn = %s", errName(code))
		}
		offs := kmsg.NewPtrAddOffsetsToTxnRequest()
		offs.Version, offs.ProducerID, offs.Group = 3, 1, "edges-g"
		if code := rawRequest(t, addr, offs).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != kerr.InvalidRequest.Code {
			t.Errorf("AddOffsetsToTxn = %s", errName(code))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.ProducerID = 4, 1
		if code := rawRequest(t, addr, end).(*kmsg.EndTxnResponse).ErrorCode; code != kerr.InvalidRequest.Code {
			t.Errorf("EndTxn = %s", errName(code))
		}
		for _, tc := range []struct {
			group string
			want  *kerr.Error
		}{{"edges-g", kerr.InvalidRequest}, {"", kerr.InvalidGroupID}} {
			toc := kmsg.NewPtrTxnOffsetCommitRequest()
			toc.Version, toc.ProducerID, toc.Group = 3, 1, tc.group
			tt := kmsg.NewTxnOffsetCommitRequestTopic()
			tt.Topic = "edges"
			tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			tt.Partitions = append(tt.Partitions, tp)
			toc.Topics = append(toc.Topics, tt)
			if code := rawRequest(t, addr, toc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != tc.want.Code {
				t.Errorf("TxnOffsetCommit of group %q = %s; want %s", tc.group, errName(code), tc.want.Message)
			}
		}
	})

	t.Run("TxnOffsetCommit answers unknown partitions first, in their topic's row", func(t *testing.T) {
		toc := kmsg.NewPtrTxnOffsetCommitRequest()
		toc.Version, toc.ProducerID, toc.Group = 3, 1, ""
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic = "no-such-topic"
		tt.Partitions = append(tt.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
		toc.Topics = append(toc.Topics, tt)
		if got := rawRequest(t, addr, toc).(*kmsg.TxnOffsetCommitResponse).Topics; len(got) != 1 || got[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("an unknown topic, group \"\": %v; want UNKNOWN_TOPIC_OR_PARTITION, as Kafka looks at topics before the group", got)
		}
		toc.Group = "edges-g"
		toc.Topics[0].Topic = "edges"
		p99 := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p99.Partition = 99
		toc.Topics[0].Partitions = append(toc.Topics[0].Partitions, p99)
		got := rawRequest(t, addr, toc).(*kmsg.TxnOffsetCommitResponse).Topics
		codes := map[int32]int16{}
		for _, p := range got[0].Partitions {
			codes[p.Partition] = p.ErrorCode
		}
		if len(got) != 1 || len(codes) != 2 || codes[99] != kerr.UnknownTopicOrPartition.Code || codes[0] != kerr.InvalidRequest.Code {
			t.Errorf("partitions 0 and 99 of edges, transactional id \"\": %v; want one row, 99 UNKNOWN_TOPIC_OR_PARTITION, 0 INVALID_REQUEST", got)
		}
	})

	t.Run("ApiVersions with an invalid software name is INVALID_REQUEST", func(t *testing.T) {
		for _, name := range []string{"bad name!", "", "-lead"} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, name, "1.0"
			if resp := rawRequest(t, addr, req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.ApiKeys) != 0 {
				t.Errorf("ApiVersions(%q) = %s with %d APIs; want INVALID_REQUEST with none", name, errName(resp.ErrorCode), len(resp.ApiKeys))
			}
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "apache-kafka-java", "4.1.1"
		if resp := rawRequest(t, addr, req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Errorf("ApiVersions(apache-kafka-java 4.1.1) = %s with %d APIs", errName(resp.ErrorCode), len(resp.ApiKeys))
		}
	})

	t.Run("OffsetCommit answers unknown partitions before the group", func(t *testing.T) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation, req.MemberID = 9, "edges-members", 5, "nobody"
		for _, tc := range []struct {
			topic string
			part  int32
		}{{"no-such-topic", 0}, {"edges", 99}, {"edges", 0}} {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = tc.topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition = tc.part
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		codes := map[string]int16{}
		resp := rawRequest(t, addr, req).(*kmsg.OffsetCommitResponse)
		if len(resp.Topics) != 2 {
			// sarama and kafka-go keep the rows in a map by topic: a second row of a topic
			// hid the first one's errors.
			t.Errorf("answered %d topic rows; want 2, a topic's partitions in one row, as Kafka's", len(resp.Topics))
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				codes[rt.Topic+"/"+string(rune('0'+rp.Partition%10))] = rp.ErrorCode
			}
		}
		if codes["no-such-topic/0"] != kerr.UnknownTopicOrPartition.Code || codes["edges/9"] != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("unknown topic %s, unknown partition %s; want UNKNOWN_TOPIC_OR_PARTITION", errName(codes["no-such-topic/0"]), errName(codes["edges/9"]))
		}
		if c, ok := codes["edges/0"]; !ok || c == 0 || c == kerr.UnknownTopicOrPartition.Code {
			t.Errorf("a known partition of an unknown member: %s (answered %v); want the group's error", errName(c), ok)
		}
	})

	t.Run("a name automatic creation refuses is UNKNOWN_TOPIC_OR_PARTITION, as in KRaft", func(t *testing.T) {
		mustCreate(t, ctx, adm, 1, nil, "edges.x")
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 12, true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("edges_x") // collides with edges.x
		req.Topics = append(req.Topics, rt)
		if got := rawRequest(t, addr, req).(*kmsg.MetadataResponse).Topics; len(got) != 1 || got[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("answered %v; want UNKNOWN_TOPIC_OR_PARTITION", got)
		}
	})

	t.Run("ElectLeaders and AlterPartitionAssignments with a timeout of 0 are REQUEST_TIMED_OUT", func(t *testing.T) {
		el := kmsg.NewPtrElectLeadersRequest()
		el.Version, el.TimeoutMillis = 2, 0
		et := kmsg.NewElectLeadersRequestTopic()
		et.Topic, et.Partitions = "edges", []int32{0}
		el.Topics = append(el.Topics, et)
		resp := rawRequest(t, addr, el).(*kmsg.ElectLeadersResponse)
		if resp.ErrorCode != kerr.RequestTimedOut.Code || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.RequestTimedOut.Code {
			t.Errorf("ElectLeaders: %s, %v; want REQUEST_TIMED_OUT at the top and for the partition", errName(resp.ErrorCode), resp.Topics)
		}
		ap := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		ap.TimeoutMillis = 0
		at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		at.Topic = "edges"
		atp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		atp.Partition, atp.Replicas = 0, []int32{1}
		at.Partitions = append(at.Partitions, atp)
		ap.Topics = append(ap.Topics, at)
		ar := rawRequest(t, addr, ap).(*kmsg.AlterPartitionAssignmentsResponse)
		if ar.ErrorCode != kerr.RequestTimedOut.Code || len(ar.Topics) != 1 || ar.Topics[0].Partitions[0].ErrorCode != kerr.RequestTimedOut.Code {
			t.Errorf("AlterPartitionAssignments: %s, %v; want REQUEST_TIMED_OUT at the top and for the partition", errName(ar.ErrorCode), ar.Topics)
		}
	})

	t.Run("ElectLeaders of an unknown election type is INVALID_REQUEST", func(t *testing.T) {
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version, req.ElectionType, req.TimeoutMillis = 2, 5, 1000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "edges", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp := rawRequest(t, addr, req).(*kmsg.ElectLeadersResponse)
		if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("answered %s, %v; want INVALID_REQUEST at the top and for the partition", errName(resp.ErrorCode), resp.Topics)
		}
	})
}
