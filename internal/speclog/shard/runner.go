// Package shard runs the shard side of total-order topics (docs/speclog.md §4) in a partition's
// leader: it feeds the partition's high watermark (its durable slots: a shard's slots are its
// partition's offsets) and the sequencer's entries to an order.Shard, appends the no-op entries
// it asks for, sends its reports, acknowledges appends once their cut commits, and publishes
// speculative deliveries, confirmations and fail notices to the node's subscribers.
package shard

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/speclog/order"
)

// Log is the partition a runner leads.
type Log interface {
	// HighWatermark is the offset below which the partition is durable (a quorum has it).
	HighWatermark() int64
	// Changed is closed the next time the high watermark or the leadership changes.
	Changed() <-chan struct{}
	// Leading reports whether this node still leads the partition.
	Leading() bool
	// AppendNoOp appends a no-op entry as leader.
	AppendNoOp(n batch.NoOp) error
}

// Feed is the sequencer as seen from this node: its state, its entries in log order, and the
// way to its leader.
type Feed interface {
	Snapshot(topic string) (st *order.State, seq uint64, ok bool)
	Since(topic string, seq uint64) ([]order.Entry, bool)
	Changed() <-chan struct{}
	Report(topic string, r order.Report)
	Join(topic string, shard int32)
	// TrimPoint is the topic's trim point (0: none) and the shard's log start for it.
	TrimPoint(topic string, shard int32) (upTo uint64, start int64)
	// SlotEnd is the position after a shard's slot, or after its last committed slot if that
	// one is not committed yet (ok false: none is, or it is trimmed).
	SlotEnd(topic string, shard int32, slot int64) (end uint64, ok bool)
	// Trim asks the sequencer's leader to trim the topic below upTo.
	Trim(topic string, upTo uint64) error
}

// EventKind says what an Event is.
type EventKind uint8

const (
	Deliver EventKind = iota + 1 // slots [Slot, Slot+N) are at positions [Position, Position+N), in View
	Confirm                      // positions below UpTo are final
	Fail                         // every speculation at or after After failed; View is the new view
)

// Event is one thing a shard tells its subscribers, in order.
type Event struct {
	Kind     EventKind
	Slot     int64
	N        int64
	Position uint64
	View     uint64
	UpTo     uint64
	After    uint64
}

// keepEvents is how many events a runner keeps for subscribers that fall behind.
const keepEvents = 1 << 16

// ErrBehind is a subscriber that fell further behind than the runner keeps events.
var ErrBehind = errors.New("shard: subscriber fell behind the kept events")

// ErrStopped: the runner stopped (the node no longer leads the partition).
var ErrStopped = errors.New("shard: not leading this shard any more")

// Runner is one shard's driver, while this node leads its partition.
type Runner struct {
	topic   string // the topic's sequencer id
	id      int32
	cfg     order.Config
	log     Log
	feed    Feed
	logger  *slog.Logger
	signals chan order.CutID
	stall   chan time.Duration
	stop    chan struct{}
	done    chan struct{}

	counts Counts // the protocol's actions, for metrics

	mu        sync.Mutex
	acked     int64  // appends of slots below are acknowledged
	confirmed uint64 // positions below are confirmed
	delivered uint64 // the end of the positions delivered (speculatively above confirmed) and not failed
	view      uint64
	events    []Event
	base      uint64 // the index of events[0]
	changed   chan struct{}
	waiters   ackHeap
	err       error // why the runner stopped
}

