package order

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

func firstTable(shards int, quota int64) *Table {
	t := &Table{}
	for s := range shards {
		t.Shards = append(t.Shards, int32(s))
		t.Quotas = append(t.Quotas, quota)
		t.SlotBase = append(t.SlotBase, 0)
	}
	return t
}

// TestPositionsAreDense: in a window, Position and Owner are inverse, and the shards' slots
// cover the window's positions exactly once.
func TestPositionsAreDense(t *testing.T) {
	for _, tb := range []*Table{
		{Window: 3, Start: 1000, Shards: []int32{2, 5, 9}, Quotas: []int64{3, 1, 2}, SlotBase: []int64{40, 7, 0}},
		{Window: 3, Start: 1000, Shards: []int32{1, 2, 3, 4, 5, 6, 7}, Quotas: []int64{3, 1, 2, 0, 5, 1, 1}, SlotBase: []int64{40, 7, 0, 3, 9, 9, 1}, Groups: 2},
		{Window: 0, Start: 0, Shards: []int32{0, 1, 2, 3, 4, 5}, Quotas: []int64{1, 1, 1, 1, 1, 1}, SlotBase: make([]int64, 6), Groups: 3},
	} {
		checkDense(t, tb)
	}
}

func checkDense(t *testing.T, tb *Table) {
	const w = 6
	seen := map[uint64]bool{}
	for i, s := range tb.Shards {
		for slot := tb.SlotBase[i]; slot < tb.SlotBase[i]+w*tb.Quotas[i]; slot++ {
			p, ok := tb.Position(w, s, slot)
			if !ok || seen[p] || p < tb.Start || p >= tb.End(w) {
				t.Fatalf("shard %d slot %d: position %d, %v (seen %v)", s, slot, p, ok, seen[p])
			}
			seen[p] = true
			os, oslot, cut, ok := tb.Owner(w, p)
			if !ok || os != s || oslot != slot {
				t.Fatalf("groups %d: Owner(%d) = %d/%d; want %d/%d", tb.Groups, p, os, oslot, s, slot)
			}
			if !tb.InCut(i, cut) || tb.SlotsThrough(s, cut) <= slot || (cut > 0 && tb.SlotsThrough(s, cut-1) > slot) {
				t.Fatalf("groups %d: shard %d slot %d in cut %d, which covers its slots through %d", tb.Groups, s, slot, cut, tb.SlotsThrough(s, cut))
			}
			if p < tb.Prefix(cut-1) || p >= tb.Prefix(cut) {
				t.Fatalf("groups %d: position %d in cut %d, which spans [%d, %d)", tb.Groups, p, cut, tb.Prefix(cut-1), tb.Prefix(cut))
			}
		}
		if _, ok := tb.Position(w, s, tb.SlotBase[i]+w*tb.Quotas[i]); ok {
			t.Fatalf("shard %d: a slot past the window has a position", s)
		}
	}
	if len(seen) != int(tb.End(w)-tb.Start) {
		t.Fatalf("%d positions of %d covered", len(seen), tb.End(w)-tb.Start)
	}
}

// sim is a deterministic simulation of one total-order topic: shards, the sequencer's state
// (its Raft log stands as an ordered entry list) and a leader that can crash, over a network
// that delays, reorders and loses reports and signals, and delivers the log's entries to each
// shard in order after a random delay.
type sim struct {
	t      *testing.T
	rnd    *rand.Rand
	cfg    Config
	now    time.Time
	st     *State
	leader *Leader
	log    []Entry
	shards []*Shard
	dead   map[int32]bool
	// per shard: log entries applied, slots appended but not yet durable, events in flight
	applied []int
	pending []struct {
		at time.Time
		n  int64
	}
	net []msg
	// what subscribers would have seen: position -> (shard, slot) per view, and confirmed
	spec      map[specKey]owner // per view
	confirmed map[uint64]owner
	prefix    uint64           // the highest confirmed prefix a shard announced
	seen      map[int32]uint64 // per shard, the confirmed prefix it announced
	failed    []uint64
	noops     int64   // no-op slots asked for
	smooth    bool    // appenders at fixed rates (the paper's workload), durable after 100 µs
	merger    *Merger // a subscriber to every shard, fed what the shards deliver
	events    []Event
	credit    []float64
	loss      float64
	// failover: the chance per step that a shard's partition changes leader (the new leader
	// resumes from its copy of the sequencer state and its durable slots)
	failover  float64
	failovers int
	takeover  func(shard int32) bool // the leader's SetTakeover hook (also after its crashes)
	rates     []float64              // per shard, replacing step's appendRate when set
}

type specKey struct {
	view uint64
	pos  uint64
}

type owner struct {
	shard int32
	slot  int64
}

type msg struct {
	at     time.Time
	report *Report
	signal *Signal
	to     int32
}

func newSim(t *testing.T, seed uint64, shards int, loss float64) *sim {
	return newSimCfg(t, seed, shards, loss, simConfig())
}

// simConfig is the simulations' configuration: short windows and timeouts, so that 1 s of
// simulated time spans many windows, failures and rejoins.
func simConfig() Config {
	return Config{W: 10, TOrd: time.Millisecond, InitialQuota: 2, DecideAt: 5, Band: 0.05, LagFix: 3,
		FailAfter: 20 * time.Millisecond, StragglerGap: 4 * time.Millisecond, StragglerReports: 3, StragglerWindows: 5, StaggerFrom: 6, StaggerGroups: 2}
}

