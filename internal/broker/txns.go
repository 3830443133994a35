package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/txncoord"
)

// TxnStateTopic is the internal compacted topic holding the transaction coordinators' state.
const TxnStateTopic = "__transaction_state"

// Timings of the transaction driver.
const (
	txnTick = 100 * time.Millisecond
	// txnPrepareRetry: how soon a prepare that found no leader to answer it asks again, and
	// txnPrepareRetryFor for how long (a partition without a majority aborts the commit after
	// it, well within clients' request timeouts).
	txnPrepareRetry    = 100 * time.Millisecond
	txnPrepareRetryFor = 5 * time.Second
	// txnDiscoverRetryFor: how long a discovery asks again for partitions no leader has
	// answered for (a node stopped: its session expires in 1.5 s and its partitions elect new
	// leaders; a node restarting), and txnDiscoverCall the time a node has to answer once.
	txnDiscoverRetryFor = 10 * time.Second
	txnDiscoverCall     = 2 * time.Second
	// txnPartitionCheck: a partition asks its coordinator about an open transaction it has held
	// this long without news, and aborts it if nothing can commit it (docs/transactions.md §3.4).
	txnPartitionCheck = 10 * time.Second
	// leadershipSkew is the margin by which a partition's leadership must predate a transaction
	// for a prepare to vouch for records it no longer holds (clocks of two nodes are compared).
	leadershipSkew = 2 * time.Second
)

// skew is the margin prepareLocal allows between the coordinator's clock and this node's.
func skew(sameClock bool) time.Duration {
	if sameClock {
		return 0
	}
	return leadershipSkew
}

// txns drives the transaction coordinators (package txncoord, which does no I/O) of the
// __transaction_state partitions this node leads, as groups does for consumer groups: it loads
// a shard when it becomes leader, feeds it requests and ticks, and carries out its effects:
// appends to the partition (waiting for the quorum commit), prepare and discovery rounds over
// the partition leaders, and marker rounds, retried until written. It also serves the partition
// side of those rounds for the partitions this node leads.
//
// Lock order: txns.mu → a replica's lock.
type txns struct {
	b          *Broker
	partitions int32
	cfg        txncoord.Config

	mu      sync.Mutex
	shards  map[int32]*txnShard
	nextID  txncoord.ReqID
	waiting map[txncoord.ReqID]txnWaiter
	// ids remembers the transactional id of producer ids seen in transactional produce, for the
	// partition's checks with the coordinator.
	ids map[int64]string
	// addedEpochs remembers, per transactional id coordinated here, the leadership (per this
	// node's image) of each partition when the open transaction added it: a prepare compares it
	// with the partition's current one (prepareLocal). Dropped when the transaction completes.
	addedEpochs map[string]map[txncoord.TP]leadership
	// earlyAdded holds, while a transactional id's marker round runs (its id a key), the
	// leaderships of partitions its next transaction adds meanwhile (an early transaction); they
	// become its addedEpochs once the round has dropped the completed transaction's.
	earlyAdded map[string]map[txncoord.TP]leadership
	// progress is closed (and replaced) whenever an operation of a transaction moves on, for
	// adds waiting out CONCURRENT_TRANSACTIONS.
	progress chan struct{}

	done chan struct{}
}

type txnShard struct {
	index int32
	p     *topics.Partition
	epoch int32
	c     *txncoord.Coordinator
}

type txnWaiter struct {
	ch    chan txncoord.Reply
	shard int32
}

func newTxns(b *Broker) *txns {
	d := &txns{b: b, partitions: b.cfg.TxnStatePartitions, cfg: b.cfg.Txns, shards: map[int32]*txnShard{},
		waiting: map[txncoord.ReqID]txnWaiter{}, ids: map[int64]string{}, addedEpochs: map[string]map[txncoord.TP]leadership{},
		earlyAdded: map[string]map[txncoord.TP]leadership{}, progress: make(chan struct{}), done: make(chan struct{})}
	d.registerRPCs()
	return d
}

// partitionFor is the __transaction_state partition of a transactional id, as Kafka computes it.
func (d *txns) partitionFor(id string) int32 {
	return javaHashPartition(id, d.b.coordinatorPartitions(TxnStateTopic, d.partitions))
}

// ensureTopic creates __transaction_state if it does not exist yet, as Kafka does on the first
// transactional FindCoordinator.
func (d *txns) ensureTopic(ctx context.Context) *adminError {
	return d.b.ensureCoordinatorTopic(ctx, TxnStateTopic, d.partitions, d.b.cfg.TxnStateReplicationFactor)
}

// coordinatorNode is the node leading a transactional id's partition, or -1.
func (d *txns) coordinatorNode(id string) int32 {
	t, ok := d.b.topics.Get(TxnStateTopic)
	if !ok {
		return -1
	}
	p := d.b.imagePartition(t.ID, d.partitionFor(id))
	if p == nil {
		return -1
	}
	return p.Leader
}

// config is the coordinators' configuration: the broker's, with the dynamic broker configs
// transaction.max.timeout.ms and transactional.id.expiration.ms where they are set.
func (d *txns) config() txncoord.Config {
	cfg := d.cfg
	if v, src, _ := d.b.topics.BrokerConfig("transaction.max.timeout.ms"); src != topics.SourceDefault {
		if ms, err := strconv.ParseInt(v, 10, 32); err == nil {
			cfg.MaxTimeoutMs = int32(ms)
		}
	}
	if v, src, _ := d.b.topics.BrokerConfig("transactional.id.expiration.ms"); src != topics.SourceDefault {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			cfg.ExpirationMs = ms
		}
	}
	return cfg
}

// load replays one __transaction_state partition into a new coordinator.
func (d *txns) load(p *topics.Partition, epoch int32) (*txncoord.Coordinator, error) {
	c := txncoord.New(d.config(), epoch)
	n := 0
	err := forEachRecord(p, func(key, value []byte) {
		r, err := txncoord.Decode(key, value)
		if err != nil {
			d.b.logger.Warn("broker: skipping a bad __transaction_state record", "partition", p.Index, "err", err)
			return
		}
		c.Load(r)
		n++
	})
	if err != nil {
		return nil, err
	}
	d.b.logger.Info("loaded transaction coordinator", "partition", p.Index, "epoch", epoch, "ids", len(c.IDs()), "records", n)
	return c, nil
}

// run follows leadership of the __transaction_state partitions, ticks the coordinators, and
// lets led partitions check their stale open transactions, until the broker stops.
func (d *txns) run(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(txnTick)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-ctx.Done():
			d.mu.Lock()
			for idx := range d.shards {
				d.dropLocked(idx)
			}
			d.mu.Unlock()
			return
		case <-tick.C:
		}
		d.refresh()
		now := time.Now().UnixMilli()
		cfg := d.config()
		d.mu.Lock()
		for _, sh := range d.shards {
			sh.c.SetConfig(cfg)
			d.executeLocked(sh, sh.c.Tick(now))
		}
		d.mu.Unlock()
		if time.Since(lastCheck) >= txnPartitionCheck/2 {
			lastCheck = time.Now()
			go d.checkOpenTransactions(ctx)
		}
	}
}

