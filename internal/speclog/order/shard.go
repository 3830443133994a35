package order

import (
	"fmt"
	"time"
)

// Delivery is a run of a shard's slots at consecutive global positions, delivered with view
// View: speculatively (before their cut commits) or after a failure, again.
type Delivery struct {
	Slot     int64
	Position uint64
	N        int64
	View     uint64
}

// Out is what a shard's state machine asks its caller to do. Zero fields ask nothing.
type Out struct {
	Deliver  []Delivery
	Report   *Report
	NoOp     int64        // append one coalesced no-op entry of this many slots
	Confirm  uint64       // positions below are confirmed (0: no news)
	Acked    int64        // the appends of slots below are acknowledged (0: no news)
	Fail     []ViewChange // view changes, in order (Apply: one; Rebase: each it missed)
	Truncate *int64       // this shard was failed: its slots from here on were never acknowledged
	Drain    bool         // Report drains a backlog past DrainAfter cuts at once
}

// ViewChange is a view change: every speculation at or after After failed when View began.
type ViewChange struct{ After, View uint64 }

// Shard is one shard's state machine: it turns durable slots into speculative deliveries and
// reports of exactly its quota, fills deficits with coalesced no-ops, and turns the sequencer's
// entries (which it applies to its own copy of the sequencer state, in log order) into
// confirmations, acknowledgements and failure notices.
type Shard struct {
	id         int32
	cfg        Config
	st         *State
	durable    int64 // slots durable, from the shard's beginning
	delivered  int64 // slots delivered in the current view
	reported   CutID // the last cut reported
	lastReport time.Time
	noopUntil  int64 // a no-op was asked for to reach this many slots
	confirmed  uint64
	acked      int64
	out        bool  // failed: waits to join again
	lagFix     bool  // reporting because of a lag signal
	noops      int64 // no-op slots asked for, in total
	records    int64 // the most records of its own seen durable (durable − noops)
	lastRecord time.Time
}

// NewShard starts a shard on the sequencer's first table (as NewState), with durable slots
// already in its log.
func NewShard(cfg Config, id int32, first *Table, durable int64) (*Shard, error) {
	st, err := NewState(cfg, first)
	if err != nil {
		return nil, err
	}
	sh := &Shard{id: id, cfg: cfg, st: st, durable: durable, records: durable, reported: CutID{Window: first.Window, Cut: -1}}
	if i := first.Index(id); i >= 0 {
		sh.delivered, sh.acked = first.SlotBase[i], first.SlotBase[i]
	}
	return sh, nil
}

// ResumeShard starts a shard from a copy of the sequencer's applied state (a partition's new
// leader; the entries after st follow through Apply), with durable slots in its log of which
// noOps were no-ops. Its reports go on from the last committed cut, and it delivers again from
// its committed slots: speculations the previous leader made are made again, at the same
// positions (they are durable, and the tables fix where they go). Durable(0, now) gives the
// first deliveries and report.
func ResumeShard(cfg Config, id int32, st *State, durable, noOps int64) *Shard {
	st.cfg = cfg
	committed := st.Slots[id]
	sh := &Shard{id: id, cfg: cfg, st: st, durable: durable, delivered: committed, acked: committed,
		reported: st.Last, confirmed: st.Committed(), out: st.Out[id], noops: noOps, records: durable - noOps}
	if t := st.Tables[st.Last.Window]; t == nil || t.Index(id) < 0 {
		// the window just turned, or the shard joins with the next table: report from there
		if c := st.Current(); c != nil && c.Index(id) >= 0 {
			sh.reported = CutID{Window: c.Window - 1, Cut: cfg.W - 1}
			if c.Window == 0 {
				sh.reported = CutID{Window: 0, Cut: -1}
			}
		}
	}
	return sh
}