func newSimCfg(t *testing.T, seed uint64, shards int, loss float64, cfg Config) *sim {
	s := &sim{t: t, rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), cfg: cfg, now: time.Unix(0, 0), dead: map[int32]bool{},
		spec: map[specKey]owner{}, confirmed: map[uint64]owner{}, seen: map[int32]uint64{}, loss: loss}
	first := firstTable(shards, cfg.InitialQuota)
	var err error
	if s.st, err = NewState(cfg, first); err != nil {
		t.Fatal(err)
	}
	s.leader = NewLeader(s.st)
	for i := range shards {
		sh, err := NewShard(cfg, int32(i), firstTable(shards, cfg.InitialQuota), 0)
		if err != nil {
			t.Fatal(err)
		}
		s.shards = append(s.shards, sh)
	}
	s.applied = make([]int, shards)
	s.credit = make([]float64, shards)
	s.pending = make([]struct {
		at time.Time
		n  int64
	}, shards)
	return s
}

func (s *sim) handle(id int32, o Out) {
	sh := s.shards[id]
	if s.merger != nil {
		for _, f := range o.Fail { // before the deliveries of the new view that come with it (as the runner does)
			s.events = append(s.events, s.merger.Fail(f.After, f.View)...)
		}
		for _, d := range o.Deliver {
			for k := range d.N {
				s.events = append(s.events, s.merger.Deliver(d.Position+uint64(k), id, owner{id, d.Slot + k}, d.View)...)
			}
		}
		if o.Confirm > 0 {
			s.events = append(s.events, s.merger.Confirm(o.Confirm, sh.st.View)...)
		}
	}
	for _, d := range o.Deliver {
		for k := range d.N {
			pos, own := d.Position+uint64(k), owner{id, d.Slot + k}
			if prev, ok := s.confirmed[pos]; ok && prev != own {
				s.t.Fatalf("position %d confirmed as %v, delivered again as %v", pos, prev, own)
			}
			k := specKey{d.View, pos}
			if prev, ok := s.spec[k]; ok && prev != own && prev.shard != id {
				s.t.Fatalf("view %d: position %d delivered to shard %d slot %d and to shard %d slot %d", d.View, pos, prev.shard, prev.slot, id, own.slot)
			}
			s.spec[k] = own
		}
	}
	if o.Confirm > 0 {
		if o.Confirm < s.prefix && s.dead[id] == false && o.Confirm < sh.confirmed {
			s.t.Fatalf("confirmed prefix went back to %d", o.Confirm)
		}
		for p := s.seen[id]; p < o.Confirm; p++ {
			if own, ok := s.spec[specKey{sh.st.View, p}]; ok && own.shard == id {
				if prev, ok := s.confirmed[p]; ok && prev != own {
					s.t.Fatalf("confirmed position %d changed from %v to %v", p, prev, own)
				}
				s.confirmed[p] = own
			}
		}
		s.seen[id] = max(s.seen[id], o.Confirm)
		s.prefix = max(s.prefix, o.Confirm)
	}
	for _, f := range o.Fail {
		if f.After != sh.confirmed {
			s.t.Fatalf("shard %d failed speculation after %d; its confirmed prefix is %d", id, f.After, sh.confirmed)
		}
		s.failed = append(s.failed, f.After)
		for k, own := range s.spec { // everything after the confirmed prefix is rolled back
			if k.pos >= f.After && own.shard == id {
				delete(s.spec, k)
			}
		}
	}
	if o.Truncate != nil { // this shard was failed: its speculation after its committed slots is gone
		for k, own := range s.spec {
			if own.shard == id && own.slot >= *o.Truncate {
				delete(s.spec, k)
			}
		}
	}
	if o.NoOp > 0 {
		s.noops += o.NoOp
		s.pending[id].n += o.NoOp
		s.pending[id].at = s.now.Add(time.Duration(s.rnd.IntN(300)) * time.Microsecond)
	}
	if o.Report != nil && s.rnd.Float64() >= s.loss {
		s.net = append(s.net, msg{at: s.now.Add(time.Duration(50+s.rnd.IntN(400)) * time.Microsecond), report: o.Report})
	}
}

