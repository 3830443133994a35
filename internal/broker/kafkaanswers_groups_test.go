package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

// Group and transaction answers checked against Apache Kafka 4.1.1's to the same requests.

// coordinatedBroker is a one-node broker whose __consumer_offsets and __transaction_state have
// one partition each, returned once both have a coordinator and the group one is loaded.
func coordinatedBroker(t *testing.T) (string, *topics.Registry) {
	t.Helper()
	_, addr, reg := ctBroker(t, func(c *Config) { c.OffsetsTopicPartitions, c.TxnStatePartitions = 1, 1 })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 6, []string{"any"}
		groups := rawRequest(t, addr, fc).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		fc.CoordinatorType = 1
		txns := rawRequest(t, addr, fc).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version, dg.Groups = 5, []string{"any"}
		loading := rawRequest(t, addr, dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
		if groups == 0 && txns == 0 && loading == 0 {
			return addr, reg
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinators not ready: %s %s %s", errName(groups), errName(txns), errName(loading))
		}
	}
}

// commitOne commits offset 1 of topic's partition p for group with OffsetCommit v9.
func commitOne(t *testing.T, addr, group, member string, generation int32, instance *string, topic string, p int32) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 9, group, member, generation, instance
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic,
		Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: 1, LeaderEpoch: -1}}}}
	return rawRequest(t, addr, req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// TestSyncGroupV5WithoutProtocol: a SyncGroup v5 without its protocol type or name is
// INCONSISTENT_GROUP_PROTOCOL before anything else, as Kafka's KafkaApis.handleSyncGroupRequest
// (both are mandatory from version 5). It used to be taken, and the leader's assignment stored.
func TestSyncGroupV5WithoutProtocol(t *testing.T) {
	addr, _ := coordinatedBroker(t)
	consumer, rangeName := "consumer", "range"
	for _, c := range []struct {
		version        int16
		protocolType   *string
		protocol       *string
		want           *kerr.Error
		protocolAnswer string
	}{
		{5, nil, nil, kerr.InconsistentGroupProtocol, "neither"},
		{5, &consumer, nil, kerr.InconsistentGroupProtocol, "no name"},
		{5, nil, &rangeName, kerr.InconsistentGroupProtocol, "no type"},
		{4, nil, nil, kerr.UnknownMemberID, "v4, neither (optional before v5)"},
	} {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.MemberID, req.Generation = c.version, "g", "m", 1
		req.ProtocolType, req.Protocol = c.protocolType, c.protocol
		if got := rawRequest(t, addr, req).(*kmsg.SyncGroupResponse).ErrorCode; got != c.want.Code {
			t.Errorf("SyncGroup(%s) = %s; want %s", c.protocolAnswer, errName(got), errName(c.want.Code))
		}
	}
}

// TestGroupAuthorizedOperations: the authorized operations of a group (KIP-430) are Kafka's
// (AclEntry.supportedOperations(GROUP): READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS, all of them without an authorizer) in DescribeGroups and ConsumerGroupDescribe.
// DescribeGroups used to leave out the two config operations, and ConsumerGroupDescribe did not
// fill them in at all.
func TestGroupAuthorizedOperations(t *testing.T) {
	addr, reg := coordinatedBroker(t)
	ctCreate(t, reg, "ops", 1, nil)
	const all = 1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationDescribe |
		1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs // 3400
	if got := commitOne(t, addr, "classic", "", -1, nil, "ops", 0); got != 0 {
		t.Fatalf("OffsetCommit = %s", errName(got))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 6, []string{"classic"}, true
	if got := rawRequest(t, addr, dg).(*kmsg.DescribeGroupsResponse).Groups[0].AuthorizedOperations; got != all {
		t.Errorf("DescribeGroups(include authorized operations) = %d; want %d", got, all)
	}

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "modern", "member-aaaaaaaaaaaaaaaaaa", 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"ops"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := rawRequest(t, addr, hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat(join) = %s", errName(r.ErrorCode))
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Version, cgd.Groups = 1, []string{"modern"}
	if got := rawRequest(t, addr, cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].AuthorizedOperations; got != notRequested {
		t.Errorf("ConsumerGroupDescribe(not asking) = %d; want %d", got, notRequested)
	}
	cgd.IncludeAuthorizedOperations = true
	if got := rawRequest(t, addr, cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].AuthorizedOperations; got != all {
		t.Errorf("ConsumerGroupDescribe(include authorized operations) = %d; want %d", got, all)
	}
}

// TestEmptyGroupIDAsKafka: Kafka keeps the empty group id for backwards compatibility where it
// names a group (GroupCoordinatorService: only a null id is INVALID_GROUP_ID there), so offsets
// committed under "" are described (Empty) and deleted; the member APIs and
// ConsumerGroupDescribe answer it INVALID_GROUP_ID (isGroupIdNotEmpty). DescribeGroups and
// DeleteGroups used to answer INVALID_GROUP_ID, Heartbeat and SyncGroup UNKNOWN_MEMBER_ID,
// LeaveGroup its members UNKNOWN_MEMBER_ID, and ConsumerGroupDescribe GROUP_ID_NOT_FOUND.
func TestEmptyGroupIDAsKafka(t *testing.T) {
	addr, reg := coordinatedBroker(t)
	ctCreate(t, reg, "e", 1, nil)
	if got := commitOne(t, addr, "", "", -1, nil, "e", 0); got != 0 {
		t.Fatalf("OffsetCommit(group \"\") = %s; want NONE", errName(got))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 6, []string{""}
	if g := rawRequest(t, addr, dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != 0 || g.State != "Empty" {
		t.Errorf("DescribeGroups([\"\"]) = %s, state %q; want NONE, Empty", errName(g.ErrorCode), g.State)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.MemberID, hb.Generation = 4, "m", 1
	if got := rawRequest(t, addr, hb).(*kmsg.HeartbeatResponse).ErrorCode; got != kerr.InvalidGroupID.Code {
		t.Errorf("Heartbeat(group \"\") = %s; want INVALID_GROUP_ID", errName(got))
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Version, sg.MemberID, sg.Generation, sg.ProtocolType, sg.Protocol = 5, "m", 1, kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if got := rawRequest(t, addr, sg).(*kmsg.SyncGroupResponse).ErrorCode; got != kerr.InvalidGroupID.Code {
		t.Errorf("SyncGroup(group \"\") = %s; want INVALID_GROUP_ID", errName(got))
	}
	lg := kmsg.NewPtrLeaveGroupRequest()
	lg.Version, lg.Members = 5, []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	if got := rawRequest(t, addr, lg).(*kmsg.LeaveGroupResponse); got.ErrorCode != kerr.InvalidGroupID.Code {
		t.Errorf("LeaveGroup(group \"\") = %s; want INVALID_GROUP_ID", errName(got.ErrorCode))
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Version, cgd.Groups = 1, []string{""}
	if got := rawRequest(t, addr, cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode; got != kerr.InvalidGroupID.Code {
		t.Errorf("ConsumerGroupDescribe([\"\"]) = %s; want INVALID_GROUP_ID", errName(got))
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{""}
	if got := rawRequest(t, addr, del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; got != 0 {
		t.Errorf("DeleteGroups([\"\"]) = %s; want NONE", errName(got))
	}
	if g := rawRequest(t, addr, dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("DescribeGroups([\"\"]) after the delete = %s, state %q; want GROUP_ID_NOT_FOUND", errName(g.ErrorCode), g.State)
	}
}
