package txncoord

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// harness carries a coordinator's effects out at once and records them: appends succeed (and
// are kept, so a second coordinator can load them), prepares succeed unless listed in
// failPrepare, discovery answers from open, markers are written.
type harness struct {
	t           *testing.T
	c           *Coordinator
	now         int64
	log         []Record
	replies     map[ReqID]Reply
	markers     []MarkerReq
	prepares    []PrepareReq
	discovers   []DiscoverReq
	failPrepare map[TP]bool
	open        []TP  // what discovery finds
	discoverErr error // what discovery reports
	nextPID     int64
	nextReq     ReqID
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, c: New(DefaultConfig(), 1), replies: map[ReqID]Reply{}, failPrepare: map[TP]bool{}, nextPID: 1000}
}

func (h *harness) run(eff Effects) {
	for len(eff.Appends)+len(eff.Prepares)+len(eff.Discover)+len(eff.Markers)+len(eff.Replies) > 0 {
		var next Effects
		for _, r := range eff.Replies {
			if _, dup := h.replies[r.ID]; dup {
				h.t.Fatalf("request %d answered twice", r.ID)
			}
			h.replies[r.ID] = r
		}
		for _, a := range eff.Appends {
			// Round-trip the record through Kafka's schema, as the partition would.
			k, v := Encode(a)
			r, err := Decode(k, v)
			if err != nil {
				h.t.Fatalf("Decode(Encode(%+v)) = %v", a, err)
			}
			h.log = append(h.log, r)
			next.merge(h.c.Appended(a.ID, nil, h.now))
		}
		for _, p := range eff.Prepares {
			h.prepares = append(h.prepares, p)
			var failed []TP
			for _, tp := range p.Partitions {
				if h.failPrepare[tp] {
					failed = append(failed, tp)
				}
			}
			next.merge(h.c.Prepared(p.ID, failed, h.now))
		}
		for _, d := range eff.Discover {
			h.discovers = append(h.discovers, d)
			next.merge(h.c.Discovered(d.ID, h.open, h.discoverErr, h.now))
		}
		for _, m := range eff.Markers {
			h.markers = append(h.markers, m)
			next.merge(h.c.MarkersWritten(m.ID, h.now))
		}
		eff = next
	}
}

// failover returns a harness whose new coordinator (coordinator epoch epoch) has loaded h's log
// up to its first PrepareCommit record: the old coordinator died right after writing it. The
// caller calls Loaded.
func (h *harness) failover(epoch int32) *harness {
	n := newHarness(h.t)
	n.c = New(DefaultConfig(), epoch)
	for _, r := range h.log {
		n.c.Load(r)
		if r.Txn != nil && r.Txn.State == PrepareCommit {
			break
		}
	}
	return n
}

func (h *harness) req() ReqID { h.nextReq++; return h.nextReq }

func (h *harness) init(id string, pid int64, epoch int16) Reply {
	h.t.Helper()
	r := h.req()
	h.run(h.c.InitProducerID(InitReq{ID: r, TxnID: id, TimeoutMs: 60_000, ProducerID: pid, Epoch: epoch, Version: 5,
		NewPID: func() (int64, error) { h.nextPID++; return h.nextPID, nil }}, h.now))
	return h.replies[r]
}

func (h *harness) add(id string, pid int64, epoch int16, v2 bool, tps ...TP) error {
	r := h.req()
	h.run(h.c.AddPartitions(AddReq{ID: r, TxnID: id, ProducerID: pid, Epoch: epoch, Partitions: tps, V2: v2, KnowsFenced: true}, h.now))
	return h.replies[r].Err
}

func (h *harness) end(id string, pid int64, epoch int16, commit, v2 bool) Reply {
	r := h.req()
	h.run(h.c.EndTxn(EndReq{ID: r, TxnID: id, ProducerID: pid, Epoch: epoch, Commit: commit, V2: v2, KnowsFenced: true,
		NewPID: func() (int64, error) { h.nextPID++; return h.nextPID, nil }}, h.now))
	rep, ok := h.replies[r]
	if !ok {
		h.t.Fatalf("EndTxn not answered")
	}
	return rep
}

func (h *harness) state(id string) Txn {
	t, ok := h.c.Txn(id)
	if !ok {
		h.t.Fatalf("no transaction %q", id)
	}
	return t
}

