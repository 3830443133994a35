package shard

import (
	"context"
	"encoding/hex"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Manager runs a Runner for every partition of a total-order topic this node leads.
type Manager struct {
	reg    *topics.Registry
	feed   Feed
	logger *slog.Logger

	mu      sync.Mutex
	runners map[key]*running
}

type key struct {
	topic     [16]byte
	partition int32
}

// running is a runner of a partition's leadership in one epoch: a runner's state is of the log
// as it was in that epoch, so a new epoch (another node led in between, and the log may have
// been truncated to that leader's) gets a new runner, as a new leader does.
type running struct {
	r       *Runner
	l       partitionLog
	trimmed uint64    // the trim point its log start follows (sync's own)
	asked   time.Time // when it last asked for a trim to its log start (sync's own)
}

// NewManager returns a manager over the registry's partitions, following the sequencer
// through feed. Run starts it.
func NewManager(reg *topics.Registry, feed Feed, logger *slog.Logger) *Manager {
	return &Manager{reg: reg, feed: feed, logger: logger, runners: map[key]*running{}}
}

// TopicKey is a topic's id as the sequencer names it.
func TopicKey(id [16]byte) string { return hex.EncodeToString(id[:]) }

// KeyTopicID is the topic id of a TopicKey; ok is false for a key that is not one.
func KeyTopicID(key string) (id [16]byte, ok bool) {
	b, err := hex.DecodeString(key)
	if err != nil || len(b) != len(id) {
		return id, false
	}
	return [16]byte(b), true
}

// Run starts and stops runners as leadership moves, until ctx ends (then it stops them all).
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		m.sync()
		select {
		case <-ctx.Done():
			m.mu.Lock()
			rs := m.runners
			m.runners = map[key]*running{}
			m.mu.Unlock()
			for _, r := range rs {
				r.r.Stop()
			}
			return
		case <-t.C:
		}
	}
}

func (m *Manager) sync() {
	want := map[key]partitionLog{}
	cfgs := map[[16]byte]order.Config{}
	for _, t := range m.reg.List() {
		if !Total(t.Configs) {
			continue
		}
		cfg, err := TopicConfig(t.Configs)
		if err != nil {
			m.logger.Error("total order: topic config", "topic", t.Name, "err", err)
			continue
		}
		cfgs[t.ID] = cfg
		for _, p := range t.Partitions {
			if p.Replica == nil {
				continue
			}
			if epoch, ready, leading := p.Replica.Leading(); leading && ready {
				want[key{t.ID, p.Index}] = partitionLog{p, epoch}
			}
		}
	}
	m.mu.Lock()
	var stop []*Runner
	for k, r := range m.runners {
		select {
		case <-r.r.Done():
			delete(m.runners, k)
			continue
		default:
		}
		if want[k] != r.l {
			stop = append(stop, r.r)
			delete(m.runners, k)
		}
	}
	for k, l := range want {
		if _, ok := m.runners[k]; !ok {
			r := Start(TopicKey(k.topic), k.partition, cfgs[k.topic], l, m.feed, m.logger)
			m.runners[k] = &running{r: r, l: l}
		}
	}
	led := make(map[key]*running, len(m.runners))
	maps.Copy(led, m.runners)
	m.mu.Unlock()
	for _, r := range stop {
		r.Stop()
	}
	for k, r := range led {
		m.trim(k, r)
	}
}

// trim keeps a shard led here and the log's trim point together, both ways. The partition's
// log start moves up to the sequencer's trim point (the shard's first slot at or after it),
// again on a new leader (its log start may trail the old leader's); its followers follow the
// leader's log start. And a log start moved past the trim point's by the partition's
// retention or a Kafka DeleteRecords moves the trim point up to the end of the last slot gone
// (asked of the sequencer's leader at most once a second until committed), so that the log has
// no hole: positions below are refused, and the other shards follow.
func (m *Manager) trim(k key, r *running) {
	topic := TopicKey(k.topic)
	upTo, start := m.feed.TrimPoint(topic, k.partition)
	log := r.l.p.Log
	if upTo > r.trimmed {
		if start > r.l.HighWatermark() {
			return // a new leader's high watermark may trail the committed slots a moment: not past it
		}
		if log.StartOffset() < start {
			if err := log.AdvanceStartOffset(start); err != nil {
				m.logger.Warn("total order: moving a shard's log start to the trim point", "partition", k.partition,
					"trim", upTo, "offset", start, "err", err)
				return // again on the next sync
			}
		}
		r.trimmed = upTo
	}
	if gone := log.StartOffset(); gone > start && time.Since(r.asked) >= time.Second {
		if end, ok := m.feed.SlotEnd(topic, k.partition, gone-1); ok && end > upTo {
			r.asked = time.Now()
			if err := m.feed.Trim(topic, end); err != nil {
				m.logger.Debug("total order: trimming the log to a shard's log start", "partition", k.partition, "trim", end, "err", err)
			}
		}
	}
}

// Runner is the runner of a partition led here, or nil.
func (m *Manager) Runner(topic [16]byte, partition int32) *Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runners[key{topic, partition}]; r != nil {
		return r.r
	}
	return nil
}

// WaitRunner waits until this node runs the partition's shard (it has just become its leader),
// or ctx ends.
func (m *Manager) WaitRunner(ctx context.Context, topic [16]byte, partition int32) (*Runner, error) {
	for {
		if r := m.Runner(topic, partition); r != nil {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Signal routes the sequencer's lag-fix signal to the shard's runner.
func (m *Manager) Signal(topic string, s order.Signal) {
	id, ok := KeyTopicID(topic)
	if !ok {
		return
	}
	if r := m.Runner(id, s.Shard); r != nil {
		r.Signal(s.Through)
	}
}

// partitionLog is a partition led in one epoch, as that epoch's runner sees it.
type partitionLog struct {
	p     *topics.Partition
	epoch int32
}

func (l partitionLog) HighWatermark() int64     { return l.p.Replica.HighWatermark() }
func (l partitionLog) Changed() <-chan struct{} { return l.p.Replica.Changed() }

func (l partitionLog) Leading() bool {
	epoch, ready, leading := l.p.Replica.Leading()
	return leading && ready && epoch == l.epoch
}

func (l partitionLog) AppendNoOp(n batch.NoOp) error {
	if _, _, err := l.p.Replica.AppendNoOp(l.epoch, n); err != nil {
		return err
	}
	l.p.NotifyAppend()
	if !l.p.Log.WriteCaching() {
		l.p.Log.SyncSoon() // durable like the records around it: the high watermark waits for the quorum's fsyncs
	}
	return nil
}
