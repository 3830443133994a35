// Package txncoord is the transaction coordinator of one __transaction_state partition, as an
// I/O-free state machine: requests, clock ticks and the outcomes of the I/O it asked for go in;
// records to append, partitions to prepare or discover, markers to write and replies come out
// (Effects). The driver (package broker) performs the effects and reports back. Design and
// crash argument: docs/transactions.md §3.
//
// A transaction has at most one operation in flight (an append, a prepare round, a discovery,
// a marker round); a request that needs the transaction meanwhile gets CONCURRENT_TRANSACTIONS,
// which clients retry, as in Kafka.
package txncoord

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state, numbered as Kafka's TransactionState.
type State int8

// States.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

func (s State) String() string {
	return [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}[s]
}

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func sortTPs(tps []TP) []TP {
	slices.SortFunc(tps, func(a, b TP) int { return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition)) })
	return tps
}

// Config holds the coordinator's settings.
type Config struct {
	MaxTimeoutMs int32 // transaction.max.timeout.ms: a longer requested timeout is INVALID_TRANSACTION_TIMEOUT
	ExpirationMs int64 // transactional.id.expiration.ms: an idle completed id is forgotten
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config { return Config{MaxTimeoutMs: 900_000, ExpirationMs: 7 * 24 * 3600 * 1000} }

// Txn is the coordinator's view of one transactional id.
type Txn struct {
	ID             string
	ProducerID     int64
	PrevProducerID int64 // the id before the last rotation, -1
	// NextProducerID: a decided version-2 transaction whose epoch is exhausted hands its
	// producer this new id (at epoch 0) with the EndTxn answer, as Kafka does (its
	// TransactionLogValue's NextProducerId); the Complete* record holds it. -1: none.
	NextProducerID int64
	Epoch          int16
	LastEpoch      int16 // the epoch before the last bump (a retried request may carry it), -1
	TimeoutMs      int32
	State          State
	Partitions     map[TP]bool // of the open or completing transaction
	StartMs        int64       // when the open transaction began
	UpdateMs       int64
	V2             bool // the transaction uses transaction version 2 (the epoch bumps at every end)
	// Lost is set on ids loaded from the log in a state where a transaction the previous
	// coordinator kept in memory may be open: its partitions are unknown until discovered.
	Lost      bool
	LostAtMs  int64 // when Lost was set; the transaction times out from there
	lostState State // the state Lost was set in, restored if nothing turns out to be open
	// abortedFrom-1 is the epoch of the transaction whose commit this coordinator turned into
	// an abort (0: none), whatever the client was told (abortedErr): its producer may
	// re-initialize with that epoch and go on (franz-go does); in memory only, cleared when the
	// next transaction begins or the producer re-initializes.
	abortedFrom int32

	op *op
}

// op is the operation in flight on a transaction.
type op struct {
	phase   phase
	commit  bool    // the outcome being completed
	fence   bool    // an abort that bumps the epoch (timeout, InitProducerId, failed prepare)
	probe   bool    // a fenced abort of a Lost id: if discovery finds nothing open, nothing is written
	waiting []ReqID // requests answered when the operation reaches its reply point
	reply   Reply   // the answer for them
	then    *Txn    // Append: the state the record holds, installed once it is durable
	// nextEpoch is the epoch the producer goes on with after a decided transaction (its EndTxn
	// answer): under transaction version 2 one past the markers' epoch, so the next transaction
	// may begin while the markers are still being written (early) without a re-sent marker ever
	// closing it (a marker older than the producer's epoch is refused, and a marker closes only
	// the transaction whose records are of its epoch or the one before).
	nextEpoch int16
	// rotate: the EndTxn's transaction rotates the producer id, to rotateTo (allocated before
	// the decision).
	rotate   bool
	rotateTo int64
	early    []TP
	earlyMs  int64
	earlyV2  bool
	// fencedOnAbort: the EndTxn's client is told of a commit turned into an abort as fenced
	// (EndReq.FencedOnAbort).
	fencedOnAbort bool
}

// nextEpochOf is the epoch a producer continues with after t's decision (t in Prepare*, its
// epoch the markers'): one more under transaction version 2 while the epoch allows.
func nextEpochOf(t *Txn) int16 {
	if t.V2 && t.Epoch < math.MaxInt16-1 {
		return t.Epoch + 1
	}
	return t.Epoch
}

// earlyOK reports whether a request of epoch may already act for the next transaction: the
// previous one is decided and only its markers and Complete* record are being written.
func (t *Txn) earlyOK(pid int64, epoch int16) bool {
	o := t.op
	if o == nil || o.phase != phaseMarkers && o.phase != phaseAppendComplete {
		return false
	}
	if t.NextProducerID >= 0 { // the producer goes on with a new id
		return pid == t.NextProducerID && epoch == 0
	}
	return pid == t.ProducerID && o.nextEpoch > t.Epoch && epoch == o.nextEpoch
}

// rotates reports whether a version-2 transaction of epoch, once decided, leaves its producer
// no epoch to go on with above the markers' (nextEpochOf): its id rotates.
func rotates(epoch int16) bool {
	return bumpEpoch(epoch) >= math.MaxInt16-1
}

type phase int8

const (
	phaseDiscover phase = iota + 1
	phasePrepare
	phaseAppendPrepare  // the Prepare* record
	phaseMarkers        // COMMIT/ABORT markers
	phaseAppendComplete // the Complete* record
	phaseAppendInit     // InitProducerId's Empty record
	phaseAppendDelete   // an expired id's tombstone
)

// ReqID names a request the driver is waiting to answer.
type ReqID uint64

// Reply answers a request.
type Reply struct {
	ID         ReqID
	Err        error // a kerr error, or nil
	ProducerID int64
	Epoch      int16
}

// Record is a __transaction_state record: the id's new state, or a tombstone (Txn nil).
type Record struct {
	ID  string
	Txn *Txn // a copy; Partitions sorted by the encoder
}

// Effects is what the driver must do after a step.
type Effects struct {
	Appends  []Record     // append to the partition, in order; report each with Appended
	Prepares []PrepareReq // report with Prepared
	Discover []DiscoverReq
	Markers  []MarkerReq // report with MarkersWritten
	Replies  []Reply
}

func (e *Effects) merge(o Effects) {
	e.Appends = append(e.Appends, o.Appends...)
	e.Prepares = append(e.Prepares, o.Prepares...)
	e.Discover = append(e.Discover, o.Discover...)
	e.Markers = append(e.Markers, o.Markers...)
	e.Replies = append(e.Replies, o.Replies...)
}

// PrepareReq asks the leaders of Partitions to make the producer's open transaction durable
// (docs/transactions.md §3.3).
type PrepareReq struct {
	ID         string
	ProducerID int64
	Epoch      int16
	Partitions []TP
}

// DiscoverReq asks every node which partitions it leads hold an open transaction of the
// producer at Epoch.
type DiscoverReq struct {
	ID         string
	ProducerID int64
	Epoch      int16
}

// MarkerReq asks for a marker on every partition, retried until written.
type MarkerReq struct {
	ID               string
	ProducerID       int64
	Epoch            int16 // the marker's producer epoch
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TP
}

// Coordinator coordinates the transactional ids of one __transaction_state partition.
type Coordinator struct {
	cfg   Config
	epoch int32 // the coordinator epoch: the partition's leader epoch
	txns  map[string]*Txn
	// broken is set when an append failed: what is durable is no longer known, so the driver
	// must reload the partition (Broken); until then every request gets NOT_COORDINATOR.
	broken bool
}

// SetConfig changes the coordinator's configuration (a dynamic broker config changed); it
// applies from the next request and tick.
func (c *Coordinator) SetConfig(cfg Config) { c.cfg = cfg }

// Broken reports that the coordinator must be reloaded from its partition.
func (c *Coordinator) Broken() bool { return c.broken }

// New returns a coordinator for a partition led in epoch.
func New(cfg Config, epoch int32) *Coordinator {
	return &Coordinator{cfg: cfg, epoch: epoch, txns: map[string]*Txn{}}
}

// Load applies a record read back from the partition. Call Loaded after the last one.
func (c *Coordinator) Load(r Record) {
	if r.Txn == nil {
		delete(c.txns, r.ID)
		return
	}
	t := *r.Txn
	t.Partitions = maps.Clone(t.Partitions)
	if t.Partitions == nil && t.State == Ongoing {
		// Kafka writes an Ongoing record without partitions (an AddPartitionsToTxn with none):
		// discovery and adds write into the set.
		t.Partitions = map[TP]bool{}
	}
	t.LastEpoch = -1
	c.txns[r.ID] = &t
}

// Loaded finishes loading at nowMs and returns the work a previous coordinator left: markers of
// prepared transactions, and transactions it may have kept in memory, which are marked Lost.
func (c *Coordinator) Loaded(nowMs int64) Effects {
	var eff Effects
	for _, id := range slices.Sorted(maps.Keys(c.txns)) {
		t := c.txns[id]
		switch t.State {
		case PrepareCommit, PrepareAbort:
			if nextEpochOf(t) > t.Epoch || t.NextProducerID >= 0 {
				// Under transaction version 2 the producer may have begun its next transaction
				// (early) before the old coordinator finished this one: Lost once it completes.
				t.Lost, t.LostAtMs, t.lostState = true, nowMs, CompleteAbort
				if t.State == PrepareCommit {
					t.lostState = CompleteCommit
				}
			}
			eff.merge(c.writeMarkers(t, nil))
		case Ongoing, Empty, CompleteCommit, CompleteAbort:
			// An Ongoing record (written by Kafka) holds partitions; more may have been added.
			t.Lost, t.LostAtMs, t.lostState = true, nowMs, t.State
		}
	}
	return eff
}

// Txn returns a copy of a transaction's state, for DescribeTransactions.
func (c *Coordinator) Txn(id string) (Txn, bool) {
	t, ok := c.txns[id]
	if !ok {
		return Txn{}, false
	}
	cp := *t
	cp.Partitions = maps.Clone(t.Partitions)
	cp.op = nil
	return cp, true
}

// ByProducer returns the transactional id using a producer id (now, as the id before its
// last rotation, or as the one a decided transaction's producer goes on with).
func (c *Coordinator) ByProducer(pid int64) (string, bool) {
	for id, t := range c.txns {
		if t.ProducerID == pid || t.PrevProducerID == pid || t.NextProducerID >= 0 && t.NextProducerID == pid {
			return id, true
		}
	}
	return "", false
}

// IDs lists the transactional ids, sorted.
func (c *Coordinator) IDs() []string { return slices.Sorted(maps.Keys(c.txns)) }

// Epoch is the coordinator epoch.
func (c *Coordinator) Epoch() int32 { return c.epoch }

func (c *Coordinator) snapshot(t *Txn) Record {
	cp := *t
	cp.Partitions = maps.Clone(t.Partitions)
	cp.op = nil
	return Record{ID: t.ID, Txn: &cp}
}

// InitReq is an InitProducerId request with a transactional id.
type InitReq struct {
	ID         ReqID
	TxnID      string
	TimeoutMs  int32
	ProducerID int64 // KIP-360: the producer's current id and epoch, or -1
	Epoch      int16
	NewPID     func() (int64, error) // allocates a producer id (called only when one is needed)
	Version    int16
}

// fencedErr is the error for a request of an older epoch: PRODUCER_FENCED where the version
// knows it, INVALID_PRODUCER_EPOCH before.
func fencedErr(knowsFenced bool) error {
	if knowsFenced {
		return kerr.ProducerFenced
	}
	return kerr.InvalidProducerEpoch
}

// InitProducerID handles InitProducerId: a new id, or the next epoch of an existing one (a new
// producer id once the epoch is exhausted). An open transaction is aborted first.
func (c *Coordinator) InitProducerID(r InitReq, nowMs int64) Effects {
	fail := func(err error) Effects { return Effects{Replies: []Reply{{ID: r.ID, Err: err}}} }
	if c.broken {
		return fail(kerr.NotCoordinator)
	}
	if r.TimeoutMs <= 0 || r.TimeoutMs > c.cfg.MaxTimeoutMs {
		return fail(kerr.InvalidTransactionTimeout)
	}
	t, ok := c.txns[r.TxnID]
	if !ok {
		pid, err := r.NewPID()
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		t = &Txn{ID: r.TxnID, ProducerID: pid, PrevProducerID: -1, NextProducerID: -1, Epoch: -1, LastEpoch: -1, State: Empty, UpdateMs: nowMs}
		c.txns[r.TxnID] = t
	}
	if t.op != nil {
		return fail(kerr.ConcurrentTransactions)
	}
	// The producer whose commit this coordinator turned into an abort goes on with the epoch of
	// that transaction.
	// (Its id may have rotated at that abort: version 2 at an exhausted epoch. The refusal
	// carried no id, so the producer still names the old one.)
	resumed := r.ProducerID >= 0 && t.abortedFrom != 0 && t.State == CompleteAbort && t.abortedFrom == int32(r.Epoch)+1 &&
		(r.ProducerID == t.ProducerID || r.ProducerID == t.PrevProducerID && t.Epoch == 0)
	// KIP-360: the caller must be the current producer, or a retry of the last bump; or the id
	// is new here (epoch -1: it expired, and its producer recovers from
	// INVALID_PRODUCER_ID_MAPPING with the id and epoch it had), as Kafka's isValidProducerId.
	if r.ProducerID >= 0 && t.Epoch >= 0 {
		current := r.ProducerID == t.ProducerID && r.Epoch == t.Epoch || resumed
		// Also after a version-2 EndTxn, which bumped the epoch: a producer that never saw its
		// answer re-initializes with the epoch it ended with (Kafka's lastProducerEpoch rule).
		retry := r.ProducerID == t.ProducerID && r.Epoch == t.LastEpoch &&
			(t.State == Empty || !resumed && (t.State == CompleteCommit || t.State == CompleteAbort))
		// The bump that rotated the producer id, retried: only an exhausted epoch of the
		// previous id made it (a zombie of that id with an older epoch is fenced).
		// So is a retry of the resumed bump after a rotating abort (franz-go), which kept the
		// previous id's epoch of the rotation (LastEpoch).
		retryRotated := r.ProducerID == t.PrevProducerID && t.State == Empty &&
			(r.Epoch >= math.MaxInt16-1 || rotates(r.Epoch) && r.Epoch == t.LastEpoch)
		if retry || retryRotated {
			if t.State == Empty && t.TimeoutMs == r.TimeoutMs {
				return Effects{Replies: []Reply{{ID: r.ID, ProducerID: t.ProducerID, Epoch: t.Epoch}}}
			}
			// As Kafka's prepareIncrementProducerEpoch on a retry: the epoch stays, and the id
			// begins afresh (Empty) with the request's timeout.
			next := *t
			next.Partitions, next.op, next.abortedFrom = nil, nil, 0
			next.TimeoutMs, next.State, next.UpdateMs, next.StartMs, next.V2 = r.TimeoutMs, Empty, nowMs, -1, false
			t.op = &op{phase: phaseAppendInit, waiting: []ReqID{r.ID}, reply: Reply{ProducerID: t.ProducerID, Epoch: t.Epoch}, then: &next}
			return Effects{Appends: []Record{c.snapshot(&next)}}
		}
		if !current {
			return fail(fencedErr(r.Version >= 4))
		}
	}
	if t.State == Ongoing || t.Lost {
		// Abort the open transaction, fencing its epoch; the client retries and then gets its
		// new epoch.
		eff := c.abortFenced(t, nowMs)
		eff.Replies = append(eff.Replies, Reply{ID: r.ID, Err: kerr.ConcurrentTransactions})
		return eff
	}
	if t.State == PrepareCommit || t.State == PrepareAbort || t.State == PrepareEpochFence {
		return fail(kerr.ConcurrentTransactions)
	}
	next := *t
	next.Partitions, next.op, next.abortedFrom = nil, nil, 0
	next.LastEpoch = t.Epoch
	if r.ProducerID < 0 {
		// A new instance (no id or epoch given): no earlier instance's request is a retry of
		// this bump, so the one it replaces is fenced even at the epoch it had (Kafka's
		// prepareIncrementProducerEpoch sets lastProducerEpoch -1).
		next.LastEpoch = -1
	}
	if resumed {
		next.LastEpoch = r.Epoch // a retry of this request (its answer lost) is answered too
	}
	if t.Epoch >= math.MaxInt16-1 {
		pid, err := r.NewPID()
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable)
		}
		next.PrevProducerID, next.ProducerID, next.Epoch = t.ProducerID, pid, 0
	} else {
		next.Epoch = t.Epoch + 1
	}
	next.TimeoutMs, next.State, next.UpdateMs, next.StartMs, next.V2 = r.TimeoutMs, Empty, nowMs, -1, false
	t.op = &op{phase: phaseAppendInit, waiting: []ReqID{r.ID}, reply: Reply{ProducerID: next.ProducerID, Epoch: next.Epoch}, then: &next}
	return Effects{Appends: []Record{c.snapshot(&next)}}
}

