package replica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// DefaultLagMax is Kafka's replica.lag.time.max.ms default since 2.5 (KIP-537).
const DefaultLagMax = 30 * time.Second

// Config configures a Manager.
type Config struct {
	NodeID int32
	// Send sends a frame to a node (transport.Send); it copies body and never blocks.
	Send   func(to int32, kind transport.Kind, body []byte)
	Logger *slog.Logger

	LagMax       time.Duration // replica.lag.time.max.ms: default 30 s, Kafka's (KIP-537)
	JoinGrace    time.Duration // a new leader counts joining followers as live this long: default 1 s
	JoinRetry    time.Duration // a follower asks to join again after: default 200 ms
	ResendAfter  time.Duration // unacknowledged sends are repeated after: default 1 s
	TickInterval time.Duration // default 100 ms; negative: no ticker (tests call Tick)

	// ReportISR is told of leaders' changed in-sync replica sets (to record in the controller).
	ReportISR func(items []controller.ISRItem)
	// ReportFailed is told that a leader's log failed (to elect another leader).
	ReportFailed func(ref controller.EpochRef)
	// Throttle, if set, holds back sends to out-of-sync followers (replication quotas,
	// throttle.go).
	Throttle Throttle
	Now      func() time.Time
}

// Manager holds this node's replicas and routes replication frames to them.
type Manager struct {
	cfg Config

	mu       sync.RWMutex
	replicas map[controller.PartitionRef]*Replica

	starts chan startMove
	stop   chan struct{}
	wg     sync.WaitGroup
	ticks  int

	// LeadershipsTaken counts the times a replica here became leader.
	LeadershipsTaken atomic.Int64
	// ThrottledBytes counts the bytes sent to followers under a replication quota.
	ThrottledBytes atomic.Int64
}

type startMove struct {
	r      *Replica
	offset int64
}

// NewManager starts a manager; Close stops it.
func NewManager(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LagMax <= 0 {
		cfg.LagMax = DefaultLagMax
	}
	if cfg.JoinGrace <= 0 {
		cfg.JoinGrace = time.Second
	}
	if cfg.JoinRetry <= 0 {
		cfg.JoinRetry = 200 * time.Millisecond
	}
	if cfg.ResendAfter <= 0 {
		cfg.ResendAfter = time.Second
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, replicas: map[controller.PartitionRef]*Replica{}, starts: make(chan startMove, 1024),
		stop: make(chan struct{})}
	m.wg.Add(1)
	go m.moveStarts()
	if cfg.TickInterval > 0 {
		m.wg.Add(1)
		go m.ticker()
	}
	return m
}

func (m *Manager) now() time.Time { return m.cfg.Now() }

// Close stops the manager's goroutines. Replicas stay as they are; their logs are the
// caller's to close.
func (m *Manager) Close() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	m.wg.Wait()
}

// Add hosts a partition whose log is open in dir, with no role until Assign. It loads the
// partition's epoch cache.
func (m *Manager) Add(ref controller.PartitionRef, topic string, log *logstore.Log, fsys vfs.FS, dir string) (*Replica, error) {
	epochs, err := LoadEpochCache(fsys, dir, log.StartOffset(), log.EndOffset())
	if err != nil {
		return nil, err
	}
	r := &Replica{m: m, Ref: ref, Topic: topic, Log: log, epochs: epochs, hwCh: make(chan struct{}),
		a: Assignment{Role: RoleNone, Epoch: -1, Leader: -1}}
	// Nothing above the log start is known to be committed until a leader says so (a durable
	// tail may be a suffix no quorum ever held).
	r.knownHW = log.StartOffset()
	log.SetDurableHook(r.onDurable)
	log.SetRetentionBound(r.RetentionBound) // as Kafka: retention deletes what the replicas in sync hold
	m.mu.Lock()
	m.replicas[ref] = r
	m.mu.Unlock()
	return r, nil
}

// Get returns a hosted replica, or nil.
func (m *Manager) Get(ref controller.PartitionRef) *Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.replicas[ref]
}

// Remove stops hosting a partition: it leads and follows no more (waiters fail). The caller
// closes its log afterwards.
func (m *Manager) Remove(ref controller.PartitionRef) {
	m.mu.Lock()
	r := m.replicas[ref]
	delete(m.replicas, ref)
	m.mu.Unlock()
	if r != nil {
		r.Log.SetDurableHook(nil)
		r.setAssignment(Assignment{Role: RoleNone, Epoch: r.Assignment().Epoch, Leader: -1})
	}
}

// Assign applies what the image says of a hosted partition.
func (m *Manager) Assign(ref controller.PartitionRef, a Assignment) {
	if r := m.Get(ref); r != nil {
		r.setAssignment(a)
	}
}

// Replicas returns every hosted replica.
func (m *Manager) Replicas() []*Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		out = append(out, r)
	}
	return out
}

