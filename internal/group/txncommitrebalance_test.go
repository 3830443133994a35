package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's ClassicGroup.validateOffsetCommit answers REBALANCE_IN_PROGRESS during
// CompletingRebalance only for plain commits ("This does not apply to transactional offset
// commits, since the group state is not enforced for those"). Runnel reused the plain check
// for TxnOffsetCommit, and the Java producer's TxnOffsetCommitHandler treats
// REBALANCE_IN_PROGRESS as "Unexpected error in TxnOffsetCommitResponse": a fatal error.
func TestTxnOffsetCommitDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t)
	a, ja := h.newMember()
	h.advance(3 * time.Second)
	if r := h.joined(ja); r.ErrorCode != 0 || h.state() != CompletingRebalance {
		t.Fatalf("join %d, state %v", r.ErrorCode, h.state())
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation, req.MemberID = 3, "g", 1, 0, 1, a
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 10, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, _, _ := h.c.TxnOffsetCommit(h.now, req)
	wantCode(t, "TxnOffsetCommit(current generation, CompletingRebalance)", resp.Topics[0].Partitions[0].ErrorCode, nil)
}