// step advances the simulation by 100 µs.
func (s *sim) step(appendRate float64, crashLeader float64) {
	s.now = s.now.Add(100 * time.Microsecond)
	for i, sh := range s.shards {
		id := int32(i)
		if s.dead[id] {
			continue
		}
		appendRate := appendRate
		if s.rates != nil {
			appendRate = s.rates[i]
		}
		if s.smooth {
			s.credit[i] += appendRate
			for ; s.credit[i] >= 1; s.credit[i]-- {
				s.pending[i].n++
				if s.pending[i].at.IsZero() {
					s.pending[i].at = s.now.Add(100 * time.Microsecond)
				}
			}
		} else if s.rnd.Float64() < appendRate { // a record appended, durable a little later
			s.pending[i].n++
			if s.pending[i].at.IsZero() {
				s.pending[i].at = s.now.Add(time.Duration(s.rnd.IntN(300)) * time.Microsecond)
			}
		}
		if p := &s.pending[i]; p.n > 0 && !s.now.Before(p.at) {
			n := p.n
			p.n, p.at = 0, time.Time{}
			s.handle(id, sh.Durable(n, s.now))
		}
		for s.applied[i] < len(s.log) && s.rnd.IntN(3) > 0 { // the log reaches shards in order, late
			o, err := sh.Apply(s.log[s.applied[i]], s.now)
			if err != nil {
				s.t.Fatalf("shard %d applying entry %d: %v", i, s.applied[i], err)
			}
			s.applied[i]++
			s.handle(id, o)
		}
		s.handle(id, sh.Tick(s.now))
	}
	// Messages due now; what handling them sends joins the network after (appending to s.net
	// while it is filtered in place would lose it).
	keep := s.net[:0]
	type answer struct {
		to int32
		o  Out
	}
	var answers []answer
	for _, m := range s.net {
		if s.now.Before(m.at) {
			keep = append(keep, m)
			continue
		}
		switch {
		case m.report != nil:
			s.leader.Report(*m.report, s.now)
		case m.signal != nil && !s.dead[m.to]:
			answers = append(answers, answer{m.to, s.shards[m.to].Signal(m.signal.Through, s.now)})
		}
	}
	s.net = keep
	for _, a := range answers {
		s.handle(a.to, a.o)
	}
	if s.rnd.Float64() < s.failover {
		i := s.rnd.IntN(len(s.shards))
		if old := s.shards[i]; !s.dead[int32(i)] {
			s.shards[i] = ResumeShard(s.cfg, int32(i), old.st.Clone(), old.durable, old.noops)
			s.failovers++
			s.handle(int32(i), s.shards[i].Durable(0, s.now))
		}
	}
	if s.rnd.Float64() < crashLeader { // the sequencer's leader fails over: its soft state is gone
		s.leader = NewLeader(s.st)
		s.leader.SetTakeover(s.takeover)
	}
	entries, signals := s.leader.Tick(s.now)
	for _, e := range entries {
		if err := s.st.Apply(e); err != nil {
			s.t.Fatalf("the sequencer applying %+v: %v", e, err)
		}
		s.log = append(s.log, e)
	}
	for _, sg := range signals {
		if s.rnd.Float64() >= s.loss {
			s.net = append(s.net, msg{at: s.now.Add(time.Duration(50+s.rnd.IntN(400)) * time.Microsecond), signal: &sg, to: sg.Shard})
		}
	}
}

// seeds is how many random schedules each simulation test runs (RUNNEL_SIM_SEEDS, default 8).
func seeds() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("RUNNEL_SIM_SEEDS"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 8
}

// TestSimulationNoFailure: over random schedules, message loss and leader crashes, with every
// shard alive, positions are assigned once, confirmed positions never change, every
// speculation is confirmed, and the log keeps moving.
func TestSimulationNoFailure(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			shards := 3
			if seed%2 == 0 {
				shards = 6 // staggered cuts from the second window on
			}
			s := newSim(t, seed, shards, 0.05)
			s.failover = 0.0005
			for range 10000 { // 1 s
				s.step(0.6, 0.001)
			}
			t.Logf("%d shards: confirmed prefix %d, %d entries in the sequencer's log, view %d, %d no-op slots, %d shard leader changes", len(s.shards), s.prefix, len(s.log), s.st.View, s.noops, s.failovers)
			if len(s.failed) > 0 {
				t.Fatalf("speculation failed %d times with no shard failure", len(s.failed))
			}
			if s.prefix < 1000 {
				t.Fatalf("only %d positions confirmed in 1 s", s.prefix)
			}
			s.checkHistory(t)
			for i, sh := range s.shards {
				if sh.delivered < sh.acked {
					t.Fatalf("shard %d delivered %d slots, %d acknowledged", i, sh.delivered, sh.acked)
				}
			}
			s.checkSpeculationConfirmed(t)
		})
	}
}

// TestSimulationShardFailure: a whole shard stops; the sequencer signals it, declares it
// failed, and the others fail exactly the speculation after their confirmed prefix, then go on
// without it; no confirmed position changes.
func TestSimulationShardFailure(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			shards := 3
			if seed%2 == 0 {
				shards = 6
			}
			s := newSim(t, seed, shards, 0.02)
			for range 3000 {
				s.step(0.6, 0.001)
			}
			s.dead[2] = true
			before := s.prefix
			for range 7000 {
				s.step(0.6, 0.001)
			}
			t.Logf("confirmed prefix %d before the failure, %d after; %d failure notices at %v", before, s.prefix, len(s.failed), s.failed)
			if len(s.failed) == 0 {
				t.Fatalf("no failure notice after shard 2 stopped")
			}
			if _, out := s.st.Out[2]; !out {
				t.Fatalf("shard 2 is not out: %+v", s.st.Out)
			}
			s.checkHistory(t)
			if s.prefix < before+500 {
				t.Fatalf("the confirmed prefix moved from %d to %d after the failure", before, s.prefix)
			}
		})
	}
}

