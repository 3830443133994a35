package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/server"
)

// errorCodes collects every ErrorCode field of a response, at any depth.
func errorCodes(resp kmsg.Response) []int16 {
	var out []int16
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
					if c := int16(v.Field(i).Int()); c != 0 {
						out = append(out, c)
					}
					continue
				}
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return out
}

var authzCodes = []int16{kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
	kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}

// TestACLMatrix sends each API as a principal the ACLs allow and as one they do not: the
// denied one gets Kafka's authorization error and changes nothing; the allowed one gets no
// authorization error. Then an ACL change takes effect within a second.
func TestACLMatrix(t *testing.T) {
	b := startSecureBroker(t, func(c *server.Config) { c.Authorizer, c.SuperUsers = "acl", "User:admin" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil)
	adm := kadm.NewClient(admin)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "mallory", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "mallory-pw"},
	}); err != nil {
		t.Fatal(err)
	}
	// Fixtures: a topic with records, a group with a committed offset.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset("t", 0, 3, -1)
	if _, err := adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	// alice: everything on t, g, tx and the cluster, through prefixed, literal and wildcard
	// patterns; mallory: nothing but a DENY that must win over alice's wildcard.
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts("*").
		ResourcePatternType(kadm.ACLPatternPrefixed).Topics("t").Groups("g").TransactionalIDs("tx").
		Operations(kadm.OpAll)
	clusterACL := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Clusters().
		Operations(kadm.OpDescribe, kadm.OpAlter, kadm.OpCreate, kadm.OpDescribeConfigs, kadm.OpAlterConfigs, kadm.OpIdempotentWrite, kadm.OpClusterAction)
	denyMallory := kadm.NewACLs().Deny("User:mallory").DenyHosts("*").Topics("*").Operations(kadm.OpAll)
	for _, a := range []*kadm.ACLBuilder{acl, clusterACL, denyMallory} {
		res, err := adm.CreateACLs(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create acl: %v", r.Err)
			}
		}
	}
	alice := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(), nil)
	mallory := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "mallory", Pass: "mallory-pw"}.AsSha256Mechanism(), nil)

	topicID := func() [16]byte {
		md, err := adm.Metadata(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		return md.Topics["t"].ID
	}()

	type tc struct {
		name string
		req  func() kmsg.Request
		want int16 // the denied principal's error
		// sharded: sent through the client's routing (AddPartitionsToTxn: v3 to the
		// transaction's coordinator, as producers send it; v4+ is for brokers only)
		sharded bool
	}
	cases := []tc{
		{"Produce", func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = recordBatch(t)
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"Fetch", func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.MaxBytes, r.SessionEpoch = 1<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "t", topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"ListOffsets", func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"Metadata", func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("t")
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"OffsetForLeaderEpoch", func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"DescribeProducers", func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			r.Topics = append(r.Topics, kmsg.DescribeProducersRequestTopic{Topic: "t", Partitions: []int32{0}})
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"OffsetCommit", func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation = "g", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"OffsetFetch", func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			r.Groups = append(r.Groups, g)
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"FindCoordinator", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKeys = []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"JoinGroup", func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g", 10000, 10000, "consumer"
			r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
			r.Version = 3 // no member-id round trip
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"Heartbeat", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = "g", "nobody"
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"ConsumerGroupHeartbeat", func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.MemberEpoch = "g2", "m", -1
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"DescribeGroups", func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"ConsumerGroupDescribe", func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"OffsetDelete", func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "g"
			r.Topics = append(r.Topics, kmsg.OffsetDeleteRequestTopic{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"CreateTopics", func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t-new", 1, 1
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"CreatePartitions", func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.Topics = append(r.Topics, kmsg.CreatePartitionsRequestTopic{Topic: "t", Count: 2})
			r.ValidateOnly = true
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"DescribeConfigs topic", func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = append(r.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"})
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"DescribeConfigs broker", func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Resources = append(r.Resources, kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"})
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"IncrementalAlterConfigs", func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
			rr.Configs = append(rr.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "retention.ms", Value: kmsg.StringPtr("1000")})
			r.Resources = append(r.Resources, rr)
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"AlterConfigs broker", func() kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
			rr.Configs = append(rr.Configs, kmsg.AlterConfigsRequestResourceConfig{Name: "log.retention.ms", Value: kmsg.StringPtr("1000")})
			r.Resources = append(r.Resources, rr)
			r.ValidateOnly = true
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"InitProducerID transactional", func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = kmsg.StringPtr("tx"), 60000, -1, -1
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code, false},
		{"InitProducerID idempotent", func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.ProducerID, r.ProducerEpoch = -1, -1
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"AddPartitionsToTxn", func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.Version = 3
			r.TransactionalID, r.ProducerID = "tx", 1
			r.Topics = append(r.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: "t", Partitions: []int32{0}})
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code, true},
		{"AddOffsetsToTxn", func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.Group = "tx", 1, "g"
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code, false},
		{"TxnOffsetCommit", func() kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group, r.ProducerID, r.Generation = "tx", "g", 1, -1
			r.Topics = append(r.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}})
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code, false},
		{"EndTxn", func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID = "tx", 1
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code, false},
		{"DescribeTransactions", func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"tx"}
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code, false},
		{"DescribeTopicPartitions", func() kmsg.Request {
			r := kmsg.NewPtrDescribeTopicPartitionsRequest()
			r.Topics = append(r.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: "t"})
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		// DescribeCluster is not here: any client may describe the cluster, as in Kafka
		// (broker.TestDescribeClusterNeedsNoACL).
		{"DescribeLogDirs", func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }, kerr.ClusterAuthorizationFailed.Code, false},
		{"ListPartitionReassignments", func() kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() }, kerr.ClusterAuthorizationFailed.Code, false},
		{"ElectLeaders", func() kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.Topics = append(r.Topics, kmsg.ElectLeadersRequestTopic{Topic: "t", Partitions: []int32{0}})
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"UnregisterBroker", func() kmsg.Request {
			r := kmsg.NewPtrUnregisterBrokerRequest()
			r.BrokerID = 1
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"UpdateFeatures", func() kmsg.Request {
			r := kmsg.NewPtrUpdateFeaturesRequest()
			u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			u.Feature, u.MaxVersionLevel = "runnel.command.level", 2
			r.FeatureUpdates = append(r.FeatureUpdates, u)
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"DescribeACLs", func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"CreateACLs", func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:mallory", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			r.Creations = append(r.Creations, c)
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"DescribeUserSCRAMCredentials", func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() }, kerr.ClusterAuthorizationFailed.Code, false},
		{"AlterUserSCRAMCredentials", func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			r.Deletions = append(r.Deletions, kmsg.AlterUserSCRAMCredentialsRequestDeletion{Name: "admin", Mechanism: 1})
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"DescribeClientQuotas", func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }, kerr.ClusterAuthorizationFailed.Code, false},
		{"AlterClientQuotas", func() kmsg.Request {
			r := kmsg.NewPtrAlterClientQuotasRequest()
			e := kmsg.NewAlterClientQuotasRequestEntry()
			e.Entity = append(e.Entity, kmsg.AlterClientQuotasRequestEntryEntity{Type: "client-id", Name: kmsg.StringPtr("acl-matrix")})
			e.Ops = append(e.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: 1e9})
			r.Entries = append(r.Entries, e)
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"StreamsGroupHeartbeat", func() kmsg.Request {
			r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
			r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.ProcessID = "gs", "m1", 30000, kmsg.StringPtr("p1")
			r.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{{SubtopologyID: "0", SourceTopics: []string{"t"}}}}
			r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"StreamsGroupDescribe", func() kmsg.Request {
			r := kmsg.NewPtrStreamsGroupDescribeRequest()
			r.Groups = []string{"gs"}
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		// Destructive ones last: the allowed principal's run changes the fixtures.
		{"DeleteACLs", func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			f.Principal = kmsg.StringPtr("User:nobody")
			r.Filters = append(r.Filters, f)
			return r
		}, kerr.ClusterAuthorizationFailed.Code, false},
		{"DeleteRecords", func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.TimeoutMillis = 5000
			r.Topics = append(r.Topics, kmsg.DeleteRecordsRequestTopic{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}})
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
		{"DeleteGroups", func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code, false},
		{"DeleteTopics", func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TopicNames = []string{"t"}
			r.Topics = append(r.Topics, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr("t")})
			return r
		}, kerr.TopicAuthorizationFailed.Code, false},
	}
	send := func(cl *kgo.Client, c tc) []int16 {
		t.Helper()
		req := c.req()
		var resp kmsg.Response
		var err error
		if c.sharded {
			resp, err = cl.Request(ctx, req)
		} else {
			resp, err = cl.SeedBrokers()[0].Request(ctx, req) // straight to the broker: no client-side routing
		}
		var ke *kerr.Error
		if errors.As(err, &ke) { // the client's routing met the error (e.g. in FindCoordinator)
			return []int16{ke.Code}
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		return errorCodes(resp)
	}
	for _, c := range cases {
		codes := send(mallory, c)
		if !slices.Contains(codes, c.want) {
			t.Errorf("%s as mallory: error codes %v, want %d (%s)", c.name, codes, c.want, kerr.ErrorForCode(c.want))
		}
	}
	// Nothing the denied principal sent changed anything.
	end, err := adm.ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	start, err := adm.ListStartOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("t", 0); o.Offset != 5 {
		t.Fatalf("end offset %d after the denied requests, want 5", o.Offset)
	}
	if o, _ := start.Lookup("t", 0); o.Offset != 0 {
		t.Fatalf("start offset %d after the denied requests", o.Offset)
	}
	if o, _ := committed.Lookup("t", 0); o.At != 3 {
		t.Fatalf("committed offset %d after the denied requests, want 3", o.At)
	}
	if _, ok := b.s.Topics().Get("t-new"); ok {
		t.Fatal("a denied CreateTopics created t-new")
	}
	if _, ok := b.s.Node().Image().Users["admin"]; !ok || len(b.s.Node().Image().ACLs) != 11 {
		t.Fatalf("users or ACLs changed: %d ACLs", len(b.s.Node().Image().ACLs))
	}
	// Every topic list mallory gets hides t.
	md, err := kadm.NewClient(mallory).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md.Topics["t"]; ok {
		t.Fatal("all-topics metadata shows mallory a topic it may not describe")
	}
	for _, c := range cases {
		for _, code := range send(alice, c) {
			if slices.Contains(authzCodes, code) {
				t.Errorf("%s as alice: %s", c.name, kerr.ErrorForCode(code))
			}
		}
	}
	if _, ok := b.s.Topics().Get("t"); ok {
		t.Fatal("alice's DeleteTopics did not delete t")
	}
	// A principal that may describe the streams group but not its topics is not shown them
	// (Kafka's TOPIC_AUTHORIZATION_FAILED for the whole group).
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:mallory").AllowHosts("*").Groups("gs").Operations(kadm.OpDescribe)); err != nil {
		t.Fatal(err)
	}
	var streamsCodes []int16
	for range 50 {
		r := kmsg.NewPtrStreamsGroupDescribeRequest()
		r.Groups = []string{"gs"}
		resp, err := mallory.SeedBrokers()[0].Request(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if streamsCodes = errorCodes(resp); slices.Contains(streamsCodes, kerr.TopicAuthorizationFailed.Code) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Contains(streamsCodes, kerr.TopicAuthorizationFailed.Code) {
		t.Errorf("mallory, allowed to describe streams group gs but not its topic t: %v", streamsCodes)
	}

	// An ACL change reaches the authorizer within a second.
	describeLater := func() []int16 {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{"later"}
		resp, err := mallory.SeedBrokers()[0].Request(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return errorCodes(resp)
	}
	if codes := describeLater(); !slices.Contains(codes, kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("mallory described group 'later' before any ACL allowed it: %v", codes)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:mallory").AllowHosts("*").Groups("later").Operations(kadm.OpDescribe)); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	for slices.Contains(describeLater(), kerr.GroupAuthorizationFailed.Code) {
		if time.Since(granted) > time.Second {
			t.Fatal("mallory cannot describe group 'later' a second after the ACL was created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the ACL took effect %v after CreateAcls returned", time.Since(granted))
}

// recordBatch is one valid record batch of one record, as a producer sends it.
func recordBatch(t *testing.T) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	recs := batch.AppendRecord(nil, 0, 0, nil, []byte("x"), 0, nil)
	return batch.AppendBatch(nil, batch.Header{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, recs)
}

// TestUserAndACLCommands: `runnel user` and `runnel acl` manage a secured node over SASL_SSL,
// and Kafka's own kafka-acls (AclCommand of kafka-tools 4.1.1) reads and writes the same ACLs.
func TestUserAndACLCommands(t *testing.T) {
	b := startSecureBroker(t, func(c *server.Config) { c.Authorizer, c.SuperUsers = "acl", "User:admin" })
	addr := b.addrs["SASL_SSL"]
	conn := []string{"--tls", "--tls-ca-file", b.pki.CAFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--sasl-password", "admin-secret"}
	run := func(command string, args ...string) string {
		t.Helper()
		out, err := runCommand(command, addr, append(args, conn...)...)
		if err != nil {
			t.Fatalf("runnel %s %v: %v\n%s", command, args, err, out)
		}
		return out
	}
	run("user", "add", "writer", "--password", "writer-pw")
	if out := run("user", "list"); !strings.Contains(out, "writer") || !strings.Contains(out, "SCRAM-SHA-512") || !strings.Contains(out, "8192") {
		t.Fatalf("user list:\n%s", out)
	}
	run("acl", "add", "--principal", "User:writer", "--operation", "write,describe", "--topic", "logs-", "--resource-pattern-type", "prefixed")
	out := run("acl", "list", "--principal", "User:writer")
	if strings.Count(out, "User:writer") != 2 || !strings.Contains(out, "PREFIXED") {
		t.Fatalf("acl list:\n%s", out)
	}
	// The ACLs apply: writer may produce to logs-app, not to other.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil)).CreateTopics(ctx, 1, 1, nil, "logs-app", "other"); err != nil {
		t.Fatal(err)
	}
	writer := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "writer", Pass: "writer-pw"}.AsSha256Mechanism(), nil)
	if err := writer.ProduceSync(ctx, &kgo.Record{Topic: "logs-app", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("writer to logs-app: %v", err)
	}
	if err := writer.ProduceSync(ctx, &kgo.Record{Topic: "other", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("writer to other: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if out := run("acl", "delete", "--principal", "User:writer"); !strings.Contains(out, "deleted 2") {
		t.Fatalf("acl delete: %s", out)
	}
	run("user", "delete", "writer")
	if out := run("user", "list"); strings.Contains(out, "writer") {
		t.Fatalf("writer still listed:\n%s", out)
	}

	// kafka-acls, with a client config for SASL_SSL.
	acls := kafkaTool(t, "org.apache.kafka.tools.AclCommand")
	props := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(props, []byte(fmt.Sprintf("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"admin-secret\";\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location=%s\n", b.pki.CAFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	kafkaACLs := func(args ...string) string {
		return runClient(t, 120*time.Second, "", acls[0], append(acls[1:], append([]string{"--bootstrap-server", addr, "--command-config", props}, args...)...)...)
	}
	kafkaACLs("--add", "--allow-principal", "User:reader", "--operation", "Read", "--topic", "logs-app", "--group", "readers")
	if out := run("acl", "list", "--principal", "User:reader"); strings.Count(out, "User:reader") != 2 {
		t.Fatalf("runnel acl list after kafka-acls --add:\n%s", out)
	}
	if out := kafkaACLs("--list", "--topic", "logs-app"); !strings.Contains(out, "User:reader") || !strings.Contains(out, "READ") {
		t.Fatalf("kafka-acls --list:\n%s", out)
	}
	kafkaACLs("--remove", "--force", "--allow-principal", "User:reader", "--operation", "Read", "--topic", "logs-app", "--group", "readers")
	if n := len(b.s.Node().Image().ACLs); n != 0 {
		t.Fatalf("%d ACLs left after kafka-acls --remove", n)
	}

	// kafka-configs adds a SCRAM user (salted client-side), describes and deletes it.
	configs := kafkaTool(t, "kafka.admin.ConfigCommand")
	kafkaConfigs := func(args ...string) string {
		return runClient(t, 120*time.Second, "", configs[0], append(configs[1:], append([]string{"--bootstrap-server", addr, "--command-config", props}, args...)...)...)
	}
	kafkaConfigs("--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=cfg-pw]", "--entity-type", "users", "--entity-name", "cfguser")
	if out := kafkaConfigs("--describe", "--entity-type", "users", "--entity-name", "cfguser"); !strings.Contains(out, "SCRAM-SHA-256=iterations=8192") {
		t.Fatalf("kafka-configs --describe:\n%s", out)
	}
	// A context of its own: the JVM tools above can outlast the first one under load.
	pingCtx, pingCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer pingCancel()
	cfg := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "cfguser", Pass: "cfg-pw"}.AsSha256Mechanism(), nil)
	if err := cfg.Ping(pingCtx); err != nil {
		t.Fatalf("the user kafka-configs added cannot log in: %v", err)
	}
	kafkaConfigs("--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "cfguser")
	if _, ok := b.s.Node().Image().Users["cfguser"]; ok {
		t.Fatal("kafka-configs --delete-config left the user")
	}
}

// TestAuthorizedOperations: Metadata, DescribeCluster and DescribeGroups report the operations
// the principal may do (KIP-430), as admin tools show them.
func TestAuthorizedOperations(t *testing.T) {
	b := startSecureBroker(t, func(c *server.Config) { c.Authorizer, c.SuperUsers = "acl", "User:admin" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "reader", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:reader").AllowHosts("*").Topics("ops").Groups("gr", "gs").Clusters().Operations(kadm.OpRead, kadm.OpDescribe)); err != nil {
		t.Fatal(err)
	}
	// The group exists (DescribeGroups v6 answers an unknown one GROUP_ID_NOT_FOUND, as Kafka).
	offs := kadm.Offsets{}
	offs.AddOffset("ops", 0, 0, -1)
	if _, err := adm.CommitOffsets(ctx, "gr", offs); err != nil {
		t.Fatal(err)
	}
	reader := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "reader", Pass: "pw"}.AsSha256Mechanism(), nil)
	md := kmsg.NewPtrMetadataRequest()
	md.IncludeTopicAuthorizedOperations = true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("ops")}}
	resp, err := reader.SeedBrokers()[0].Request(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	if want := int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDescribe); mr.Topics[0].AuthorizedOperations != want {
		t.Fatalf("topic operations %b, want %b (READ, DESCRIBE)", mr.Topics[0].AuthorizedOperations, want)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	cresp, err := reader.SeedBrokers()[0].Request(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cresp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations, int32(1<<kmsg.ACLOperationDescribe); got != want {
		t.Fatalf("cluster operations %b, want %b (DESCRIBE)", got, want)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"gr"}, true
	var g kmsg.DescribeGroupsResponseGroup
	for { // the first lookup creates the coordinator's partitions
		dresp, err := reader.Request(ctx, dg)
		if err != nil {
			t.Fatal(err)
		}
		if g = dresp.(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g.ErrorCode != 0 || g.AuthorizedOperations != 1<<kmsg.ACLOperationRead|1<<kmsg.ACLOperationDescribe {
		t.Fatalf("group %+v", g)
	}
	// A share group (ShareGroupDescribe used to leave them out, as not asked for), and the
	// empty group id, which Kafka answers INVALID_GROUP_ID (it was GROUP_ID_NOT_FOUND).
	admin := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil)
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "gs", "m-gs", []string{"ops"}
	for {
		resp, err := hb.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 0 {
			break
		}
		if !kerr.IsRetriable(kerr.ErrorForCode(resp.ErrorCode)) || ctx.Err() != nil {
			t.Fatalf("share heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		time.Sleep(50 * time.Millisecond)
	}
	sd := kmsg.NewPtrShareGroupDescribeRequest()
	sd.GroupIDs, sd.IncludeAuthorizedOperations = []string{"gs", ""}, true
	raw, err := reader.SeedBrokers()[0].Request(ctx, sd) // the node itself: the client would look "" up first
	if err != nil {
		t.Fatal(err)
	}
	sresp := raw.(*kmsg.ShareGroupDescribeResponse)
	if len(sresp.Groups) != 2 || sresp.Groups[0].ErrorCode != 0 || sresp.Groups[0].AuthorizedOperations != 1<<kmsg.ACLOperationRead|1<<kmsg.ACLOperationDescribe {
		t.Fatalf("share group described with its operations: %+v; want READ and DESCRIBE", sresp.Groups)
	}
	if g := sresp.Groups[1]; g.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("share group \"\" described: %v; want INVALID_GROUP_ID", kerr.ErrorForCode(g.ErrorCode))
	}
	// OffsetFetch of a share group: no offsets, as an unknown group's (Kafka's fetchOffsets
	// takes the share group's GroupIdNotFoundException as none); it was GROUP_ID_NOT_FOUND.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "gs", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "ops", Partitions: []int32{0}}}}}
	oresp, err := of.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if og := oresp.Groups[0]; og.ErrorCode != 0 || len(og.Topics) != 1 || og.Topics[0].Partitions[0].Offset != -1 || og.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetFetch of share group gs: %+v; want offset -1 and no error", og)
	}
}

// TestRegexSubscriptionHonoursDescribeACLs: a KIP-848 member subscribing by regex (its
// heartbeat's SubscribedTopicRegex, as the Java client and franz-go send it) is assigned only
// the matching topics its principal may describe, as Kafka resolves regexes
// (filterTopicDescribeAuthorizedTopics); before, it was also assigned a topic it could not
// see, whose partitions no other member of the group could then take.
func TestRegexSubscriptionHonoursDescribeACLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, adm, alice := aliceWithTopic(t, ctx, 2, "rx-open", "rx-hidden", kadm.NewACLs().Groups("rxg"))
	md, err := adm.Metadata(ctx, "rx-open", "rx-hidden")
	if err != nil {
		t.Fatal(err)
	}
	regex := "rx-.*"
	memberID, epoch := "rx-member-1", int32(0)
	var got map[string]int
	for range 100 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "rxg", memberID, epoch, 30000
		req.SubscribedTopicRegex, req.Topics = &regex, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); kerr.IsRetriable(err) { // the offsets topic is being created
			time.Sleep(100 * time.Millisecond)
			continue
		} else if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			got = map[string]int{}
			for _, at := range resp.Assignment.Topics {
				for name, mt := range md.Topics {
					if mt.ID == at.TopicID {
						got[name] += len(at.Partitions)
					}
				}
			}
			if got["rx-open"] == 2 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got["rx-open"] != 2 || got["rx-hidden"] != 0 {
		t.Errorf("alice (DESCRIBE on rx-open only), regex %q: assigned %v; want rx-open's 2 partitions and none of rx-hidden", regex, got)
	}
}

// TestGroupsHideUndescribableTopics: as Kafka (KAFKA-18813), a consumer group heartbeat that
// names a topic the member may not describe is refused with TOPIC_AUTHORIZATION_FAILED, and a
// consumer or share group whose members are assigned such a topic is described to that client
// as TOPIC_AUTHORIZATION_FAILED with no members, while a group of describable topics is
// described in full.
func TestGroupsHideUndescribableTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _, alice := aliceWithTopic(t, ctx, 1, "hd-open", "hd-hidden", kadm.NewACLs().ResourcePatternType(kadm.ACLPatternPrefixed).Groups("hd"))

	// retry sends req until the group's coordinator answers with something else than a
	// retriable error.
	retry := func(cl *kgo.Client, req kmsg.Request, code func(kmsg.Response) int16) kmsg.Response {
		t.Helper()
		for {
			resp, err := cl.Request(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !kerr.IsRetriable(kerr.ErrorForCode(code(resp))) {
				return resp
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	heartbeat := func(cl *kgo.Client, group string, topics ...string) int16 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = group, "m-"+group, 30000, topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return retry(cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	}
	if code := heartbeat(alice, "hd-alice", "hd-open", "hd-hidden"); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice's heartbeat naming hd-hidden: %v; want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := heartbeat(alice, "hd-alice", "hd-open"); code != 0 {
		t.Errorf("alice's heartbeat naming hd-open: %v; want none", kerr.ErrorForCode(code))
	}
	// The admin's members: group hd-both is assigned both topics, hd-one only hd-open.
	for _, g := range []struct {
		name   string
		topics []string
	}{{"hd-both", []string{"hd-open", "hd-hidden"}}, {"hd-one", []string{"hd-open"}}} {
		if code := heartbeat(admin, g.name, g.topics...); code != 0 {
			t.Fatalf("admin's heartbeat in %s: %v", g.name, kerr.ErrorForCode(code))
		}
		sreq := kmsg.NewPtrShareGroupHeartbeatRequest()
		sreq.GroupID, sreq.MemberID, sreq.SubscribedTopicNames = g.name+"-share", "s-"+g.name, g.topics
		sresp := retry(admin, sreq, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }).(*kmsg.ShareGroupHeartbeatResponse)
		if sresp.ErrorCode != 0 {
			t.Fatalf("admin's share heartbeat in %s-share: %v", g.name, kerr.ErrorForCode(sresp.ErrorCode))
		}
	}
	describe := func(cl *kgo.Client, group string) (int16, int, string) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp := retry(cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode }).(*kmsg.ConsumerGroupDescribeResponse)
		g := resp.Groups[0]
		assigned := 0
		for _, m := range g.Members {
			assigned += len(m.Assignment.TopicPartitions) + len(m.TargetAssignment.TopicPartitions)
		}
		msg := ""
		if g.ErrorMessage != nil {
			msg = *g.ErrorMessage
		}
		return g.ErrorCode, assigned, msg
	}
	describeShare := func(cl *kgo.Client, group string) (int16, int) {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp := retry(cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode }).(*kmsg.ShareGroupDescribeResponse)
		return resp.Groups[0].ErrorCode, len(resp.Groups[0].Members)
	}
	if code, assigned, _ := describe(admin, "hd-both"); code != 0 || assigned == 0 {
		t.Fatalf("hd-both described to admin: %v, %d topic assignments; want the group with its assignment", kerr.ErrorForCode(code), assigned)
	}
	if code, assigned, msg := describe(alice, "hd-both"); code != kerr.TopicAuthorizationFailed.Code || assigned != 0 || !strings.Contains(msg, "not authorized to describe") {
		t.Errorf("hd-both described to alice: %v (%q), %d topic assignments; want TOPIC_AUTHORIZATION_FAILED and nothing of the group", kerr.ErrorForCode(code), msg, assigned)
	}
	if code, assigned, _ := describe(alice, "hd-one"); code != 0 || assigned == 0 {
		t.Errorf("hd-one described to alice: %v, %d topic assignments; want the group", kerr.ErrorForCode(code), assigned)
	}
	if code, members := describeShare(admin, "hd-both-share"); code != 0 || members != 1 {
		t.Fatalf("hd-both-share described to admin: %v, %d members", kerr.ErrorForCode(code), members)
	}
	if code, members := describeShare(alice, "hd-both-share"); code != kerr.TopicAuthorizationFailed.Code || members != 0 {
		t.Errorf("hd-both-share described to alice: %v, %d members; want TOPIC_AUTHORIZATION_FAILED, none", kerr.ErrorForCode(code), members)
	}
	if code, members := describeShare(alice, "hd-one-share"); code != 0 || members != 1 {
		t.Errorf("hd-one-share described to alice: %v, %d members; want the group", kerr.ErrorForCode(code), members)
	}
}

// aliceWithTopic starts a broker with ACLs and topics open and hidden of the given partitions,
// and returns a super user's client (and its admin) and user alice's, whom the ACLs allow
// everything on open and on the groups of groups (a builder naming them), nothing on hidden.
func aliceWithTopic(t *testing.T, ctx context.Context, partitions int32, open, hidden string, groups *kadm.ACLBuilder) (*kgo.Client, *kadm.Client, *kgo.Client) {
	t.Helper()
	b := startSecureBroker(t, func(c *server.Config) { c.Authorizer, c.SuperUsers = "acl", "User:admin" })
	admin := b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism(), nil)
	adm := kadm.NewClient(admin)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"}}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{open, hidden} {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	for _, acl := range []*kadm.ACLBuilder{kadm.NewACLs().Topics(open), groups} {
		acl.Allow("User:alice").AllowHosts("*").Operations(kadm.OpAll)
		if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
			t.Fatalf("create acl: %v %v", err, res)
		}
	}
	return admin, adm, b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(), nil)
}