var tpA, tpB, tpOffsets = TP{"a", 0}, TP{"b", 3}, TP{"__consumer_offsets", 7}

// TestCommitEconomy: a transaction over three partitions writes two records (the decision and
// its completion) and nothing for AddPartitions; partitions are prepared before the decision;
// markers carry the transaction's epoch (version 1).
func TestCommitEconomy(t *testing.T) {
	h := newHarness(t)
	r := h.init("t1", -1, -1)
	if r.Err != nil || r.Epoch != 0 {
		t.Fatalf("InitProducerId = %+v; want epoch 0", r)
	}
	pid := r.ProducerID
	if n := len(h.log); n != 1 || h.log[0].Txn.State != Empty {
		t.Fatalf("InitProducerId wrote %d records; want one Empty", n)
	}
	for _, tp := range []TP{tpA, tpB, tpOffsets} {
		if err := h.add("t1", pid, 0, false, tp); err != nil {
			t.Fatalf("AddPartitions(%v) = %v", tp, err)
		}
	}
	if n := len(h.log); n != 1 {
		t.Fatalf("AddPartitions wrote %d records; want none (kept in memory)", n-1)
	}
	if rep := h.end("t1", pid, 0, true, false); rep.Err != nil || rep.Epoch != 0 {
		t.Fatalf("EndTxn(commit) = %+v", rep)
	}
	states := []State{}
	for _, rec := range h.log[1:] {
		states = append(states, rec.Txn.State)
	}
	if !slices.Equal(states, []State{PrepareCommit, CompleteCommit}) {
		t.Errorf("records of the commit = %v; want PrepareCommit, CompleteCommit", states)
	}
	if got := h.log[1].Txn.Partitions; len(got) != 3 {
		t.Errorf("PrepareCommit holds %d partitions; want 3", len(got))
	}
	if len(h.prepares) != 1 || !slices.Equal(h.prepares[0].Partitions, sortTPs([]TP{tpA, tpB, tpOffsets})) {
		t.Errorf("prepares = %+v; want one round over the three partitions", h.prepares)
	}
	if len(h.markers) != 1 || !h.markers[0].Commit || h.markers[0].Epoch != 0 || len(h.markers[0].Partitions) != 3 || h.markers[0].CoordinatorEpoch != 1 {
		t.Errorf("markers = %+v; want one COMMIT round at epoch 0, coordinator epoch 1", h.markers)
	}
	if s := h.state("t1"); s.State != CompleteCommit || len(s.Partitions) != 0 {
		t.Errorf("after the commit: %v", &s)
	}
	// A retry of the same EndTxn (version 1) succeeds; the opposite outcome does not.
	if rep := h.end("t1", pid, 0, true, false); rep.Err != nil {
		t.Errorf("retried EndTxn(commit) = %v; want success", rep.Err)
	}
	if rep := h.end("t1", pid, 0, false, false); !errors.Is(rep.Err, kerr.InvalidTxnState) {
		t.Errorf("EndTxn(abort) after a commit = %v; want INVALID_TXN_STATE", rep.Err)
	}
}

// TestVersion2BumpsEpoch: under version 2 the markers carry the epoch after the transaction's
// and the producer goes on with the one after that; a retry of the last EndTxn is answered with
// it, and anything else from the old epoch is fenced (KAFKA-17754).
func TestVersion2BumpsEpoch(t *testing.T) {
	h := newHarness(t)
	pid := h.init("t2", -1, -1).ProducerID
	if err := h.add("t2", pid, 0, true, tpA); err != nil {
		t.Fatal(err)
	}
	rep := h.end("t2", pid, 0, true, true)
	if rep.Err != nil || rep.Epoch != 2 || rep.ProducerID != pid {
		t.Fatalf("EndTxn v5 = %+v; want epoch 2", rep)
	}
	if m := h.markers[0]; m.Epoch != 1 {
		t.Errorf("markers at epoch %d; want 1 (between the records' 0 and the next transaction's 2)", m.Epoch)
	}
	if rep := h.end("t2", pid, 0, true, true); rep.Err != nil || rep.Epoch != 2 {
		t.Errorf("retried EndTxn v5 = %+v; want success with epoch 2", rep)
	}
	if err := h.add("t2", pid, 0, true, tpB); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("AddPartitions from the old epoch = %v; want PRODUCER_FENCED", err)
	}
	// An empty transaction may be aborted (and bumps the epoch).
	if rep := h.end("t2", pid, 2, false, true); rep.Err != nil || rep.Epoch != 3 {
		t.Errorf("EndTxn(abort) of an empty transaction = %+v; want epoch 3", rep)
	}
}