func (d *txns) refresh() {
	t, ok := d.b.topics.Get(TxnStateTopic)
	led := map[int32]bool{}
	if ok {
		for _, p := range t.Partitions {
			if p.Replica == nil {
				continue
			}
			epoch, ready, leading := p.Replica.Leading()
			if !leading || !ready {
				continue
			}
			led[p.Index] = true
			d.mu.Lock()
			sh := d.shards[p.Index]
			d.mu.Unlock()
			if sh != nil && sh.p == p && sh.epoch == epoch && !sh.c.Broken() {
				continue
			}
			c, err := d.load(p, epoch)
			if err != nil {
				d.b.logger.Error("broker: loading transaction coordinator", "partition", p.Index, "err", err)
				continue
			}
			d.mu.Lock()
			if e, _, still := p.Replica.Leading(); still && e == epoch {
				d.dropLocked(p.Index)
				sh := &txnShard{index: p.Index, p: p, epoch: epoch, c: c}
				d.shards[p.Index] = sh
				d.reportLocked(sh, c.Loaded(time.Now().UnixMilli()))
			}
			d.mu.Unlock()
		}
	}
	d.mu.Lock()
	for idx := range d.shards {
		if !led[idx] {
			d.dropLocked(idx)
		}
	}
	d.mu.Unlock()
}

// dropLocked forgets a shard; its waiting requests get NOT_COORDINATOR.
func (d *txns) dropLocked(idx int32) {
	if _, ok := d.shards[idx]; !ok {
		return
	}
	delete(d.shards, idx)
	for id, w := range d.waiting {
		if w.shard == idx {
			close(w.ch)
			delete(d.waiting, id)
		}
	}
	for id := range d.addedEpochs {
		if d.partitionFor(id) == idx {
			delete(d.addedEpochs, id)
		}
	}
	for id := range d.earlyAdded {
		if d.partitionFor(id) == idx {
			delete(d.earlyAdded, id)
		}
	}
}

// leadership names a partition's leadership: its leader epoch and the leader's registration
// (a leader that restarts quickly may keep its epoch, but not its incarnation), and, for each
// of its replicas, the registration since which it lost no write (controller.Node.LossSince).
type leadership struct {
	Epoch       int32  `json:"epoch"`
	Incarnation uint64 `json:"incarnation"`
	// Replicas maps each replica of the partition to its LossSince (nil: not noted, or the
	// partition was being moved or uncleanly elected), and ReplicasSince is the image's index of
	// the last change of the partition's replicas (an unclean election and the move back after
	// it end with the same replicas, each in its registration, but a leader that may lack what
	// the others had acknowledged).
	Replicas      map[int32]uint64 `json:"replicas,omitempty"`
	ReplicasSince uint64           `json:"replicas_since,omitempty"`
}

// replicaIncarnations returns, for each replica of p in img, the registration since which it
// lost no write (a restart on the same machine boot loses none), or nil if p is
// being moved, was asked for an unclean election, names a node img does not know or does not
// record when its replicas last changed (an image of an older version).
func replicaIncarnations(img *controller.Image, p *controller.Partition) map[int32]uint64 {
	if len(p.Target) > 0 || p.Unclean || p.ReplicasSince == 0 {
		return nil
	}
	m := make(map[int32]uint64, len(p.Replicas))
	for _, r := range p.Replicas {
		n := img.Nodes[r]
		if n == nil {
			return nil
		}
		m[r] = n.LossSince()
	}
	return m
}

// noReplicaRestarted reports whether p's replicas in img are those of added, none registered
// since added was noted in a way that may have lost writes: then none lost what it held since
// (a node loses unsynced writes only with its machine's crash or a failed log, and then
// registers anew without keeping its writes, see cluster's boot mark), and an election since
// chose a log holding every record a quorum had acknowledged (docs/transactions.md §3.3).
func noReplicaRestarted(img *controller.Image, p *controller.Partition, added *leadership) bool {
	if added == nil || added.Replicas == nil || p == nil {
		return false
	}
	now := replicaIncarnations(img, p)
	if now == nil || len(now) != len(added.Replicas) || p.ReplicasSince != added.ReplicasSince {
		return false
	}
	for r, inc := range now {
		if was, ok := added.Replicas[r]; !ok || was != inc {
			return false
		}
	}
	return true
}

// noRestartSinceEpoch reports whether none of p's replicas in img registered anew in a way
// that may have lost writes (controller.Node.LossSince) since p's leader epoch e began, and p's replicas are those they were then (not being moved, no unclean
// election since): then none lost what it held of records written in epoch e or later, and
// every election since chose a log holding every record a quorum had acknowledged
// (docs/transactions.md §3.3). It needs no note of the coordinator's (one that took over since
// has none), only the image's record of when each recent epoch began.
func noRestartSinceEpoch(img *controller.Image, p *controller.Partition, e int32) bool {
	if p == nil || len(p.Target) > 0 || p.Unclean || p.ReplicasSince == 0 {
		return false
	}
	began, ok := p.EpochStartIndex(e)
	if !ok || p.ReplicasSince > began {
		return false
	}
	for _, r := range p.Replicas {
		if n := img.Nodes[r]; n == nil || n.LossSince() >= began {
			return false
		}
	}
	return true
}

// noteAdded records the leadership, per this node's image, of the local partitions a
// transaction has just added (those it had not added before). Its records there are all
// written after the add, so under that leadership or a later one (the image may trail).
func (d *txns) noteAdded(id string, tps []txncoord.TP) {
	img := d.b.cl.Image()
	d.mu.Lock()
	defer d.mu.Unlock()
	notes := d.addedEpochs
	if _, marking := d.earlyAdded[id]; marking {
		notes = d.earlyAdded // the next transaction's, begun during the marker round
	}
	m := notes[id]
	for _, tp := range tps {
		if _, ok := m[tp]; ok {
			continue
		}
		t, ok := d.b.topics.Get(tp.Topic)
		if !ok || isObjectTopic(t) {
			continue
		}
		p := d.b.imagePartition(t.ID, tp.Partition)
		if p == nil || p.Leader < 0 || img.Nodes[p.Leader] == nil {
			continue
		}
		if m == nil {
			m = map[txncoord.TP]leadership{}
			notes[id] = m
		}
		m[tp] = leadership{Epoch: p.LeaderEpoch, Incarnation: img.Nodes[p.Leader].Incarnation,
			Replicas: replicaIncarnations(img, p), ReplicasSince: p.ReplicasSince}
	}
}

// shardForLocked returns the shard of a transactional id, or the error for a client asking a
// node that does not coordinate it.
func (d *txns) shardForLocked(id string) (*txnShard, *kerr.Error) {
	idx := d.partitionFor(id)
	if sh := d.shards[idx]; sh != nil && !sh.c.Broken() {
		return sh, nil
	}
	if t, ok := d.b.topics.Get(TxnStateTopic); ok && int(idx) < len(t.Partitions) {
		if r := t.Partitions[idx].Replica; r != nil {
			if _, _, leading := r.Leading(); leading {
				return nil, kerr.CoordinatorLoadInProgress
			}
		}
	}
	return nil, kerr.NotCoordinator
}

// current reports whether sh is still the shard of its partition (a callback of an older
// shard's I/O is dropped).
func (d *txns) currentLocked(sh *txnShard) bool { return d.shards[sh.index] == sh }

// call runs a coordinator request for a transactional id and waits for its reply.
func (d *txns) call(ctx context.Context, id string, f func(c *txncoord.Coordinator, req txncoord.ReqID, nowMs int64) txncoord.Effects) txncoord.Reply {
	r, _ := d.callProgress(ctx, id, f)
	return r
}

