package logstore

import (
	"errors"
	"syscall"
	"testing"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// idemBatchOf is a one-record batch of idempotent producer pid, epoch 0, at sequence seq.
func idemBatchOf(pid int64, seq int32) []byte {
	body := batch.AppendRecord(nil, 0, 0, []byte("k"), make([]byte, 200), 0, nil)
	return batch.AppendBatch(nil, batch.Header{BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq, RecordCount: 1}, body)
}

// Producer 7 appends sequences 0..; a roll writes a snapshot at S (its state: last sequence
// S-1); it goes on to S+1, S+2; a plain batch follows; DeleteRecords moves the log start past
// every one of its batches, inside the segment. After a crash (no clean snapshot at the end)
// Open loaded the snapshot at S, below the log start, and replayed from the log start only:
// producer 7 came back with a stale last sequence, and its next batch, in order, was refused
// OUT_OF_ORDER_SEQUENCE_NUMBER. The replay now starts at the snapshot (its segment is still
// there), so the producer's state is its own. (Kafka's truncateAndReload deletes snapshots at or
// below the log start and forgets such a producer: its batch is taken too, at any sequence.)
func TestStateFromASnapshotBelowTheLogStart(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/p")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1200 // a roll every few batches
	cfg.Preallocate = false
	l := e.open(cfg)
	seq := int32(0)
	var snap int64 = -1
	for snap < 0 {
		if _, err := l.AppendBatch(idemBatchOf(7, seq), 1); err != nil {
			t.Fatal(err)
		}
		seq++
		offs, err := l.snapshotOffsets()
		if err != nil {
			t.Fatal(err)
		}
		if len(offs) > 0 {
			snap = offs[len(offs)-1]
		}
	}
	// Two more batches of producer 7 in the new segment, then a plain one.
	for range 2 {
		if _, err := l.AppendBatch(idemBatchOf(7, seq), 1); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	if offs, _ := l.snapshotOffsets(); offs[len(offs)-1] != snap {
		t.Fatalf("another roll happened (snapshots %v); the test needs one", offs)
	}
	plain := valueBatch(t, 1, 10, 1_700_000_000_000, 1)
	first, _, err := l.Append(plain, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AdvanceStartOffset(first); err != nil { // DeleteRecords past every batch of 7
		t.Fatal(err)
	}
	syncAll(t, l)
	t.Logf("snapshot at %d, producer 7 at sequences 0..%d, log start %d, end %d", snap, seq-1, l.StartOffset(), l.EndOffset())

	e.fs = mem.Crash(vfs.CrashOptions{}) // power loss: no clean-shutdown snapshot
	l2 := e.open(cfg)
	defer l2.Close()
	if _, err := l2.AppendBatch(idemBatchOf(7, seq), 1); err != nil {
		t.Errorf("after the restart, producer 7's next batch (sequence %d) was refused: %v; Kafka forgets a producer whose state lay wholly below the log start and takes it", seq, err)
	}
}

// txnBatchOf is a one-record transactional batch of producer pid, epoch 0, at sequence seq.
func txnBatchOf(pid int64, seq int32) []byte {
	body := batch.AppendRecord(nil, 0, 0, []byte("k"), make([]byte, 200), 0, nil)
	return batch.AppendBatch(nil, batch.Header{Attributes: batch.AttrTransactional, BaseTimestamp: 1_700_000_000_000,
		MaxTimestamp: 1_700_000_000_000, ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq, RecordCount: 1}, body)
}

// Producer 9's transaction opens at offset 0; a roll writes a snapshot at S with it open; it is
// COMMITTED after S; DeleteRecords moves the log start past the marker. After a crash, Open
// loaded the snapshot at S (the transaction open) and replayed from the log start only, never
// seeing the COMMIT: the partition believed the transaction open, its last stable offset stuck
// at the log start, and read_committed consumers saw nothing more (until the stale-transaction
// check had the coordinator abort it). As in Kafka, no transaction is open after the restart.
func TestCommittedTxnStaysClosedAfterACrashBelowTheLogStart(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/p")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1200
	cfg.Preallocate = false
	l := e.open(cfg)
	seq := int32(0)
	for {
		if _, err := l.AppendBatch(txnBatchOf(9, seq), 1); err != nil {
			t.Fatal(err)
		}
		seq++
		if offs, _ := l.snapshotOffsets(); len(offs) > 0 {
			break
		}
	}
	marker, err := l.AppendMarker(txn.Marker{ProducerID: 9, Epoch: 0, Commit: true, CoordinatorEpoch: 1}, 1, 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := l.Append(valueBatch(t, 1, 10, 1_700_000_000_000, 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	if fu := l.FirstUnstableOffset(); fu != -1 {
		t.Fatalf("before the crash: first unstable offset %d; want -1 (committed at %d)", fu, marker)
	}
	if err := l.AdvanceStartOffset(first); err != nil {
		t.Fatal(err)
	}
	syncAll(t, l)
	offs, _ := l.snapshotOffsets()
	t.Logf("snapshots %v, commit marker at %d, log start %d, end %d", offs, marker, l.StartOffset(), l.EndOffset())

	e.fs = mem.Crash(vfs.CrashOptions{})
	l2 := e.open(cfg)
	defer l2.Close()
	end := l2.EndOffset()
	if fu, lso := l2.FirstUnstableOffset(), l2.LastStable(end); fu != -1 || lso != end {
		t.Errorf("after the restart: first unstable offset %d, last stable offset %d with the log ending at %d; "+
			"want no open transaction (producer 9 committed at %d) and LSO %d, as Kafka", fu, lso, end, marker, end)
	}
}

// TestFailedSnapshotLeavesNoFile: a producer snapshot whose write fails (a full disk, half the
// data written) is removed, not left empty or cut for every later start to warn about.
func TestFailedSnapshotLeavesNoFile(t *testing.T) {
	rules := &vfs.Rules{}
	e := newEnv(t, vfs.NewErrorFS(vfs.NewMem(), rules), "/data/p0")
	l := e.open(testConfig())
	defer l.Close()
	fill(t, l, 5, 100, 1)
	rules.Add(vfs.Rule{Op: vfs.OpWrite, PathContains: snapshotSuffix, Err: syscall.ENOSPC, PartialWrite: true})
	if err := l.writeSnapshot(l.EndOffset()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writeSnapshot on a full disk = %v; want ENOSPC", err)
	}
	if offsets, err := l.snapshotOffsets(); err != nil || len(offsets) != 0 {
		t.Fatalf("snapshots left: %v, %v; want none", offsets, err)
	}
}