// Start starts a runner for shard id of topic. It returns at once; the runner stops when Stop
// is called or the node stops leading the partition.
func Start(topic string, id int32, cfg order.Config, log Log, feed Feed, logger *slog.Logger) *Runner {
	r := &Runner{topic: topic, id: id, cfg: cfg, log: log, feed: feed, logger: logger, signals: make(chan order.CutID, 16),
		stall: make(chan time.Duration, 1), stop: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	go r.run()
	return r
}

// Stop stops the runner and waits for it.
func (r *Runner) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// Done is closed once the runner has stopped.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Signal hands the runner a lag-fix signal.
func (r *Runner) Signal(through order.CutID) {
	select {
	case r.signals <- through:
	default: // the sequencer signals again
	}
}

// Stall makes the runner stop for d, as if the shard's process were frozen (fault injection:
// the sequencer fails the shard after FailAfter, and it joins again once it runs).
func (r *Runner) Stall(d time.Duration) {
	select {
	case r.stall <- d:
	default:
	}
}

// Acked is how many slots' appends are acknowledged (their cuts committed).
func (r *Runner) Acked() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// WaitAcked waits until the appends below offset end are acknowledged. Each waiter is woken
// once, when the acknowledged prefix passes its end (not at every event of the shard).
func (r *Runner) WaitAcked(ctx context.Context, end int64) error {
	r.mu.Lock()
	if r.acked >= end {
		r.mu.Unlock()
		return nil
	}
	if r.err != nil {
		err := r.err
		r.mu.Unlock()
		return err
	}
	w := &ackWaiter{end: end, ch: make(chan struct{})}
	heap.Push(&r.waiters, w)
	r.mu.Unlock()
	select {
	case <-w.ch:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.acked >= end {
			return nil
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err() // the waiter stays in the heap until the prefix passes it: harmless
	}
}

// ackWaiter is an append waiting for its acknowledgement.
type ackWaiter struct {
	end int64
	ch  chan struct{}
}

// ackHeap orders waiters by end (container/heap).
type ackHeap []*ackWaiter

func (h ackHeap) Len() int           { return len(h) }
func (h ackHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h ackHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ackHeap) Push(x any)        { *h = append(*h, x.(*ackWaiter)) }
func (h *ackHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// wakeLocked wakes the waiters the acknowledged prefix has passed (all of them once stopped).
func (r *Runner) wakeLocked() {
	for len(r.waiters) > 0 && (r.waiters[0].end <= r.acked || r.err != nil) {
		close(heap.Pop(&r.waiters).(*ackWaiter).ch)
	}
}

// Events returns the events from index from on (a copy), the next index, and a channel closed
// when more arrive or the runner stops (then Events from the end returns why). A subscriber
// starts from Head.
func (r *Runner) Events(from uint64) ([]Event, uint64, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from < r.base {
		return nil, from, nil, ErrBehind
	}
	end := r.base + uint64(len(r.events))
	if from >= end {
		return nil, end, r.changed, r.err
	}
	return append([]Event(nil), r.events[from-r.base:]...), end, r.changed, nil
}

// Head is the index of the next event, the confirmed prefix and the view.
func (r *Runner) Head() (next uint64, confirmed uint64, view uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.base + uint64(len(r.events)), r.confirmed, r.view
}

// Delivered is the end of the positions the shard has delivered (speculatively above the
// confirmed prefix) and not failed since, the confirmed prefix, the view, and the end of the
// partition's durable slots: how far this shard's speculation runs ahead.
func (r *Runner) Delivered() (delivered, confirmed, view uint64, durable int64) {
	durable = r.log.HighWatermark()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delivered, r.confirmed, r.view, durable
}

func (r *Runner) run() {
	defer close(r.done)
	err := r.loop()
	r.mu.Lock()
	r.err = err
	r.wakeLocked()
	// changed stays closed: nothing comes after this, and a subscriber that still had events
	// to read takes them with this channel and must then come back to learn that it stopped
	// (a fresh channel here was never closed, and such a subscriber waited for good).
	close(r.changed)
	r.mu.Unlock()
}

func (r *Runner) loop() error {
	st, seq, ok := r.feed.Snapshot(r.topic)
	for !ok { // the sequencer has not created the topic yet
		select {
		case <-r.stop:
			return ErrStopped
		case <-time.After(10 * time.Millisecond):
		}
		st, seq, ok = r.feed.Snapshot(r.topic)
	}
	fed := r.log.HighWatermark()
	sh := order.ResumeShard(r.cfg, r.id, st, fed, 0)
	r.mu.Lock()
	r.acked, r.confirmed, r.view = st.Slots[r.id], st.Committed(), st.View
	r.mu.Unlock()
	r.handle(sh, sh.Durable(0, time.Now()))
	tick := time.NewTicker(r.cfg.TOrd / 2)
	defer tick.Stop()
	var lastJoin time.Time
	for {
		hwCh, feedCh := r.log.Changed(), r.feed.Changed()
		now := time.Now()
		if !r.log.Leading() {
			return ErrStopped
		}
		if hw := r.log.HighWatermark(); hw > fed {
			r.handle(sh, sh.Durable(hw-fed, now))
			fed = hw
		}
		ents, ok := r.feed.Since(r.topic, seq)
		if !ok {
			// The member restored a snapshot, or this runner fell behind what it keeps.
			if st, seq, ok = r.feed.Snapshot(r.topic); !ok {
				return ErrStopped // the topic is gone
			}
			var o order.Out
			sh, o = sh.Rebase(st, now)
			r.counts.Rebases.Add(1)
			if o.Truncate != nil {
				fed = *o.Truncate
				r.feed.Join(r.topic, r.id)
				lastJoin = now
			}
			r.handle(sh, o)
			continue
		}
		for _, e := range ents {
			o, err := sh.Apply(e, now)
			seq++
			if err != nil {
				r.logger.Error("shard: applying the sequencer's entry", "topic", r.topic, "shard", r.id, "err", err)
				continue
			}
			if o.Truncate != nil {
				// Failed: its slots from *o.Truncate on were never acknowledged. They stay in
				// the log and are fed again once it joins (they take positions then).
				fed = *o.Truncate
				r.feed.Join(r.topic, r.id)
				lastJoin = now
			}
			r.handle(sh, o)
		}
		select {
		case <-r.stop:
			return ErrStopped
		case <-hwCh:
		case <-feedCh:
		case c := <-r.signals:
			r.handle(sh, sh.Signal(c, time.Now()))
		case d := <-r.stall:
			r.logger.Warn("shard: stalled (fault injection)", "topic", r.topic, "shard", r.id, "for", d)
			select {
			case <-time.After(d):
			case <-r.stop:
				return ErrStopped
			}
		drop:
			for { // what the frozen shard would not have heard
				select {
				case <-r.signals:
				default:
					break drop
				}
			}
		case <-tick.C:
			now := time.Now()
			r.handle(sh, sh.Tick(now))
			// Failed (seen now or found so when this leader resumed the shard): ask to join
			// until a table takes it back; a request can be lost with a sequencer leader.
			if st := sh.State(); st.Out[r.id] && !st.Joining[r.id] && now.Sub(lastJoin) >= 100*time.Millisecond {
				r.feed.Join(r.topic, r.id)
				lastJoin = now
			}
		}
	}
}

// handle carries out a state machine's output.
// Counts are what a runner did of the protocol since it started: reports sent (of which
// answers to a lag-fix signal, and backlogs drained at once) and coalesced no-op entries
// appended (and the slots they fill), and rebases onto a sequencer state it could not follow
// entry by entry (order.Shard.Rebase).
type Counts struct {
	Reports, LagFixReports, Drains, NoOpEntries, NoOpSlots atomic.Uint64
	Rebases                                                atomic.Uint64
}

// Counts returns the runner's counters.
func (r *Runner) Counts() *Counts { return &r.counts }

func (r *Runner) handle(sh *order.Shard, o order.Out) {
	view := sh.State().View
	if o.NoOp > 0 {
		if err := r.log.AppendNoOp(batch.NoOp{Slots: o.NoOp, View: view}); err != nil {
			// Appends stopped for a leadership transfer (asked again once they resume), not
			// leading any more, or the log failed (the loop finds out; a new leader resumes).
			r.logger.Debug("shard: appending a no-op entry", "topic", r.topic, "shard", r.id, "err", err)
			sh.NoOpRefused(&o)
		} else {
			r.counts.NoOpEntries.Add(1)
			r.counts.NoOpSlots.Add(uint64(o.NoOp))
		}
	}
	if o.Report != nil {
		r.counts.Reports.Add(1)
		if o.Report.LagFix {
			r.counts.LagFixReports.Add(1)
		}
		if o.Drain {
			r.counts.Drains.Add(1)
		}
		r.feed.Report(r.topic, *o.Report)
	}
	if len(o.Deliver) == 0 && o.Confirm == 0 && o.Acked == 0 && len(o.Fail) == 0 {
		return
	}
	r.mu.Lock()
	r.view = view
	for _, f := range o.Fail {
		r.events = append(r.events, Event{Kind: Fail, After: f.After, View: f.View})
		r.delivered = min(r.delivered, f.After)
	}
	for _, d := range o.Deliver {
		r.events = append(r.events, Event{Kind: Deliver, Slot: d.Slot, N: d.N, Position: d.Position, View: d.View})
		r.delivered = max(r.delivered, d.Position+uint64(d.N))
	}
	if o.Confirm > r.confirmed {
		r.confirmed = o.Confirm
		r.events = append(r.events, Event{Kind: Confirm, UpTo: o.Confirm, View: r.view})
	}
	if o.Acked > r.acked {
		r.acked = o.Acked
		r.wakeLocked()
	}
	if over := len(r.events) - keepEvents; over > keepEvents/4 {
		r.events = append(r.events[:0:0], r.events[over:]...)
		r.base += uint64(over)
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}