// checkProducer checks a request's producer id and epoch against the transaction's.
func (c *Coordinator) checkProducer(t *Txn, ok bool, pid int64, epoch int16, knowsFenced bool) error {
	switch {
	case !ok:
		return kerr.InvalidProducerIDMapping
	case pid != t.ProducerID:
		return kerr.InvalidProducerIDMapping
	case epoch != t.Epoch:
		return fencedErr(knowsFenced)
	}
	return nil
}

// AddReq adds partitions to a transaction: AddPartitionsToTxn from a client (transaction version
// 1), a partition leader's implicit add (version 2), AddOffsetsToTxn, or a verification.
type AddReq struct {
	ID          ReqID
	TxnID       string
	ProducerID  int64
	Epoch       int16
	Partitions  []TP
	VerifyOnly  bool // answer whether they are in the transaction; change nothing
	V2          bool
	KnowsFenced bool // the request version has PRODUCER_FENCED
}

// AddPartitions adds partitions to the open transaction (beginning one): in memory only, the
// economy of docs/transactions.md §3.2. The reply's Err applies to every partition.
func (c *Coordinator) AddPartitions(r AddReq, nowMs int64) Effects {
	reply := func(err error) Effects { return Effects{Replies: []Reply{{ID: r.ID, Err: err}}} }
	if c.broken {
		return reply(kerr.NotCoordinator)
	}
	t, ok := c.txns[r.TxnID]
	if ok && t.earlyOK(r.ProducerID, r.Epoch) {
		if r.VerifyOnly {
			return reply(kerr.ConcurrentTransactions)
		}
		// The next transaction begins while the previous one's markers are written: its
		// partitions join once the Complete* record is durable.
		if len(t.op.early) == 0 {
			t.op.earlyMs, t.op.earlyV2 = nowMs, r.V2
		}
		t.op.early = append(t.op.early, r.Partitions...)
		return reply(nil)
	}
	if err := c.checkProducer(t, ok, r.ProducerID, r.Epoch, r.KnowsFenced); err != nil {
		return reply(err)
	}
	if t.op != nil {
		return reply(kerr.ConcurrentTransactions)
	}
	if r.VerifyOnly {
		if t.Lost { // the partition is in the transaction if the producer says so: remember it
			c.add(t, r.Partitions, nowMs)
			return reply(nil)
		}
		// As Kafka's handleVerifyPartitionsInTransaction: a partition not in the transaction is
		// TRANSACTION_ABORTABLE (KIP-890; the broker turns it into INVALID_TXN_STATE for a
		// client too old to know it). Kafka answers each partition; the caller that wants to
		// know which asks of one partition at a time.
		for _, tp := range r.Partitions {
			if t.State != Ongoing || !t.Partitions[tp] {
				return reply(kerr.TransactionAbortable)
			}
		}
		return reply(nil)
	}
	switch t.State {
	case Empty, CompleteCommit, CompleteAbort, Ongoing:
	default:
		return reply(kerr.ConcurrentTransactions)
	}
	if t.State != Ongoing {
		t.V2 = r.V2
	}
	c.add(t, r.Partitions, nowMs)
	return reply(nil)
}

