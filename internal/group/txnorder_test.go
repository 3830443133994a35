package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func plainCommit(t *testing.T, c *Coordinator, now time.Time, offset int64) []Record {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, out := c.OffsetCommit(now, req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit: %d", code)
	}
	return out.Records
}

// A transactional commit of 100 is pending; a plain commit of 200 (an admin reset, a
// standalone consumer) lands after it in the log; then the transaction's COMMIT marker. Kafka
// keeps the most recent record (GroupMetadata.CommitRecordMetadataAndOffset /
// OffsetMetadataManager.replayEndTransactionMarker compare record offsets), precisely so that
// compaction of __consumer_offsets cannot change the materialized offset. Runnel let the
// older transactional offset overwrite the newer plain one, and a reload of the compacted log
// (the txn record is superseded by the later plain record of the same key and removed) gave
// 200: the committed offset changed across a coordinator failover.
func TestTxnCommitDoesNotOverwriteNewerPlainCommit(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	txnCommit(t, c, now, 9, 1, 100)
	plain := plainCommit(t, c, now, 200)
	c.CompleteTxn(now, 9, 1, true)
	live, _ := fetchStable(c)

	// Compacted log: [plain 200, COMMIT marker] (the txn record lost to the later plain one).
	c2 := New(DefaultConfig())
	for _, r := range plain {
		if err := c2.Load(now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	c2.CompleteTxn(now, 9, 1, true)
	reloaded, _ := fetchStable(c2)
	if live != 200 || reloaded != live {
		t.Fatalf("live committed offset %d, after a reload of the compacted log %d; want 200 both (the newest record wins, as in Kafka)", live, reloaded)
	}
}

// A pending transactional commit survived DeleteGroups (and OffsetDelete): its COMMIT marker
// resurrected the deleted group with the offset. Kafka's replay of an offset tombstone drops the
// pending transactional offsets of that partition (OffsetMetadataManager.replay, "Remove all
// the pending offset commits related to the tombstone"), and deleteAllOffsets tombstones the
// pending ones too. After compaction the txn record (superseded by the tombstone) is gone, so a
// reload has no group while the live coordinator has one.
func TestDeletedGroupNotResurrectedByPendingTxn(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	plainCommit(t, c, now, 50)
	txnCommit(t, c, now, 9, 1, 100)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	resp, out := c.DeleteGroups(req)
	if resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups: %d", resp.Groups[0].ErrorCode)
	}
	c.CompleteTxn(now, 9, 1, true)
	_, liveExists := c.Group("g")
	live, _ := fetchStable(c)

	c2 := New(DefaultConfig()) // compacted: only the tombstones, then the marker
	for _, r := range out.Records {
		if err := c2.Load(now, r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	c2.CompleteTxn(now, 9, 1, true)
	reloaded, _ := fetchStable(c2)
	if liveExists || live != -1 || reloaded != live {
		t.Fatalf("after DeleteGroups + the pending txn's COMMIT: group exists=%v, live offset %d, reloaded offset %d; want the group gone and -1 both", liveExists, live, reloaded)
	}
}

// Kafka does not expire an offset whose partition has a pending transactional commit
// (OffsetMetadataManager.cleanupExpiredOffsets: !hasPendingTransactionalOffsets). Here the
// committed offset expired (and the group was deleted) while the transaction was open; if the
// transaction then aborted, the group had no committed offset at all and the consumer fell
// back to auto.offset.reset, where Kafka still has 100.
func TestExpiryWaitsForPendingTxnOffsets(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	cfg := DefaultConfig()
	c := New(cfg)
	plainCommit(t, c, now, 100)
	later := now.Add(cfg.OffsetsRetention)
	txnCommit(t, c, later, 9, 1, 150)
	c.ExpireOffsets(later)
	c.CompleteTxn(later, 9, 1, false) // the transaction aborts
	if off, err := fetchStable(c); err != nil || off != 100 {
		t.Fatalf("after expiry during an open transaction that aborted: offset %d (%v); want 100 (Kafka skips partitions with pending transactional offsets)", off, err)
	}
}