// TestSimulationTakeover: a shard's leader stops for 10 × FailAfter while another replica can
// take the shard over (the sequencer leader's SetTakeover says so, across its own crashes); the
// new leader resumes the shard from the durable slots. Nothing is failed, the view stays,
// positions are assigned once, every speculation is confirmed, and the log moves on.
func TestSimulationTakeover(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			shards := 3
			if seed%2 == 0 {
				shards = 6
			}
			cfg := simConfig()
			cfg.Takeover = 400 * time.Millisecond
			s := newSimCfg(t, seed, shards, 0.02, cfg)
			asked := 0
			s.takeover = func(sh int32) bool { asked++; return sh == 2 } // shard 2 is replicated elsewhere
			s.leader.SetTakeover(s.takeover)
			for range 3000 {
				s.step(0.6, 0.001)
			}
			s.dead[2] = true // its leader freezes; the controller elects a replica later
			before := s.prefix
			for range 2000 { // 200 ms
				s.step(0.6, 0.001)
			}
			old := s.shards[2]
			s.shards[2] = ResumeShard(cfg, 2, old.st.Clone(), old.durable, old.noops)
			s.dead[2] = false
			s.handle(2, s.shards[2].Durable(0, s.now))
			stalled := s.prefix
			for range 5000 {
				s.step(0.6, 0.001)
			}
			t.Logf("%d shards: confirmed prefix %d before the freeze, %d at the takeover, %d after; view %d; leader asked %d times",
				shards, before, stalled, s.prefix, s.st.View, asked)
			if asked == 0 {
				t.Fatal("the leader never asked whether shard 2 could be taken over")
			}
			if len(s.failed) > 0 || s.st.View != 0 {
				t.Fatalf("a shard taken over within Takeover was failed: %d failure notices, view %d", len(s.failed), s.st.View)
			}
			if s.prefix < stalled+500 {
				t.Fatalf("the confirmed prefix moved from %d to %d after the takeover", stalled, s.prefix)
			}
			s.checkHistory(t)
			s.checkSpeculationConfirmed(t)
		})
	}
}

// TestSimulationSmoothLoad: with the paper's defaults and its kind of workload (appenders at
// fixed rates, here 10 records/ms per shard), no-ops stay under the paper's 5% of positions and
// no shard is failed or benched.
func TestSimulationSmoothLoad(t *testing.T) {
	for _, shards := range []int{2, 4} {
		cfg := DefaultConfig()
		cfg.InitialQuota = 10
		s := newSimCfg(t, uint64(shards), shards, 0, cfg)
		s.smooth = true
		for range 20000 { // 2 s
			s.step(1.0, 0)
		}
		frac := float64(s.noops) / float64(max(s.prefix, 1))
		t.Logf("%d shards: confirmed prefix %d, no-op slots %d (%.1f%%), quotas %v", shards, s.prefix, s.noops, 100*frac, s.st.Current().Quotas)
		if frac >= 0.05 || s.st.View != 0 || len(s.st.Benched) > 0 {
			t.Fatalf("%d shards: %.1f%% no-ops, view %d, benched %v", shards, 100*frac, s.st.View, s.st.Benched)
		}
	}
}

// checkSpeculationConfirmed: every position a shard delivered speculatively, below the confirmed
// prefix that shard announced, was confirmed with the same shard and slot.
func (s *sim) checkSpeculationConfirmed(t *testing.T) {
	t.Helper()
	for k, own := range s.spec {
		if k.pos < s.seen[own.shard] {
			if c, ok := s.confirmed[k.pos]; !ok || c != own {
				t.Fatalf("position %d speculated as %v, confirmed as %v (%v)", k.pos, own, c, ok)
			}
		}
	}
}

// checkHistory: the sequencer's history maps every confirmed position to the shard and slot
// that was confirmed there, and back.
func (s *sim) checkHistory(t *testing.T) {
	t.Helper()
	h := &s.st.History
	for pos, own := range s.confirmed {
		shard, slot, noOp, ok := h.Owner(s.cfg.W, pos)
		if !ok || noOp || shard != own.shard || slot != own.slot {
			t.Fatalf("history: position %d owned by %d/%d (no-op %v, %v); confirmed as %v", pos, shard, slot, noOp, ok, own)
		}
		if p, ok := h.Position(s.cfg.W, own.shard, own.slot); !ok || p != pos {
			t.Fatalf("history: shard %d slot %d at %d (%v); confirmed at %d", own.shard, own.slot, p, ok, pos)
		}
	}
	// FirstSlot (a shard's log start for a trim point, a binary search) against a scan of the
	// positions' owners (a shard's own no-op slots are slots; a failed shard's are not).
	committed := s.st.Committed()
	for pos := uint64(0); pos <= committed; pos += 1 + uint64(s.rnd.IntN(7)) + committed/50 {
		for sh := range int32(len(s.shards)) {
			want := s.st.Slots[sh]
			for p := pos; p < committed; p++ {
				if owner, slot, noOp, ok := s.st.Owner(p); ok && !noOp && owner == sh {
					want = slot
					break
				}
			}
			if got := s.st.FirstSlot(sh, pos); got != want {
				t.Fatalf("shard %d's first slot at or after position %d: %d, want %d", sh, pos, got, want)
			}
		}
	}
}

// TestHistoryRuns: under a steady load the history stays a few runs long, however many windows
// pass; trimming drops the runs before a position.
func TestHistoryRuns(t *testing.T) {
	cfg := DefaultConfig()
	s := newSimCfg(t, 1, 2, 0, cfg)
	s.smooth = true
	for range 20000 {
		s.step(1.0, 0)
	}
	s.checkHistory(t)
	h := &s.st.History
	windows := s.st.Last.Window
	if len(h.Runs) > 5 || windows < 15 {
		t.Fatalf("%d runs for %d windows; want a handful", len(h.Runs), windows)
	}
	last := h.Runs[len(h.Runs)-1]
	h.TrimBefore(cfg.W, last.Start)
	if len(h.Runs) != 1 || h.Runs[0].First != last.First {
		t.Fatalf("after trimming before the last run: %d runs", len(h.Runs))
	}
}

