package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Answers checked against what Apache Kafka 4.1.1 answers to the same requests.

// TestOffsetDeleteUnknownTopicOrPartition: OffsetDelete naming a topic that does not exist, or a
// partition past a topic's count, answers UNKNOWN_TOPIC_OR_PARTITION in those rows, as Kafka's
// KafkaApis.handleOffsetDeleteRequest, next to the rows of the known partitions (those used to
// be answered NONE, as if offsets had been deleted); a group error leaves only the group error.
func TestOffsetDeleteUnknownTopicOrPartition(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "od", 2, nil)
	ctx, _, adm := adminClients(t, addr)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "od", Partition: 0, At: 1, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	del := func(group string) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		req.Topics = []kmsg.OffsetDeleteRequestTopic{
			{Topic: "od", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 9}}},
			{Topic: "nosuch", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		}
		return rawRequest(t, addr, req).(*kmsg.OffsetDeleteResponse)
	}
	resp := del("g")
	got := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	want := map[string]int16{"od/0": 0, "od/9": kerr.UnknownTopicOrPartition.Code, "nosuch/0": kerr.UnknownTopicOrPartition.Code}
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 || len(got) != len(want) {
		t.Fatalf("OffsetDelete(g) = %s with %d topics, rows %v; want NONE, 2 topics, rows %v", errName(resp.ErrorCode), len(resp.Topics), got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("OffsetDelete(g) row %s = %s; want %s", k, errName(got[k]), errName(w))
		}
	}
	// Another group may hash to a coordinator partition still loading: retry, as a client does.
	resp = del("nosuch-group")
	for deadline := time.Now().Add(10 * time.Second); resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		resp = del("nosuch-group")
	}
	if resp.ErrorCode != kerr.GroupIDNotFound.Code || len(resp.Topics) != 0 {
		t.Errorf("OffsetDelete(nosuch-group) = %s with %d topics; want GROUP_ID_NOT_FOUND alone", errName(resp.ErrorCode), len(resp.Topics))
	}
}

// TestEmptyGroupAndTransactionalID: an empty group id or transactional id is answered finally on
// any node (they used to get NOT_COORDINATOR, which clients retry until their timeout):
// OffsetDelete INVALID_GROUP_ID (Kafka's GroupCoordinatorService.deleteOffsets),
// DescribeTransactions INVALID_REQUEST in its row (TransactionCoordinator.handleDescribeTransactions).
func TestEmptyGroupAndTransactionalID(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "e", 1, nil)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "e", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if got := rawRequest(t, addr, od).(*kmsg.OffsetDeleteResponse); got.ErrorCode != kerr.InvalidGroupID.Code || len(got.Topics) != 0 {
		t.Errorf("OffsetDelete(group \"\") = %s with %d topics; want INVALID_GROUP_ID alone", errName(got.ErrorCode), len(got.Topics))
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{""}
	if got := rawRequest(t, addr, dt).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]; got.ErrorCode != kerr.InvalidRequest.Code || got.TransactionalID != "" {
		t.Errorf("DescribeTransactions(\"\") = %q %s; want \"\" INVALID_REQUEST", got.TransactionalID, errName(got.ErrorCode))
	}
}

// TestScramOneUserTwiceInARequest: AlterUserScramCredentials changing one user twice, whatever the
// mechanisms and whether upserted or deleted, answers that user DUPLICATE_RESOURCE once and
// changes nothing of it, as Kafka's ScramControlManager.alterCredentials (keyed by user alone);
// it used to be keyed by user and mechanism, and both changes applied. Other users of the request
// are changed.
func TestScramOneUserTwiceInARequest(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	upsert := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt = name, mech, 4096, []byte("saltsaltsalt")
		u.SaltedPassword = make([]byte, 32*int(mech))
		return u
	}
	alter := func(dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) map[string]int16 {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Deletions, req.Upsertions = dels, ups
		out := map[string]int16{}
		for _, r := range rawRequest(t, addr, req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
			if _, dup := out[r.User]; dup {
				t.Errorf("user %s answered twice", r.User)
			}
			out[r.User] = r.ErrorCode
		}
		return out
	}
	credentials := func(name string) int {
		d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		d.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: name}}
		return len(rawRequest(t, addr, d).(*kmsg.DescribeUserSCRAMCredentialsResponse).Results[0].CredentialInfos)
	}
	dup := kerr.DuplicateResource.Code
	if got := alter(nil, upsert("bob", 1), upsert("bob", 2), upsert("amy", 1)); got["bob"] != dup || got["amy"] != 0 {
		t.Errorf("AlterUserScramCredentials(bob SHA-256 and SHA-512, amy) = %v; want bob DUPLICATE_RESOURCE, amy NONE", got)
	}
	if n, m := credentials("bob"), credentials("amy"); n != 0 || m != 1 {
		t.Errorf("credentials after the request: bob %d, amy %d; want 0 and 1", n, m)
	}
	if got := alter(nil, upsert("bob", 1)); got["bob"] != 0 {
		t.Fatalf("AlterUserScramCredentials(bob SHA-256) = %v; want NONE", got)
	}
	if got := alter(nil, upsert("bob", 2)); got["bob"] != 0 {
		t.Fatalf("AlterUserScramCredentials(bob SHA-512) = %v; want NONE", got)
	}
	for _, tc := range []struct {
		name string
		dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion
		ups  []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	}{
		{"two deletions", []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "bob", Mechanism: 1}, {Name: "bob", Mechanism: 2}}, nil},
		{"a deletion and an upsertion", []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "bob", Mechanism: 1}},
			[]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert("bob", 2)}},
		{"one mechanism twice", nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsert("bob", 1), upsert("bob", 1)}},
	} {
		if got := alter(tc.dels, tc.ups...); got["bob"] != dup {
			t.Errorf("AlterUserScramCredentials(%s) = %v; want bob DUPLICATE_RESOURCE", tc.name, got)
		}
		if n := credentials("bob"); n != 2 {
			t.Errorf("bob's credentials after %s = %d; want both, untouched", tc.name, n)
		}
	}
}