func (c *Coordinator) add(t *Txn, tps []TP, nowMs int64) {
	if t.State != Ongoing {
		t.abortedFrom = 0
		t.State, t.StartMs, t.Partitions = Ongoing, nowMs, map[TP]bool{}
		if t.Lost {
			t.StartMs = t.LostAtMs
		}
	}
	for _, tp := range tps {
		t.Partitions[tp] = true
	}
	t.UpdateMs = nowMs
}

// EndReq is EndTxn.
type EndReq struct {
	ID          ReqID
	TxnID       string
	ProducerID  int64
	Epoch       int16
	Commit      bool
	V2          bool // EndTxn v5+: the epoch bumps, the reply carries the new one
	KnowsFenced bool
	// FencedOnAbort: a commit turned into an abort is answered INVALID_PRODUCER_EPOCH even
	// under transaction version 2 (abortedErr).
	FencedOnAbort bool
	// NewPID allocates a producer id: the one a version-2 producer whose epoch is exhausted
	// goes on with (called only then).
	NewPID func() (int64, error)
}

// newPID allocates the producer id a rotation hands out (COORDINATOR_NOT_AVAILABLE, retriable,
// if none can be had).
func (r EndReq) newPID() (int64, error) {
	if r.NewPID == nil {
		return 0, kerr.CoordinatorNotAvailable
	}
	pid, err := r.NewPID()
	if err != nil {
		return 0, kerr.CoordinatorNotAvailable
	}
	return pid, nil
}

