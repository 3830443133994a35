package txncoord

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestLoadedOngoingWithoutPartitions: Kafka writes an Ongoing record without partitions (an
// AddPartitionsToTxn with none, from Empty); it decodes with no partition set. Loaded, the id is
// Lost; when its transaction times out it is discovered, and the partitions found are added to
// its set (which must exist: it was a nil map, and Discovered panicked).
func TestLoadedOngoingWithoutPartitions(t *testing.T) {
	k, v := Encode(Record{ID: "k", Txn: &Txn{ID: "k", ProducerID: 7, PrevProducerID: -1, NextProducerID: -1, Epoch: 3,
		TimeoutMs: 1000, State: Ongoing}})
	r, err := Decode(k, v)
	if err != nil {
		t.Fatal(err)
	}
	c := New(DefaultConfig(), 2)
	c.Load(r)
	c.Loaded(0)
	eff := c.Tick(5000)
	if len(eff.Discover) != 1 {
		t.Fatalf("tick: %+v; want a discovery", eff)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Discovered panicked: %v", p)
		}
	}()
	eff = c.Discovered("k", []TP{tpA}, nil, 5000)
	if len(eff.Appends) != 1 || eff.Appends[0].Txn.State != PrepareAbort || !eff.Appends[0].Txn.Partitions[tpA] {
		t.Errorf("after the discovery: %+v; want PrepareAbort on a", eff)
	}
}

// TestInitAfterUnseenVersion2End: a version-2 producer whose EndTxn answer it never saw (the
// commit happened; franz-go then re-runs InitProducerId with its id and the epoch it ended with)
// is answered the current producer id and epoch, as Kafka does (the expected epoch is the
// coordinator's lastProducerEpoch: a retry). It was refused PRODUCER_FENCED, fatal to the client.
func TestInitAfterUnseenVersion2End(t *testing.T) {
	h := newHarness(t)
	pid := h.init("f", -1, -1).ProducerID
	if err := h.add("f", pid, 0, true, tpA); err != nil {
		t.Fatal(err)
	}
	if rep := h.end("f", pid, 0, true, true); rep.Err != nil || rep.Epoch != 2 {
		t.Fatalf("EndTxn = %+v", rep)
	}
	rep := h.init("f", pid, 0) // the answer above was lost
	if rep.Err != nil || rep.ProducerID != pid || rep.Epoch != 2 {
		t.Fatalf("InitProducerId(pid, 0) after the unseen commit = %+v; want pid %d at epoch 2", rep, pid)
	}
	if rep := h.init("f", pid, 1); !errors.Is(rep.Err, kerr.ProducerFenced) {
		t.Errorf("InitProducerId(pid, 1) = %+v; want PRODUCER_FENCED (no producer had epoch 1)", rep)
	}
}

// TestRetriedCommitTurnedAbort: a retry of an EndTxn(commit) that the coordinator turned into an
// abort (a partition failed its prepare), whose first answer was lost, gets that answer again:
// TRANSACTION_ABORTABLE (version 2) or INVALID_PRODUCER_EPOCH (version 1), which clients recover
// from. It got INVALID_TXN_STATE (version 2) or PRODUCER_FENCED (version 1), fatal to clients.
func TestRetriedCommitTurnedAbort(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		h := newHarness(t)
		pid := h.init("t", -1, -1).ProducerID
		h.add("t", pid, 0, v2, tpA, tpB)
		h.failPrepare[tpB] = true
		first := h.end("t", pid, 0, true, v2)
		if first.Err == nil {
			t.Fatalf("v2=%v: EndTxn(commit) with a failed prepare succeeded", v2)
		}
		if retry := h.end("t", pid, 0, true, v2); !errors.Is(retry.Err, first.Err) {
			t.Errorf("v2=%v: first EndTxn(commit) = %v, its retry = %v; want the same answer", v2, first.Err, retry.Err)
		}
	}
}

// TestResumeAfterRotatingAbortRetried: the InitProducerId that resumes a producer after a
// rotating abort (TestResumeAfterRotatingAbort), retried because its answer was lost, gets the
// same answer, as it does without a rotation (TestPrepareFailureAborts). At epoch 32765 it was
// fenced: only an exhausted epoch of the previous producer id was taken for a retry.
func TestResumeAfterRotatingAbortRetried(t *testing.T) {
	for _, e := range []int16{math.MaxInt16 - 2, math.MaxInt16 - 1} {
		h := newHarness(t)
		pid := h.init("t", -1, -1).ProducerID
		h.c.txns["t"].Epoch = e
		h.add("t", pid, e, true, tpA, tpB)
		h.failPrepare[tpB] = true
		if rep := h.end("t", pid, e, true, true); !errors.Is(rep.Err, kerr.TransactionAbortable) {
			t.Fatalf("EndTxn = %+v", rep)
		}
		first := h.init("t", pid, e)
		if first.Err != nil {
			t.Fatalf("e=%d: resume = %v", e, first.Err)
		}
		if again := h.init("t", pid, e); again.Err != nil || again.ProducerID != first.ProducerID || again.Epoch != first.Epoch {
			t.Errorf("e=%d: resume %+v, its retry %+v; want the same answer", e, first, again)
		}
		if zombie := h.init("t", pid, 7); !errors.Is(zombie.Err, kerr.ProducerFenced) {
			t.Errorf("e=%d: InitProducerId(old id, 7) = %+v; want PRODUCER_FENCED", e, zombie)
		}
	}
}

