package order

import (
	"testing"
	"time"
)

// drive runs a sequencer leader over whole cuts: before each cut, every shard in gaps (its
// interval between reports) whose turn it is reports the cut; the leader ticks every 100 µs and
// its entries are applied. It returns the state and the signals seen.
type driver struct {
	t      *testing.T
	cfg    Config
	st     *State
	l      *Leader
	now    time.Time
	next   map[int32]time.Time // when each shard reports next
	thru   map[int32]CutID
	sigs   []Signal
	silent map[int32]bool
}

func newDriver(t *testing.T, cfg Config, shards int) *driver {
	st, err := NewState(cfg, firstTable(shards, cfg.InitialQuota))
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, cfg: cfg, st: st, l: NewLeader(st), now: time.Unix(0, 0), next: map[int32]time.Time{}, thru: map[int32]CutID{}, silent: map[int32]bool{}}
	for s := range shards {
		d.thru[int32(s)] = CutID{Cut: -1}
	}
	return d
}

// run advances time by dur; shard s reports its next cut every gaps[s] (if it has a table).
func (d *driver) run(dur time.Duration, gaps map[int32]time.Duration) {
	end := d.now.Add(dur)
	for d.now.Before(end) {
		d.now = d.now.Add(100 * time.Microsecond)
		for s, gap := range gaps {
			if d.silent[s] || d.now.Before(d.next[s]) {
				continue
			}
			c := d.thru[s].next(d.cfg.W)
			if d.st.Tables[c.Window] == nil {
				continue
			}
			if !d.st.Active(s, c) { // quota 0 or failed in this cut: nothing to report
				d.thru[s] = c
				continue
			}
			d.thru[s] = c
			d.next[s] = d.now.Add(gap)
			d.l.Report(Report{Shard: s, View: d.st.View, Through: c, Slots: d.st.Tables[c.Window].SlotsThrough(s, c.Cut)}, d.now)
		}
		entries, sigs := d.l.Tick(d.now)
		d.sigs = append(d.sigs, sigs...)
		for _, sg := range sigs { // lag-fix: a live shard reports through the cut at once (no-ops fill)
			if !d.silent[sg.Shard] && d.thru[sg.Shard].Less(sg.Through) {
				d.thru[sg.Shard] = sg.Through
				slots := int64(0)
				if tb := d.st.Tables[sg.Through.Window]; tb != nil {
					slots = tb.SlotsThrough(sg.Shard, sg.Through.Cut)
				}
				d.l.Report(Report{Shard: sg.Shard, View: d.st.View, Through: sg.Through, Slots: slots, LagFix: true}, d.now)
			}
		}
		for _, e := range entries {
			if err := d.st.Apply(e); err != nil {
				d.t.Fatalf("applying %+v: %v", e, err)
			}
		}
	}
}

func testConfig() Config {
	c := DefaultConfig()
	c.W, c.DecideAt, c.InitialQuota = 10, 5, 4
	return c
}

// TestQuotaFollowsRate: a shard reporting twice per T_ord gets twice the quota in the next
// window; one reporting once per T_ord keeps its quota.
func TestQuotaFollowsRate(t *testing.T) {
	d := newDriver(t, testConfig(), 2)
	d.run(8*time.Millisecond, map[int32]time.Duration{0: 500 * time.Microsecond, 1: time.Millisecond})
	n := d.st.Tables[1]
	if n == nil {
		t.Fatalf("no table for window 1 after 8 ms")
	}
	if n.Quotas[0] != 8 || n.Quotas[1] != 4 {
		t.Fatalf("window 1 quotas %v; want [8 4]", n.Quotas)
	}
	if n.Start != 10*8 || n.SlotBase[0] != 40 || n.SlotBase[1] != 40 {
		t.Fatalf("window 1 starts at %d with slot bases %v; want 80, [40 40]", n.Start, n.SlotBase)
	}
}