// EndTxn commits or aborts the open transaction.
func (c *Coordinator) EndTxn(r EndReq, nowMs int64) Effects {
	reply := func(err error) Effects { return Effects{Replies: []Reply{{ID: r.ID, Err: err}}} }
	if c.broken {
		return reply(kerr.NotCoordinator)
	}
	t, ok := c.txns[r.TxnID]
	if ok && r.Commit && t.abortedFrom != 0 && t.abortedFrom == int32(r.Epoch)+1 &&
		(r.ProducerID == t.ProducerID || t.PrevProducerID >= 0 && r.ProducerID == t.PrevProducerID) &&
		(t.State == PrepareAbort || t.State == CompleteAbort) {
		// A retry of the commit this coordinator turned into an abort (its answer lost): the
		// same answer, which the client recovers from.
		return reply(abortedErr(r.V2, r.FencedOnAbort))
	}
	if ok {
		if eff, retry := c.endRetry(t, r); retry {
			return eff
		}
	}
	if ok && t.earlyOK(r.ProducerID, r.Epoch) {
		return reply(kerr.ConcurrentTransactions) // the previous transaction is still completing
	}
	if err := c.checkProducer(t, ok, r.ProducerID, r.Epoch, r.KnowsFenced); err != nil {
		return reply(err)
	}
	if t.op != nil {
		return reply(kerr.ConcurrentTransactions)
	}
	switch t.State {
	case Ongoing:
	case CompleteCommit, CompleteAbort:
		if !t.Lost {
			if (t.State == CompleteCommit) == r.Commit && !t.V2 { // a retry of the last EndTxn (version 1)
				return Effects{Replies: []Reply{{ID: r.ID, ProducerID: t.ProducerID, Epoch: t.Epoch}}}
			}
			if r.V2 && !r.Commit { // version 2 may abort a transaction that wrote nothing
				return c.endEmpty(t, r, nowMs)
			}
			return reply(kerr.InvalidTxnState)
		}
	case Empty:
		if !t.Lost {
			if r.V2 && !r.Commit {
				return c.endEmpty(t, r, nowMs)
			}
			return reply(kerr.InvalidTxnState)
		}
	default:
		return reply(kerr.ConcurrentTransactions)
	}
	if t.Lost && t.State != Ongoing {
		t.State, t.StartMs, t.Partitions = Ongoing, t.LostAtMs, map[TP]bool{}
	}
	o := &op{commit: r.Commit, waiting: []ReqID{r.ID}, fencedOnAbort: r.FencedOnAbort}
	if r.V2 && rotates(t.Epoch) {
		pid, err := r.newPID()
		if err != nil {
			return reply(err)
		}
		o.rotate, o.rotateTo = true, pid
	}
	t.V2 = r.V2
	t.op = o
	if t.Lost {
		o.phase = phaseDiscover
		return Effects{Discover: []DiscoverReq{{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch}}}
	}
	return c.afterDiscovery(t, nowMs)
}