// subscribe attaches a subscriber to every shard, reading positions from the sequencer's state
// as the SpecLog service does (State.Owner: a failed shard's slots are no-ops).
func (s *sim) subscribe() {
	s.merger = NewMerger(0, func(pos uint64) (int32, bool, bool) {
		shard, _, noOp, ok := s.st.Owner(pos)
		return shard, noOp, ok
	}, nil)
	s.merger.Views(s.st.ViewAfter)
}

// checkEvents: records come in position order (again from a fail notice's position after one),
// confirmations only grow, and every record given as confirmed is the one the log confirmed.
func (s *sim) checkEvents(t *testing.T) (records, fails int) {
	t.Helper()
	var next, told uint64
	final := map[uint64]owner{}  // given as confirmed
	latest := map[uint64]owner{} // the last record given at each position
	for _, e := range s.events {
		switch e.Kind {
		case EventRecord:
			if e.Position < next {
				t.Fatalf("record at %d after one at %d with no fail notice between", e.Position, next-1)
			}
			next = e.Position + 1
			records++
			if prev, ok := final[e.Position]; ok && prev != e.Record.(owner) {
				t.Fatalf("position %d given as confirmed %v, later as %v", e.Position, prev, e.Record)
			}
			if !e.Speculative {
				final[e.Position] = e.Record.(owner)
			}
			latest[e.Position] = e.Record.(owner)
		case EventConfirm:
			if e.UpTo < told {
				t.Fatalf("confirmation went back from %d to %d", told, e.UpTo)
			}
			told = e.UpTo
		case EventFail:
			if e.After < told {
				t.Fatalf("fail notice after %d below the confirmation %d", e.After, told)
			}
			next = e.After
			fails++
			for p := range latest { // void: given again after the notice
				if p >= e.After {
					delete(latest, p)
				}
			}
		}
	}
	h := &s.st.History
	for pos, own := range final {
		if c, ok := s.confirmed[pos]; ok && c != own {
			t.Fatalf("position %d given as confirmed %v; the log confirmed %v", pos, own, c)
		}
		shard, slot, noOp, ok := h.Owner(s.cfg.W, pos)
		if !ok || noOp || shard != own.shard || slot != own.slot || pos >= s.st.Committed() {
			t.Fatalf("position %d given as confirmed %v; the log has %d/%d (no-op %v, %v), committed %d", pos, own, shard, slot, noOp, ok, s.st.Committed())
		}
	}
	for pos := range min(s.merger.Next(), s.st.Committed()) { // no gap: every record below was given
		shard, slot, noOp, ok := h.Owner(s.cfg.W, pos)
		if !ok || noOp {
			continue
		}
		if got, given := latest[pos]; !given || got != (owner{shard, slot}) {
			t.Fatalf("position %d (%d/%d in the log) given as %v (%v)", pos, shard, slot, got, given)
		}
	}
	return records, fails
}

// TestSubscriberOrder: a subscriber to every shard sees the total order: with no failure it
// keeps up with the confirmed prefix and gets no fail notice; with a whole-shard failure the
// view changes and the subscriber keeps getting the log (its events are checked against the
// confirmed log, fail notices included).
func TestSubscriberOrder(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		s := newSim(t, seed, 3+3*int(seed%2), 0.02)
		s.subscribe()
		for range 5000 {
			s.step(0.6, 0.001)
		}
		records, fails := s.checkEvents(t)
		if fails != 0 || records == 0 || s.merger.Next()+2000 < s.st.Committed() {
			t.Fatalf("seed %d, no failure: %d records, %d fail notices, next %d, committed %d", seed, records, fails, s.merger.Next(), s.st.Committed())
		}
		s.dead[1] = true
		for range 5000 {
			s.step(0.6, 0.001)
		}
		records2, fails := s.checkEvents(t)
		// A fail notice comes only if the subscriber had been given something past the
		// confirmed prefix when the failure was applied; the log must go on either way.
		if records2 <= records || s.st.View == 0 {
			t.Fatalf("seed %d, shard 1 failed: view %d, %d fail notices, %d → %d records", seed, s.st.View, fails, records, records2)
		}
	}
}