// TestStragglerBenched: a shard whose reports come 5·T_ord apart gets quota 0 (the other shard's
// cuts stop waiting for it), and quota 1 again after StragglerWindows windows.
func TestStragglerBenched(t *testing.T) {
	cfg := testConfig()
	d := newDriver(t, cfg, 2)
	gaps := map[int32]time.Duration{0: time.Millisecond, 1: 5 * time.Millisecond}
	d.run(60*time.Millisecond, gaps)
	benchedAt, ok := d.st.Benched[1]
	if !ok {
		t.Fatalf("shard 1 is not benched; tables %+v", d.st.Tables)
	}
	// While benched, cuts move at shard 0's pace: about one per T_ord.
	before := d.st.Last
	d.run(20*time.Millisecond, map[int32]time.Duration{0: time.Millisecond, 1: time.Millisecond})
	if moved := cutsBetween(before, d.st.Last, cfg.W); moved < 15 {
		t.Fatalf("%d cuts in 20 ms with the straggler benched; want about 20", moved)
	}
	d.run(time.Duration(cfg.StragglerWindows*cfg.W)*time.Millisecond, map[int32]time.Duration{0: time.Millisecond, 1: time.Millisecond})
	if _, still := d.st.Benched[1]; still {
		t.Fatalf("shard 1 still benched at window %d (since %d)", d.st.Last.Window, benchedAt)
	}
	if q := d.st.Current().Quotas[1]; q < 1 {
		t.Fatalf("shard 1's quota after its bench: %d", q)
	}
}

// TestAheadIsNoStraggler: a shard that runs ahead (a backlog lets it report a cut every
// 250 µs) makes the sequencer signal the others time after time; they report at their pace,
// so none of them is benched as a straggler, and the fast one's quota grows.
func TestAheadIsNoStraggler(t *testing.T) {
	cfg := testConfig()
	cfg.W, cfg.DecideAt = 100, 50 // windows long enough for many signals each
	d := newDriver(t, cfg, 3)
	d.run(100*time.Millisecond, map[int32]time.Duration{0: 250 * time.Microsecond, 1: time.Millisecond, 2: time.Millisecond})
	signalled := map[int32]int{}
	for _, s := range d.sigs {
		signalled[s.Shard]++
	}
	if signalled[1] <= cfg.StragglerReports || signalled[2] <= cfg.StragglerReports {
		t.Fatalf("signals per shard %v: the at-pace shards were not held to lag-fix often enough for this test", signalled)
	}
	t.Logf("signals %v, last %v, quotas %v", signalled, d.st.Last, d.st.Current().Quotas)
	if len(d.st.Benched) != 0 {
		t.Fatalf("benched %v (signals per shard %v); tables %+v", d.st.Benched, signalled, d.st.Current())
	}
	if q := d.st.Current().Quotas; q[0] <= q[1] {
		t.Fatalf("quotas %v: the shard ahead should have the largest", q)
	}
}

