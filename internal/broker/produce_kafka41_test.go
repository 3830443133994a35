package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A produce refused by transaction verification (the partition is not in the producer's
// transaction) is refused before the log: Kafka's ReplicaManager turns the verification's
// preAppendErrors into LogAppendResult(LogAppendInfo.UNKNOWN_LOG_APPEND_INFO, ...), log start
// offset -1; only appendToLocalLog's own failures carry the partition's log start.
// Runnel gave these the log start too, once refusals of the log carried it.
func TestTxnVerificationRefusalLogStart(t *testing.T) {
	addr, reg := coordinatedBroker(t)
	ctCreate(t, reg, "verls", 2, nil)
	pid, epoch := initTransactional(t, addr, "verls-tx")
	if got := addPartitionsV3(t, addr, "verls-tx", pid, epoch, map[string][]int32{"verls": {0}}); got["verls/0"] != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	for _, v := range []int16{10, 11} {
		pr := ctProduce(v, -1, ctPart{"verls", 1, lsoTxnBatch(pid, 1)})
		pr.TransactionID = kmsg.StringPtr("verls-tx")
		sp := rawRequest(t, addr, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if sp.ErrorCode == 0 {
			t.Fatalf("v%d: appended", v)
		}
		if sp.LogStartOffset != -1 {
			t.Errorf("Produce v%d refused by transaction verification (%s): LogStartOffset %d; Kafka: -1 (UNKNOWN_LOG_APPEND_INFO)",
				v, kerr.ErrorForCode(sp.ErrorCode), sp.LogStartOffset)
		}
	}
}

// A DeleteTopics with a passed deadline whose entries are all duplicates (or name both a name
// and an id) reaches no controller event in Kafka (ControllerApis.deleteTopics: findTopicIds,
// findTopicNames and deleteTopics of nothing complete at once), so its entries are answered
// INVALID_REQUEST; Runnel answered REQUEST_TIMED_OUT to any non-empty request, unlike its
// CreateTopics/CreatePartitions rule (only when a well-formed entry would reach the controller).
func TestDeleteTopicsPassedDeadlineOnlyDuplicates(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "dupdel", 1, nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis = 6, 0
	for range 2 {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr("dupdel")
		req.Topics = append(req.Topics, rt)
	}
	resp := ctRoundTrip(t, addr, req).(*kmsg.DeleteTopicsResponse)
	for _, st := range resp.Topics {
		if st.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("DeleteTopics(timeout 0, dupdel twice): %v; Kafka: INVALID_REQUEST Duplicate topic name. (no controller event)", kerr.ErrorForCode(st.ErrorCode))
		}
	}
}

// Kafka's partition-count limit per request (validateTotalNumberOfPartitions) runs inside the
// controller's createTopics event, whose deadline has passed when the timeout is 0: the event
// never runs and every topic is REQUEST_TIMED_OUT. Runnel exempted such a request and answered
// POLICY_VIOLATION.
func TestCreateTopicsPassedDeadlineTooManyPartitions(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 0
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "toomany", 10001, 1
	req.Topics = append(req.Topics, rt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.CreateTopicsResponse)
	if c := resp.Topics[0].ErrorCode; c != kerr.RequestTimedOut.Code {
		t.Errorf("CreateTopics(timeout 0, 10001 partitions): %v; Kafka: REQUEST_TIMED_OUT (the limit is checked inside the controller event)", kerr.ErrorForCode(c))
	}
}