// TestInitAfterVersion2FenceResumes: under version 2 the abort that fences an open
// transaction (a timeout, or an InitProducerId) is the transaction's own bump and keeps the
// epoch before it as the last one (Kafka 4.1, KAFKA-19367: only the abort bumps). So the
// producer whose InitProducerId aborted its transaction, answered CONCURRENT_TRANSACTIONS,
// retries with its epoch and is given the current one, as franz-go does after a commit it
// never heard the answer to; it was fenced (PRODUCER_FENCED, fatal). A new instance asks with
// no epoch and bumps again, so the instance it replaces is fenced from then on.
func TestInitAfterVersion2FenceResumes(t *testing.T) {
	h := newHarness(t)
	pid := h.init("z", -1, -1).ProducerID
	h.add("z", pid, 0, true, tpA)
	h.now = 61_000
	h.run(h.c.Tick(h.now))
	if s := h.state("z"); s.State != CompleteAbort || s.Epoch != 2 {
		t.Fatalf("after the timeout: %v", &s)
	}
	if rep := h.init("z", pid, 0); rep.Err != nil || rep.ProducerID != pid || rep.Epoch != 2 {
		t.Errorf("InitProducerId(pid, 0) after the timeout abort = %+v; want the current epoch 2", rep)
	}
	if s := h.state("z"); s.Epoch != 2 {
		t.Errorf("the retry bumped the epoch to %d", s.Epoch)
	}

	// The producer's own InitProducerId aborts its open transaction; its retry resumes.
	h.add("z", pid, 2, true, tpB)
	if rep := h.init("z", pid, 2); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId during an open transaction = %+v", rep)
	}
	r := h.init("z", pid, 2)
	if r.Err != nil || r.ProducerID != pid || r.Epoch <= 2 {
		t.Fatalf("the retry of InitProducerId(pid, 2) = %+v; want a later epoch", r)
	}

	// A zombie (epoch r.Epoch) is aborted by a new instance's InitProducerId: once the new
	// instance has its epoch, the zombie's InitProducerId is fenced.
	h.add("z", pid, r.Epoch, true, tpA)
	if rep := h.init("z", -1, -1); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId during an open transaction = %+v", rep)
	}
	if rep := h.init("z", -1, -1); rep.Err != nil {
		t.Fatalf("the new instance's retry = %+v", rep)
	}
	if rep := h.init("z", pid, r.Epoch); !errors.Is(rep.Err, kerr.ProducerFenced) {
		t.Errorf("the zombie's InitProducerId(pid, %d) = %+v; want PRODUCER_FENCED", r.Epoch, rep)
	}
}

// TestReplacedInstanceIsFenced: a second instance of a transactional id (InitProducerId with
// no producer id) fences the first, which recovering with InitProducerId(id, its epoch)
// (KIP-360) is refused PRODUCER_FENCED, as Kafka sets lastProducerEpoch to -1 for a request
// without an epoch. It was taken for a retry of the second instance's bump and given its
// epoch: two instances writing as one, their transactions no longer exactly once.
func TestReplacedInstanceIsFenced(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		h := newHarness(t)
		first := h.init("x", -1, -1)
		if v2 {
			h.add("x", first.ProducerID, first.Epoch, true, tpA)
			if rep := h.end("x", first.ProducerID, first.Epoch, true, true); rep.Err != nil {
				t.Fatalf("EndTxn = %+v", rep)
			}
			first = h.init("x", first.ProducerID, h.state("x").Epoch)
		}
		second := h.init("x", -1, -1)
		if second.Err != nil || second.Epoch <= first.Epoch {
			t.Fatalf("v2=%v: second instance = %+v after %+v", v2, second, first)
		}
		if rep := h.init("x", first.ProducerID, first.Epoch); !errors.Is(rep.Err, kerr.ProducerFenced) {
			t.Errorf("v2=%v: the replaced instance's InitProducerId(pid, %d) = %+v; want PRODUCER_FENCED", v2, first.Epoch, rep)
		}
	}
}

