package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func replayFull(t *testing.T, records []Record, h *harness) *Coordinator {
	t.Helper()
	c := New(DefaultConfig())
	c.Topics = func() map[string]TopicMeta { return testTopics }
	for _, r := range records {
		if err := c.Load(h.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func deleteG(t *testing.T, h *harness) {
	t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	resp, out := h.c.DeleteGroups(req)
	if code := resp.Groups[0].ErrorCode; code != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(code))
	}
	h.apply(out)
}

// TestDeletedConsumerGroupStaysDeletedOnReplay: an empty consumer group with an offset is
// deleted. DeleteGroups writes the offset tombstone, the GroupMetadata tombstone, then the
// consumer record's tombstone; on a full replay the GroupMetadata tombstone leaves the consumer
// group alone (a later record decides a group's type), so the consumer tombstone must delete
// what is left (it only cleared the consumer state, and the deleted group came back as an
// Empty classic group of protocol type "consumer").
func TestDeletedConsumerGroupStaysDeletedOnReplay(t *testing.T) {
	h := newConsumerHarness(t)
	r := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := h.hb("c", -1, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := h.commit("", -1, "t", 0, 7); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	deleteG(t, h)
	if g, _ := h.c.Group("g"); g != nil {
		t.Fatal("live: the group is still there")
	}
	for name, c := range map[string]*Coordinator{"full": replayFull(t, h.records, h), "compacted": replayCompacted(t, h.records, h.now)} {
		if g, _ := c.Group("g"); g != nil {
			lg := c.ListGroups(kmsg.NewPtrListGroupsRequest())
			t.Errorf("%s replay: deleted group is back: type %s, protocol type %q, state %v; ListGroups %+v",
				name, g.Type(), g.ProtocolType, g.State, lg.Groups)
		}
	}
}

// TestDeleteGroupsWithPendingTxnOnReplay: DeleteGroups of a group with a pending
// transactional offset deletes it live (the tombstone drops the pending offset); a
// replay must delete it too, also after the transaction's marker (the GroupMetadata
// tombstone kept a group with a pending offset, Empty with no offsets).
func TestDeleteGroupsWithPendingTxnOnReplay(t *testing.T) {
	h := newConsumerHarness(t)
	id := h.join("", "")
	m := h.joined(id).MemberID
	jid := h.join(m, "")
	h.advance(3 * time.Second)
	j := h.joined(jid)
	h.sync(m, j.Generation, map[string]string{m: "a"})
	if code := h.commit(m, j.Generation, "t", 0, 5); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group, lv.MemberID = 0, "g", m
	_, out := h.c.LeaveGroup(h.now, lv)
	h.apply(out)
	if h.state() != Empty {
		t.Fatalf("setup: state %v", h.state())
	}
	before := len(h.records)
	txn := txnCommit(t, h.c, h.now, 9, 1, 50)
	deleteG(t, h)
	h.c.CompleteTxn(h.now, 9, 2, false)
	if g, _ := h.c.Group("g"); g != nil {
		t.Fatal("live: the group is still there")
	}
	c := New(DefaultConfig())
	c.Topics = func() map[string]TopicMeta { return testTopics }
	for i, r := range h.records {
		if i == before {
			for _, tr := range txn {
				if err := c.LoadTxn(9, 1, tr.Key, tr.Value); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := c.Load(h.now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	c.CompleteTxn(h.now, 9, 2, false)
	if g, _ := c.Group("g"); g != nil {
		t.Errorf("replay: deleted group is back: type %s, state %v, %d offsets", g.Type(), g.State, len(g.offsets))
	}
}