// TestVersion2EarlyNextTransaction: once a version-2 transaction is decided and its markers are
// being written, the producer's next transaction may add partitions (they join when the
// Complete* record is durable); its EndTxn waits (CONCURRENT_TRANSACTIONS) until then.
func TestVersion2EarlyNextTransaction(t *testing.T) {
	h := newHarness(t)
	pid := h.init("e", -1, -1).ProducerID
	h.add("e", pid, 0, true, tpA)
	c := h.c
	eff := c.EndTxn(EndReq{ID: 100, TxnID: "e", ProducerID: pid, Epoch: 0, Commit: true, V2: true}, 0)
	eff = c.Prepared("e", nil, 0)
	eff = c.Appended("e", nil, 0) // PrepareCommit durable: the answer and the marker round
	if len(eff.Replies) != 1 || eff.Replies[0].Epoch != 2 || len(eff.Markers) != 1 {
		t.Fatalf("after PrepareCommit: %+v; want the answer (epoch 2) and a marker round", eff)
	}
	add := c.AddPartitions(AddReq{ID: 101, TxnID: "e", ProducerID: pid, Epoch: 2, Partitions: []TP{tpB}, V2: true, KnowsFenced: true}, 5)
	if len(add.Replies) != 1 || add.Replies[0].Err != nil {
		t.Fatalf("early AddPartitions = %+v; want accepted", add)
	}
	if end := c.EndTxn(EndReq{ID: 102, TxnID: "e", ProducerID: pid, Epoch: 2, Commit: true, V2: true}, 5); !errors.Is(end.Replies[0].Err, kerr.ConcurrentTransactions) {
		t.Errorf("EndTxn of the next transaction during the markers = %v; want CONCURRENT_TRANSACTIONS", end.Replies[0].Err)
	}
	if end := c.EndTxn(EndReq{ID: 103, TxnID: "e", ProducerID: pid, Epoch: 0, Commit: true, V2: true}, 5); !errors.Is(end.Replies[0].Err, kerr.ConcurrentTransactions) {
		t.Errorf("a retry of the deciding EndTxn during the markers = %v; want CONCURRENT_TRANSACTIONS", end.Replies[0].Err)
	}
	if !c.Check("e", pid, 2, tpB) {
		t.Errorf("Check of the early transaction = abort; want wait")
	}
	eff = c.MarkersWritten("e", 6)
	if len(eff.Appends) != 1 || eff.Appends[0].Txn.State != CompleteCommit || eff.Appends[0].Txn.Epoch != 2 {
		t.Fatalf("after the markers: %+v; want CompleteCommit at epoch 2", eff)
	}
	c.Appended("e", nil, 7)
	if s := h.state("e"); s.State != Ongoing || s.Epoch != 2 || !s.Partitions[tpB] || len(s.Partitions) != 1 {
		t.Errorf("after Complete: %v %v; want the next transaction Ongoing at epoch 2 on b", &s, s.Partitions)
	}
}

// TestPrepareFailureAbortsFencedForJava: a version 2 client that asked to be told as fenced
// (the Java client: Kafka Streams dies of TRANSACTION_ABORTABLE) gets INVALID_PRODUCER_EPOCH.
func TestPrepareFailureAbortsFencedForJava(t *testing.T) {
	h := newHarness(t)
	pid := h.init("t", -1, -1).ProducerID
	h.add("t", pid, 0, true, tpA, tpB)
	h.failPrepare[tpB] = true
	r := h.req()
	h.run(h.c.EndTxn(EndReq{ID: r, TxnID: "t", ProducerID: pid, Epoch: 0, Commit: true, V2: true, KnowsFenced: true, FencedOnAbort: true}, h.now))
	if rep := h.replies[r]; !errors.Is(rep.Err, kerr.InvalidProducerEpoch) {
		t.Fatalf("EndTxn(commit) with a failed prepare, fenced on abort = %v; want INVALID_PRODUCER_EPOCH", rep.Err)
	}
}