// TestLagFixThenFailure: a shard that stops reporting is signalled once it lags LagFix cuts,
// signalled again while it does not answer, and failed after FailAfter: the view goes up, the
// cuts go on without it, the next table leaves it out; when it joins again it continues from
// the slots committed cuts gave it.
func TestLagFixThenFailure(t *testing.T) {
	cfg := testConfig()
	d := newDriver(t, cfg, 3)
	all := map[int32]time.Duration{0: time.Millisecond, 1: time.Millisecond, 2: time.Millisecond}
	d.run(3*time.Millisecond, all)
	d.silent[2] = true
	d.run(cfg.FailAfter/2, all)
	if len(d.sigs) < 2 || d.sigs[0].Shard != 2 {
		t.Fatalf("signals %+v; want shard 2 signalled, and again", d.sigs)
	}
	d.run(cfg.FailAfter, all)
	if _, failed := d.st.Failed[2]; !failed && !d.st.Out[2] {
		t.Fatalf("shard 2 not failed after %v: %+v", cfg.FailAfter, d.st)
	}
	if d.st.View != 1 {
		t.Fatalf("view %d after a failure; want 1", d.st.View)
	}
	slots := d.st.Slots[2]
	before := d.st.Last
	d.run(30*time.Millisecond, all)
	if cutsBetween(before, d.st.Last, cfg.W) < 20 {
		t.Fatalf("cuts stalled after the failure: %+v → %+v", before, d.st.Last)
	}
	if t2 := d.st.Current(); t2.Index(2) >= 0 {
		t.Fatalf("window %d still has the failed shard: %+v", t2.Window, t2)
	}
	if err := d.st.Apply(Entry{Join: &JoinEntry{Shard: 2}}); err != nil {
		t.Fatal(err)
	}
	d.silent[2] = false
	d.thru[2] = d.st.Last
	d.run(30*time.Millisecond, all)
	t3 := d.st.Current()
	i := t3.Index(2)
	if i < 0 {
		t.Fatalf("shard 2 did not join again: %+v", t3)
	}
	if t3.View != 1 {
		t.Fatalf("the rejoined table's view %d; want 1", t3.View)
	}
	if d.st.Slots[2] < slots {
		t.Fatalf("shard 2's committed slots went back from %d to %d", slots, d.st.Slots[2])
	}
}

// TestTakeoverWaitsInsteadOfFailing: a lagging shard that another replica can take over is not
// failed after FailAfter but signalled on until Config.Takeover; when its new leader catches up
// (a report through the cut it was signalled to) nothing was failed, the view stays and the cuts
// go on. If no takeover comes it is failed after Takeover; with no replica to take over, after
// FailAfter as before.
func TestTakeoverWaitsInsteadOfFailing(t *testing.T) {
	cfg := testConfig()
	cfg.Takeover = 20 * cfg.FailAfter
	all := map[int32]time.Duration{0: time.Millisecond, 1: time.Millisecond, 2: time.Millisecond}
	failedAt := func(takeover bool, resume time.Duration) (view uint64, signals int, failed bool) {
		d := newDriver(t, cfg, 3)
		movable := 0
		d.l.SetTakeover(func(sh int32) bool {
			movable++
			return takeover && sh == 2
		})
		d.run(3*time.Millisecond, all)
		d.silent[2] = true
		d.run(resume, all)
		n := len(d.sigs)
		if _, f := d.st.Failed[2]; f || d.st.Out[2] {
			return d.st.View, n, true
		}
		if takeover && resume > cfg.FailAfter && movable == 0 {
			t.Fatal("the leader never asked whether shard 2 can be taken over")
		}
		d.silent[2] = false // the new leader resumes: signalled, it reports through the cut asked
		before := d.st.Last
		d.run(30*time.Millisecond, all)
		if cutsBetween(before, d.st.Last, cfg.W) < 20 {
			t.Fatalf("cuts stalled after the takeover: %+v → %+v", before, d.st.Last)
		}
		_, f := d.st.Failed[2]
		return d.st.View, n, f || d.st.Out[2]
	}
	// Taken over after 10 × FailAfter: nothing failed, the view stays, signalled all along.
	view, signals, failed := failedAt(true, 10*cfg.FailAfter)
	if failed || view != 0 {
		t.Fatalf("a shard taken over within Takeover was failed (view %d)", view)
	}
	if want := int(10 * cfg.FailAfter / (2 * cfg.TOrd) / 2); signals < want {
		t.Fatalf("%d signals while waiting %v for the takeover; want at least %d (sent again every 2·T_ord)", signals, 10*cfg.FailAfter, want)
	}
	// No takeover within Takeover: failed then, not before.
	if _, _, failed := failedAt(true, cfg.Takeover-cfg.FailAfter); failed {
		t.Fatalf("failed before Takeover (%v)", cfg.Takeover)
	}
	if view, _, failed := failedAt(true, cfg.Takeover+5*time.Millisecond); !failed || view != 1 {
		t.Fatalf("not failed after Takeover: failed %v, view %d", failed, view)
	}
	// Nothing can take it over: failed after FailAfter, as without the hook.
	if view, _, failed := failedAt(false, cfg.FailAfter+5*time.Millisecond); !failed || view != 1 {
		t.Fatalf("a shard no replica can take over is not failed after FailAfter: failed %v, view %d", failed, view)
	}
}