// endRetry answers a version-2 EndTxn that repeats one whose epoch bump already happened (its
// answer was lost, or the coordinator failed over): the request carries the epoch before the
// bump. The Prepare* record holds the bumped epoch and the Complete* record one more (one only
// for a transaction that wrote nothing), so the retry is recognized from the epochs, as Kafka
// does, and also after a reload; while the id is held, also from the epoch bumped from. While the markers are written it waits
// (CONCURRENT_TRANSACTIONS); once complete it gets the outcome, or INVALID_TXN_STATE if it asked
// for the other one (a transaction aborted after its timeout).
func (c *Coordinator) endRetry(t *Txn, r EndReq) (Effects, bool) {
	one := bumpEpoch(r.Epoch)
	two := bumpEpoch(one)
	reply := func(err error) (Effects, bool) {
		rep := Reply{ID: r.ID, Err: err}
		if err == nil {
			rep.ProducerID, rep.Epoch = t.ProducerID, t.Epoch
		}
		return Effects{Replies: []Reply{rep}}, true
	}
	if r.V2 && t.V2 && r.ProducerID >= 0 && r.ProducerID == t.PrevProducerID && rotates(r.Epoch) && t.op == nil && t.Epoch == 0 &&
		(t.State == CompleteCommit || t.State == CompleteAbort) {
		// The EndTxn that rotated the producer id (its answer lost): its outcome, and the new id.
		if (t.State == CompleteCommit) != r.Commit {
			return reply(kerr.InvalidTxnState)
		}
		return reply(nil)
	}
	if !r.V2 || !t.V2 || r.ProducerID != t.ProducerID || r.Epoch < 0 || one == r.Epoch {
		return Effects{}, false
	}
	switch t.State {
	case PrepareCommit, PrepareAbort:
		if t.Epoch == one {
			if (t.State == PrepareCommit) != r.Commit {
				return reply(kerr.InvalidTxnState)
			}
			return reply(kerr.ConcurrentTransactions)
		}
	case CompleteCommit, CompleteAbort:
		// Two bumps above the request are a transaction's retry, one an empty one's; but two
		// are also a fencing InitProducerId and an empty abort after it, which a zombie of
		// the epoch before must not pass as its retry. The completion keeps the epoch it
		// bumped from (LastEpoch) unless the id was reloaded since (not in the record; then
		// the epochs alone decide, as Kafka's retryOnEpochBump).
		if t.op == nil && (t.Epoch == two || t.Epoch == one) && (t.LastEpoch < 0 || t.LastEpoch == r.Epoch) {
			if (t.State == CompleteCommit) != r.Commit {
				return reply(kerr.InvalidTxnState)
			}
			return reply(nil)
		}
	}
	return Effects{}, false
}