// Rebase moves the shard onto a newer copy of the sequencer's state whose entries since its
// own it cannot apply (its node's member restored a snapshot, or the shard fell further behind
// than the member keeps entries), as ResumeShard does for a new leader, keeping what it counted
// (durable slots, no-ops asked for). Unlike a new leader it has subscribers: they read from the
// log only what was durable with a position when they started, and wait for this shard's
// deliveries for the rest. So the slots it had not delivered yet are delivered now, at the
// positions the new state committed them to meanwhile; the new state's confirmations and
// acknowledgements come at once. Each view change it missed is announced as it happened
// (Fail: its own speculation from the first one on failed), and it delivers again from its
// confirmed slots, in the new view; a failure of this shard itself also truncates it, as Apply
// does, after delivering its slots committed before the failure.
func (sh *Shard) Rebase(st *State, now time.Time) (*Shard, Out) {
	n := ResumeShard(sh.cfg, sh.id, st, sh.durable, sh.noops)
	n.noopUntil = sh.noopUntil // a no-op entry asked for is in the log, durable or not
	n.records, n.lastRecord = sh.records, sh.lastRecord
	var o Out
	from := sh.delivered
	for v := sh.st.View + 1; v <= st.View; v++ {
		after, _ := st.ViewAfter(v)
		o.Fail = append(o.Fail, ViewChange{After: after, View: v})
		from = sh.acked // its speculation failed: again from its confirmed slots, in the new view
	}
	if _, _, ok := n.position(from); !ok && from < n.delivered {
		// Trimmed meanwhile: the slots after the trim point it owes all the same.
		from = max(from, st.FirstSlot(sh.id, 0))
	}
	if _, _, ok := n.position(from); ok && from < n.delivered {
		n.delivered = from
	}
	if n.out && !sh.out { // failed meanwhile: its slots committed before that, then nothing
		keep := st.Slots[sh.id]
		n.out, n.durable = false, keep
		n.deliver(&o)
		n.out, n.noopUntil = true, 0
		o.Truncate = &keep
	}
	d := n.Durable(0, now)
	o.Deliver, o.Report = append(o.Deliver, d.Deliver...), d.Report
	o.Confirm, o.Acked = n.confirmed, n.acked
	return n, o
}

// Clone is a deep copy of the state (a shard's own copy, a snapshot being written).
func (s *State) Clone() *State {
	c, err := DecodeState(s.cfg, s.Encode())
	if err != nil {
		panic(fmt.Sprintf("order: cloning the sequencer state: %v", err))
	}
	return c
}

// State is the shard's copy of the sequencer state (read only).
func (sh *Shard) State() *State { return sh.st }

// Durable takes n more durable slots (records, or a no-op entry's slots).
func (sh *Shard) Durable(n int64, now time.Time) Out {
	sh.durable += n
	if r := sh.durable - sh.noops; r > sh.records {
		sh.records, sh.lastRecord = r, now
	}
	var o Out
	sh.deliver(&o)
	sh.report(&o, now, true)
	return o
}

// Tick fills a deficit with a no-op when no report went out for 1.5·T_ord (1.5·g·T_ord with
// g staggered groups: the shard is in every g-th cut), and re-sends the last report (it may
// have been lost, or the sequencer's leader changed).
func (sh *Shard) Tick(now time.Time) Out {
	var o Out
	g := 1
	if t := sh.st.Current(); t != nil {
		g = t.groups()
	}
	if sh.out {
		return o
	}
	if now.Sub(sh.lastReport) >= sh.cfg.TOrd {
		sh.report(&o, now, true) // the next cut, if its records are durable
		if o.Report != nil {
			return o
		}
	}
	pace := sh.cfg.TOrd * 3 / 2 * time.Duration(g)
	if sh.idle(now) {
		pace = max(pace, sh.cfg.IdlePace)
	}
	if now.Sub(sh.lastReport) < pace {
		return o
	}
	c := sh.reported.next(sh.cfg.W)
	if t := sh.st.Tables[c.Window]; t != nil && sh.st.Active(sh.id, c) {
		sh.askNoOp(&o, t.SlotsThrough(sh.id, c.Cut))
	}
	if sh.reported.Cut >= 0 || sh.reported.Window > 0 { // again: it may have been lost, or the sequencer's leader changed
		o.Report = sh.currentReport(now)
	}
	sh.lastReport = now
	return o
}

// currentReport is the report of the shard's slots through its last reported cut (a report
// sent again says nothing of lag-fix: report marks the one that moves).
func (sh *Shard) currentReport(now time.Time) *Report {
	return &Report{Shard: sh.id, View: sh.st.View, Through: sh.reported, Slots: sh.reportedSlots(), NoOps: sh.noops,
		Records: sh.durable - sh.noops, Idle: sh.idle(now)}
}