// TestMergerKeepsNewViewDeliveries: a subscription merges streams that started at different
// times; one started after a view change, so it delivers in the new view and never announces
// the change. When another stream's fail notice arrives, the void records of the old view are
// failed, and the late stream's records — right in the new view — are kept (pending) or given
// again after the notice (emitted), not lost: the subscriber would wait for them forever.
func TestMergerKeepsNewViewDeliveries(t *testing.T) {
	// Shard 0 owns the even positions, shard 1 the odd ones, in both views.
	owner := func(pos uint64) (int32, bool, bool) { return int32(pos % 2), false, true }
	m := NewMerger(0, owner, nil)
	var got []Event
	feed := func(evs []Event) { got = append(got, evs...) }
	feed(m.Deliver(0, 0, "a0", 0))     // shard 0, old view (below the failure: stays valid)
	feed(m.Deliver(1, 1, "b1", 1))     // shard 1's late stream: new view
	feed(m.Deliver(2, 0, "a2-old", 0)) // void: shard 0 fails in view 1 after position 2
	feed(m.Deliver(3, 1, "b3", 1))
	feed(m.Deliver(5, 1, "b5", 1)) // pending: waits for position 4
	feed(m.Fail(2, 1))             // shard 0's fail notice
	feed(m.Deliver(2, 0, "a2", 1)) // shard 0 again, in view 1
	feed(m.Deliver(4, 0, "a4", 1))
	if s, want := recordsAndFails(got), "[0:a0 1:b1 2:a2-old 3:b3 fail@2 2:a2 3:b3 4:a4 5:b5]"; s != want {
		t.Fatalf("events %s; want %s", s, want)
	}
	if m.Next() != 6 {
		t.Fatalf("next %d; want 6", m.Next())
	}
	// A fail notice that voids nothing emitted (everything past it already in the new view)
	// is not given.
	m = NewMerger(0, owner, nil)
	got = nil
	feed(m.Deliver(0, 0, "a0", 1))
	feed(m.Deliver(1, 1, "b1", 1))
	feed(m.Fail(0, 1))
	if len(got) != 2 || got[0].Kind != EventRecord || got[1].Kind != EventRecord {
		t.Fatalf("events %+v; want the two records and no fail notice", got)
	}
}

// TestMergerVoidsStaleViews: after two view changes, a delivery of the first view below the
// second's After is right and one of an older view is void, even when it comes last (a shard's
// stream that started before both); a view change announced after a later one (streams started
// at different times) still fails what it voids.
func TestMergerVoidsStaleViews(t *testing.T) {
	owner := func(pos uint64) (int32, bool, bool) { return int32(pos % 2), false, true }
	events := recordsAndFails
	m := NewMerger(0, owner, nil)
	var got []Event
	got = append(got, m.Fail(2, 1)...)
	got = append(got, m.Fail(6, 2)...)
	got = append(got, m.Deliver(0, 0, "a0", 0)...)
	got = append(got, m.Deliver(1, 1, "b1", 0)...)
	got = append(got, m.Deliver(2, 0, nil, 0)...) // view 0 at 2: void since view 1 (a no-op there would hide a record)
	got = append(got, m.Deliver(2, 0, "a2", 1)...)
	got = append(got, m.Deliver(3, 1, "b3", 1)...)
	if s := events(got); s != "[0:a0 1:b1 2:a2 3:b3]" {
		t.Fatalf("two view changes, a stale delivery: %s", s)
	}

	m, got = NewMerger(0, owner, nil), nil
	for p, r := range []string{"a0", "b1", "x2", "y3"} {
		got = append(got, m.Deliver(uint64(p), int32(p%2), r, 0)...)
	}
	got = append(got, m.Fail(6, 2)...) // voids nothing given
	got = append(got, m.Fail(2, 1)...) // announced late: voids 2 and 3
	got = append(got, m.Deliver(2, 0, "a2", 1)...)
	got = append(got, m.Deliver(3, 1, "b3", 1)...)
	if s := events(got); s != "[0:a0 1:b1 2:x2 3:y3 fail@2 2:a2 3:b3]" {
		t.Fatalf("view changes announced out of order: %s", s)
	}
}

// TestRejoinedShardOwnsItsNextWindow: while the window a shard failed in is still being cut,
// the next window's table, decided after the shard asked to join again, gives it real slots:
// State.Owner (which subscribers place positions by) must not call them no-ops, or a
// subscriber skips the records the shard then delivers there.
func TestRejoinedShardOwnsItsNextWindow(t *testing.T) {
	s := newSim(t, 1, 3, 0)
	s.dead[1] = true
	for s.st.View == 0 {
		s.step(0.6, 0)
	}
	join := Entry{Join: &JoinEntry{Shard: 1}}
	if err := s.st.Apply(join); err != nil {
		t.Fatal(err)
	}
	s.log = append(s.log, join)
	cur := s.st.Last.next(s.cfg.W).Window
	for s.st.Tables[cur+1] == nil || s.st.Tables[cur+1].Index(1) < 0 {
		if s.st.Last.next(s.cfg.W).Window != cur {
			t.Fatalf("window %d ended before the next table took shard 1 back", cur)
		}
		s.step(0.6, 0)
	}
	if _, failed := s.st.Failed[1]; !failed {
		t.Fatal("shard 1 is no longer failed in its window")
	}
	next := s.st.Tables[cur+1]
	found := 0
	for pos := next.Start; pos < next.End(s.cfg.W); pos++ {
		shard, slot, noOp, ok := s.st.Owner(pos)
		if !ok || shard != 1 {
			continue
		}
		found++
		if noOp {
			t.Fatalf("position %d, shard 1's slot %d in window %d: a no-op while window %d is cut", pos, slot, cur+1, cur)
		}
		if p, ok := s.st.Position(1, slot); !ok || p != pos {
			t.Fatalf("shard 1's slot %d: position %d (%v); want %d", slot, p, ok, pos)
		}
	}
	if found == 0 {
		t.Fatalf("shard 1 has no slot in window %d: %+v", cur+1, next)
	}
}