// bumpEpoch is the epoch after a bump; an exhausted epoch stays (the producer id rotates at the
// next InitProducerId).
func bumpEpoch(e int16) int16 {
	if e < math.MaxInt16-1 {
		return e + 1
	}
	return e
}

// endEmpty ends (aborts) a version-2 transaction that wrote nothing: the epoch bumps.
func (c *Coordinator) endEmpty(t *Txn, r EndReq, nowMs int64) Effects {
	next := c.bumped(t)
	if next.Epoch == t.Epoch { // exhausted: the producer goes on with a new id
		pid, err := r.newPID()
		if err != nil {
			return Effects{Replies: []Reply{{ID: r.ID, Err: err}}}
		}
		next.PrevProducerID, next.ProducerID, next.Epoch, next.LastEpoch = t.ProducerID, pid, 0, -1
	}
	// V2: a retry of this abort (its answer lost) is recognized from the epochs (endRetry), also
	// as the first EndTxn after an InitProducerId.
	next.State, next.UpdateMs, next.Partitions, next.V2 = CompleteAbort, nowMs, nil, true
	t.op = &op{phase: phaseAppendComplete, waiting: []ReqID{r.ID}, reply: Reply{ProducerID: next.ProducerID, Epoch: next.Epoch}, then: next}
	return Effects{Appends: []Record{c.snapshot(next)}}
}

// bumped returns a copy of t with the next epoch (or, when exhausted, a new producer id is left
// to the next InitProducerId: the epoch stays at its maximum).
func (c *Coordinator) bumped(t *Txn) *Txn {
	next := *t
	next.Partitions, next.op = maps.Clone(t.Partitions), nil
	if t.Epoch < math.MaxInt16-1 {
		next.LastEpoch, next.Epoch = t.Epoch, t.Epoch+1
	}
	return &next
}

// afterDiscovery continues an EndTxn (or a fenced abort) once the partition set is known.
func (c *Coordinator) afterDiscovery(t *Txn, nowMs int64) Effects {
	o := t.op
	t.Lost = false
	if o.commit && len(t.Partitions) > 0 {
		o.phase = phasePrepare
		return Effects{Prepares: []PrepareReq{{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, Partitions: sortTPs(slices.Collect(maps.Keys(t.Partitions)))}}}
	}
	return c.appendPrepare(t, nowMs)
}

// appendPrepare writes PrepareCommit or PrepareAbort: the decision.
func (c *Coordinator) appendPrepare(t *Txn, nowMs int64) Effects {
	o := t.op
	next := *t
	if t.V2 || o.fence {
		// A fencing abort (a timeout, or an InitProducerId while the transaction is open)
		// keeps the epoch before its bump as the last one, whatever the client's transaction
		// version, as Kafka 4.1 ends it at the cluster's transaction version (2; only the
		// abort bumps, KAFKA-19367): the producer that asked, answered
		// CONCURRENT_TRANSACTIONS, or a version-1 producer recovering from its timed-out
		// transaction (KIP-360), retries with that epoch and is given the current one. A new
		// instance asks with no epoch and bumps again, fencing the old one.
		next = *c.bumped(t)
	} else {
		next.Partitions = maps.Clone(t.Partitions)
	}
	next.op = nil
	next.State, next.UpdateMs = PrepareAbort, nowMs
	if o.commit {
		next.State = PrepareCommit
	}
	o.phase, o.then = phaseAppendPrepare, &next
	o.nextEpoch = nextEpochOf(&next)
	o.reply = Reply{Err: o.reply.Err, ProducerID: next.ProducerID, Epoch: o.nextEpoch}
	if t.V2 && o.rotate && rotates(t.Epoch) {
		// No epoch is left above the markers': the producer goes on with a new id.
		next.NextProducerID, o.nextEpoch = o.rotateTo, 0
		o.reply.ProducerID, o.reply.Epoch = o.rotateTo, 0
	}
	return Effects{Appends: []Record{c.snapshot(&next)}}
}