// idle reports whether none of the shard's own records became durable for 2·IdlePace (the
// time counts from its first tick when it has had none).
func (sh *Shard) idle(now time.Time) bool {
	if sh.cfg.IdlePace <= 0 {
		return false
	}
	if sh.lastRecord.IsZero() {
		sh.lastRecord = now
	}
	return now.Sub(sh.lastRecord) >= 2*sh.cfg.IdlePace
}

// Signal is the sequencer's lag-fix: report through cut c at once, filling with one no-op.
func (sh *Shard) Signal(c CutID, now time.Time) Out {
	var o Out
	if sh.out {
		return o
	}
	need := int64(0)
	for d := sh.reported.next(sh.cfg.W); !c.Less(d); d = d.next(sh.cfg.W) {
		t := sh.st.Tables[d.Window]
		if t == nil {
			break
		}
		if sh.st.Active(sh.id, d) {
			need = t.SlotsThrough(sh.id, d.Cut)
		}
	}
	sh.askNoOp(&o, need)
	sh.lagFix = true // the reports until it is fixed are the sequencer's pace, not this shard's
	sh.report(&o, now, false)
	if o.Report == nil && !sh.reported.Less(c) {
		// Reported through c already: the sequencer signals again because that report did
		// not reach it. An idle shard would only send it again at its idle pace.
		o.Report = sh.currentReport(now)
	}
	return o
}

// askNoOp asks for a no-op entry that brings the shard's slots to need, counting the slots of
// a no-op asked for before and not durable yet.
func (sh *Shard) askNoOp(o *Out, need int64) {
	if have := max(sh.durable, sh.noopUntil); need > have {
		o.NoOp, sh.noopUntil = need-have, need
		sh.noops += o.NoOp
	}
}

// NoOpRefused takes back the no-op entry o asked for, which the log refused (appends were
// stopped for a leadership transfer that then did not happen, say): its slots are not
// coming, so a later Tick or Signal asks for them again (askNoOp counts a no-op asked for as
// coming: without this an idle shard would stall every cut). o's report stops counting it.
func (sh *Shard) NoOpRefused(o *Out) {
	n := o.NoOp
	if n <= 0 {
		return
	}
	sh.noops -= n
	sh.noopUntil -= n
	if o.Report != nil {
		o.Report.NoOps -= n
		o.Report.Records += n
	}
	o.NoOp = 0
}

// Apply applies the sequencer's next entry (in log order).
func (sh *Shard) Apply(e Entry, now time.Time) (Out, error) {
	var o Out
	if err := sh.st.Apply(e); err != nil {
		return o, err
	}
	switch {
	case e.Cut != nil:
		if c := sh.st.Committed(); c > sh.confirmed {
			sh.confirmed, o.Confirm = c, c
		}
		if a := sh.st.Slots[sh.id]; a > sh.acked {
			sh.acked, o.Acked = a, a
		}
	case e.Fail != nil && e.Fail.Shard == sh.id:
		keep := sh.st.Slots[sh.id]
		sh.out, sh.durable, sh.delivered, sh.noopUntil = true, keep, keep, 0
		o.Truncate = &keep
		// its own speculation after the confirmed prefix is void too
		o.Fail = []ViewChange{{After: sh.confirmed, View: sh.st.View}}
		return o, nil
	case e.Fail != nil:
		o.Fail = []ViewChange{{After: sh.confirmed, View: sh.st.View}}
		sh.delivered = sh.st.Slots[sh.id] // deliver again from the confirmed prefix, in the new view
	case e.Table != nil && e.Table.Index(sh.id) >= 0 && sh.out:
		sh.out = false // joined again
		sh.reported = CutID{Window: e.Table.Window - 1, Cut: sh.cfg.W - 1}
	}
	sh.deliver(&o)
	sh.report(&o, now, true)
	return o, nil
}

// deliver delivers the durable slots not delivered yet whose positions the known tables fix.
func (sh *Shard) deliver(o *Out) {
	if sh.out {
		return
	}
	for sh.delivered < sh.durable {
		pos, span, ok := sh.position(sh.delivered)
		if !ok {
			return // past the known tables: the lease holds delivery until the next table
		}
		n := min(sh.durable-sh.delivered, span)
		o.Deliver = append(o.Deliver, Delivery{Slot: sh.delivered, Position: pos, N: n, View: sh.st.View})
		sh.delivered += n
	}
}