// TestPrepareFailureAborts: a partition that cannot vouch for its records turns the commit into
// an abort with an epoch bump; the client is told so.
func TestPrepareFailureAborts(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		h := newHarness(t)
		pid := h.init("t", -1, -1).ProducerID
		h.add("t", pid, 0, v2, tpA, tpB)
		h.failPrepare[tpB] = true
		rep := h.end("t", pid, 0, true, v2)
		want := kerr.InvalidProducerEpoch
		if v2 {
			want = kerr.TransactionAbortable
		}
		if !errors.Is(rep.Err, want) {
			t.Errorf("v2=%v: EndTxn(commit) with a failed prepare = %v; want %v", v2, rep.Err, want)
		}
		last := h.log[len(h.log)-1].Txn
		wantEpoch := int16(1)
		if v2 {
			wantEpoch = 2 // markers at 1, the producer goes on at 2
		}
		if last.State != CompleteAbort || last.Epoch != wantEpoch {
			t.Errorf("v2=%v: final record %v; want CompleteAbort at epoch %d", v2, last, wantEpoch)
		}
		if m := h.markers[0]; m.Commit || m.Epoch != 1 || len(m.Partitions) != 2 {
			t.Errorf("v2=%v: markers %+v; want ABORT at epoch 1 on both partitions", v2, m)
		}
		if !v2 {
			continue
		}
		// The version 2 producer told TRANSACTION_ABORTABLE re-initializes with the epoch of the
		// aborted transaction (franz-go's recovery) and goes on; another epoch is still fenced.
		if rep := h.init("t", pid, 1); !errors.Is(rep.Err, kerr.ProducerFenced) {
			t.Errorf("InitProducerId with epoch 1 after the abort = %v; want PRODUCER_FENCED", rep.Err)
		}
		if rep := h.init("t", pid, 0); rep.Err != nil || rep.Epoch != 3 {
			t.Errorf("InitProducerId with the aborted transaction's epoch 0 = %+v; want epoch 3", rep)
		}
		if rep := h.init("t", pid, 0); rep.Err != nil || rep.Epoch != 3 {
			t.Errorf("a retry of that InitProducerId (its answer lost) = %+v; want epoch 3 again", rep)
		}
		if rep := h.init("t", pid, -1); !errors.Is(rep.Err, kerr.ProducerFenced) {
			t.Errorf("InitProducerId with the producer id and epoch -1 = %v; want PRODUCER_FENCED", rep.Err)
		}
	}
}

// TestTimeoutAndZombie: an open transaction past its timeout is aborted with an epoch bump; a
// new producer with the same id fences the old one, whose EndTxn is refused.
func TestTimeoutAndZombie(t *testing.T) {
	h := newHarness(t)
	pid := h.init("z", -1, -1).ProducerID
	h.add("z", pid, 0, false, tpA)
	h.now = 59_000
	h.run(h.c.Tick(h.now))
	if s := h.state("z"); s.State != Ongoing {
		t.Fatalf("before the timeout: %v", &s)
	}
	h.now = 61_000
	h.run(h.c.Tick(h.now))
	if s := h.state("z"); s.State != CompleteAbort || s.Epoch != 1 {
		t.Fatalf("after the timeout: %v; want CompleteAbort at epoch 1", &s)
	}
	if rep := h.end("z", pid, 0, true, false); !errors.Is(rep.Err, kerr.ProducerFenced) {
		t.Errorf("EndTxn of the timed-out epoch = %v; want PRODUCER_FENCED", rep.Err)
	}

	// Zombie: producer A (epoch 2) is open when B initializes the same id.
	r := h.init("z", -1, -1)
	h.add("z", r.ProducerID, r.Epoch, false, tpB)
	if rep := h.init("z", -1, -1); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId during an open transaction = %+v; want CONCURRENT_TRANSACTIONS (abort first)", rep)
	}
	if m := h.markers[len(h.markers)-1]; m.Commit || !slices.Equal(m.Partitions, []TP{tpB}) {
		t.Errorf("the zombie's transaction was not aborted: %+v", m)
	}
	b := h.init("z", -1, -1)
	if b.Err != nil || b.Epoch <= r.Epoch+1 {
		t.Fatalf("InitProducerId retry = %+v; want an epoch past %d", b, r.Epoch+1)
	}
	if rep := h.end("z", r.ProducerID, r.Epoch, true, false); !errors.Is(rep.Err, kerr.ProducerFenced) {
		t.Errorf("the zombie's EndTxn = %v; want PRODUCER_FENCED", rep.Err)
	}
	if rep := h.init("z", r.ProducerID, r.Epoch); !errors.Is(rep.Err, kerr.ProducerFenced) {
		t.Errorf("the zombie's InitProducerId (KIP-360) = %v; want PRODUCER_FENCED", rep.Err)
	}
}

