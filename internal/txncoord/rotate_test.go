package txncoord

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestVersion2EpochExhaustionRotates: under transaction version 2 every EndTxn bumps the epoch,
// so a producer exhausts it after about 16,000 transactions. The decision that leaves no epoch
// above the markers' hands the producer a new producer id at epoch 0 with the EndTxn answer,
// as Kafka does (before, the answer repeated the request's id and epoch: the next
// transaction's first batch was taken for a duplicate of the last one's, and a retried EndTxn
// was refused as INVALID_TXN_STATE). The markers carry the old id; the new id is in the
// decision's record (NextProducerID), so a coordinator that fails over completes it; a retry
// of the EndTxn gets the same answer; the next transaction may begin under the new id while
// the markers are written; the old id is then refused.
func TestVersion2EpochExhaustionRotates(t *testing.T) {
	h := newHarness(t)
	old := h.init("x", -1, -1).ProducerID
	e := int16(math.MaxInt16 - 2) // 32765: one more bump leaves the markers at the last epoch
	h.c.txns["x"].Epoch = e
	if err := h.add("x", old, e, true, tpA); err != nil {
		t.Fatal(err)
	}
	r := h.req()
	eff := h.c.EndTxn(EndReq{ID: r, TxnID: "x", ProducerID: old, Epoch: e, Commit: true, V2: true, KnowsFenced: true,
		NewPID: func() (int64, error) { h.nextPID++; return h.nextPID, nil }}, h.now)
	// The partitions vouch for the transaction; then stop after the decision's record: the
	// answer goes out, the markers are not written yet.
	if len(eff.Prepares) != 1 {
		t.Fatalf("EndTxn effects %+v; want a prepare round", eff)
	}
	eff = h.c.Prepared("x", nil, h.now)
	if len(eff.Appends) != 1 || eff.Appends[0].Txn.State != PrepareCommit {
		t.Fatalf("EndTxn effects %+v; want the PrepareCommit record", eff)
	}
	prep := eff.Appends[0].Txn
	if prep.ProducerID != old || prep.NextProducerID != h.nextPID {
		t.Fatalf("PrepareCommit holds id %d, next %d; want %d, next %d", prep.ProducerID, prep.NextProducerID, old, h.nextPID)
	}
	rotated := h.nextPID
	k, v := Encode(eff.Appends[0])
	rec, err := Decode(k, v)
	if err != nil || rec.Txn.NextProducerID != rotated {
		t.Fatalf("the decision's record through Kafka's schema: %+v, %v; want next producer id %d", rec.Txn, err, rotated)
	}
	eff = h.c.Appended("x", nil, h.now)
	var markers []MarkerReq
	for _, rep := range eff.Replies {
		if rep.ID == r && (rep.Err != nil || rep.ProducerID != rotated || rep.Epoch != 0) {
			t.Fatalf("EndTxn answer %+v; want the new id %d at epoch 0", rep, rotated)
		}
	}
	markers = eff.Markers
	if len(markers) != 1 || markers[0].ProducerID != old || markers[0].Epoch != math.MaxInt16-1 {
		t.Fatalf("markers %+v; want the old id %d at epoch %d", markers, old, math.MaxInt16-1)
	}
	// The next transaction begins under the new id while the markers are written; the old id
	// retrying its EndTxn waits.
	if err := h.add("x", rotated, 0, true, tpB); err != nil {
		t.Fatalf("AddPartitions(new id, epoch 0) during the marker round = %v", err)
	}
	if rep := h.end("x", old, e, true, true); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("the rotating EndTxn retried during the marker round = %+v; want CONCURRENT_TRANSACTIONS", rep)
	}
	h.run(h.c.MarkersWritten("x", h.now))
	s := h.state("x")
	if s.ProducerID != rotated || s.Epoch != 0 || s.PrevProducerID != old || s.State != Ongoing || !s.Partitions[tpB] {
		t.Fatalf("after the markers: %+v; want id %d epoch 0 (previous %d), Ongoing with b", s, rotated, old)
	}
	if err := h.add("x", old, e, true, tpA); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Errorf("the old id adding a partition = %v; want INVALID_PRODUCER_ID_MAPPING", err)
	}
	if rep := h.end("x", rotated, 0, true, true); rep.Err != nil || rep.ProducerID != rotated || rep.Epoch != 2 {
		t.Fatalf("the next EndTxn = %+v; want id %d epoch 2", rep, rotated)
	}
	// Once that one is complete, a late retry of the rotating EndTxn is a zombie's request.
	if rep := h.end("x", old, e, true, true); rep.Err == nil {
		t.Errorf("the rotating EndTxn retried after the next transaction = %+v; want it refused", rep)
	}
}

// TestVersion2RotationRetriedAndFailedOver: the rotating EndTxn's answer is lost: its retry
// gets the outcome and the new id. A coordinator that takes over after the decision's record
// completes it under the new id, and the producer's early requests under that id are taken.
func TestVersion2RotationRetriedAndFailedOver(t *testing.T) {
	h := newHarness(t)
	old := h.init("x", -1, -1).ProducerID
	e := int16(math.MaxInt16 - 1) // 32766: reached by an InitProducerId bump; nothing above it
	h.c.txns["x"].Epoch = e
	h.add("x", old, e, true, tpA)
	rep := h.end("x", old, e, false, true)
	if rep.Err != nil || rep.ProducerID == old || rep.Epoch != 0 {
		t.Fatalf("abort at epoch %d = %+v; want a new id at epoch 0", e, rep)
	}
	if again := h.end("x", old, e, false, true); again.Err != nil || again.ProducerID != rep.ProducerID || again.Epoch != 0 {
		t.Errorf("the abort retried = %+v; want the same answer %+v", again, rep)
	}
	if wrong := h.end("x", old, e, true, true); !errors.Is(wrong.Err, kerr.InvalidTxnState) {
		t.Errorf("a commit retried after the abort = %+v; want INVALID_TXN_STATE", wrong)
	}

	// A transaction that wrote nothing, aborted at the exhausted epoch, rotates too.
	g := newHarness(t)
	pid := g.init("y", -1, -1).ProducerID
	g.c.txns["y"].Epoch = e
	if r := g.end("y", pid, e, false, true); r.Err != nil || r.ProducerID == pid || r.Epoch != 0 {
		t.Errorf("empty abort at epoch %d = %+v; want a new id at epoch 0", e, r)
	}

	// Failover right after the decision's record.
	f := newHarness(t)
	old = f.init("z", -1, -1).ProducerID
	f.c.txns["z"].Epoch = e
	f.add("z", old, e, true, tpA)
	f.end("z", old, e, true, true)
	n := f.failover(2)
	loaded := n.c.Loaded(0)
	next, _ := n.c.Txn("z")
	if next.NextProducerID < 0 || next.NextProducerID == old {
		t.Fatalf("loaded decision %+v; want its next producer id", next)
	}
	if err := n.add("z", next.NextProducerID, 0, true, tpB); err != nil {
		t.Fatalf("early add under the new id after the failover = %v", err)
	}
	n.run(loaded)
	if s := n.state("z"); s.ProducerID != next.NextProducerID || s.Epoch != 0 || s.PrevProducerID != old {
		t.Errorf("after the loaded decision completes: %+v; want id %d epoch 0", s, next.NextProducerID)
	}
}
