package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCommit sends a TxnOffsetCommit (version 3, no member check) of one partition's offset by
// the producer at epoch and returns the records to append.
func txnCommit(t *testing.T, c *Coordinator, now time.Time, pid int64, epoch int16, offset int64) []Record {
	records, _ := txnCommitUndo(t, c, now, pid, epoch, offset)
	return records
}

// txnCommitUndo is txnCommit, with the undo of a failed append.
func txnCommitUndo(t *testing.T, c *Coordinator, now time.Time, pid int64, epoch int16, offset int64) ([]Record, func()) {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = 3, "g", pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, records, undo := c.TxnOffsetCommit(now, req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	return records, undo
}

// fetchStable is the group's committed offset of in-0 for a require_stable OffsetFetch, or the
// error it gets.
func fetchStable(c *Coordinator) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = 8, true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = "in", []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	p := c.OffsetFetch(req).Groups[0].Topics[0].Partitions[0]
	return p.Offset, kerr.ErrorForCode(p.ErrorCode)
}

// TestMarkerSettlesOnlyItsTransaction: a version-2 producer's transaction A (records at epoch
// 5, markers at 6) commits offset 40; the next transaction B (epoch 7) commits offset 80 while
// A's marker is still to be applied here, then aborts (marker at 8). A's COMMIT must not commit
// B's offsets, whichever order the markers are applied in, and a replay of the log agrees.
func TestMarkerSettlesOnlyItsTransaction(t *testing.T) {
	const pid = 42
	now := time.UnixMilli(1_700_000_000_000)
	for _, order := range []string{"A then B", "B then A"} {
		t.Run(order, func(t *testing.T) {
			c := New(DefaultConfig())
			txnCommit(t, c, now, pid, 5, 40)
			txnCommit(t, c, now, pid, 7, 80)
			if _, err := fetchStable(c); err != kerr.UnstableOffsetCommit {
				t.Fatalf("with both pending: %v, want UNSTABLE_OFFSET_COMMIT", err)
			}
			a := func() { c.CompleteTxn(now, pid, 6, true) }
			b := func() { c.CompleteTxn(now, pid, 8, false) }
			if order == "A then B" {
				a()
				if _, err := fetchStable(c); err != kerr.UnstableOffsetCommit {
					t.Fatalf("after A's marker, B's offsets must still be pending: %v", err)
				}
				b()
			} else {
				b()
				if _, err := fetchStable(c); err != kerr.UnstableOffsetCommit {
					t.Fatalf("after B's marker, A's offsets must still be pending: %v", err)
				}
				a()
			}
			if off, err := fetchStable(c); err != nil || off != 40 {
				t.Fatalf("committed offset %d (%v), want A's 40: B was aborted", off, err)
			}
		})
	}

	// The same history read back from the log: A's offsets, A's marker, B's offsets, B's marker.
	c := New(DefaultConfig())
	for _, step := range []struct {
		epoch  int16
		offset int64 // -1: a marker
		commit bool
	}{{5, 40, false}, {6, -1, true}, {7, 80, false}, {8, -1, false}} {
		if step.offset < 0 {
			c.CompleteTxn(now, pid, step.epoch, step.commit)
			continue
		}
		o := Offset{Offset: step.offset, LeaderEpoch: -1}
		r := offsetRecord("g", TopicPartition{"in", 0}, &o)
		if err := c.LoadTxn(pid, step.epoch, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if off, err := fetchStable(c); err != nil || off != 40 {
		t.Fatalf("replayed: committed offset %d (%v), want 40", off, err)
	}
}

// TestMarkerOfTheSameEpoch: transaction version 1 writes its markers with the records' epoch,
// and a partition's own abort uses the open transaction's epoch: both settle those offsets.
func TestMarkerOfTheSameEpoch(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	txnCommit(t, c, now, 7, 3, 10)
	c.CompleteTxn(now, 7, 3, true)
	if off, err := fetchStable(c); err != nil || off != 10 {
		t.Fatalf("committed offset %d (%v), want 10", off, err)
	}
	txnCommit(t, c, now, 7, 3, 20)
	c.CompleteTxn(now, 7, 3, false)
	if off, err := fetchStable(c); err != nil || off != 10 {
		t.Fatalf("after the abort: committed offset %d (%v), want 10", off, err)
	}
	if len(c.pending) != 0 {
		t.Fatalf("pending offsets left: %v", c.pending)
	}
}

// TestFailedAppendKeepsEarlierPending: a transaction's first TxnOffsetCommit of in-0 (offset 5)
// is appended; its second one of the same partition (offset 7) fails to append, and is undone.
// Offset 5, which is in the log, stays pending: require_stable fetches see the partition
// unstable, and the COMMIT marker commits 5 live as a coordinator replaying the log does. (The
// undo used to delete the partition's pending entry, offset 5 with it, as Kafka's coordinator
// does not: it reverts a failed append to the state before it.) A commit of a partition with
// nothing pending before is undone to nothing.
func TestFailedAppendKeepsEarlierPending(t *testing.T) {
	const pid, epoch = 9, 0
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	written := txnCommit(t, c, now, pid, epoch, 5) // appended: in the log
	_, undo := txnCommitUndo(t, c, now, pid, epoch, 7)
	undo() // its append failed
	if _, err := fetchStable(c); err != kerr.UnstableOffsetCommit {
		t.Errorf("after the failed append, offset 5 is still pending in the log: require_stable got %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	c.CompleteTxn(now, pid, epoch, true)
	live, _ := fetchStable(c)
	c2 := New(DefaultConfig()) // the log as a new coordinator reads it: offset 5, then the COMMIT marker
	if err := c2.LoadTxn(pid, epoch, written[0].Key, written[0].Value); err != nil {
		t.Fatal(err)
	}
	c2.CompleteTxn(now, pid, epoch, true)
	if reloaded, _ := fetchStable(c2); live != 5 || reloaded != 5 {
		t.Fatalf("committed offset live %d, replayed from the log %d; want 5 and 5", live, reloaded)
	}

	c3 := New(DefaultConfig())
	_, undo = txnCommitUndo(t, c3, now, pid, epoch, 7)
	undo()
	if len(c3.pending) != 0 {
		t.Fatalf("pending after the only commit was undone: %v", c3.pending)
	}
}

// TestForgetDeletedTopics: the offsets of a deleted topic are deleted in every group, and a
// transactional commit of it still pending is dropped, so its marker commits nothing, live and
// replayed from the records alike; other topics' offsets stay (Kafka's
// OffsetMetadataManager.onPartitionsDeleted). Runnel kept them: a topic created again under the
// name inherited them, and its consumers skipped its first records.
func TestForgetDeletedTopics(t *testing.T) {
	const pid = 42
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	var log []Record // the records as the log holds them; transactional ones marked by txn
	txn := map[int]bool{}
	commit := func(group, topic string, offset int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		resp, out := c.OffsetCommit(now, req)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit %s %s: %v", group, topic, kerr.ErrorForCode(code))
		}
		log = append(log, out.Records...)
	}
	commit("g", "keep", 6)
	commit("h", "in", 7)
	for _, r := range txnCommit(t, c, now, pid, 3, 40) { // g's in-0, only pending
		txn[len(log)] = true
		log = append(log, r)
	}
	out := c.ForgetTopics(map[string][16]byte{"in": {1}}, nil)
	log = append(log, out.Records...)
	c.CompleteTxn(now, pid, 4, true)
	check := func(name string, c *Coordinator) {
		t.Helper()
		for _, gt := range []struct {
			group, topic string
			want         int64
		}{{"g", "in", -1}, {"h", "in", -1}, {"g", "keep", 6}} {
			g, _ := c.Group(gt.group)
			got := int64(-1)
			if o, ok := g.offsets[TopicPartition{gt.topic, 0}]; ok {
				got = o.Offset
			}
			if got != gt.want {
				t.Errorf("%s: %s's offset of %s-0 = %d; want %d", name, gt.group, gt.topic, got, gt.want)
			}
		}
	}
	check("live", c)
	r := New(DefaultConfig())
	for i, rec := range log {
		var err error
		if txn[i] {
			err = r.LoadTxn(pid, 3, rec.Key, rec.Value)
		} else {
			err = r.Load(now, rec.Key, rec.Value)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r.CompleteTxn(now, pid, 4, true)
	check("replayed", r)
}

// TestForgetDeletedTopicKeepsTheNewTopicsOffsets: a topic deleted and created again between two
// looks of the group service: an offset committed to the old topic goes, one committed to the
// new topic of the same name (told apart by its topic id) stays.
func TestForgetDeletedTopicKeepsTheNewTopicsOffsets(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	id := [16]byte{1} // the old topic's
	c.TopicID = func(string) ([16]byte, bool) { return id, true }
	commit := func(group string, offset int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		if resp, _ := c.OffsetCommit(now, req); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		}
	}
	commit("old", 5)
	id = [16]byte{2} // deleted and created again
	commit("new", 3)
	out := c.ForgetTopics(map[string][16]byte{"in": {1}}, nil)
	if len(out.Records) != 1 {
		t.Fatalf("%d tombstones; want 1, the old topic's offset", len(out.Records))
	}
	if g, _ := c.Group("old"); len(g.offsets) != 0 {
		t.Errorf("the old topic's offset stayed: %v", g.offsets)
	}
	if g, _ := c.Group("new"); g.offsets[TopicPartition{"in", 0}].Offset != 3 {
		t.Errorf("the new topic's offset: %v; want 3", g.offsets)
	}
}

// TestForgetMissingTopics: the offsets of a topic the metadata no longer has, or has under
// another id, are forgotten, pending ones included; those of live topics and of offsets
// without an id under a live name stay. The broker's look at its topics at each tick missed a
// topic created and deleted between two ticks, whose offsets then survived it: a topic created
// again under the name resumed at them.
func TestForgetMissingTopics(t *testing.T) {
	const pid = 42
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	ids := map[string][16]byte{"live": {1}, "gone": {2}, "again": {3}}
	c.TopicID = func(name string) ([16]byte, bool) { id, ok := ids[name]; return id, ok }
	commit := func(group, topic string, offset int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		if resp, _ := c.OffsetCommit(now, req); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %s %s: %v", group, topic, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		}
	}
	commit("g", "live", 1)
	commit("g", "gone", 2)
	commit("g", "again", 3)
	txnCommit(t, c, now, pid, 3, 40) // g's in-0, pending
	c.TopicID = nil
	commit("h", "live", 4) // no id known: kept while the name lives
	delete(ids, "gone")
	delete(ids, "in")
	ids["again"] = [16]byte{4} // deleted and created again
	ids["live"] = [16]byte{1}
	out := c.ForgetTopics(nil, func(name string) ([16]byte, bool) { id, ok := ids[name]; return id, ok })
	if len(out.Records) != 3 {
		t.Errorf("%d tombstones; want 3 (gone, again, the pending in)", len(out.Records))
	}
	c.CompleteTxn(now, pid, 4, true)
	g, _ := c.Group("g")
	if _, ok := g.offsets[TopicPartition{"live", 0}]; !ok || len(g.offsets) != 1 {
		t.Errorf("g's offsets after: %v; want live's alone", g.offsets)
	}
	if h, _ := c.Group("h"); h.offsets[TopicPartition{"live", 0}].Offset != 4 {
		t.Errorf("h's offsets after: %v; want live's 4", h.offsets)
	}
}

// TestUnstableOffsetHasNoOffset: a require_stable OffsetFetch of a partition with a
// transactional commit pending answers UNSTABLE_OFFSET_COMMIT with offset -1 and no metadata,
// as Kafka's OffsetMetadataManager.fetchOffsets; it carried the committed offset the pending
// one is to replace.
func TestUnstableOffsetHasNoOffset(t *testing.T) {
	const pid = 11
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	txnCommit(t, c, now, pid, 0, 5)
	c.CompleteTxn(now, pid, 0, true)
	if off, err := fetchStable(c); err != nil || off != 5 {
		t.Fatalf("committed: %d, %v", off, err)
	}
	txnCommit(t, c, now, pid, 1, 9)
	if off, err := fetchStable(c); err != kerr.UnstableOffsetCommit || off != -1 {
		t.Errorf("with offset 9 pending: offset %d, %v; want -1, UNSTABLE_OFFSET_COMMIT", off, err)
	}
}