// TestFailover: a new coordinator completes a prepared transaction's markers, and treats
// transactions it cannot see as Lost: it discovers their partitions before ending them, aborts
// a commit it cannot make atomic, and lets an id with nothing open keep its epoch.
func TestFailover(t *testing.T) {
	h := newHarness(t)
	pidP := h.init("prepared", -1, -1).ProducerID
	h.add("prepared", pidP, 0, false, tpA)
	pidL := h.init("lost", -1, -1).ProducerID
	pidI := h.init("idle", -1, -1).ProducerID
	h.add("lost", pidL, 0, false, tpA) // in the old coordinator's memory only
	// The old coordinator dies right after writing PrepareCommit: cut its log there.
	h.run(h.c.EndTxn(EndReq{ID: h.req(), TxnID: "prepared", ProducerID: pidP, Epoch: 0, Commit: true}, h.now))

	n := h.failover(2)
	n.run(n.c.Loaded(0))
	if len(n.markers) != 1 || !n.markers[0].Commit || n.markers[0].CoordinatorEpoch != 2 {
		t.Fatalf("markers after load = %+v; want the prepared commit's, at coordinator epoch 2", n.markers)
	}
	if s := n.state("prepared"); s.State != CompleteCommit {
		t.Errorf("prepared transaction after load: %v", &s)
	}
	// The lost transaction: the producer adds tpB and commits; discovery finds tpA as well.
	n.open = []TP{tpA}
	if err := n.add("lost", pidL, 0, false, tpB); err != nil {
		t.Fatal(err)
	}
	if rep := n.end("lost", pidL, 0, true, false); rep.Err != nil {
		t.Fatalf("EndTxn(commit) of a lost transaction = %v", rep.Err)
	}
	if len(n.discovers) != 1 {
		t.Errorf("discoveries = %d; want 1", len(n.discovers))
	}
	if m := n.markers[len(n.markers)-1]; !m.Commit || !slices.Equal(m.Partitions, []TP{tpA, tpB}) {
		t.Errorf("markers of the lost transaction = %+v; want COMMIT on a and b", m)
	}
	// An idle id whose producer does nothing: after its timeout, discovery finds nothing open,
	// and nothing is written; its epoch stands.
	n.open = nil
	before := len(n.log)
	n.now = 70_000
	n.run(n.c.Tick(n.now))
	if s := n.state("idle"); s.Lost || s.Epoch != 0 || len(n.log) != before {
		t.Errorf("idle id after its timeout: %v, lost %v, %d records written", &s, s.Lost, len(n.log)-before)
	}
	if rep := n.init("idle", pidI, 0); rep.Err != nil || rep.Epoch != 1 {
		t.Errorf("InitProducerId of the idle id = %+v; want epoch 1", rep)
	}

	// A discovery that misses a node: a commit cannot be atomic and is aborted.
	m := newHarness(t)
	m.c = New(DefaultConfig(), 3)
	for _, r := range n.log {
		m.c.Load(r)
	}
	m.run(m.c.Loaded(0))
	m.discoverErr = errors.New("node 3 did not answer")
	m.add("lost", pidL, 0, false, tpB)
	if rep := m.end("lost", pidL, 0, true, false); !errors.Is(rep.Err, kerr.InvalidProducerEpoch) {
		t.Errorf("commit (version 1) after an incomplete discovery = %v; want INVALID_PRODUCER_EPOCH", rep.Err)
	}
}

