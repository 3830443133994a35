package order

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// CutID names a cut: cut Cut (0 ≤ Cut < W) of window Window. The zero CutID with Cut -1 means
// "before the first cut".
type CutID struct {
	Window uint64 `json:"window"`
	Cut    int    `json:"cut"`
}

// Less orders cut ids.
func (c CutID) Less(d CutID) bool {
	return c.Window < d.Window || c.Window == d.Window && c.Cut < d.Cut
}

// next is the cut after c in windows of w cuts.
func (c CutID) next(w int) CutID {
	if c.Cut+1 >= w {
		return CutID{Window: c.Window + 1, Cut: 0}
	}
	return CutID{Window: c.Window, Cut: c.Cut + 1}
}

// Entry is one decision of the sequencer, replicated (the sequencer's Raft log) and applied by
// every replica in order. Exactly one field is set.
type Entry struct {
	Cut   *CutID     `json:"cut,omitempty"`   // the next cut is committed
	Table *Table     `json:"table,omitempty"` // the next window's table (replacing an earlier decision)
	Fail  *FailEntry `json:"fail,omitempty"`  // a whole shard failed
	Join  *JoinEntry `json:"join,omitempty"`  // a shard asks to take part from the next decided table
}

// FailEntry declares a shard failed: its slots after cut After of the current window are no-ops,
// the view goes up, and it takes no part in later tables until it joins again.
type FailEntry struct {
	Shard int32 `json:"shard"`
	After CutID `json:"after"` // its last committed cut (Cut -1: none in the window)
}

// JoinEntry adds a shard (a new partition, or a failed shard that is back) to the next table.
type JoinEntry struct {
	Shard int32 `json:"shard"`
}

// Errors of Apply: an entry that does not follow from the state (a bug or a stale leader).
var (
	ErrOutOfOrder = errors.New("order: entry out of order")
	ErrNoTable    = errors.New("order: no table for the next window")
)

// State is the sequencer's replicated state: what its log's entries add up to.
type State struct {
	cfg    Config
	Tables map[uint64]*Table `json:"tables"` // the current window's and, once decided, the next's
	Last   CutID             `json:"last"`   // the last committed cut (Cut -1 before the first)
	View   uint64            `json:"view"`
	// Failed: shards failed in the current window, and since when (their slots after it are
	// no-ops); Out: shards taking no part until they join; Joining: asked to join.
	Failed  map[int32]CutID `json:"failed"`
	Out     map[int32]bool  `json:"out"`
	Joining map[int32]bool  `json:"joining"`
	// Slots: per shard, how many of its slots committed cuts cover (a rejoining shard goes on
	// from there; its later slots were never acknowledged).
	Slots map[int32]int64 `json:"slots"`
	// Benched: stragglers, and the first window of their quota 0 (straggler mitigation).
	Benched map[int32]uint64 `json:"benched"`
	// History: every window's layout since the trim point (positions of the past).
	History History `json:"history"`
	// Views: where each view began — the confirmed prefix when its failure voided the
	// speculation after it (the After of the shards' fail notices).
	Views map[uint64]uint64 `json:"views,omitempty"`
}

// ViewAfter is where view v began: the position from which it failed the speculation of older
// views (0 for the first view). ok is false for a view this state has not reached.
func (s *State) ViewAfter(v uint64) (after uint64, ok bool) {
	if v > s.View {
		return 0, false
	}
	return s.Views[v], true
}

// NewState starts a topic's sequencer with its first window's table.
func NewState(cfg Config, first *Table) (*State, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := first.check(); err != nil {
		return nil, err
	}
	s := &State{cfg: cfg, Tables: map[uint64]*Table{first.Window: first}, Last: CutID{Window: first.Window, Cut: -1},
		View: first.View, Failed: map[int32]CutID{}, Out: map[int32]bool{}, Joining: map[int32]bool{}, Slots: map[int32]int64{}, Benched: map[int32]uint64{}}
	for i, sh := range first.Shards {
		s.Slots[sh] = first.SlotBase[i]
	}
	s.History.Add(cfg.W, first)
	return s, nil
}