// TestShardReportsExactlyItsQuota: a shard reports whole quotas only (extra records wait for
// the next report, but are delivered at once, their positions being known); with nothing to
// report for 1.5·T_ord it asks for one coalesced no-op entry filling the deficit; a committed
// cut confirms and acknowledges.
func TestShardReportsExactlyItsQuota(t *testing.T) {
	cfg := testConfig() // quota 4
	first := firstTable(2, cfg.InitialQuota)
	sh, err := NewShard(cfg, 1, first, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	o := sh.Durable(6, now)
	if o.Report == nil || o.Report.Through != (CutID{Window: 0, Cut: 0}) || o.Report.Slots != 4 {
		t.Fatalf("6 durable slots with quota 4: report %+v; want through cut 0 (4 slots)", o.Report)
	}
	if len(o.Deliver) != 2 || o.Deliver[0] != (Delivery{Slot: 0, Position: 4, N: 4}) || o.Deliver[1] != (Delivery{Slot: 4, Position: 12, N: 2}) {
		t.Fatalf("deliveries %+v; want slots 0-3 at 4-7 and 4-5 at 12-13", o.Deliver)
	}
	if o := sh.Tick(now.Add(cfg.TOrd)); o.NoOp != 0 {
		t.Fatalf("a no-op before 1.5·T_ord: %+v", o)
	}
	o = sh.Tick(now.Add(2 * cfg.TOrd))
	if o.NoOp != 2 {
		t.Fatalf("after 2·T_ord with 2 of 4 slots: no-op of %d; want one entry of 2", o.NoOp)
	}
	if o := sh.Tick(now.Add(4 * cfg.TOrd)); o.NoOp != 0 {
		t.Fatalf("the same deficit filled twice: %+v", o)
	}
	o = sh.Durable(2, now.Add(4*cfg.TOrd))
	if o.Report == nil || o.Report.Through != (CutID{Window: 0, Cut: 1}) {
		t.Fatalf("the no-op made durable: report %+v; want through cut 1", o.Report)
	}
	o, err = sh.Apply(Entry{Cut: &CutID{Window: 0, Cut: 0}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if o.Confirm != 8 || o.Acked != 4 {
		t.Fatalf("cut 0 committed: confirm %d, acked %d; want 8 and 4", o.Confirm, o.Acked)
	}
}

// TestRefusedNoOpIsAskedAgain: a no-op entry the log refused (appends stopped for a
// leadership transfer that did not happen) is asked for again at the next tick; before,
// the shard waited forever for slots that were not coming, and an idle shard stalled every cut.
// A no-op asked for and not durable yet counts: the next cut's no-op adds only its own slots.
func TestRefusedNoOpIsAskedAgain(t *testing.T) {
	cfg := testConfig() // quota 4
	sh, err := NewShard(cfg, 1, firstTable(2, cfg.InitialQuota), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	o := sh.Tick(now.Add(2 * cfg.TOrd))
	if o.NoOp != 4 || o.Report != nil {
		t.Fatalf("idle for 2·T_ord: %+v; want a no-op of 4 slots and no report (nothing reported yet)", o)
	}
	sh.NoOpRefused(&o)
	if o.NoOp != 0 {
		t.Fatalf("a refused no-op left in its Out: %+v", o)
	}
	o = sh.Tick(now.Add(4 * cfg.TOrd))
	if o.NoOp != 4 {
		t.Fatalf("after the refusal: %+v; want the no-op of 4 asked again", o)
	}
	// Not durable yet: the next cut's deficit is its own 4 slots, not 8.
	o = sh.Tick(now.Add(6 * cfg.TOrd))
	if o.NoOp != 0 {
		t.Fatalf("the same cut's no-op asked twice: %+v", o)
	}
	o = sh.Signal(CutID{Window: 0, Cut: 1}, now.Add(6*cfg.TOrd))
	if o.NoOp != 4 {
		t.Fatalf("a lag-fix through cut 1 with cut 0's no-op in flight: no-op of %d; want 4", o.NoOp)
	}
	o = sh.Durable(8, now.Add(6*cfg.TOrd))
	if o.Report == nil || o.Report.Through != (CutID{Window: 0, Cut: 1}) || o.Report.NoOps != 8 || o.Report.Records != 0 {
		t.Fatalf("both no-ops durable: report %+v; want through cut 1, 8 no-op slots, 0 records", o.Report)
	}
}

// TestRebaseDeliversWhatItOwes: a shard whose copy of the sequencer state fell behind (its
// member restored a snapshot meanwhile) and is rebased onto the new state delivers every durable
// slot it had not delivered, including those the new state committed meanwhile, each at its
// committed position; ResumeShard alone (a new leader, no subscribers yet) starts at the
// committed slots. Across a view change it missed, it announces the change where the view
// began (not at its own stale confirmed prefix) and delivers again from its confirmed slots in
// the new view; if it was the shard that failed, it delivers its slots committed before the
// failure and is truncated there.
func TestRebaseDeliversWhatItOwes(t *testing.T) {
	cfg := testConfig() // W 10, quota 4
	both := map[int32]time.Duration{0: 500 * time.Microsecond, 1: 500 * time.Microsecond}
	now := time.Unix(0, 0)
	// stale is shard 1 with 2,000 durable slots that heard only the first table.
	stale := func() *Shard {
		sh, err := NewShard(cfg, 1, firstTable(2, cfg.InitialQuota), 0)
		if err != nil {
			t.Fatal(err)
		}
		delivered := int64(0)
		for _, d := range sh.Durable(2000, now).Deliver {
			delivered += d.N
		}
		if delivered != 40 {
			t.Fatalf("with window 0's table only: %d slots delivered; want its 40", delivered)
		}
		return sh
	}
	// check: o's deliveries are slots [from, from+n) at st's positions, in st's view.
	check := func(what string, o Out, st *State, from int64) int64 {
		t.Helper()
		next := from
		for _, dl := range o.Deliver {
			if dl.Slot != next || dl.View != st.View {
				t.Fatalf("%s: delivery %+v; want slot %d on in view %d (deliveries %+v)", what, dl, next, st.View, o.Deliver)
			}
			for k := range dl.N {
				if want, ok := st.Position(1, dl.Slot+k); !ok || want != dl.Position+uint64(k) {
					t.Fatalf("%s: slot %d delivered at %d; the state has it at %d (%v)", what, dl.Slot+k, dl.Position+uint64(k), want, ok)
				}
			}
			next += dl.N
		}
		return next
	}

	t.Run("same view", func(t *testing.T) {
		d := newDriver(t, cfg, 2)
		d.run(30*time.Millisecond, both)
		st := d.st.Clone()
		if st.Slots[1] <= 40 {
			t.Fatalf("the sequencer committed %d of shard 1's slots; the test needs more than 40", st.Slots[1])
		}
		_, o := stale().Rebase(st, now)
		if next := check("rebased", o, st, 40); next <= st.Slots[1] {
			t.Fatalf("rebased: delivered through slot %d; the state committed %d of them", next, st.Slots[1])
		}
		if o.Confirm != st.Committed() || o.Acked != st.Slots[1] {
			t.Fatalf("rebased: confirm %d, acked %d; want %d and %d", o.Confirm, o.Acked, st.Committed(), st.Slots[1])
		}
		if len(o.Fail) != 0 || o.Truncate != nil {
			t.Fatalf("rebased in the same view: %+v", o)
		}
	})

	t.Run("another shard failed", func(t *testing.T) {
		d := newDriver(t, cfg, 2)
		d.run(30*time.Millisecond, both)
		sh, _ := stale().Rebase(d.st.Clone(), now)
		confirmed, acked := sh.confirmed, sh.acked
		d.run(20*time.Millisecond, both) // more commits before the view change
		d.silent[0] = true
		d.run(200*time.Millisecond, both)
		st := d.st.Clone()
		after, _ := st.ViewAfter(1)
		if st.View != 1 || after <= confirmed {
			t.Fatalf("view %d beginning at %d (the shard's confirmed prefix %d): the test needs view 1 after more commits", st.View, after, confirmed)
		}
		_, o := sh.Rebase(st, now)
		if len(o.Fail) != 1 || o.Fail[0] != (ViewChange{After: after, View: 1}) {
			t.Fatalf("rebased across the view change: fail %+v; want view 1 from %d", o.Fail, after)
		}
		if len(o.Deliver) == 0 {
			t.Fatal("rebased across the view change: nothing delivered again")
		}
		check("rebased across the view change", o, st, acked)
	})

	t.Run("this shard failed", func(t *testing.T) {
		d := newDriver(t, cfg, 2)
		sh := stale()
		d.run(30*time.Millisecond, both)
		d.silent[1] = true
		d.run(200*time.Millisecond, both)
		st := d.st.Clone()
		keep := st.Slots[1]
		if !st.Out[1] || keep <= 40 {
			t.Fatalf("shard 1 out %v with %d committed slots: the test needs it failed past 40", st.Out[1], keep)
		}
		after, _ := st.ViewAfter(1)
		_, o := sh.Rebase(st, now)
		if o.Truncate == nil || *o.Truncate != keep || len(o.Fail) != 1 || o.Fail[0] != (ViewChange{After: after, View: 1}) {
			t.Fatalf("rebased after its own failure: truncate %v, fail %+v; want %d and view 1 from %d", o.Truncate, o.Fail, keep, after)
		}
		if next := check("rebased after its own failure", o, st, 0); next != keep {
			t.Fatalf("rebased after its own failure: delivered slots 0 to %d; want its %d committed ones", next, keep)
		}
		if o.Report != nil {
			t.Fatalf("a failed shard reports: %+v", o.Report)
		}
	})
}

// TestShardDrainsABacklog: a backlog of at most DrainAfter cuts of the quota is reported at the
// shard's pace (at most LagFix−1 cuts ahead of the last committed cut); a larger one is
// reported at once, every cut it fills, as the shard's own report (not a lag-fix).
func TestShardDrainsABacklog(t *testing.T) {
	for _, drain := range []int{0, 2} {
		cfg := testConfig() // quota 4, lag-fix at 3 cuts
		cfg.DrainAfter = drain
		sh, err := NewShard(cfg, 1, firstTable(2, cfg.InitialQuota), 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(0, 0)
		o := sh.Durable(6, now) // a backlog of 2 after the first cut: paced either way
		if o.Report == nil || o.Report.Through != (CutID{Window: 0, Cut: 0}) {
			t.Fatalf("drain %d: 6 durable slots with quota 4: report %+v; want through cut 0", drain, o.Report)
		}
		o = sh.Durable(20, now.Add(cfg.TOrd)) // 26 durable, 4 reported: 22 waiting
		want := CutID{Window: 0, Cut: 1}      // paced: the last committed cut is -1, lag-fix at 3
		if drain > 0 {
			want = CutID{Window: 0, Cut: 5} // 22 > 2·4: all 6 full cuts
		}
		if o.Report == nil || o.Report.Through != want || o.Report.LagFix {
			t.Fatalf("drain %d: 22 records waiting: report %+v; want through %v, not a lag-fix", drain, o.Report, want)
		}
	}
}