// position is a slot's global position by the known tables, and how many slots from it lie at
// consecutive positions.
func (sh *Shard) position(slot int64) (uint64, int64, bool) {
	noOp := false
	for _, t := range sh.st.Tables {
		if p, n, c, ok := t.Span(sh.cfg.W, sh.id, slot); ok {
			if sh.st.Active(sh.id, CutID{Window: t.Window, Cut: c}) {
				return p, n, true
			}
			// A slot of a cut after this shard failed: a no-op now, unless the table that
			// takes it back gives the same slot number (the failed cuts' slots) a position.
			noOp = true
		}
	}
	if noOp {
		return 0, 0, false
	}
	if slot < sh.st.Slots[sh.id] { // committed in a window whose table is gone (a resumed shard)
		return sh.st.History.Span(sh.cfg.W, sh.id, slot)
	}
	return 0, 0, false
}

// reportedSlots is the shard's slots through its last reported cut.
func (sh *Shard) reportedSlots() int64 {
	if t := sh.st.Tables[sh.reported.Window]; t != nil && t.Index(sh.id) >= 0 {
		return t.SlotsThrough(sh.id, sh.reported.Cut)
	}
	return sh.st.Slots[sh.id]
}

// backlogged reports whether more durable records wait for slots than DrainAfter cuts of
// the shard's quota hold.
func (sh *Shard) backlogged() bool {
	if sh.cfg.DrainAfter == 0 {
		return false
	}
	c := sh.reported.next(sh.cfg.W)
	t := sh.st.Tables[c.Window]
	if t == nil {
		return false
	}
	i := t.Index(sh.id)
	if i < 0 || t.Quotas[i] == 0 {
		return false
	}
	return sh.durable-sh.reportedSlots() > int64(sh.cfg.DrainAfter)*t.Quotas[i]
}

// report reports through the last cut whose slots are all durable: paced, at most one cut of
// its own per T_ord (records beyond the quota wait for the next report: a clump made durable
// at once does not run this shard ahead of the others, which would make them fill the cuts
// between with no-ops), or every such cut at once for a lag-fix signal or when the backlog
// exceeds DrainAfter cuts (the paper's back-to-back reports after a burst).
func (sh *Shard) report(o *Out, now time.Time, paced bool) {
	if sh.out {
		return
	}
	// A lag-fix in progress, or a no-op entry asked for to complete a cut, reports at once.
	paced = paced && !sh.lagFix && sh.noopUntil <= sh.reportedSlots()
	if paced && now.Sub(sh.lastReport) < sh.cfg.TOrd {
		return // the next tick reports it
	}
	moved := false
	if sh.reported.Less(sh.st.Last) {
		// committed without this shard's report: an earlier leader of its partition reported
		// them (their slots are durable), and their tables may be gone from the state
		sh.reported = sh.st.Last
	}
	drain := paced && sh.backlogged()
	if drain {
		paced = false // every cut the backlog fills, now
	}
	for {
		c := sh.reported.next(sh.cfg.W)
		t := sh.st.Tables[c.Window]
		if t == nil {
			break
		}
		if sh.st.Active(sh.id, c) && t.SlotsThrough(sh.id, c.Cut) > sh.durable {
			break
		}
		if !sh.st.Active(sh.id, c) && (sh.st.Out[sh.id] || t.Index(sh.id) < 0) {
			break
		}
		sh.reported, moved = c, true
		// Paced: one cut of its own per report, or more while within LagFix−1 cuts of the last
		// committed one (a backlog drains, yet the shard never gets so far ahead of the others
		// that they are signalled to fill the cuts between with no-ops).
		if paced && sh.st.Active(sh.id, c) && cutsBetween(sh.st.Last, c.next(sh.cfg.W), sh.cfg.W) >= sh.cfg.LagFix {
			break
		}
	}
	if moved {
		o.Report = sh.currentReport(now)
		o.Report.LagFix = sh.lagFix
		sh.lastReport, sh.lagFix = now, false
		o.Drain = drain
	}
}
