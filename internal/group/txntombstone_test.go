package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetDeleteDropsPendingTxnOffset: a transactional commit of in-0 is pending; an admin
// deletes in-0's offset (OffsetDelete: a tombstone). The tombstone removes the pending
// transactional offsets of that partition, as Kafka's OffsetMetadataManager.replay of an offset
// tombstone does ("Remove all the pending offset commits related to the tombstone"), so the
// partition is stable at once: a require_stable OffsetFetch (every read_committed Java consumer
// sends one) gets -1, not UNSTABLE_OFFSET_COMMIT until the transaction ends. The transaction's
// COMMIT marker, arriving later, then commits nothing, live and on a replay of the log.
func TestOffsetDeleteDropsPendingTxnOffset(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	log := plainCommit(t, c, now, 50)
	txn := txnCommit(t, c, now, 9, 1, 100)
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	resp, out := c.OffsetDelete(req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %v %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if off, err := fetchStable(c); err != nil || off != -1 {
		t.Fatalf("require_stable OffsetFetch after the offset's tombstone: offset %d, %v; want -1 and no error (the tombstone drops the pending transactional offset, as in Kafka)", off, err)
	}
	c.CompleteTxn(now, 9, 1, true)
	if off, err := fetchStable(c); err != nil || off != -1 {
		t.Fatalf("after the transaction's COMMIT: offset %d, %v; want -1 (its offset was deleted)", off, err)
	}
	if len(c.pending) != 0 {
		t.Fatalf("pending offsets left: %v", c.pending)
	}

	// The log read back: the plain commit, the transactional one, the tombstone, the marker.
	c2 := New(DefaultConfig())
	for _, r := range log {
		if err := c2.Load(now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := c2.LoadTxn(9, 1, txn[0].Key, txn[0].Value); err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Records {
		if err := c2.Load(now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if off, err := fetchStable(c2); err != nil || off != -1 {
		t.Fatalf("replayed up to the tombstone: offset %d, %v; want -1 and no error", off, err)
	}
	c2.CompleteTxn(now, 9, 1, true)
	if off, err := fetchStable(c2); err != nil || off != -1 {
		t.Fatalf("replayed with the COMMIT marker: offset %d, %v; want -1", off, err)
	}
}