// TestSubscriberAcrossRejoin: a shard fails early in a window and asks to join again; the next
// window's table takes it back while the failed window is still being cut. Its slots in the
// next window are real from the start (a failure holds for the rest of its own window only), so
// the subscriber, which places positions by the sequencer's state, gets every record there
// instead of skipping the rejoined shard's as no-ops.
func TestSubscriberAcrossRejoin(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		s := newSim(t, seed, 3, 0)
		s.subscribe()
		s.dead[1] = true // from the start: failed in the first window
		for s.st.View == 0 {
			s.step(0.6, 0)
		}
		window := s.st.Last.next(s.cfg.W).Window
		s.rejoin(1) // back at once
		for range 6000 {
			s.step(0.6, 0)
		}
		if s.st.Last.Window <= window+1 || s.st.Out[1] {
			t.Fatalf("seed %d: shard 1 did not take part again (window %d → %d, out %v)", seed, window, s.st.Last.Window, s.st.Out[1])
		}
		records, _ := s.checkEvents(t) // no gap: every record below the subscriber's position was given
		if s.merger.Next()+2000 < s.st.Committed() || records == 0 {
			t.Fatalf("seed %d: the subscriber is at %d, the committed prefix %d (%d records)", seed, s.merger.Next(), s.st.Committed(), records)
		}
	}
}

// rejoin brings a dead shard back: it resumes from the sequencer's state (as a new leader of
// its partition would) and asks to join, which the sequencer applies.
func (s *sim) rejoin(id int32) {
	s.dead[id] = false
	old := s.shards[id]
	s.shards[id] = ResumeShard(s.cfg, id, s.st.Clone(), old.durable, old.noops)
	s.applied[id] = len(s.log)
	join := Entry{Join: &JoinEntry{Shard: id}}
	if err := s.st.Apply(join); err != nil {
		s.t.Fatal(err)
	}
	s.log = append(s.log, join)
}

// recordsAndFails is a merger's records ("position:record") and fail notices ("fail@after").
func recordsAndFails(evs []Event) string {
	var s []string
	for _, e := range evs {
		switch e.Kind {
		case EventRecord:
			s = append(s, fmt.Sprintf("%d:%v", e.Position, e.Record))
		case EventFail:
			s = append(s, fmt.Sprintf("fail@%d", e.After))
		}
	}
	return fmt.Sprint(s)
}

// TestSimulationIdleTopic: with idle pacing, a topic nobody appends to commits a cut per
// IdlePace instead of one per 1.5·T_ord; a record arriving on one shard is confirmed within a
// few T_ord (the idle shards are signalled at once); one busy shard among idle ones keeps its
// pace with no view change and nobody benched; over message loss and sequencer leader
// crashes, positions stay assigned once and every speculation is confirmed.
func TestSimulationIdleTopic(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cutsWhileIdle := func(pace time.Duration) (*sim, int) {
				cfg := simConfig()
				cfg.IdlePace = pace
				s := newSimCfg(t, seed, 3, 0.05, cfg)
				for range 3000 { // 0.3 s of appends
					s.step(0.6, 0.001)
				}
				for range 1000 { // 0.1 s to settle and turn idle
					s.step(0, 0.001)
				}
				from := len(s.log)
				for range 10000 { // 1 s idle
					s.step(0, 0.001)
				}
				cuts := 0
				for _, e := range s.log[from:] {
					if e.Cut != nil {
						cuts++
					}
				}
				return s, cuts
			}
			_, paperCuts := cutsWhileIdle(0)
			s, idleCuts := cutsWhileIdle(20 * time.Millisecond)
			t.Logf("cuts in 1 s idle: %d at the paper's pace, %d with a 20 ms idle pace", paperCuts, idleCuts)
			if paperCuts < 300 || idleCuts > 100 {
				t.Fatalf("cuts in 1 s idle: %d at the paper's pace, %d with a 20 ms idle pace; want the idle pace far fewer", paperCuts, idleCuts)
			}

			// One record on shard 0: acknowledged within a few T_ord, not an idle pace.
			s.rates = []float64{0, 0, 0}
			want := s.shards[0].durable + 1
			s.pending[0].n++
			s.pending[0].at = s.now
			start := s.now
			for s.shards[0].acked < want {
				if s.now.Sub(start) > 15*time.Millisecond {
					t.Fatalf("a record on an idle topic not acknowledged after %v (view %d)", s.now.Sub(start), s.st.View)
				}
				s.step(0, 0)
			}
			t.Logf("a record on the idle topic acknowledged after %v", s.now.Sub(start))

			// One busy shard among idle ones: it keeps its pace; nobody is failed or benched.
			s.rates = []float64{0.6, 0, 0}
			from := s.prefix
			for range 5000 { // 0.5 s
				s.step(0, 0.001)
			}
			if s.st.View != 0 || len(s.failed) > 0 {
				t.Fatalf("view %d, %d speculation failures with every shard alive", s.st.View, len(s.failed))
			}
			// 0.6 records per 100 µs: 3,000 in 0.5 s, each a position of shard 0's, plus the others' padding.
			if got := s.prefix - from; got < 2500 {
				t.Fatalf("%d positions confirmed in 0.5 s of one busy shard", got)
			}
			s.checkHistory(t)
			s.checkSpeculationConfirmed(t)
		})
	}
}