// Current is the table of the window being cut.
func (s *State) Current() *Table { return s.Tables[s.Last.next(s.cfg.W).Window] }

// Committed is the global position prefix the committed cuts cover.
func (s *State) Committed() uint64 {
	t := s.Tables[s.Last.Window]
	if t == nil { // the window has just turned
		return s.Current().Start
	}
	return t.Prefix(s.Last.Cut)
}

// Active reports whether a shard must report cut c for it to commit (a quota in c's window,
// and not failed at or before c). A failure holds for the rest of its window only: Failed is
// cleared when the window turns, and a next window's table that has the shard was decided after
// it asked to join again, so its slots there are real (marking them no-ops early would tell a
// subscriber's merger to skip records the shard then delivers).
func (s *State) Active(shard int32, c CutID) bool {
	t := s.Tables[c.Window]
	if t == nil {
		return false
	}
	i := t.Index(shard)
	if i < 0 || !t.InCut(i, c.Cut) {
		return false
	}
	if f, failed := s.Failed[shard]; failed && f.Less(c) && c.Window <= s.Last.next(s.cfg.W).Window {
		return false
	}
	return true
}

// Owner is the shard and slot at a global position by the history and the decided tables
// (noOp: a failed shard's slot; ok false: not laid out yet, or trimmed).
func (s *State) Owner(pos uint64) (shard int32, slot int64, noOp, ok bool) {
	if shard, slot, noOp, ok = s.History.Owner(s.cfg.W, pos); ok {
		return shard, slot, noOp, ok
	}
	for _, t := range s.Tables {
		if sh, sl, cut, ok := t.Owner(s.cfg.W, pos); ok {
			return sh, sl, !s.Active(sh, CutID{Window: t.Window, Cut: cut}), true
		}
	}
	return 0, 0, false, false
}

// Position is the global position of a shard's slot, by the history and the decided tables.
func (s *State) Position(shard int32, slot int64) (uint64, bool) {
	if p, ok := s.History.Position(s.cfg.W, shard, slot); ok {
		return p, true
	}
	for _, t := range s.Tables {
		if p, _, c, ok := t.Span(s.cfg.W, shard, slot); ok && s.Active(shard, CutID{Window: t.Window, Cut: c}) {
			return p, true
		}
	}
	return 0, false
}