// callProgress is call, also returning the progress channel as it was right after the request
// ran: it closes at the next change of any transaction's operation.
func (d *txns) callProgress(ctx context.Context, id string, f func(c *txncoord.Coordinator, req txncoord.ReqID, nowMs int64) txncoord.Effects) (txncoord.Reply, <-chan struct{}) {
	d.mu.Lock()
	sh, code := d.shardForLocked(id)
	if sh == nil {
		progress := d.progress
		d.mu.Unlock()
		return txncoord.Reply{Err: code}, progress
	}
	d.nextID++
	req := d.nextID
	ch := make(chan txncoord.Reply, 1)
	d.waiting[req] = txnWaiter{ch, sh.index}
	d.executeLocked(sh, f(sh.c, req, time.Now().UnixMilli()))
	progress := d.progress
	d.mu.Unlock()
	select {
	case r, ok := <-ch:
		if !ok {
			return txncoord.Reply{Err: kerr.NotCoordinator}, progress
		}
		return r, progress
	case <-ctx.Done():
		d.mu.Lock()
		delete(d.waiting, req)
		d.mu.Unlock()
		return txncoord.Reply{Err: kerr.RequestTimedOut}, progress
	}
}

// executeLocked carries out a shard's effects. Appends happen now, in order, under mu (so the
// log has them in the order the coordinator decided them); the waits and the rounds run on
// their own goroutines and report back under mu.
func (d *txns) executeLocked(sh *txnShard, eff txncoord.Effects) {
	for _, r := range eff.Replies {
		if w, ok := d.waiting[r.ID]; ok {
			w.ch <- r
			delete(d.waiting, r.ID)
		}
	}
	for _, rec := range eff.Appends {
		d.appendLocked(sh, rec)
	}
	for _, p := range eff.Prepares {
		go d.prepareRound(sh, p)
	}
	for _, q := range eff.Discover {
		go d.discoverRound(sh, q)
	}
	for _, m := range eff.Markers {
		if h := d.b.cfg.Hooks.BeforeMarkers; h != nil {
			h(m.ID, m.Commit)
		}
		// Under mu, before the replies just given can bring the next transaction's adds: a
		// note taken before the round began was the completed transaction's, and went with it.
		d.startMarkerNotesLocked(m.ID)
		go d.markerRound(sh, m)
	}
}

// reportLocked feeds the outcome of an operation's I/O back to its shard's coordinator, and
// wakes the requests waiting out CONCURRENT_TRANSACTIONS (callWaitingOut): an operation moved.
func (d *txns) reportLocked(sh *txnShard, eff txncoord.Effects) {
	close(d.progress)
	d.progress = make(chan struct{})
	d.executeLocked(sh, eff)
}

// appendLocked appends a record to the shard's partition and reports its commit.
func (d *txns) appendLocked(sh *txnShard, rec txncoord.Record) {
	key, value := txncoord.Encode(rec)
	now := time.Now().UnixMilli()
	body := batch.AppendRecord(nil, 0, 0, key, value, 0, nil)
	b := batch.AppendBatch(nil, batch.Header{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, RecordCount: 1}, body)
	res, epoch, err := sh.p.Replica.Append(b)
	if err != nil {
		d.reportLocked(sh, sh.c.Appended(rec.ID, err, now))
		return
	}
	sh.p.NotifyAppend()
	sh.p.Log.SyncSoon()
	go func() {
		ctx, cancel := context.WithTimeout(d.b.ctx, 30*time.Second)
		defer cancel()
		err := sh.p.Replica.WaitCommitted(ctx, epoch, res.Last+1)
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.currentLocked(sh) {
			d.reportLocked(sh, sh.c.Appended(rec.ID, err, time.Now().UnixMilli()))
		}
	}()
}

// The partition side of the rounds, between nodes (cluster RPCs, JSON).

type txnPrepareReq struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	ProducerID int64  `json:"producer_id"`
	Epoch      int16  `json:"epoch"`
	StartMs    int64  `json:"start_ms"` // when the transaction began at the coordinator
	// Added is the partition's leadership when the transaction added it, if the coordinator
	// knows it (noteAdded).
	Added *leadership `json:"added,omitempty"`
}

type txnCodeResp struct {
	Code int16  `json:"code"`
	Msg  string `json:"msg,omitempty"`
}

type txnDiscoverReq struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

type txnDiscoverResp struct {
	Partitions []txncoord.TP `json:"partitions"`
	// Led: every partition the node leads, with its leader epoch; it answers for those (the
	// coordinator takes an answer in the epoch its image names, or a later one).
	Led []txnLed `json:"led"`
}

// txnLed is a partition a node leads, in a leader epoch.
type txnLed struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Epoch     int32  `json:"epoch"`
}