// TestRejoinOnAnIdleTopic: a shard that was failed asks to join again while every other shard
// is idle (padding a cut only every IdlePace). It takes part from the next window, so its
// records are acknowledged only once this window ends: the idle shards are asked to pad to its
// end at once, instead of the window taking W·IdlePace.
func TestRejoinOnAnIdleTopic(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		cfg := simConfig()
		cfg.IdlePace = 50 * time.Millisecond
		s := newSimCfg(t, seed, 2, 0.05, cfg)
		s.dead[1] = true
		for s.st.View == 0 || !s.st.Out[1] {
			s.step(0.6, 0)
		}
		s.rates = []float64{0, 0}
		for range 3000 { // 0.3 s: shard 0 turns idle
			s.step(0, 0)
		}
		if !s.leader.idle[0] {
			t.Fatalf("seed %d: shard 0 not idle after 0.3 s without records", seed)
		}
		s.rejoin(1) // back, with a record
		want := s.shards[1].durable + 1
		s.pending[1].n++
		s.pending[1].at = s.now
		start := s.now
		for s.shards[1].acked < want {
			if s.now.Sub(start) > 20*cfg.TOrd {
				t.Fatalf("seed %d: the rejoined shard's record not acknowledged after %v (window %d, cut %d)", seed, s.now.Sub(start), s.st.Last.Window, s.st.Last.Cut)
			}
			s.step(0, 0)
		}
		t.Logf("seed %d: acknowledged %v after the join", seed, s.now.Sub(start))
		s.checkHistory(t)
	}
}

// TestRejoinBesideABusyShard: a shard asks to rejoin while one shard of the window is busy and
// another idle. The busy shard moves the window on at its pace, so the idle one is not hurried
// to the window's end: that jump would put it cuts ahead of the busy shard, which would be
// signalled to pad the rest of the window with no-ops (and failed if it could not answer in
// time).
func TestRejoinBesideABusyShard(t *testing.T) {
	for seed := uint64(1); seed <= seeds(); seed++ {
		cfg := simConfig()
		cfg.IdlePace = 50 * time.Millisecond
		s := newSimCfg(t, seed, 3, 0, cfg)
		s.dead[2] = true
		for s.st.View == 0 || !s.st.Out[2] {
			s.step(0.6, 0)
		}
		s.rates = []float64{0.6, 0, 0}
		for range 3000 { // 0.3 s: shard 1 turns idle
			s.step(0, 0)
		}
		if !s.leader.idle[1] || s.leader.idle[0] {
			t.Fatalf("seed %d: idle %v; want shard 1 idle and shard 0 busy", seed, s.leader.idle)
		}
		s.rejoin(2)
		// Until the next window's table takes shard 2 (once it has, shard 2 reports the rest of
		// this window as passed, and the others are signalled to its end as after any join).
		signals := map[*Signal]bool{}
		cur := s.st.Current().Window
		for start := s.now; s.st.Tables[cur+1] == nil || s.st.Tables[cur+1].Index(2) < 0; {
			if s.now.Sub(start) > 100*time.Millisecond {
				t.Fatalf("seed %d: no table with shard 2 after %v", seed, s.now.Sub(start))
			}
			if s.st.Current().Window != cur {
				cur = s.st.Current().Window // decided without it before it asked: the next one
			}
			s.step(0, 0)
			for _, m := range s.net {
				if m.signal != nil && m.to == 0 {
					signals[m.signal] = true
				}
			}
		}
		if len(signals) > 0 {
			t.Fatalf("seed %d: the busy shard was signalled %d times while shard 2 waited to join", seed, len(signals))
		}
	}
}

// TestFirstSlotOfALateShard: a shard that joins (a partition added) more than 4M positions
// after a subscription's start has its first slot found (SubscribeShard's catch-up starts
// there; a scan of positions bounded at 4M answered the shard's committed count, so its
// committed records were never sent and the subscriber waited for them for good).
func TestFirstSlotOfALateShard(t *testing.T) {
	cfg := DefaultConfig() // W 100
	first := &Table{Window: 0, Start: 0, Shards: []int32{0}, Quotas: []int64{MaxQuota}, SlotBase: []int64{0}}
	st, err := NewState(cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(e Entry) {
		t.Helper()
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	for c := range cfg.W {
		if c == cfg.W-1 { // shard 1 joins with window 1
			apply(Entry{Join: &JoinEntry{Shard: 1}})
			apply(Entry{Table: &Table{Window: 1, Start: first.End(cfg.W), Shards: []int32{0, 1},
				Quotas: []int64{1, 1}, SlotBase: []int64{int64(cfg.W) * MaxQuota, 0}}})
		}
		apply(Entry{Cut: &CutID{Window: 0, Cut: c}})
	}
	apply(Entry{Cut: &CutID{Window: 1, Cut: 0}})
	apply(Entry{Cut: &CutID{Window: 1, Cut: 1}})
	if p, ok := st.Position(1, 0); !ok || p < 1<<22 || st.Slots[1] != 2 {
		t.Fatalf("setup: shard 1's slot 0 at %d (%v), %d committed slots", p, ok, st.Slots[1])
	}
	for _, from := range []uint64{0, 1 << 22} {
		if got := st.FirstSlot(1, from); got != 0 {
			t.Fatalf("FirstSlot(1, %d) = %d; want 0", from, got)
		}
	}
}