// TestDescribeProducersInvalidTopicName: a topic name Kafka could never have is
// INVALID_TOPIC_EXCEPTION in its rows (Kafka's checkValidTopic, before authorization); it used
// to be UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeProducersInvalidTopicName(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "bad name!", Partitions: []int32{0, 1}}, {Topic: "good-name", Partitions: []int32{0}}}
	resp := rawRequest(t, addr, req).(*kmsg.DescribeProducersResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidTopicException.Code || p.ErrorMessage == nil {
			t.Errorf("DescribeProducers(\"bad name!\"/%d) = %s (%s); want INVALID_TOPIC_EXCEPTION with a message", p.Partition, errName(p.ErrorCode), msg(p.ErrorMessage))
		}
	}
	if got := resp.Topics[1].Partitions[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("DescribeProducers(good-name/0) = %s; want UNKNOWN_TOPIC_OR_PARTITION", errName(got))
	}
}

// TestProduceSamePartitionTwice: a Produce naming one partition twice appends it once, its last
// mention's batch, and answers one row, as Kafka's KafkaApis keys a request's partitions in a
// map; a topic named twice is one topic of the answer. Each mention used to be appended.
func TestProduceSamePartitionTwice(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "p", 2, nil)
	resp := ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"p", 0, ctBatch(1, 10)}, ctPart{"p", 0, ctBatch(3, 10)}, ctPart{"p", 1, ctBatch(1, 10)})).(*kmsg.ProduceResponse)
	rows := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			rows++
			if rp.ErrorCode != 0 || rp.BaseOffset != 0 {
				t.Errorf("Produce row p/%d = %s at %d; want NONE at 0", rp.Partition, errName(rp.ErrorCode), rp.BaseOffset)
			}
		}
	}
	ends := ctEnds(reg)
	if len(resp.Topics) != 1 || rows != 2 || ends["p/0"] != 3 || ends["p/1"] != 1 {
		t.Errorf("Produce(p/0 twice, p/1) = %d topics, %d rows, ends %v; want 1 topic, 2 rows, p/0 at 3 (the last batch), p/1 at 1",
			len(resp.Topics), rows, ends)
	}
}

func TestUniqueProducePartitions(t *testing.T) {
	many := func(topic string, n int) kmsg.ProduceRequestTopic {
		rt := kmsg.ProduceRequestTopic{Topic: topic}
		for i := range n {
			rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: int32(i)})
		}
		return rt
	}
	for _, tc := range []struct {
		name   string
		topics []kmsg.ProduceRequestTopic
		unique bool
		rows   int
	}{
		{"distinct", []kmsg.ProduceRequestTopic{many("a", 3), many("b", 3)}, true, 6},
		{"distinct, large", []kmsg.ProduceRequestTopic{many("a", 30), many("b", 30)}, true, 60},
		{"topic twice", []kmsg.ProduceRequestTopic{many("a", 1), many("b", 1), many("a", 1)}, false, 2},
		{"topic twice, large", []kmsg.ProduceRequestTopic{many("a", 20), many("a", 20)}, false, 20},
		{"topic twice, other partitions, large", []kmsg.ProduceRequestTopic{many("a", 20), {Topic: "a", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 99}}}}, false, 21},
	} {
		got, unique := uniqueProducePartitions(tc.topics)
		rows, names := 0, map[string]bool{}
		for _, rt := range got {
			rows += len(rt.Partitions)
			if names[rt.Topic] {
				t.Errorf("uniqueProducePartitions(%s) names %s twice", tc.name, rt.Topic)
			}
			names[rt.Topic] = true
		}
		if unique != tc.unique || rows != tc.rows {
			t.Errorf("uniqueProducePartitions(%s) = %d rows, unique %v; want %d, %v", tc.name, rows, unique, tc.rows, tc.unique)
		}
	}
	small := []kmsg.ProduceRequestTopic{many("a", 4), many("b", 4)}
	if n := testing.AllocsPerRun(100, func() { uniqueProducePartitions(small) }); n != 0 {
		t.Errorf("uniqueProducePartitions of a small request without repeats allocates %v times; want 0", n)
	}
}