// FirstSlot is a shard's first committed slot at a position at or after pos, or its count of
// committed slots if it has none there: the shard's log start when the log is trimmed to pos
// (every slot below it is at a position below pos). A shard's committed slots have increasing
// positions, so it is a binary search over them; a slot whose position is no longer known
// (trimmed) lies below pos.
func (s *State) FirstSlot(shard int32, pos uint64) int64 {
	lo, hi := int64(0), s.Slots[shard]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if p, ok := s.Position(shard, mid); ok && p >= pos {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Config is the state's protocol configuration.
func (s *State) Config() Config { return s.cfg }

// Known reports whether a shard is part of the topic: in a table, failed, or asked to join.
func (s *State) Known(shard int32) bool {
	if _, ok := s.Slots[shard]; ok || s.Out[shard] || s.Joining[shard] {
		return true
	}
	for _, t := range s.Tables {
		if t.Index(shard) >= 0 {
			return true
		}
	}
	return false
}

// Apply applies one entry.
func (s *State) Apply(e Entry) error {
	switch {
	case e.Cut != nil:
		want := s.Last.next(s.cfg.W)
		if *e.Cut != want {
			return fmt.Errorf("%w: cut %+v, expected %+v", ErrOutOfOrder, *e.Cut, want)
		}
		t := s.Tables[want.Window]
		if t == nil {
			return fmt.Errorf("%w: window %d", ErrNoTable, want.Window)
		}
		if want.Cut == s.cfg.W-1 && s.Tables[want.Window+1] == nil {
			return fmt.Errorf("%w: window %d ends with cut %d", ErrNoTable, want.Window+1, want.Cut)
		}
		for _, sh := range t.Shards {
			if s.Active(sh, want) {
				s.Slots[sh] = t.SlotsThrough(sh, want.Cut)
			}
		}
		s.Last = want
		if want.Cut == s.cfg.W-1 { // the window is over: failures of it are settled, the next is fixed
			s.History.Add(s.cfg.W, s.Tables[want.Window+1])
			delete(s.Tables, want.Window)
			clear(s.Failed)
		}
		delete(s.Tables, want.Window-1)
	case e.Table != nil:
		if err := e.Table.check(); err != nil {
			return err
		}
		if g := e.Table.groups(); s.cfg.W%g != 0 {
			return fmt.Errorf("%w: %d staggered groups in a %d-cut window", ErrBadEntry, g, s.cfg.W)
		}
		cur := s.Last.next(s.cfg.W).Window
		if e.Table.Window != cur+1 || e.Table.View < s.View {
			return fmt.Errorf("%w: table of window %d (view %d) while cutting window %d (view %d)", ErrOutOfOrder, e.Table.Window, e.Table.View, cur, s.View)
		}
		if s.Tables[e.Table.Window] != nil {
			// Decided already (a failure since drops a table it concerns): shards may have
			// delivered into the window by that one.
			return fmt.Errorf("%w: a second table of window %d", ErrOutOfOrder, e.Table.Window)
		}
		s.Tables[e.Table.Window] = e.Table
		for i, sh := range e.Table.Shards {
			delete(s.Joining, sh)
			delete(s.Out, sh)
			if _, benched := s.Benched[sh]; e.Table.Quotas[i] == 0 && !benched {
				s.Benched[sh] = e.Table.Window
			} else if e.Table.Quotas[i] > 0 {
				delete(s.Benched, sh)
			}
		}
	case e.Fail != nil:
		f := e.Fail
		if _, already := s.Failed[f.Shard]; already || s.Out[f.Shard] {
			return nil // failed already: the same decision twice
		}
		if f.After != s.Last {
			// Decided on a state without the cuts since (or with cuts that were refused): the
			// failed shard's slots in those are committed, and must keep their positions.
			return fmt.Errorf("%w: fail of shard %d after cut %+v, the last cut is %+v", ErrOutOfOrder, f.Shard, f.After, s.Last)
		}
		s.Failed[f.Shard] = f.After
		s.Out[f.Shard] = true
		cur := s.Last.next(s.cfg.W).Window
		after := -1
		if f.After.Window == cur {
			after = f.After.Cut
		}
		s.History.Fail(Failure{Window: cur, Shard: f.Shard, After: after})
		if s.Views == nil {
			s.Views = map[uint64]uint64{}
		}
		s.Views[s.View+1] = s.Committed()
		s.View++
		if n := s.Tables[s.Last.next(s.cfg.W).Window+1]; n != nil && n.Index(f.Shard) >= 0 {
			// Decided with the failed shard: the leader decides again. The shards that table was
			// taking back (joined, not in the current window) must be in the new decision too.
			cur := s.Current()
			for _, sh := range n.Shards {
				if sh != f.Shard && cur.Index(sh) < 0 {
					s.Joining[sh] = true
				}
			}
			delete(s.Tables, n.Window)
		}
	case e.Join != nil:
		sh := e.Join.Shard
		if !s.Out[sh] && !s.Joining[sh] && s.Known(sh) {
			// Taken back already (a join decided before the table that did so): joining
			// again would lay its slots of this window out twice.
			return fmt.Errorf("%w: join of shard %d, which takes part", ErrOutOfOrder, sh)
		}
		s.Joining[sh] = true
	default:
		return fmt.Errorf("%w: an empty entry", ErrOutOfOrder)
	}
	return nil
}

// Report is a shard's message to the sequencer: its slots through cut Through are durable.
type Report struct {
	Shard   int32  `json:"shard"`
	View    uint64 `json:"view"`
	Through CutID  `json:"through"`
	Slots   int64  `json:"slots"`  // the shard's slots through that cut
	NoOps   int64  `json:"no_ops"` // of all its slots so far, the no-ops (Slots − NoOps: its records, whose rate sets its quota)
	// LagFix: sent because the sequencer signalled a lag (not at the shard's own pace: its
	// timing does not count as the shard's report interval).
	LagFix bool `json:"lag_fix,omitempty"`
	// Records: the shard's durable records so far (reported or not): their rate, backlog
	// included, sets its quota.
	Records int64 `json:"records,omitempty"`
	// Idle: the shard has had no records of its own for a while and pads only every
	// Config.IdlePace: signal it as soon as another shard is a cut ahead.
	Idle bool `json:"idle,omitempty"`
}

// Signal tells a lagging shard to report through a cut at once (lag-fix).
type Signal struct {
	Shard   int32
	Through CutID
}

// Leader is the sequencer leader's decision logic over the applied state: it takes reports and
// time, and proposes entries (which count only once applied) and signals. A new leader starts
// afresh from the applied state; shards re-send their reports.
type Leader struct {
	st       *State
	reported map[int32]CutID
	arrivals map[int32][]arrival // recent reports, for rates
	paced    map[int32]int64     // records made durable, in total (as of the last report)
	mark     map[int32]arrival   // paced as of the last table decision, for the rate
	records  map[int32]int64     // records (slots that are not no-ops) as of each shard's last report
	signaled map[int32]time.Time // first signal of the current lag
	resent   map[int32]time.Time // last signal (a lost signal is sent again)
	lagFixes map[int32]int       // lags signalled since the last table decision
	idle     map[int32]bool      // the shard's last report said it is idle (Report.Idle)
	proposed CutID               // the last cut proposed (not necessarily applied yet)
	// decided: the window whose table was last proposed, in view decidedView (a failure
	// drops a table decided before it, and the window's table is decided again)
	decided     uint64
	decidedView uint64
	takeover    func(shard int32) bool // see SetTakeover
}

// SetTakeover tells the leader which lagging shards another replica can take over, or has
// (their leader died or froze, and the controller moves the partition to an in-sync follower,
// which has every durable record): those are failed only after Config.Takeover, not FailAfter,
// so the new leader resumes the shard where the sequencer's state left it (the same slots at
// the same positions) and nothing speculated is failed. f is asked only about a shard past
// FailAfter, on every Tick while it lags.
func (l *Leader) SetTakeover(f func(shard int32) bool) { l.takeover = f }

// NewLeader starts the leader logic on the applied state st (which the caller keeps applying
// entries to).
func NewLeader(st *State) *Leader {
	return &Leader{st: st, reported: map[int32]CutID{}, arrivals: map[int32][]arrival{}, paced: map[int32]int64{}, mark: map[int32]arrival{}, records: map[int32]int64{}, signaled: map[int32]time.Time{}, resent: map[int32]time.Time{}, lagFixes: map[int32]int{}, idle: map[int32]bool{}, proposed: st.Last}
}

// Report takes a shard's report.
func (l *Leader) Report(r Report, now time.Time) {
	if r.View != l.st.View || l.st.Out[r.Shard] {
		return // from before a view change, or from a failed shard: fenced
	}
	if prev, ok := l.reported[r.Shard]; ok && !prev.Less(r.Through) {
		return
	}
	l.reported[r.Shard] = r.Through
	l.idle[r.Shard] = r.Idle
	delete(l.signaled, r.Shard)
	records := r.Records
	if records == 0 {
		records = r.Slots - r.NoOps // a shard that does not say its durable records
	}
	// Records dips while a no-op entry the shard asked for is not durable yet (its slots are
	// counted as no-ops already): only growth past the highest count seen is new demand.
	prevRecords, had := l.records[r.Shard]
	l.records[r.Shard] = max(records, prevRecords)
	if !had {
		return
	}
	l.paced[r.Shard] += max(records-prevRecords, 0)
	if r.LagFix {
		return // reports made at the sequencer's request are not the shard's report interval
	}
	a := append(l.arrivals[r.Shard], arrival{at: now, slots: l.paced[r.Shard]})
	if len(a) > 16 {
		a = a[len(a)-16:]
	}
	l.arrivals[r.Shard] = a
}

// Tick decides: the cuts every active shard has reported, the next window's table at cut
// DecideAt, lag signals and failures.
func (l *Leader) Tick(now time.Time) ([]Entry, []Signal) {
	st, w := l.st, l.st.cfg.W
	if l.proposed.Less(st.Last) {
		l.proposed = st.Last
	}
	var out []Entry
	// The next window's table, once its decision point is proposed (or sooner if needed).
	cur := st.Last.next(w).Window
	due := l.proposed.Window > cur || l.proposed.Window == cur && l.proposed.Cut+1 >= st.cfg.DecideAt
	if st.Tables[cur+1] == nil && due && (l.decided <= cur || l.decidedView != st.View) {
		out = append(out, Entry{Table: l.nextTable(now)})
		l.decided, l.decidedView = cur+1, st.View
		clear(l.lagFixes)
	}
	// Cuts.
	for {
		c := l.proposed.next(w)
		if st.Tables[c.Window] == nil || (c.Cut == w-1 && st.Tables[c.Window+1] == nil) {
			break // the next table is not applied yet
		}
		if !l.allReported(c) {
			break
		}
		out = append(out, Entry{Cut: &c})
		l.proposed = c
	}
	// Lag-fix and failures.
	var most CutID
	for _, r := range l.reported {
		if most.Less(r) {
			most = r
		}
	}
	var signals []Signal
	t := st.Current()
	// A shard that takes part again (or for the first time) does so from the next window. When
	// every shard of this one is idle (each pads a cut only every IdlePace), they are asked to
	// pad to its end, or the newcomer's records would wait up to W·IdlePace for the window to
	// end. With a busy shard the window passes at its pace (about W·T_ord), and its reports are
	// not disturbed: the idle shards' jump to the end would have it signalled to pad too.
	hurry := CutID{Window: t.Window, Cut: w - 1}
	if !l.allIdle(t) || !l.joinPending(t) {
		hurry = CutID{}
	}
	for _, sh := range t.Shards {
		c := st.Last.next(w)
		if !st.Active(sh, c) {
			continue
		}
		r, ok := l.reported[sh]
		if !ok {
			r = CutID{Window: st.Last.Window, Cut: -1}
		}
		lagFix, most := st.cfg.LagFix, most
		if l.idle[sh] {
			lagFix = 1 // it pads only when asked
			if most.Less(hurry) {
				most = hurry
			}
		}
		if lag := cutsBetween(r, most, w); lag < lagFix {
			continue
		}
		since, signaled := l.signaled[sh]
		switch {
		case !signaled:
			l.signaled[sh], l.resent[sh] = now, now
			if a := l.arrivals[sh]; !l.idle[sh] && (len(a) == 0 || now.Sub(a[len(a)-1].at) > st.cfg.StragglerGap) {
				// It held the others up: no report of its own for long. (A shard that reports
				// at its pace and lags only because another ran ahead on a backlog is no
				// straggler.)
				l.lagFixes[sh]++
			}
			signals = append(signals, Signal{Shard: sh, Through: most})
		case now.Sub(since) < st.cfg.FailAfter || l.awaitTakeover(sh, now.Sub(since)):
			if now.Sub(l.resent[sh]) >= 2*st.cfg.TOrd {
				l.resent[sh] = now // the signal or the answer may have been lost
				signals = append(signals, Signal{Shard: sh, Through: most})
			}
		default:
			// Its slots after the last cut decided (applied, or proposed ahead of this entry)
			// are no-ops: what it reported beyond is on a shard that no longer runs, and a
			// confirmed position must be deliverable. The cuts proposed before stay its.
			after := l.proposed
			if after.Less(st.Last) {
				after = st.Last
			}
			out = append(out, Entry{Fail: &FailEntry{Shard: sh, After: after}})
			delete(l.signaled, sh)
		}
	}
	return out, signals
}

// joinPending reports whether a shard waits to take part from the next window: it asked to
// join, or the next window's table has it while the current one does not (or failed it, or
// gave it quota 0). cur is the current window's table.
func (l *Leader) joinPending(cur *Table) bool {
	st := l.st
	if len(st.Joining) > 0 {
		return true
	}
	next := st.Tables[cur.Window+1]
	if next == nil {
		return false
	}
	for i, sh := range next.Shards {
		if next.Quotas[i] == 0 {
			continue
		}
		// new, failed in this window, or back from a straggler's quota 0
		j := cur.Index(sh)
		if _, failed := st.Failed[sh]; failed || j < 0 || cur.Quotas[j] == 0 {
			return true
		}
	}
	return false
}

// allIdle reports whether every shard taking part in window table t (a quota, not failed) last
// reported itself idle.
func (l *Leader) allIdle(t *Table) bool {
	for i, sh := range t.Shards {
		if _, failed := l.st.Failed[sh]; failed || t.Quotas[i] == 0 {
			continue
		}
		if !l.idle[sh] {
			return false
		}
	}
	return true
}

// awaitTakeover: a shard lagging for lag (past FailAfter) waits for another replica to take it
// over rather than being failed.
func (l *Leader) awaitTakeover(sh int32, lag time.Duration) bool {
	return lag < l.st.cfg.Takeover && l.takeover != nil && l.takeover(sh)
}

// arrival is a report the leader took: when, and how many slots the shard had reported at its
// own pace by then.
type arrival struct {
	at    time.Time
	slots int64
}

// reportGap is the mean time between a shard's reports.
func reportGap(a []arrival) time.Duration {
	return a[len(a)-1].at.Sub(a[0].at) / time.Duration(len(a)-1)
}

// A quota changes by at most maxQuotaStep times per window, and stays at most MaxQuota
// positions per cut: a burst measured over a few reports must not blow a window up.
const (
	maxQuotaStep = 4.0
	MaxQuota     = 1 << 16
)

// allReported reports whether every shard that must report cut c has (a cut with no active
// shard left, all failed, commits at once: its slots are no-ops).
func (l *Leader) allReported(c CutID) bool {
	for _, sh := range l.st.Tables[c.Window].Shards {
		if !l.st.Active(sh, c) {
			continue
		}
		if r, ok := l.reported[sh]; !ok || r.Less(c) {
			return false
		}
	}
	return true
}

// cutsBetween is how many cuts b is ahead of a.
func cutsBetween(a, b CutID, w int) int {
	if !a.Less(b) {
		return 0
	}
	return int(b.Window-a.Window)*w + b.Cut - a.Cut
}

// nextTable decides the next window's table: the current shards that are not out, with quotas
// from their measured report rates (the paper's rule: change only outside the ±Band band around
// one report per T_ord; new quota = ceil(q · T_ord / interval), at least 1), and the joining
// shards with the initial quota.
func (l *Leader) nextTable(now time.Time) *Table {
	st := l.st
	t := st.Current()
	quotas, base := map[int32]int64{}, map[int32]int64{}
	// A shard is slow only next to the others: when every shard's reports were held up (a
	// lease waiting for its table, a view change), none is a straggler.
	intervals := map[int32]time.Duration{}
	for _, sh := range t.Shards {
		if a := l.arrivals[sh]; len(a) >= 2 {
			intervals[sh] = reportGap(a)
		}
	}
	others := func(sh int32) time.Duration { // the median interval of the other shards
		var o []time.Duration
		for s, d := range intervals {
			if s != sh {
				o = append(o, d)
			}
		}
		if len(o) == 0 {
			return 0
		}
		slices.Sort(o)
		return o[len(o)/2]
	}
	for i, sh := range t.Shards {
		if st.Out[sh] {
			continue
		}
		q := t.Quotas[i]
		if since, benched := st.Benched[sh]; benched {
			if t.Window+1-since >= uint64(st.cfg.StragglerWindows) {
				q = 1 // back on probation: the rate rule grows it if it keeps up
				delete(l.arrivals, sh)
			}
			quotas[sh] = q
			continue
		}
		a := l.arrivals[sh]
		if len(a) >= 2 && q > 0 {
			interval := reportGap(a)
			// A straggler: its reports come far apart, or it kept the others waiting until
			// signalled, time after time.
			slow := len(a) > st.cfg.StragglerReports && interval > st.cfg.StragglerGap && interval > 2*others(sh) && !l.idle[sh]
			if st.cfg.StragglerGap > 0 && (slow || l.lagFixes[sh] > st.cfg.StragglerReports) {
				quotas[sh] = 0 // a straggler: the others go on without waiting for it
				delete(l.arrivals, sh)
				continue
			}
			// The paper's rule, q·T_ord/interval, is the shard's records per T_ord: measured in
			// records, as a report may cover several cuts (a burst made them durable at once)
			// and its no-ops are not demand (counting them would keep a padded quota padded).
			// Over the time since the last decision (about a window: the paper's moving
			// average), so durability in clumps does not look like a burst; over the last
			// reports when that is too short.
			from, to := a[0], a[len(a)-1]
			if m, ok := l.mark[sh]; ok && now.Sub(m.at) >= 10*st.cfg.TOrd {
				from, to = m, arrival{at: now, slots: l.paced[sh]}
			}
			elapsed := to.at.Sub(from.at)
			perTOrd := float64(to.slots-from.slots) * float64(st.cfg.TOrd) / float64(max(elapsed, time.Microsecond))
			ratio := min(max(perTOrd/float64(q), 1.0/maxQuotaStep), maxQuotaStep)
			if len(a) >= 4 && math.Abs(ratio-1) > st.cfg.Band {
				q = min(max(1, int64(math.Ceil(float64(q)*ratio))), MaxQuota)
			}
		}
		quotas[sh] = max(q, 1)
	}
	clear(l.mark)
	for sh, n := range l.paced {
		l.mark[sh] = arrival{at: now, slots: n}
	}
	for sh := range st.Joining {
		if _, ok := quotas[sh]; !ok {
			quotas[sh] = st.cfg.InitialQuota
			base[sh] = st.Slots[sh]
		}
	}
	for sh := range st.Out {
		if !st.Joining[sh] {
			delete(quotas, sh)
		}
	}
	n := t.Next(st.cfg.W, st.View, quotas, base)
	for i, sh := range n.Shards { // a shard that was failed goes on from its committed slots
		if _, failed := st.Failed[sh]; failed || st.Joining[sh] {
			n.SlotBase[i] = st.Slots[sh]
		}
	}
	n.Groups = 1
	if g := st.cfg.StaggerGroups; g > 1 && st.cfg.StaggerFrom > 0 && len(n.Shards) >= st.cfg.StaggerFrom {
		n.Groups = g
	}
	if len(n.Shards) > 0 && n.CutSize() == 0 { // every shard benched: the log must go on
		for i := range n.Quotas {
			n.Quotas[i] = 1
		}
	}
	return n
}