// TestVersion2RetryAfterFailover: the coordinator dies after writing PrepareCommit, before its
// answer reaches the client; the client retries EndTxn (with the epoch before the bump) at the
// new coordinator, which knows nothing of the first request. The retry waits while the markers
// are written, then gets the outcome and the producer's next epoch: it is not fenced. A commit
// retried after a timeout abort is refused without committing.
func TestVersion2RetryAfterFailover(t *testing.T) {
	h := newHarness(t)
	pid := h.init("r", -1, -1).ProducerID
	h.add("r", pid, 0, true, tpA, tpOffsets)
	h.run(h.c.EndTxn(EndReq{ID: h.req(), TxnID: "r", ProducerID: pid, Epoch: 0, Commit: true, V2: true}, h.now))
	n := h.failover(2)
	markers := n.c.Loaded(0)
	retry := func(commit bool) Reply {
		id := n.req()
		eff := n.c.EndTxn(EndReq{ID: id, TxnID: "r", ProducerID: pid, Epoch: 0, Commit: commit, V2: true, KnowsFenced: true}, n.now)
		if len(eff.Replies) != 1 || len(eff.Appends)+len(eff.Markers)+len(eff.Prepares)+len(eff.Discover) != 0 {
			t.Fatalf("retried EndTxn: %+v; want an answer and nothing else", eff)
		}
		return eff.Replies[0]
	}
	if rep := retry(true); !errors.Is(rep.Err, kerr.ConcurrentTransactions) {
		t.Errorf("retry while the loaded commit's markers are written = %v; want CONCURRENT_TRANSACTIONS", rep.Err)
	}
	n.run(markers)
	if s := n.state("r"); s.State != CompleteCommit || s.Epoch != 2 {
		t.Fatalf("after the markers: %v; want CompleteCommit at epoch 2", &s)
	}
	if rep := retry(true); rep.Err != nil || rep.ProducerID != pid || rep.Epoch != 2 {
		t.Errorf("retry after the commit completed = %+v; want success at epoch 2", rep)
	}
	if rep := retry(false); !errors.Is(rep.Err, kerr.InvalidTxnState) {
		t.Errorf("an abort claiming to retry the commit = %v; want INVALID_TXN_STATE", rep.Err)
	}
	if err := n.add("r", pid, 2, true, tpB); err != nil {
		t.Errorf("the next transaction at epoch 2 = %v", err)
	}

	// A transaction aborted after its timeout: the producer's late commit is refused.
	n.now = 200_000
	n.run(n.c.Tick(n.now))
	if s := n.state("r"); s.State != CompleteAbort {
		t.Fatalf("after the timeout: %v; want CompleteAbort", &s)
	}
	if rep := n.end("r", pid, 2, true, true); !errors.Is(rep.Err, kerr.InvalidTxnState) && !errors.Is(rep.Err, kerr.ProducerFenced) {
		t.Errorf("commit after the timeout abort = %+v; want refused", rep)
	}
	if m := n.markers[len(n.markers)-1]; m.Commit {
		t.Errorf("the timed-out transaction was committed: %+v", m)
	}
}

// TestCheck: what a partition holding an open transaction is told.
func TestCheck(t *testing.T) {
	h := newHarness(t)
	pid := h.init("c", -1, -1).ProducerID
	if h.c.Check("c", pid, 0, tpA) {
		t.Errorf("Check before any AddPartitions = true; want abort")
	}
	h.add("c", pid, 0, false, tpA)
	if !h.c.Check("c", pid, 0, tpA) || h.c.Check("c", pid, 0, tpB) || h.c.Check("c", pid+1, 0, tpA) || h.c.Check("other", pid, 0, tpA) {
		t.Errorf("Check during the transaction: included partition must wait, others abort")
	}
	h.end("c", pid, 0, false, false)
	if h.c.Check("c", pid, 0, tpA) {
		t.Errorf("Check after the abort completed = true; want abort")
	}
}