type txnMarkerReq struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	Epoch            int16  `json:"epoch"`
	Commit           bool   `json:"commit"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
}

type txnAddReq struct {
	TxnID       string      `json:"txn_id"`
	ProducerID  int64       `json:"producer_id"`
	Epoch       int16       `json:"epoch"`
	TP          txncoord.TP `json:"tp"`
	VerifyOnly  bool        `json:"verify_only"`
	V2          bool        `json:"v2"`
	KnowsFenced bool        `json:"knows_fenced"`
	// KnowsAbortable: the asking node turns TRANSACTION_ABORTABLE into the code its client's
	// version knows (produceTxnError). A node of an earlier version, which does not, passes the
	// coordinator's code on as it is: it is told INVALID_TXN_STATE, as before.
	KnowsAbortable bool `json:"knows_abortable,omitempty"`
}

type txnCheckReq struct {
	TxnID      string      `json:"txn_id"` // "" if the partition does not know it: any coordinator holding the producer id answers
	ProducerID int64       `json:"producer_id"`
	Epoch      int16       `json:"epoch"`
	TP         txncoord.TP `json:"tp"`
}

type txnCheckResp struct {
	Known bool `json:"known"` // a coordinator here holds the id (or the producer id)
	Wait  bool `json:"wait"`  // keep the transaction open
	// Loaded lists the __transaction_state partitions whose coordinators are loaded here (asked
	// without a transactional id): a producer no coordinator knows may be aborted only if every
	// partition's coordinator was asked.
	Loaded []int32 `json:"loaded,omitempty"`
}

func codeOf(err error) txnCodeResp {
	if err == nil {
		return txnCodeResp{}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return txnCodeResp{Code: ke.Code, Msg: err.Error()}
	}
	return txnCodeResp{Code: errorCode(err), Msg: err.Error()}
}

func (r txnCodeResp) err() error {
	if r.Code == 0 {
		return nil
	}
	if e := kerr.ErrorForCode(r.Code); e != nil {
		// Msg is the answering node's error, which begins with e's own text: say it once.
		msg := strings.TrimPrefix(r.Msg, e.Error())
		if msg = strings.TrimPrefix(msg, ": "); msg == "" {
			return e
		}
		return fmt.Errorf("%w: %s", e, msg)
	}
	return errors.New(r.Msg)
}

func (d *txns) registerRPCs() {
	handle := func(method string, h func(ctx context.Context, payload []byte) (any, error)) {
		d.b.cl.Handle(method, func(ctx context.Context, _ int32, payload []byte) (any, error) { return h(ctx, payload) })
	}
	d.b.cl.Handle("txn.prepare", func(ctx context.Context, from int32, payload []byte) (any, error) {
		var req txnPrepareReq
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return codeOf(d.prepareLocal(ctx, req, from == d.b.cfg.NodeID)), nil
	})
	handle("txn.discover", func(_ context.Context, payload []byte) (any, error) {
		var req txnDiscoverReq
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return d.discoverLocal(req), nil
	})
	handle("txn.marker", func(ctx context.Context, payload []byte) (any, error) {
		var req txnMarkerReq
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return codeOf(d.markerLocal(ctx, req)), nil
	})
	handle("txn.add", func(ctx context.Context, payload []byte) (any, error) {
		var req txnAddReq
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		err := d.addLocal(ctx, req)
		if errors.Is(err, kerr.TransactionAbortable) && !req.KnowsAbortable {
			err = kerr.InvalidTxnState
		}
		return codeOf(err), nil
	})
	handle("txn.check", func(_ context.Context, payload []byte) (any, error) {
		var req txnCheckReq
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return d.checkLocal(req), nil
	})
}

// ledPartition returns a partition this node leads, or the error for it.
func (d *txns) ledPartition(topic string, index int32) (*topics.Partition, error) {
	t, ok := d.b.topics.Get(topic)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition
	}
	return d.b.leader(t, index, -1)
}

// prepareLocal makes a transaction's records on a partition this node leads quorum-durable, if
// it can vouch for all of them (docs/transactions.md §3.3): its open transaction of the producer
// began in the current leader epoch, or it holds none and the leadership (epoch and this node's
// incarnation) is the one the partition had when the transaction added it (every record of the
// transaction here would be of this leadership), or, when the coordinator does not know that,
// this node has led since before the transaction began (a new leader might have lost records
// the old one took). The coordinator's clock set the transaction's start: on another node, the
// leadership must predate it by leadershipSkew; on this one (sameClock), just predate it.
func (d *txns) prepareLocal(ctx context.Context, req txnPrepareReq, sameClock bool) error {
	t, ok := d.b.topics.Get(req.Topic)
	if ok && isObjectTopic(t) {
		return d.prepareObject(t, req)
	}
	p, err := d.ledPartition(req.Topic, req.Partition)
	if err != nil {
		return err
	}
	epoch, ready, leading := p.Replica.Leading()
	if !leading || !ready {
		return replica.ErrNotLeader
	}
	here := prepareState{Epoch: epoch, Incarnation: d.b.cl.Incarnation(), LeadingSinceMs: p.Replica.LeadingSince().UnixMilli()}
	img := d.b.cl.Image()
	var ip *controller.Partition
	if ok {
		_, ip, _ = img.Partition(t.ID, req.Partition)
	}
	here.NoReplicaRestarted = noReplicaRestarted(img, ip, req.Added)
	_, here.BeganIn, here.ProducerEpoch, here.Open = p.Log.OpenTransaction(req.ProducerID)
	if here.Open {
		// From the epoch of the transaction's first record still in this log, or the one it
		// added the partition in if the coordinator noted it: a first record lost with its
		// holders (and a later one accepted under a new leader) would move the former past it.
		from := here.BeganIn
		if req.Added != nil && req.Added.Epoch < from {
			from = req.Added.Epoch
		}
		here.NoRestartSinceBegan = noRestartSinceEpoch(img, ip, from)
	}
	if err := prepareVerdict(req, here, skew(sameClock)); err != nil {
		return err
	}
	end := p.Log.EndOffset()
	p.Log.SyncSoon()
	return p.Replica.WaitDurable(ctx, epoch, end)
}

// prepareState is what prepareVerdict needs to know of a partition this node leads.
type prepareState struct {
	Epoch          int32  // the partition's leader epoch now
	Incarnation    uint64 // this node's registration now
	LeadingSinceMs int64  // when this node became the partition's leader
	// The producer's open transaction on the partition, if it has one.
	Open          bool
	BeganIn       int32 // the leader epoch its first record was written in
	ProducerEpoch int16
	// NoReplicaRestarted: the partition's replicas are those it had when the transaction added
	// it, none registered anew since in a way that may have lost writes (noReplicaRestarted).
	NoReplicaRestarted bool
	// NoRestartSinceBegan: no replica registered anew in a way that may have lost writes, and
	// the replicas did not change, since
	// the leader epoch the open transaction began in (noRestartSinceEpoch).
	NoRestartSinceBegan bool
}

// errCannotVouch is a partition leader's verdict that it cannot vouch for every record of a
// transaction on its partition (prepareVerdict): the transaction must be aborted.
var errCannotVouch = kerr.TransactionAbortable

// prepareVerdict is prepareLocal's decision: nil if this leader can vouch for every record of
// the transaction on the partition, or why not.
func prepareVerdict(req txnPrepareReq, s prepareState, skew time.Duration) error {
	switch {
	case s.Open && s.ProducerEpoch != req.Epoch:
		return fmt.Errorf("%w: the partition's open transaction is of epoch %d, not %d", kerr.InvalidProducerEpoch, s.ProducerEpoch, req.Epoch)
	case s.NoReplicaRestarted, s.Open && s.NoRestartSinceBegan:
		// Whatever leaders came and went, no replica lost an acknowledged record, and this
		// leader's log holds them all: an open transaction is whole, and none open means the
		// producer wrote nothing here that was acknowledged.
		return nil
	case s.Open && s.BeganIn != s.Epoch:
		return fmt.Errorf("%w: the transaction began in leader epoch %d, the partition is now in %d, and a replica restarted or the replicas changed", errCannotVouch, s.BeganIn, s.Epoch)
	case s.Open && req.Added != nil && req.Added.Epoch == s.Epoch && req.Added.Incarnation != s.Incarnation:
		// The leader of the epoch the partition joined in restarted without a new epoch:
		// unsynced records of the transaction may be gone, though some are there.
		return fmt.Errorf("%w: the partition's leader restarted since it joined the transaction", errCannotVouch)
	case !s.Open && req.Added != nil && (req.Added.Epoch != s.Epoch || req.Added.Incarnation != s.Incarnation):
		return fmt.Errorf("%w: the partition was added to the transaction under leader epoch %d of incarnation %d, it is now under %d of %d",
			errCannotVouch, req.Added.Epoch, req.Added.Incarnation, s.Epoch, s.Incarnation)
	case !s.Open && req.Added == nil && s.LeadingSinceMs > req.StartMs-skew.Milliseconds():
		return fmt.Errorf("%w: the partition changed leader since the transaction began", errCannotVouch)
	}
	return nil
}

// discoverLocal lists the partitions this node leads (it answers for them) and, among them,
// those that hold an open transaction of the producer at epoch. A leader not yet ready holds
// every record its election found acknowledged: it answers too.
func (d *txns) discoverLocal(req txnDiscoverReq) txnDiscoverResp {
	resp := txnDiscoverResp{Led: []txnLed{}}
	for _, t := range d.b.topics.List() {
		for _, p := range t.Partitions {
			if p.Replica == nil {
				continue
			}
			epoch, _, leading := p.Replica.Leading()
			if !leading {
				continue
			}
			resp.Led = append(resp.Led, txnLed{Topic: t.Name, Partition: p.Index, Epoch: epoch})
			if _, _, e, ok := p.Log.OpenTransaction(req.ProducerID); ok && e == req.Epoch {
				resp.Partitions = append(resp.Partitions, txncoord.TP{Topic: t.Name, Partition: p.Index})
			}
		}
	}
	return resp
}

// markerLocal is the partition side of the coordinator's marker round: writeMarker, where a
// marker refused for an older producer or coordinator epoch is done (a newer epoch or
// coordinator already wrote past it). A topic this node does not know is answered as such: the
// coordinator tells a deleted topic (it needs no marker) from a leader that has just restarted
// and not loaded its topics yet (gone), whose marker must still be written.
func (d *txns) markerLocal(ctx context.Context, req txnMarkerReq) error {
	err := d.writeMarker(ctx, req)
	switch {
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.TransactionCoordinatorFenced):
		d.b.logger.Warn("broker: transaction marker refused", "topic", req.Topic, "partition", req.Partition, "err", err)
		return nil
	}
	return err
}

// writeMarker writes a marker to a partition this node leads, or to an object partition (a
// controller entry: txnobjects.go), and waits until a quorum holds it durably, whatever the
// topic's write caching: the coordinator forgets the transaction's partitions once every
// marker is written.
func (d *txns) writeMarker(ctx context.Context, req txnMarkerReq) error {
	if t, ok := d.b.topics.Get(req.Topic); ok && isTotalOrder(t) {
		// A total-order shard holds no transactional batches (AddPartitionsToTxn and Produce
		// refuse them): there is nothing to mark, and a marker would take a global position.
		return nil
	} else if ok && isObjectTopic(t) {
		if req.CoordinatorEpoch == -1 && !req.Commit {
			// The controller takes an abort of coordinator epoch -1 for the partition's own
			// (abortHere), which no epoch fences. An operator's (KIP-664) is checked as any
			// marker, here on this node's image once it holds what the controller committed: one
			// older than the producer's epoch is refused INVALID_PRODUCER_EPOCH, as Kafka
			// refuses it.
			if err := d.b.cl.Barrier(ctx); err != nil {
				return fmt.Errorf("%w: %v", kerr.NotEnoughReplicas, err)
			}
			p, err := d.b.objectPartition(t.ID, req.Partition)
			if err != nil {
				return err
			}
			if err := p.CheckMarker(txn.Marker{ProducerID: req.ProducerID, Epoch: req.Epoch, CoordinatorEpoch: -1}); err != nil {
				return err
			}
		}
		_, err := d.proposeObjectMarker(ctx, t, req.Partition, req.ProducerID, req.Epoch, req.Commit, req.CoordinatorEpoch)
		return err
	}
	p, err := d.ledPartition(req.Topic, req.Partition)
	if err != nil {
		return err
	}
	off, epoch, err := p.Replica.AppendMarker(txn.Marker{ProducerID: req.ProducerID, Epoch: req.Epoch, Commit: req.Commit,
		CoordinatorEpoch: req.CoordinatorEpoch}, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	p.NotifyAppend()
	p.Log.SyncSoon()
	d.b.groups.onMarker(p, req.ProducerID, req.Epoch, req.Commit)
	return p.Replica.WaitDurable(ctx, epoch, off+1)
}

// gone reports whether a partition's answer err means its topic is gone, so that it needs no
// prepare or marker: UNKNOWN_TOPIC_OR_PARTITION, and this node no longer knows the topic either.
// A leader that has just restarted answers UNKNOWN_TOPIC_OR_PARTITION until it has loaded its
// topics: taken for "gone", a commit went on without its prepare, and its marker was skipped
// (the partition then aborted the committed records).
func (d *txns) gone(tp txncoord.TP, err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) && d.partitionGone(tp)
}

// partitionGone reports whether this node's image lacks the partition: its topic, or the
// partition of a topic deleted and created again with fewer.
func (d *txns) partitionGone(tp txncoord.TP) bool {
	t, known := d.b.topics.Get(tp.Topic)
	return !known || int(tp.Partition) >= len(t.Partitions)
}

// nodeFor is the leader of a partition per the image, or -1; for an object partition, which
// any node serves, this node.
func (d *txns) nodeFor(tp txncoord.TP) int32 {
	t, ok := d.b.topics.Get(tp.Topic)
	if !ok {
		return -1
	}
	if isObjectTopic(t) {
		return d.b.cfg.NodeID
	}
	p := d.b.imagePartition(t.ID, tp.Partition)
	if p == nil {
		return -1
	}
	return p.Leader
}

// callPartition calls an RPC on a partition's leader (this node's handler if it leads).
func (d *txns) callPartition(ctx context.Context, tp txncoord.TP, method string, req, resp any) error {
	node := d.nodeFor(tp)
	if node < 0 {
		// Gone: the topic, or the partition of a topic deleted and created again with fewer
		// (gone then skips it; asked again and again, the transaction never ended). Checked
		// again on an image a controller confirmed: this node's may trail the leader's.
		if d.partitionGone(tp) {
			d.b.adminBarrier(ctx)
			if d.partitionGone(tp) {
				return kerr.UnknownTopicOrPartition
			}
		}
		return kerr.LeaderNotAvailable
	}
	return d.b.cl.Call(ctx, node, method, req, resp)
}

func (d *txns) prepareRound(sh *txnShard, req txncoord.PrepareReq) {
	d.mu.Lock()
	txnState, _ := sh.c.Txn(req.ID)
	added := d.addedEpochs[req.ID]
	d.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []txncoord.TP
	for _, tp := range req.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(d.b.ctx, 10*time.Second)
			defer cancel()
			preq := txnPrepareReq{Topic: tp.Topic, Partition: tp.Partition, ProducerID: req.ProducerID, Epoch: req.Epoch, StartMs: txnState.StartMs}
			if l, ok := added[tp]; ok {
				preq.Added = &l
			}
			var err error
			retryUntil := time.Now().Add(txnPrepareRetryFor)
			for {
				var resp txnCodeResp
				if err = d.callPartition(ctx, tp, "txn.prepare", preq, &resp); err == nil {
					err = resp.err()
				}
				// A leader's verdict is final; no leader yet, a deposed one or a node that does
				// not answer is asked again (the image names the next leader) until the round's
				// time is up.
				if err == nil || d.gone(tp, err) || errors.Is(err, errCannotVouch) || errors.Is(err, kerr.InvalidProducerEpoch) ||
					time.Now().After(retryUntil) {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(txnPrepareRetry):
				}
				if ctx.Err() != nil {
					break
				}
			}
			if err != nil && !d.gone(tp, err) {
				d.b.logger.Warn("broker: transaction prepare failed", "txn", req.ID, "topic", tp.Topic, "partition", tp.Partition, "err", err)
				mu.Lock()
				failed = append(failed, tp)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.currentLocked(sh) {
		d.reportLocked(sh, sh.c.Prepared(req.ID, failed, time.Now().UnixMilli()))
	}
}

// discoverRound lists the partitions holding an open transaction of a Lost id's producer
// (docs/transactions.md §3.4). Every partition of the image must be answered for by its
// leader, in the leader epoch the image names or a later one: a node that does not lead a
// partition yet (its image is behind) or no longer (deposed, or it stopped), and a partition
// without a leader (an election in progress, its leader's session not yet expired), are asked
// again every txnPrepareRetry, of whichever node the image then names, for up to
// txnDiscoverRetryFor; only then does the discovery fail (and a commit become an abort).
// Before, one round asked every node once: a node stopped a moment before, or a partition
// between leaders, turned a commit after a coordinator's failover into an abort (a Kafka
// Connect task fails for good on that), and a partition whose image leader had not yet taken
// the leadership was skipped without an error.
func (d *txns) discoverRound(sh *txnShard, req txncoord.DiscoverReq) {
	found := map[txncoord.TP]bool{}
	covered := map[txncoord.TP]bool{}
	retryUntil := time.Now().Add(txnDiscoverRetryFor)
	var err error
	for {
		err = d.discoverAttempt(req, found, covered)
		if err == nil || time.Now().After(retryUntil) || d.b.ctx.Err() != nil {
			break
		}
		d.mu.Lock()
		current := d.currentLocked(sh)
		d.mu.Unlock()
		if !current {
			return
		}
		select {
		case <-d.b.ctx.Done():
		case <-time.After(txnPrepareRetry):
		}
	}
	tps := make([]txncoord.TP, 0, len(found))
	for tp := range found {
		tps = append(tps, tp)
	}
	if err != nil {
		d.b.logger.Warn("broker: transaction discovery incomplete", "txn", req.ID, "err", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.currentLocked(sh) {
		d.reportLocked(sh, sh.c.Discovered(req.ID, tps, err, time.Now().UnixMilli()))
	}
}

// discoverAttempt asks the leaders of the partitions not yet covered (per the image now) and
// reads the object partitions from the image; it adds to found and covered, and returns what
// is still missing (nil: the discovery is complete). A partition answered for once stays
// answered for: the producer writes nothing while its EndTxn or InitProducerId is in flight,
// and a later leader holds every record an earlier one acknowledged.
func (d *txns) discoverAttempt(req txncoord.DiscoverReq, found, covered map[txncoord.TP]bool) error {
	// The image must be as new as the controller's: one that trailed it could name a deposed
	// leader, in the epoch that leader still believes it leads in, while a later leader holds
	// acknowledged records of the transaction.
	bctx, cancel := context.WithTimeout(d.b.ctx, txnDiscoverCall)
	err := d.b.cl.Barrier(bctx)
	cancel()
	if err != nil {
		return fmt.Errorf("no controller confirmed this node's image: %w", err)
	}
	img := d.b.cl.Image()
	for _, tp := range objectTransactions(img, req.ProducerID, req.Epoch) { // no leader: the image holds them
		found[tp] = true
	}
	ask, missing := discoverAsk(img, covered)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	answers := map[int32]txnDiscoverResp{}
	for _, id := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(d.b.ctx, txnDiscoverCall)
			defer cancel()
			var resp txnDiscoverResp
			err := d.b.cl.Call(ctx, id, "txn.discover", txnDiscoverReq{ProducerID: req.ProducerID, Epoch: req.Epoch}, &resp)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", id, err))
				return
			}
			answers[id] = resp
		}()
	}
	wg.Wait()
	for _, resp := range answers {
		for _, tp := range resp.Partitions {
			found[tp] = true
		}
	}
	return errors.Join(append(errs, discoverCover(img, covered, answers, missing)...)...)
}

// discoverAsk lists the nodes the image names as leaders of partitions (not of object topics)
// that no answer covers yet, and an error for each such partition without a leader.
func discoverAsk(img *controller.Image, covered map[txncoord.TP]bool) (ask []int32, missing []error) {
	seen := map[int32]bool{}
	for _, t := range img.Topics {
		if t.IsObject() {
			continue // no leader: any node serves them (objectTransactions)
		}
		for i, p := range t.Partitions {
			switch {
			case covered[txncoord.TP{Topic: t.Name, Partition: int32(i)}]:
			case p.Leader < 0:
				missing = append(missing, fmt.Errorf("%s[%d] has no leader", t.Name, i))
			case !seen[p.Leader]:
				seen[p.Leader] = true
				ask = append(ask, p.Leader)
			}
		}
	}
	return ask, missing
}

// discoverCover marks covered the partitions the answers' nodes lead in the epoch img names or
// a later one, and returns an error for each partition of an answering node (per img) it
// does not cover: that node's image or img is behind, and it is asked again.
func discoverCover(img *controller.Image, covered map[txncoord.TP]bool, answers map[int32]txnDiscoverResp, errs []error) []error {
	for id, resp := range answers {
		if resp.Led == nil {
			// A node of an older version lists no leaderships: it answered for what it leads
			// per img (the rule before; without it a rolling upgrade aborted every such commit).
			for _, t := range img.Topics {
				for i, p := range t.Partitions {
					if !t.IsObject() && p.Leader == id {
						covered[txncoord.TP{Topic: t.Name, Partition: int32(i)}] = true
					}
				}
			}
			continue
		}
		for _, l := range resp.Led {
			t := img.Topics[l.Topic]
			if t == nil || t.IsObject() || l.Partition < 0 || int(l.Partition) >= len(t.Partitions) {
				continue
			}
			if l.Epoch >= t.Partitions[l.Partition].LeaderEpoch {
				covered[txncoord.TP{Topic: l.Topic, Partition: l.Partition}] = true
			}
		}
	}
	for _, t := range img.Topics {
		if t.IsObject() {
			continue
		}
		for i, p := range t.Partitions {
			if _, answered := answers[p.Leader]; answered && !covered[txncoord.TP{Topic: t.Name, Partition: int32(i)}] {
				errs = append(errs, fmt.Errorf("node %d does not lead %s[%d] in epoch %d yet", p.Leader, t.Name, i, p.LeaderEpoch))
			}
		}
	}
	return errs
}

// markerRound writes a transaction's markers to every partition, in parallel, each retried
// until written (or its topic is gone, or the shard is no longer current).
func (d *txns) markerRound(sh *txnShard, req txncoord.MarkerReq) {
	var wg sync.WaitGroup
	for _, tp := range req.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := 10 * time.Millisecond
			for {
				ctx, cancel := context.WithTimeout(d.b.ctx, 10*time.Second)
				var resp txnCodeResp
				err := d.callPartition(ctx, tp, "txn.marker", txnMarkerReq{Topic: tp.Topic, Partition: tp.Partition,
					ProducerID: req.ProducerID, Epoch: req.Epoch, Commit: req.Commit, CoordinatorEpoch: req.CoordinatorEpoch}, &resp)
				cancel()
				if err == nil {
					err = resp.err()
				}
				if err == nil || d.gone(tp, err) {
					return
				}
				d.mu.Lock()
				current := d.currentLocked(sh)
				d.mu.Unlock()
				if !current || d.b.ctx.Err() != nil {
					return // the next coordinator redoes the round
				}
				select {
				case <-d.b.ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, time.Second)
			}
		}()
	}
	wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finishMarkerNotesLocked(req.ID) // the transaction is complete
	if d.currentLocked(sh) {
		d.reportLocked(sh, sh.c.MarkersWritten(req.ID, time.Now().UnixMilli()))
	}
}

// startMarkerNotesLocked begins a marker round of transactional id id: the leaderships its next
// transaction's adds note meanwhile are kept apart from the completed transaction's.
func (d *txns) startMarkerNotesLocked(id string) {
	if _, ok := d.earlyAdded[id]; !ok {
		d.earlyAdded[id] = nil
	}
}

// finishMarkerNotesLocked ends id's marker round: the completed transaction's notes go, and
// those of the transaction begun meanwhile are its notes from now on (without them, a prepare
// of one of its partitions whose leadership changed since, such as a topic deleted and created
// again, could not tell it was added under the new one, and its commit was refused).
func (d *txns) finishMarkerNotesLocked(id string) {
	delete(d.addedEpochs, id)
	if early := d.earlyAdded[id]; early != nil {
		d.addedEpochs[id] = early
	}
	delete(d.earlyAdded, id)
}

// addLocal is the coordinator side of a partition leader's add or verification.
func (d *txns) addLocal(ctx context.Context, req txnAddReq) error {
	r := d.callWaitingOut(ctx, req.TxnID, func(c *txncoord.Coordinator, id txncoord.ReqID, now int64) txncoord.Effects {
		return c.AddPartitions(txncoord.AddReq{ID: id, TxnID: req.TxnID, ProducerID: req.ProducerID, Epoch: req.Epoch,
			Partitions: []txncoord.TP{req.TP}, VerifyOnly: req.VerifyOnly, V2: req.V2, KnowsFenced: req.KnowsFenced}, now)
	})
	if r.Err == nil && !req.VerifyOnly {
		d.noteAdded(req.TxnID, []txncoord.TP{req.TP})
	}
	return r.Err
}

// callWaitingOut is call, but while the transaction's previous operation runs (its markers are
// being written, typically: a version 2 producer begins the next transaction as soon as EndTxn
// answers) it waits for it here, up to a second, instead of sending CONCURRENT_TRANSACTIONS
// back for a client-side backoff.
//
// An empty transactional id is INVALID_REQUEST, as Kafka's TransactionCoordinator answers it
// (InitProducerId and DescribeTransactions check it themselves).
func (d *txns) callWaitingOut(ctx context.Context, id string, f func(c *txncoord.Coordinator, req txncoord.ReqID, nowMs int64) txncoord.Effects) txncoord.Reply {
	if id == "" {
		return txncoord.Reply{Err: fmt.Errorf("%w: the transactional id is empty", kerr.InvalidRequest)}
	}
	deadline := time.After(time.Second)
	for {
		r, progress := d.callProgress(ctx, id, f)
		if !errors.Is(r.Err, kerr.ConcurrentTransactions) {
			return r
		}
		select {
		case <-progress:
		case <-deadline:
			return r
		case <-ctx.Done():
			return r
		}
	}
}

// checkLocal is the coordinator side of a partition's check of an open transaction.
func (d *txns) checkLocal(req txnCheckReq) txnCheckResp {
	d.mu.Lock()
	defer d.mu.Unlock()
	if req.TxnID != "" {
		sh, _ := d.shardForLocked(req.TxnID)
		if sh == nil {
			return txnCheckResp{Wait: true} // not coordinated here (now): keep it open
		}
		return txnCheckResp{Known: true, Wait: sh.c.Check(req.TxnID, req.ProducerID, req.Epoch, req.TP)}
	}
	var resp txnCheckResp
	for idx, sh := range d.shards {
		if sh.c.Broken() {
			return txnCheckResp{Known: true, Wait: true}
		}
		if id, ok := sh.c.ByProducer(req.ProducerID); ok {
			return txnCheckResp{Known: true, Wait: sh.c.Check(id, req.ProducerID, req.Epoch, req.TP)}
		}
		resp.Loaded = append(resp.Loaded, idx)
	}
	return resp
}

// ensureInTransaction runs before a transactional batch is appended to a partition this node
// leads: the producer's transaction must include the partition (transaction version 2 adds it
// here, version 1 verifies the client added it, KIP-890), and an older epoch's transaction still
// open on the partition must be resolved first.
func (d *txns) ensureInTransaction(ctx context.Context, txnID string, p txnPartition, pid int64, epoch int16, produceVersion int16) error {
	if txnID == "" {
		return fmt.Errorf("%w: a transactional batch without a transactional id", kerr.InvalidRecord)
	}
	openEpoch, open := p.openTransaction(pid)
	if open && openEpoch == epoch {
		return nil
	}
	tp := p.tp()
	// As Kafka's brokers do (add.partitions.to.txn.retry.backoff.ms), CONCURRENT_TRANSACTIONS
	// (the previous transaction's markers are being written) is retried here, briefly, rather
	// than sent back to a client that would wait for a metadata refresh. The coordinator itself
	// holds an add until the previous operation is done, so this loop rarely turns.
	backoff, deadline := 20*time.Millisecond, time.Now().Add(2*time.Second)
	for {
		err := d.addToTransaction(ctx, txnAddReq{TxnID: txnID, ProducerID: pid, Epoch: epoch, TP: tp,
			VerifyOnly: produceVersion < 12, V2: produceVersion >= 12, KnowsFenced: produceVersion >= 12, KnowsAbortable: true})
		if err == nil {
			// The coordinator vouched that pid is txnID's: the partition's check of a
			// transaction left open asks that coordinator (without a mapping, every
			// coordinator by producer id). Taken from the request before the answer, a
			// client naming another producer's id made the check ask the wrong coordinator,
			// which knows nothing of it, and the partition aborted that producer's
			// transaction.
			d.mu.Lock()
			d.ids[pid] = txnID
			d.mu.Unlock()
			break
		}
		if !errors.Is(err, kerr.ConcurrentTransactions) || time.Now().After(deadline) {
			return produceTxnError(err, produceVersion)
		}
		select {
		case <-ctx.Done():
			return produceTxnError(err, produceVersion)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
	// An older epoch's transaction still open here must be closed before this epoch's records
	// go in: by its marker, if its transaction was decided (the coordinator says to wait), or by
	// the partition itself if nothing can commit it.
	for {
		openEpoch, open := p.openTransaction(pid)
		if !open || openEpoch >= epoch {
			return nil
		}
		err := d.resolveStale(ctx, txnID, p, pid, openEpoch)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		// Its marker is on the way (a version-2 producer's next transaction may begin while
		// the previous one's markers are written): it lands within a replication round.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Millisecond):
		}
	}
}

// addToTransaction asks a transactional id's coordinator to add (or verify) a partition.
func (d *txns) addToTransaction(ctx context.Context, req txnAddReq) error {
	node := d.coordinatorNode(req.TxnID)
	if node < 0 {
		return kerr.CoordinatorNotAvailable
	}
	var resp txnCodeResp
	if err := d.b.cl.Call(ctx, node, "txn.add", req, &resp); err != nil {
		return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	}
	return resp.err()
}

// produceTxnError is the produce error for a failed add or verification: retriable coordinator
// errors become NOT_ENOUGH_REPLICAS, which every client retries (KIP-890 does the same), and a
// partition not in the transaction is TRANSACTION_ABORTABLE from Produce v11 on (KIP-890,
// KIP-1050) and INVALID_TXN_STATE before, as Kafka's AddPartitionsToTxnManager converts it for
// older clients (its DEFAULT_ERROR).
func produceTxnError(err error, produceVersion int16) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorLoadInProgress),
		errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.RequestTimedOut):
		return fmt.Errorf("%w: %v", kerr.NotEnoughReplicas, err)
	case errors.Is(err, kerr.TransactionAbortable) && produceVersion < 11:
		return fmt.Errorf("%w: %v", kerr.InvalidTxnState, err)
	case errors.Is(err, kerr.ProducerFenced):
		// As Kafka's AddPartitionsToTxnManager: producers expect INVALID_PRODUCER_EPOCH from
		// a produce (abortable), never PRODUCER_FENCED (fatal to the Java producer).
		return fmt.Errorf("%w: %v", kerr.InvalidProducerEpoch, err)
	}
	return err
}

// resolveStale asks the coordinator about a producer's older-epoch transaction still open on p,
// and aborts it there when nothing can commit it; else the caller must wait.
func (d *txns) resolveStale(ctx context.Context, txnID string, p txnPartition, pid int64, epoch int16) error {
	wait, err := d.askCheck(ctx, txnCheckReq{TxnID: txnID, ProducerID: pid, Epoch: epoch, TP: p.tp()})
	if err != nil {
		return fmt.Errorf("%w: checking the previous transaction: %v", kerr.NotEnoughReplicas, err)
	}
	if wait {
		return fmt.Errorf("%w: the previous transaction of producer %d is still completing", kerr.NotEnoughReplicas, pid)
	}
	return p.abortHere(ctx, pid, epoch)
}

// askCheck asks the coordinator whether an open transaction may still commit.
func (d *txns) askCheck(ctx context.Context, req txnCheckReq) (bool, error) {
	if req.TxnID != "" {
		node := d.coordinatorNode(req.TxnID)
		if node < 0 {
			return false, kerr.CoordinatorNotAvailable
		}
		var resp txnCheckResp
		if err := d.b.cl.Call(ctx, node, "txn.check", req, &resp); err != nil {
			return false, err
		}
		return resp.Wait, nil
	}
	// The transactional id is not known here (the log does not hold it; this node may have
	// become the leader since): every coordinator is asked; the transaction is aborted only if
	// every node answered, between them they had every coordinator loaded, and none of those
	// knows the producer. During a coordinator's failover its partition is loaded nowhere for a
	// moment, and the transaction may be prepared there: wait.
	var resps []txnCheckResp
	for id, n := range d.b.cl.Image().Nodes {
		if n.Fenced {
			return true, nil
		}
		var resp txnCheckResp
		if err := d.b.cl.Call(ctx, id, "txn.check", req, &resp); err != nil {
			return false, err
		}
		resps = append(resps, resp)
	}
	partitions := 0
	if t, ok := d.b.topics.Get(TxnStateTopic); ok {
		partitions = len(t.Partitions)
	}
	return checkVerdict(resps, partitions), nil
}

// checkVerdict combines every node's answer to a check by producer id (no transactional id):
// the answer of a coordinator that knows the producer; else wait unless, between them, the nodes
// had all of the partitions' coordinators loaded (partitions: __transaction_state's count).
func checkVerdict(resps []txnCheckResp, partitions int) (wait bool) {
	loaded := map[int32]bool{}
	for _, r := range resps {
		if r.Known {
			return r.Wait
		}
		for _, i := range r.Loaded {
			if i >= 0 && int(i) < partitions {
				loaded[i] = true
			}
		}
	}
	return len(loaded) < partitions
}

// txnPartition is what a transactional produce needs of the partition it writes to: a local
// partition this node leads (localTxnPartition) or an object partition (objectTxnPartition).
type txnPartition interface {
	tp() txncoord.TP
	// openTransaction returns the producer epoch of the producer's open transaction here.
	openTransaction(pid int64) (epoch int16, ok bool)
	// abortHere writes an ABORT marker for the producer's open transaction itself (coordinator
	// epoch -1: the partition's own), once nothing can commit it.
	abortHere(ctx context.Context, pid int64, epoch int16) error
}

// localTxnPartition is a local partition this node leads.
type localTxnPartition struct {
	d *txns
	p *topics.Partition
}

func (l localTxnPartition) tp() txncoord.TP {
	return txncoord.TP{Topic: l.p.Topic, Partition: l.p.Index}
}

func (l localTxnPartition) openTransaction(pid int64) (int16, bool) {
	_, _, epoch, ok := l.p.Log.OpenTransaction(pid)
	return epoch, ok
}

func (l localTxnPartition) abortHere(ctx context.Context, pid int64, epoch int16) error {
	return l.d.abortHere(ctx, l.p, pid, epoch)
}

// abortHere writes an ABORT marker for the producer's open transaction on p itself (coordinator
// epoch -1: the partition's own).
func (d *txns) abortHere(ctx context.Context, p *topics.Partition, pid int64, epoch int16) error {
	off, le, err := p.Replica.AppendMarker(txn.Marker{ProducerID: pid, Epoch: epoch, CoordinatorEpoch: -1, Own: true}, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	d.b.logger.Info("broker: aborted a transaction no coordinator can commit", "topic", p.Topic, "partition", p.Index, "producer", pid, "epoch", epoch)
	p.NotifyAppend()
	p.Log.SyncSoon()
	d.b.groups.onMarker(p, pid, epoch, false)
	return p.Replica.WaitDurable(ctx, le, off+1)
}

// checkOpenTransactions lets every partition this node leads check the transactions it has
// held open longer than txnPartitionCheck.
func (d *txns) checkOpenTransactions(ctx context.Context) {
	d.checkObjectTransactions(ctx)
	for _, t := range d.b.topics.List() {
		for _, p := range t.Partitions {
			if p.Replica == nil {
				continue
			}
			if _, ready, leading := p.Replica.Leading(); !leading || !ready {
				continue
			}
			for pid := range p.Log.OpenTransactions() {
				first, _, epoch, ok := p.Log.OpenTransaction(pid)
				if !ok || !d.staleOpen(p, first) {
					continue
				}
				d.checkStale(ctx, localTxnPartition{d, p}, pid, epoch)
			}
		}
	}
}

// checkStale asks the coordinators about a transaction a partition has held open too long, and
// aborts it there when nothing can commit it.
func (d *txns) checkStale(ctx context.Context, p txnPartition, pid int64, epoch int16) {
	d.mu.Lock()
	id := d.ids[pid]
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tp := p.tp()
	wait, err := d.askCheck(ctx, txnCheckReq{TxnID: id, ProducerID: pid, Epoch: epoch, TP: tp})
	if err == nil && !wait {
		err = p.abortHere(ctx, pid, epoch)
	}
	if err != nil {
		d.b.logger.Debug("broker: checking an open transaction", "topic", tp.Topic, "partition", tp.Partition, "producer", pid, "err", err)
	}
}

// staleOpen reports whether an open transaction starting at first is older than the check
// interval, by its first batch's timestamp.
func (d *txns) staleOpen(p *topics.Partition, first int64) bool {
	if first < p.Log.StartOffset() {
		// Its first batch was deleted (retention, DeleteRecords): as old as that. The check
		// with the coordinators still decides.
		return true
	}
	data, err := p.Log.Read(nil, first, 1)
	if err != nil || len(data) < batch.HeaderSize {
		return false
	}
	h, err := batch.ParseHeader(data)
	if err != nil {
		return false
	}
	return time.Since(time.UnixMilli(h.MaxTimestamp)) > txnPartitionCheck
}

// javaHashPartition is abs(Java String.hashCode(s)) % n, Kafka's partition of a group or
// transactional id.
func javaHashPartition(s string, n int32) int32 {
	var h int32
	for _, c := range s {
		h = 31*h + int32(c)
	}
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % n
}