// Handle takes a replication frame from a peer (the transport's handler). body is only valid
// during the call.
func (m *Manager) Handle(from int32, kind transport.Kind, body []byte) {
	switch kind {
	case KindAppend:
		as, err := ParseAppends(body)
		if err != nil {
			m.cfg.Logger.Warn("replica: dropping a malformed frame", "from", from, "kind", kind, "err", err)
			return
		}
		acks := make([]AppendAck, 0, len(as))
		for i := range as {
			if r := m.Get(as[i].Ref); r != nil {
				acks = append(acks, r.onAppend(from, &as[i]))
			} else {
				acks = append(acks, AppendAck{Ref: as[i].Ref, Epoch: as[i].Epoch, Status: StatusUnknown})
			}
		}
		m.cfg.Send(from, KindAppendAck, AppendAcks(nil, acks))
	case KindAppendAck:
		acks, err := ParseAcks(body)
		if err != nil {
			m.cfg.Logger.Warn("replica: dropping a malformed frame", "from", from, "kind", kind, "err", err)
			return
		}
		for i := range acks {
			if r := m.Get(acks[i].Ref); r != nil {
				r.onAck(from, &acks[i])
			}
		}
	case KindFollow:
		f, err := ParseFollow(body)
		if err != nil {
			m.cfg.Logger.Warn("replica: dropping a malformed frame", "from", from, "kind", kind, "err", err)
			return
		}
		if r := m.Get(f.Ref); r != nil {
			r.onFollow(from, f)
		} else {
			reply := FollowReply{Ref: f.Ref, Epoch: f.Epoch, Status: StatusUnknown}
			m.cfg.Send(from, KindFollowReply, AppendFollowReply(nil, &reply))
		}
	case KindFollowReply:
		fr, err := ParseFollowReply(body)
		if err != nil {
			m.cfg.Logger.Warn("replica: dropping a malformed frame", "from", from, "kind", kind, "err", err)
			return
		}
		if r := m.Get(fr.Ref); r != nil {
			r.onFollowReply(from, fr)
		}
	}
}

// PeerDown is told that the connection to a node broke.
func (m *Manager) PeerDown(node int32) {
	for _, r := range m.Replicas() {
		r.peerDown(node)
	}
}

// Vote answers a vote request for the partitions hosted here; the caller has made sure the
// image that started the elections is applied.
func (m *Manager) Vote(items []controller.EpochRef) []controller.Vote {
	out := make([]controller.Vote, 0, len(items))
	for _, it := range items {
		if r := m.Get(it.PartitionRef); r != nil {
			out = append(out, r.Vote(it.Epoch))
		} else {
			out = append(out, controller.Vote{PartitionRef: it.PartitionRef, Epoch: it.Epoch, Reason: "not hosted here"})
		}
	}
	return out
}

// PrepareTransfer prepares a leadership transfer (Replica.PrepareTransfer).
func (m *Manager) PrepareTransfer(ctx context.Context, req controller.TransferRequest) bool {
	r := m.Get(req.PartitionRef)
	return r != nil && r.PrepareTransfer(ctx, req.Epoch, req.Target)
}

func (m *Manager) ticker() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.tick(m.now(), true)
	}
}

// Tick does the replicas' periodic work; every fifth tick the leaders check their ISR.
func (m *Manager) Tick(now time.Time) { m.tick(now, false) }

// tick is Tick; the ticker's (skipBusy) passes over a replica whose lock is held, to the next
// tick: a leader's append holds it through its write, and a write waiting on a slow or stalled
// disk would hold every other replica's resends, probes and ISR reports behind it.
func (m *Manager) tick(now time.Time, skipBusy bool) {
	m.ticks++
	checkISR := m.ticks%5 == 0
	var isr []controller.ISRItem
	for _, r := range m.Replicas() {
		if it := r.tick(now, checkISR, skipBusy); it != nil {
			isr = append(isr, *it)
		}
	}
	if len(isr) > 0 && m.cfg.ReportISR != nil {
		m.cfg.ReportISR(isr)
	}
}

// advanceStart moves a follower's log start up to its leader's (DeleteRecords), off the
// frame handler: it may wait for a compaction pass.
func (m *Manager) advanceStart(r *Replica, offset int64) {
	select {
	case m.starts <- startMove{r, offset}:
	default: // the next append asks again
	}
}

func (m *Manager) moveStarts() {
	defer m.wg.Done()
	for {
		select {
		case <-m.stop:
			return
		case s := <-m.starts:
			if s.offset <= s.r.Log.StartOffset() {
				continue
			}
			if err := s.r.Log.AdvanceStartOffset(s.offset); err != nil {
				m.cfg.Logger.Warn("replica: moving the log start up to the leader's", "topic", s.r.Topic,
					"partition", s.r.Ref.Partition, "offset", s.offset, "err", err)
			}
		}
	}
}
