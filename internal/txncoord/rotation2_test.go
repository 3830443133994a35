package txncoord

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// rotatingCommit drives a version-2 commit at epoch e of "x" (partition tpA) up to its marker
// round and stops there: the EndTxn is answered (new id, epoch 0), the markers are not written.
func rotatingCommit(t *testing.T, e int16) (h *harness, old, rotated int64) {
	h = newHarness(t)
	old = h.init("x", -1, -1).ProducerID
	h.c.txns["x"].Epoch = e
	if err := h.add("x", old, e, true, tpA); err != nil {
		t.Fatal(err)
	}
	r := h.req()
	h.c.EndTxn(EndReq{ID: r, TxnID: "x", ProducerID: old, Epoch: e, Commit: true, V2: true, KnowsFenced: true,
		NewPID: func() (int64, error) { h.nextPID++; return h.nextPID, nil }}, h.now)
	h.c.Prepared("x", nil, h.now)
	eff := h.c.Appended("x", nil, h.now)
	if len(eff.Markers) != 1 || len(eff.Replies) != 1 || eff.Replies[0].Epoch != 0 {
		t.Fatalf("effects %+v; want the answer (new id, epoch 0) and a marker round", eff)
	}
	return h, old, eff.Replies[0].ProducerID
}

// The producer, told (new id, 0), begins its next transaction during the marker round (the
// coordinator accepts it: earlyOK). Its partition holds records of (new id, 0) and checks them
// with the coordinator (txnPartitionCheck; staleness is by the batch's client timestamp): the
// answer must be "wait", as it is for the early transaction without a rotation (same id, op in
// flight). It was "abort": the partition aborted records the coordinator then committed.
func TestEarlyTxnUnderRotatedIDCheckedDuringMarkers(t *testing.T) {
	for _, e := range []int16{math.MaxInt16 - 2, math.MaxInt16 - 1} {
		h, _, rotated := rotatingCommit(t, e)
		if err := h.add("x", rotated, 0, true, tpB); err != nil {
			t.Fatalf("early add = %v", err)
		}
		if !h.c.Check("x", rotated, 0, tpB) {
			t.Errorf("e=%d: Check(x, new id %d, epoch 0, b) during the marker round = abort; the early transaction was accepted and will commit", e, rotated)
		}
		if id, ok := h.c.ByProducer(rotated); !ok || id != "x" {
			t.Errorf("e=%d: ByProducer(new id %d) during the marker round = %q, %v; a partition without the id mapping aborts the early transaction", e, rotated, id, ok)
		}
	}
}

// Same after a failover: the new coordinator loads PrepareCommit with NextProducerID, runs the
// marker round; the producer's requests under the new id are accepted early, and its
// partitions' checks must be told to wait.
func TestEarlyTxnUnderRotatedIDCheckedAfterFailover(t *testing.T) {
	f := newHarness(t)
	old := f.init("z", -1, -1).ProducerID
	e := int16(math.MaxInt16 - 2)
	f.c.txns["z"].Epoch = e
	f.add("z", old, e, true, tpA)
	f.end("z", old, e, true, true)
	n := f.failover(2)
	loaded := n.c.Loaded(0)
	if len(loaded.Markers) != 1 {
		t.Fatalf("Loaded = %+v", loaded)
	}
	next, _ := n.c.Txn("z")
	if err := n.add("z", next.NextProducerID, 0, true, tpB); err != nil {
		t.Fatal(err)
	}
	if !n.c.Check("z", next.NextProducerID, 0, tpB) {
		t.Errorf("Check(new id, 0) during the loaded marker round = abort")
	}
}

// A franz-go producer whose rotating commit is turned into an abort (a partition failed its
// prepare: TRANSACTION_ABORTABLE) re-initializes with its id and epoch, as
// TestPrepareFailureAborts shows it may without a rotation (the "resumed" path). With a rotation
// it was fenced (fatal), even at epoch 32766, which Kafka's isValidProducerId accepts for the
// previous producer id in any state.
func TestResumeAfterRotatingAbort(t *testing.T) {
	for _, e := range []int16{math.MaxInt16 - 2, math.MaxInt16 - 1} {
		h := newHarness(t)
		pid := h.init("t", -1, -1).ProducerID
		h.c.txns["t"].Epoch = e
		h.add("t", pid, e, true, tpA, tpB)
		h.failPrepare[tpB] = true
		rep := h.end("t", pid, e, true, true)
		if !errors.Is(rep.Err, kerr.TransactionAbortable) {
			t.Fatalf("EndTxn = %+v", rep)
		}
		if rep := h.init("t", pid, e); rep.Err != nil {
			t.Errorf("e=%d: InitProducerId(old id, %d) after the rotating abort = %v; without a rotation it resumes", e, e, rep.Err)
		}
	}
}

// An empty version-2 abort right after InitProducerId (which leaves V2 false) at the last epoch
// rotates; its retry (answer lost) was not recognized: endRetry requires t.V2, and endEmpty did
// not set it. The same held without a rotation: the retry was fenced.
func TestEmptyAbortRetryAfterInit(t *testing.T) {
	for _, e := range []int16{5, math.MaxInt16 - 1} {
		h := newHarness(t)
		pid := h.init("y", -1, -1).ProducerID
		h.c.txns["y"].Epoch = e // as an InitProducerId bump leaves it (V2 false)
		first := h.end("y", pid, e, false, true)
		if first.Err != nil {
			t.Fatalf("empty abort = %+v", first)
		}
		if again := h.end("y", pid, e, false, true); again.Err != nil || again != (Reply{ID: again.ID, ProducerID: first.ProducerID, Epoch: first.Epoch}) {
			t.Errorf("e=%d: the empty abort retried = %+v; want the same answer %+v", e, again, first)
		}
	}
}