// TestVersion1FenceResumes: Kafka 4.1 ends a fenced transaction (timed out, or aborted for an
// InitProducerId) at the cluster's transaction version, 2, whatever the client's: the epoch is
// bumped once and the one before stays the last epoch. So a version-1 producer (Sarama,
// kafkajs, librdkafka) recovering with InitProducerId(id, its epoch) (KIP-360) after its
// transaction timed out, or retrying its own InitProducerId answered CONCURRENT_TRANSACTIONS,
// gets the current epoch and carries on; Runnel fenced it for good.
func TestVersion1FenceResumes(t *testing.T) {
	h := newHarness(t)
	pid := h.init("v1", -1, -1).ProducerID
	if err := h.add("v1", pid, 0, false, tpA); err != nil {
		t.Fatal(err)
	}
	h.now = 61_000
	h.run(h.c.Tick(h.now))
	if s := h.state("v1"); s.State != CompleteAbort || s.Epoch != 1 {
		t.Fatalf("after the timeout: %v", &s)
	}
	r := h.init("v1", pid, 0)
	if r.Err != nil || r.ProducerID != pid || r.Epoch != 1 {
		t.Fatalf("InitProducerId(pid, 0) after the timeout = %+v; want the current epoch 1", r)
	}
	if err := h.add("v1", pid, 1, false, tpA); err != nil {
		t.Fatalf("the next transaction's AddPartitionsToTxn: %v", err)
	}
	if rep := h.end("v1", pid, 1, true, false); rep.Err != nil {
		t.Fatalf("its commit: %v", rep.Err)
	}

	// Its own InitProducerId during an open transaction, retried.
	if err := h.add("v1", pid, 1, false, tpB); err != nil {
		t.Fatal(err)
	}
	if rep := h.init("v1", pid, 1); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId during an open transaction = %+v", rep)
	}
	if rep := h.init("v1", pid, 1); rep.Err != nil || rep.Epoch != 2 {
		t.Errorf("its retry = %+v; want epoch 2", rep)
	}
}

// TestInitRetryBeginsAfresh: an InitProducerId answered as a retry (its epoch the last one)
// leaves the id Empty with the request's timeout, as Kafka's prepareIncrementProducerEpoch
// does; Runnel answered it and changed nothing, so DescribeTransactions and ListTransactions
// still showed the aborted transaction's CompleteAbort, and the old timeout held.
func TestInitRetryBeginsAfresh(t *testing.T) {
	h := newHarness(t)
	pid := h.init("x", -1, -1).ProducerID
	h.add("x", pid, 0, true, tpA)
	if rep := h.init("x", pid, 0); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId during an open transaction = %+v", rep)
	}
	r := h.req()
	h.run(h.c.InitProducerID(InitReq{ID: r, TxnID: "x", TimeoutMs: 90_000, ProducerID: pid, Epoch: 0, Version: 5}, h.now))
	if rep := h.replies[r]; rep.Err != nil {
		t.Fatalf("the retry = %+v", rep)
	}
	if s := h.state("x"); s.State != Empty || s.TimeoutMs != 90_000 {
		t.Errorf("after the retry: state %v, timeout %d; want Empty, 90000", s.State, s.TimeoutMs)
	}
}

// TestZombieEndTxnAfterEmptyAbortIsFenced: a version-2 commit bumps the epoch twice (Z = E+2);
// a new instance's InitProducerId bumps once (Z+1) and its EndTxn of an empty transaction once
// more (Z+2). The zombie's EndTxn at Z then looked like a retry of a committed transaction of
// epoch Z (Complete* two bumps above it): it was answered with the new instance's epoch, and
// the zombie wrote and committed again while the live instance was fenced. Kafka answers
// PRODUCER_FENCED. A retry is one from the epoch the last completion bumped from.
func TestZombieEndTxnAfterEmptyAbortIsFenced(t *testing.T) {
	h := newHarness(t)
	first := h.init("x", -1, -1)
	if err := h.add("x", first.ProducerID, first.Epoch, true, tpA); err != nil {
		t.Fatal(err)
	}
	zombie := h.end("x", first.ProducerID, first.Epoch, true, true)
	if zombie.Err != nil {
		t.Fatalf("the first instance's commit: %+v", zombie)
	}
	second := h.init("x", -1, -1)
	if second.Err != nil || second.Epoch != zombie.Epoch+1 {
		t.Fatalf("the second instance: %+v after %+v", second, zombie)
	}
	live := h.end("x", second.ProducerID, second.Epoch, false, true)
	if live.Err != nil || live.Epoch != second.Epoch+1 {
		t.Fatalf("the second instance's empty abort: %+v", live)
	}
	for _, commit := range []bool{false, true} {
		if rep := h.end("x", first.ProducerID, zombie.Epoch, commit, true); !errors.Is(rep.Err, kerr.ProducerFenced) {
			t.Errorf("the zombie's EndTxn(commit=%v) at epoch %d = %+v; want PRODUCER_FENCED", commit, zombie.Epoch, rep)
		}
	}
	// The live instance's own retry of its abort is still a retry.
	if rep := h.end("x", second.ProducerID, second.Epoch, false, true); rep.Err != nil || rep.Epoch != live.Epoch {
		t.Errorf("the second instance's retried abort = %+v; want epoch %d", rep, live.Epoch)
	}
	if s := h.state("x"); s.Epoch != live.Epoch {
		t.Errorf("epoch %d after the zombie; want %d", s.Epoch, live.Epoch)
	}
}