// abortFenced aborts t's open transaction with an epoch bump: after a timeout, for an
// InitProducerId, or for a Lost transaction. Its partitions are discovered first if Lost.
func (c *Coordinator) abortFenced(t *Txn, nowMs int64) Effects {
	if t.State != Ongoing {
		t.State, t.StartMs, t.Partitions = Ongoing, t.LostAtMs, map[TP]bool{}
	}
	t.op = &op{fence: true, probe: t.Lost && t.lostState != Ongoing}
	if t.Lost {
		t.op.phase = phaseDiscover
		return Effects{Discover: []DiscoverReq{{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch}}}
	}
	return c.appendPrepare(t, nowMs)
}

// Discovered reports the partitions found holding an open transaction of the producer (err:
// not every node answered).
func (c *Coordinator) Discovered(id string, tps []TP, err error, nowMs int64) Effects {
	t, ok := c.txns[id]
	if !ok || t.op == nil || t.op.phase != phaseDiscover {
		return Effects{}
	}
	for _, tp := range tps {
		t.Partitions[tp] = true
	}
	if err == nil && t.op.probe && len(t.Partitions) == 0 {
		// Nothing was open after all: the id goes back to its state, and its epoch stands.
		waiting := t.op.waiting
		t.State, t.Partitions, t.Lost, t.op = t.lostState, nil, false, nil
		return c.answer(waiting, Reply{Err: kerr.ConcurrentTransactions})
	}
	if err != nil {
		if t.op.commit { // a partition may be missing: the commit cannot be atomic
			t.op.commit, t.op.fence = false, true
			t.op.reply.Err = abortedErr(t.V2, t.op.fencedOnAbort)
			t.abortedFrom = int32(t.Epoch) + 1
		} else {
			// An abort can go on: a partition missed now aborts its part when it asks (§3.4).
			// It bumps the epoch (a missed partition's records must not join the producer's
			// next transaction). A version-1 client keeps its epoch after its own abort, so
			// it is told INVALID_PRODUCER_EPOCH and re-initializes with the epoch it had, as
			// after a commit turned into an abort (KIP-588; franz-go does); answered success,
			// its next AddPartitionsToTxn was fenced.
			if !t.op.fence && !t.V2 {
				t.op.reply.Err = kerr.InvalidProducerEpoch
				t.abortedFrom = int32(t.Epoch) + 1
			}
			t.op.fence = true
		}
	}
	return c.afterDiscovery(t, nowMs)
}

// Prepared reports the prepare round: failed lists the partitions that could not vouch for
// every record of the transaction; it is then aborted.
func (c *Coordinator) Prepared(id string, failed []TP, nowMs int64) Effects {
	t, ok := c.txns[id]
	if !ok || t.op == nil || t.op.phase != phasePrepare {
		return Effects{}
	}
	if len(failed) > 0 {
		t.op.commit, t.op.fence = false, true
		t.op.reply.Err = abortedErr(t.V2, t.op.fencedOnAbort)
		t.abortedFrom = int32(t.Epoch) + 1
	}
	return c.appendPrepare(t, nowMs)
}

// abortedErr is what a client is told when the coordinator turned its commit into an abort
// (with an epoch bump): version 2 clients TRANSACTION_ABORTABLE (they abort and go on with the
// epoch the abort gave them), version 1 clients INVALID_PRODUCER_EPOCH, as are clients that
// asked for it (fenced): the Java client, since Kafka Streams 4.3 takes a
// TransactionAbortableException from a commit as fatal (its stream thread dies) but recovers
// from a ProducerFencedException (it re-creates its producer); a plain Java producer must be
// re-created after it, as after any fencing (docs/transactions.md §3.3).
func abortedErr(v2, fenced bool) error {
	if v2 && !fenced {
		return kerr.TransactionAbortable
	}
	return kerr.InvalidProducerEpoch
}

// Appended reports the durable append (err nil) or the failure of a record the transaction's
// operation asked for.
func (c *Coordinator) Appended(id string, err error, nowMs int64) Effects {
	t, ok := c.txns[id]
	if !ok || t.op == nil {
		return Effects{}
	}
	o := t.op
	if err != nil {
		// Whether the record became durable is not known: the coordinator stops (every request
		// gets NOT_COORDINATOR) until the driver reloads it from the partition, which finds the
		// truth, and completes a decision that did become durable.
		c.broken = true
		t.op = nil
		return c.answer(o.waiting, Reply{Err: kerr.NotCoordinator})
	}
	switch o.phase {
	case phaseAppendInit:
		c.install(t, o.then)
		t.op = nil
		return c.answer(o.waiting, o.reply)
	case phaseAppendPrepare:
		c.install(t, o.then)
		eff := c.answer(o.waiting, o.reply)
		o.waiting = nil
		eff.merge(c.writeMarkers(t, o))
		return eff
	case phaseAppendComplete:
		c.install(t, o.then)
		t.op = nil
		if len(o.early) > 0 {
			t.V2 = o.earlyV2
			c.add(t, o.early, o.earlyMs)
		}
		return c.answer(o.waiting, o.reply)
	case phaseAppendDelete:
		delete(c.txns, id)
		return Effects{}
	}
	return Effects{}
}

