package group

import (
	"testing"
	"time"
)

// TestOlderTxnCommitDoesNotOverwriteNewerTxnCommit: two transactional producers commit
// offsets for the same group partition: A's record (offset 100) is written first, B's (200)
// after it. B's COMMIT marker lands first, then A's. The offset of the most recent record stays
// committed, whichever producer wrote it (Kafka's
// OffsetMetadataManager.replayEndTransactionMarker compares record offsets): 200, which is
// also all a compacted log can give, as A's record shares B's key and is older, so the cleaner
// drops it.
func TestOlderTxnCommitDoesNotOverwriteNewerTxnCommit(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	c := New(DefaultConfig())
	txnCommit(t, c, now, 1, 0, 100)         // producer A
	recB := txnCommit(t, c, now, 2, 0, 200) // producer B, later in the log
	c.CompleteTxn(now, 2, 0, true)
	c.CompleteTxn(now, 1, 0, true)
	live, _ := fetchStable(c)

	// The compacted log: B's record (the newest of the key), B's marker, A's marker.
	c2 := New(DefaultConfig())
	if err := c2.LoadTxn(2, 0, recB[0].Key, recB[0].Value); err != nil {
		t.Fatal(err)
	}
	c2.CompleteTxn(now, 2, 0, true)
	c2.CompleteTxn(now, 1, 0, true)
	reloaded, _ := fetchStable(c2)
	if live != 200 || reloaded != live {
		t.Fatalf("committed offset live %d, after reloading the compacted log %d; want 200 both (the newest record wins, as in Kafka)", live, reloaded)
	}
}