// TestAppendFailureStops: after a failed append the coordinator answers NOT_COORDINATOR until
// reloaded.
func TestAppendFailureStops(t *testing.T) {
	h := newHarness(t)
	pid := h.init("f", -1, -1).ProducerID
	h.add("f", pid, 0, false, tpA)
	r := h.req()
	eff := h.c.EndTxn(EndReq{ID: r, TxnID: "f", ProducerID: pid, Epoch: 0, Commit: true}, 0)
	eff = h.c.Prepared("f", nil, 0)
	if len(eff.Appends) != 1 {
		t.Fatalf("effects %+v; want the PrepareCommit append", eff)
	}
	eff = h.c.Appended("f", errors.New("not leader"), 0)
	if len(eff.Replies) != 1 || !errors.Is(eff.Replies[0].Err, kerr.NotCoordinator) || !h.c.Broken() {
		t.Fatalf("after a failed append: %+v, broken %v", eff, h.c.Broken())
	}
	if err := h.add("f", pid, 0, false, tpB); !errors.Is(err, kerr.NotCoordinator) {
		t.Errorf("AddPartitions on a broken coordinator = %v; want NOT_COORDINATOR", err)
	}
}

// TestExpiration: an id idle past transactional.id.expiration.ms is deleted with a tombstone.
func TestExpiration(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.ExpirationMs = 1000
	h.init("e", -1, -1)
	h.now = 2000
	h.run(h.c.Tick(h.now))
	if _, ok := h.c.Txn("e"); ok || h.log[len(h.log)-1].Txn != nil {
		t.Errorf("expired id still there, or no tombstone written")
	}
}

// TestVersion1AbortAfterIncompleteDiscovery: a version-1 client aborts a Lost transaction and
// discovery misses a node, so the abort bumps the epoch. The client is told
// INVALID_PRODUCER_EPOCH (its own abort was answered success before, and its next
// AddPartitionsToTxn was then fenced), and its InitProducerId with the epoch it had gets the
// bumped one, so it goes on.
func TestVersion1AbortAfterIncompleteDiscovery(t *testing.T) {
	h := newHarness(t)
	pid := h.init("v1", -1, -1).ProducerID
	if err := h.add("v1", pid, 0, false, tpA); err != nil {
		t.Fatal(err)
	}
	n := newHarness(t)
	n.c = New(DefaultConfig(), 2)
	for _, r := range h.log {
		n.c.Load(r)
	}
	n.run(n.c.Loaded(0))
	if s := n.state("v1"); !s.Lost {
		t.Fatalf("after the failover: %v; want Lost", &s)
	}
	n.open, n.discoverErr = []TP{tpA}, errors.New("node 3 did not answer")
	if rep := n.end("v1", pid, 0, false, false); !errors.Is(rep.Err, kerr.InvalidProducerEpoch) {
		t.Fatalf("abort (version 1) after an incomplete discovery = %+v; want INVALID_PRODUCER_EPOCH", rep)
	}
	if m := n.markers[len(n.markers)-1]; m.Commit || m.Epoch != 1 || !slices.Equal(m.Partitions, []TP{tpA}) {
		t.Errorf("markers = %+v; want ABORT on a at the bumped epoch 1", m)
	}
	if s := n.state("v1"); s.State != CompleteAbort || s.Epoch != 1 {
		t.Fatalf("after the abort: %v; want CompleteAbort at epoch 1", &s)
	}
	if err := n.add("v1", pid, 0, false, tpB); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("AddPartitionsToTxn with the old epoch = %v; want fenced (the client re-initializes first)", err)
	}
	rep := n.init("v1", pid, 0)
	if rep.Err != nil || rep.ProducerID != pid || rep.Epoch != 2 {
		t.Fatalf("InitProducerId with the epoch it had = %+v; want success at epoch 2", rep)
	}
	if err := n.add("v1", pid, 2, false, tpB); err != nil {
		t.Errorf("the next transaction = %v", err)
	}
	if rep := n.end("v1", pid, 2, true, false); rep.Err != nil {
		t.Errorf("its commit = %v", rep.Err)
	}

	// With every node answering, a version-1 abort keeps its epoch and is answered success.
	n.discoverErr = nil
	if err := n.add("v1", pid, 2, false, tpA); err != nil {
		t.Fatal(err)
	}
	if rep := n.end("v1", pid, 2, false, false); rep.Err != nil || rep.Epoch != 2 {
		t.Errorf("a plain version-1 abort = %+v; want success at epoch 2", rep)
	}
}