func (c *Coordinator) install(t *Txn, next *Txn) {
	op := t.op
	*t = *next
	t.op = op
}

func (c *Coordinator) answer(ids []ReqID, r Reply) Effects {
	var eff Effects
	for _, id := range ids {
		r.ID = id
		eff.Replies = append(eff.Replies, r)
	}
	return eff
}

// writeMarkers starts the marker round of a prepared transaction (o nil: one loaded as prepared).
func (c *Coordinator) writeMarkers(t *Txn, o *op) Effects {
	if o == nil {
		o = &op{commit: t.State == PrepareCommit, nextEpoch: nextEpochOf(t)}
		if t.NextProducerID >= 0 {
			o.nextEpoch = 0
		}
	}
	o.phase, t.op = phaseMarkers, o
	if len(t.Partitions) == 0 {
		return c.MarkersWritten(t.ID, 0)
	}
	return Effects{Markers: []MarkerReq{{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: t.State == PrepareCommit,
		CoordinatorEpoch: c.epoch, Partitions: sortTPs(slices.Collect(maps.Keys(t.Partitions)))}}}
}

// MarkersWritten reports that every marker of the round is written (the driver retries each
// until it is, or its partition no longer exists), at nowMs.
func (c *Coordinator) MarkersWritten(id string, nowMs int64) Effects {
	t, ok := c.txns[id]
	if !ok || t.op == nil || t.op.phase != phaseMarkers {
		return Effects{}
	}
	next := *t
	next.Partitions, next.op = nil, nil
	next.State, next.UpdateMs = CompleteAbort, nowMs
	if t.State == PrepareCommit {
		next.State = CompleteCommit
	}
	o := t.op
	next.Epoch = max(next.Epoch, o.nextEpoch)
	if t.NextProducerID >= 0 { // the producer goes on with its new id
		next.PrevProducerID, next.ProducerID, next.Epoch, next.LastEpoch, next.NextProducerID = t.ProducerID, t.NextProducerID, 0, -1, -1
	}
	t.op = &op{phase: phaseAppendComplete, then: &next, nextEpoch: o.nextEpoch, early: o.early, earlyMs: o.earlyMs, earlyV2: o.earlyV2}
	return Effects{Appends: []Record{c.snapshot(&next)}}
}

// Tick runs timeouts at nowMs: an open transaction older than its timeout is aborted with an
// epoch bump; a Lost one is discovered and aborted; an id idle past the expiration is deleted.
func (c *Coordinator) Tick(nowMs int64) Effects {
	var eff Effects
	if c.broken {
		return eff
	}
	for _, id := range slices.Sorted(maps.Keys(c.txns)) {
		t := c.txns[id]
		if t.op != nil {
			continue
		}
		switch {
		case t.State == Ongoing && nowMs-t.StartMs > int64(t.TimeoutMs):
			eff.merge(c.abortFenced(t, nowMs))
		case t.Lost && nowMs-t.LostAtMs > int64(t.TimeoutMs):
			eff.merge(c.abortFenced(t, nowMs))
		case !t.Lost && (t.State == Empty || t.State == CompleteCommit || t.State == CompleteAbort) &&
			nowMs-t.UpdateMs > c.cfg.ExpirationMs:
			t.op = &op{phase: phaseAppendDelete}
			eff.Appends = append(eff.Appends, Record{ID: id})
		}
	}
	return eff
}

// Check answers a partition leader that holds an open transaction of (producer id, epoch) and
// asks whether to keep waiting (true) or to abort it itself (false): false only when no
// transaction this coordinator knows, open or deciding, can include the partition.
func (c *Coordinator) Check(id string, pid int64, epoch int16, tp TP) bool {
	if c.broken {
		return true // what is durable is not known until the reload
	}
	t, ok := c.txns[id]
	if ok && t.op != nil && t.NextProducerID >= 0 && pid == t.NextProducerID {
		return true // the early next transaction under the rotated id: it joins once Complete* is durable
	}
	if !ok || t.ProducerID != pid {
		return false
	}
	if t.op != nil {
		return true // deciding: the in-memory state is not yet the durable one
	}
	if t.Lost && epoch == t.Epoch {
		return true // it may be open: the coordinator learns it when the transaction ends
	}
	if t.Partitions[tp] {
		switch {
		case t.State == Ongoing && epoch == t.Epoch:
			return true
		case t.State == PrepareCommit || t.State == PrepareAbort:
			return epoch >= t.Epoch-1 // markers are coming (with a bumped epoch, data has the one before)
		}
	}
	return false
}

// String describes a transaction, for logs.
func (t *Txn) String() string {
	return fmt.Sprintf("%s(pid %d epoch %d %s, %d partitions)", t.ID, t.ProducerID, t.Epoch, t.State, len(t.Partitions))
}
