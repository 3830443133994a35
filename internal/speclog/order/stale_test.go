package order

import (
	"testing"
	"time"
)

// staleState is a two-shard topic (quota 1 each, W 4, the next table decided at cut 2).
func staleState(t *testing.T) (Config, *State, *Table) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.W, cfg.DecideAt, cfg.StaggerFrom = 4, 2, 0
	first := &Table{Window: 0, Start: 0, Shards: []int32{0, 1}, Quotas: []int64{1, 1}, SlotBase: []int64{0, 0}, Groups: 1}
	st, err := NewState(cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, st, first
}

// TestStaleFailIsRefused: a sequencer leader that has just taken over may decide on
// an applied state that trails the entries the old leader committed (the group now waits for
// its term's first entry; this is the state machine's own guard). Its Fail names the last cut
// it knew; applied after later cuts holding the failed shard's slots, it would turn those
// committed (acknowledged, confirmed) slots into no-ops and break FirstSlot. It is refused.
func TestStaleFailIsRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.W, cfg.DecideAt, cfg.StaggerFrom = 10, 8, 0 // no table decision in the cuts below
	st, err := NewState(cfg, &Table{Window: 0, Start: 0, Shards: []int32{0, 1}, Quotas: []int64{1, 1}, SlotBase: []int64{0, 0}, Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(e Entry) error { return st.Apply(e) }
	for c := range 2 { // applied on the new leader's node before it leads
		if err := apply(Entry{Cut: &CutID{Window: 0, Cut: c}}); err != nil {
			t.Fatal(err)
		}
	}
	// The new leader decides on that applied state (Last = cut 1): shard 0 re-sends its report
	// through cut 5, shard 1 does not reach it.
	l := NewLeader(st)
	now := time.Unix(0, 0)
	l.Report(Report{Shard: 0, View: 0, Through: CutID{Window: 0, Cut: 5}, Slots: 6}, now)
	var fail *FailEntry
	for _, at := range []time.Time{now, now.Add(cfg.FailAfter + time.Millisecond)} {
		ents, _ := l.Tick(at)
		for _, e := range ents {
			if e.Fail != nil {
				fail = e.Fail
			}
		}
	}
	if fail == nil || fail.Shard != 1 || fail.After != (CutID{Window: 0, Cut: 1}) {
		t.Fatalf("setup: the new leader's fail entry is %+v", fail)
	}
	// In log order: the old leader's cuts 2 to 5 (both shards reported them), then the Fail.
	for c := 2; c < 6; c++ {
		if err := apply(Entry{Cut: &CutID{Window: 0, Cut: c}}); err != nil {
			t.Fatal(err)
		}
	}
	if st.Slots[1] != 6 {
		t.Fatalf("setup: shard 1 has %d committed slots, want 6", st.Slots[1])
	}
	confirmed := st.Committed()
	failErr := apply(Entry{Fail: fail})
	// Every committed slot of shard 1 must keep its position, and its positions below the
	// confirmed prefix must stay its records.
	for slot := int64(0); slot < st.Slots[1]; slot++ {
		p, ok := st.Position(1, slot)
		if !ok {
			t.Errorf("Fail{After: %+v} applied (err %v) after cut %+v: shard 1's committed slot %d has no position any more", fail.After, failErr, st.Last, slot)
			continue
		}
		if p >= confirmed {
			t.Errorf("shard 1's committed slot %d at %d, past the confirmed prefix %d", slot, p, confirmed)
		}
		if sh, sl, noOp, ok := st.Owner(p); !ok || noOp || sh != 1 || sl != slot {
			t.Errorf("confirmed position %d (shard 1, slot %d) is now owned by %d/%d no-op=%v ok=%v", p, slot, sh, sl, noOp, ok)
		}
	}
	// The log start a trim at shard 1's slot 2's position would give it.
	if got := st.FirstSlot(1, 5); got != 2 {
		t.Errorf("FirstSlot(1, 5) = %d, want 2 (slot 2 is at position 5)", got)
	}
}

// TestStaleTableIsRefused: a stale leader decides the next window's table that
// the old leader decided already. A second table for a window is refused: shards may have
// delivered into it by the first, and replacing it would move those deliveries' positions
// without a fail notice.
func TestStaleTableIsRefused(t *testing.T) {
	cfg, st, first := staleState(t)
	for c := range 2 {
		if err := st.Apply(Entry{Cut: &CutID{Window: 0, Cut: c}}); err != nil {
			t.Fatal(err)
		}
	}
	// The new leader's decision on its applied state (cut 1 of 4, decide at 2: due).
	l := NewLeader(st)
	ents, _ := l.Tick(time.Unix(0, 0))
	var stale *Table
	for _, e := range ents {
		if e.Table != nil {
			stale = e.Table
		}
	}
	if stale == nil || stale.Window != 1 {
		t.Fatalf("setup: the new leader decided %+v", stale)
	}
	// The old leader's table for window 1, decided from measured rates (shard 0 busier).
	decided := first.Next(cfg.W, 0, map[int32]int64{0: 2, 1: 1}, nil)
	decided.Groups = 1

	// Shard 0, with 10 records durable, follows the log: the old leader's table, then the
	// new leader's.
	sh, err := NewShard(cfg, 0, first, 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	var delivered []Delivery
	var fails []ViewChange
	take := func(o Out) {
		delivered = append(delivered, o.Deliver...)
		fails = append(fails, o.Fail...)
	}
	take(sh.Durable(0, now))
	log := []Entry{{Cut: &CutID{Window: 0, Cut: 0}}, {Cut: &CutID{Window: 0, Cut: 1}}, {Table: decided}, {Table: stale}}
	for c := 2; c < 4; c++ {
		log = append(log, Entry{Cut: &CutID{Window: 0, Cut: c}})
	}
	for c := range 3 { // (cut 3 would need window 2's table)
		log = append(log, Entry{Cut: &CutID{Window: 1, Cut: c}})
	}
	for i, e := range log {
		if i >= 2 { // the sequencer's own state has cuts 0 and 1 already
			if err := st.Apply(e); err != nil {
				if e.Table == stale {
					t.Logf("the stale table is refused: %v", err)
					continue
				}
				t.Fatalf("sequencer applying %+v: %v", e, err)
			}
		}
		o, err := sh.Apply(e, now)
		if err != nil {
			if e.Table == stale {
				continue
			}
			t.Fatalf("shard applying entry %d: %v", i, err)
		}
		take(o)
	}
	if len(fails) > 0 {
		return // speculation failed and delivered again: fine
	}
	confirmed := st.Committed()
	for _, d := range delivered {
		for k := range d.N {
			pos := d.Position + uint64(k)
			if pos >= confirmed {
				continue
			}
			if p, ok := st.Position(0, d.Slot+k); !ok || p != pos {
				sh1, sl1, _, _ := st.Owner(pos)
				t.Errorf("shard 0's slot %d delivered at %d (no fail notice), committed at %d (%v); position %d is confirmed as shard %d's slot %d",
					d.Slot+k, pos, p, ok, pos, sh1, sl1)
			}
		}
	}
}

// TestStaleJoinIsRefused: a Join decided on a stale state (the shard still out)
// lands after the Table that took the shard back. It is refused: taken as Joining again, the
// next table would start the shard's slots at its committed count mid-window, laying the
// current window's later slots out twice and moving committed positions.
func TestStaleJoinIsRefused(t *testing.T) {
	cfg, st, _ := staleState(t)
	apply := func(e Entry) {
		t.Helper()
		if err := st.Apply(e); err != nil {
			t.Fatalf("applying %+v: %v", e, err)
		}
	}
	apply(Entry{Cut: &CutID{Window: 0, Cut: 0}})
	apply(Entry{Fail: &FailEntry{Shard: 1, After: CutID{Window: 0, Cut: 0}}})
	apply(Entry{Join: &JoinEntry{Shard: 1}}) // J1
	apply(Entry{Cut: &CutID{Window: 0, Cut: 1}})
	l := NewLeader(st)
	var next *Table
	ents, _ := l.Tick(time.Unix(0, 0))
	for _, e := range ents {
		if e.Table != nil {
			next = e.Table
		}
	}
	if next == nil || next.Index(1) < 0 {
		t.Fatalf("setup: window 1's table %+v", next)
	}
	apply(Entry{Table: next})
	if err := st.Apply(Entry{Join: &JoinEntry{Shard: 1}}); err != nil { // J2, the stale leader's
		t.Logf("the stale join is refused: %v", err)
	}
	apply(Entry{Cut: &CutID{Window: 0, Cut: 2}})
	apply(Entry{Cut: &CutID{Window: 0, Cut: 3}})
	apply(Entry{Cut: &CutID{Window: 1, Cut: 0}})
	apply(Entry{Cut: &CutID{Window: 1, Cut: 1}})
	ents, _ = l.Tick(time.Unix(0, 0).Add(time.Millisecond))
	var w2 *Table
	for _, e := range ents {
		if e.Table != nil {
			w2 = e.Table
		}
	}
	if w2 == nil || w2.Window != 2 {
		t.Fatalf("setup: window 2's table %+v", w2)
	}
	i, j := next.Index(1), w2.Index(1)
	if want := next.SlotBase[i] + int64(cfg.W)*next.Quotas[i]; w2.SlotBase[j] != want {
		t.Errorf("window 2 starts shard 1 at slot %d; its slots in window 1 run to %d", w2.SlotBase[j], want)
	}
	apply(Entry{Table: w2})
	apply(Entry{Cut: &CutID{Window: 1, Cut: 2}})
	before := map[int64]uint64{}
	for s := next.SlotBase[i]; s < st.Slots[1]; s++ {
		p, ok := st.Position(1, s)
		if !ok {
			t.Fatalf("committed slot %d has no position", s)
		}
		before[s] = p
	}
	apply(Entry{Cut: &CutID{Window: 1, Cut: 3}}) // window 1 ends: window 2 joins the history
	for s, p := range before {
		if q, ok := st.Position(1, s); !ok || q != p {
			t.Errorf("shard 1's committed slot %d was at %d; now at %d (%v)", s, p, q, ok)
		}
	}
}

// TestRebaseAfterTrimDeliversWhatItOwes: a runner whose member restored a snapshot rebases onto
// it (Shard.Rebase); the snapshot has a view change it missed and a trim point past its
// confirmed slots. It re-delivers from the first slot that still has a position: the slots it
// never delivered, committed past the trim point, which a subscriber waits for.
func TestRebaseAfterTrimDeliversWhatItOwes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.W, cfg.DecideAt, cfg.StaggerFrom = 4, 2, 0
	first := &Table{Window: 0, Start: 0, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{0, 0, 0}, Groups: 1}
	old, err := NewState(cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	must := func(st *State, e Entry) {
		t.Helper()
		if err := st.Apply(e); err != nil {
			t.Fatalf("applying %+v: %v", e, err)
		}
	}
	must(old, Entry{Cut: &CutID{Window: 0, Cut: 0}})
	now := time.Unix(0, 0)
	sh := ResumeShard(cfg, 0, old.Clone(), 20, 0)
	sh.Durable(0, now) // slots 1-3 delivered speculatively in window 0

	// What the member's snapshot holds: shard 2 failed (view 1), two more windows, a trim.
	st := old.Clone()
	must(st, Entry{Fail: &FailEntry{Shard: 2, After: CutID{Window: 0, Cut: 0}}})
	must(st, Entry{Cut: &CutID{Window: 0, Cut: 1}})
	must(st, Entry{Table: &Table{Window: 1, View: 1, Start: 12, Shards: []int32{0, 1}, Quotas: []int64{1, 1}, SlotBase: []int64{4, 4}, Groups: 1}})
	must(st, Entry{Cut: &CutID{Window: 0, Cut: 2}})
	must(st, Entry{Cut: &CutID{Window: 0, Cut: 3}})
	must(st, Entry{Table: &Table{Window: 2, View: 1, Start: 20, Shards: []int32{0, 1}, Quotas: []int64{1, 1}, SlotBase: []int64{8, 8}, Groups: 1}})
	for c := range 4 {
		must(st, Entry{Cut: &CutID{Window: 1, Cut: c}})
	}
	must(st, Entry{Cut: &CutID{Window: 2, Cut: 0}})
	must(st, Entry{Cut: &CutID{Window: 2, Cut: 1}})
	const trim = 12 // window 1's start (sequencer.Machine: Trimmed = 12, History.TrimBefore)
	st.History.TrimBefore(cfg.W, trim)

	_, o := sh.Rebase(st, now)
	got := map[int64]uint64{}
	for _, d := range o.Deliver {
		for k := range d.N {
			got[d.Slot+k] = d.Position + uint64(k)
		}
	}
	for slot := st.FirstSlot(0, trim); slot < st.Slots[0]; slot++ {
		want, _ := st.Position(0, slot)
		if p, ok := got[slot]; !ok || p != want {
			t.Errorf("committed slot %d (position %d >= trim %d, never delivered by this runner) delivered: %v at %d", slot, want, trim, ok, p)
		}
	}
	t.Logf("fails %+v, deliveries %+v", o.Fail, o.Deliver)
}

// TestRejoinedShardDeliversWhateverTheMapOrder: a shard failed in window 0 and taken back by
// window 1's table delivers into window 1 once it has the table. Window 0's table also spans
// those slot numbers (the failed cuts', no-ops): the table that gives a slot an active
// position wins, whatever order the Tables map yields them in.
func TestRejoinedShardDeliversWhateverTheMapOrder(t *testing.T) {
	cfg := DefaultConfig()
	cfg.W, cfg.DecideAt, cfg.StaggerFrom = 4, 2, 0
	first := &Table{Window: 0, Start: 0, Shards: []int32{0, 1}, Quotas: []int64{1, 1}, SlotBase: []int64{0, 0}, Groups: 1}
	counts := map[int]int{}
	for range 64 {
		sh, err := NewShard(cfg, 1, first, 10)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(0, 0)
		delivered := 0
		step := func(e Entry) {
			t.Helper()
			o, err := sh.Apply(e, now)
			if err != nil {
				t.Fatalf("applying %+v: %v", e, err)
			}
			if o.Truncate != nil { // the runner feeds the slots after it again
				sh.Durable(10-*o.Truncate, now)
			}
			for _, d := range o.Deliver {
				if d.View == 1 {
					delivered += int(d.N)
				}
			}
		}
		sh.Durable(0, now)
		step(Entry{Cut: &CutID{Window: 0, Cut: 0}})
		step(Entry{Fail: &FailEntry{Shard: 1, After: CutID{Window: 0, Cut: 0}}})
		step(Entry{Join: &JoinEntry{Shard: 1}})
		step(Entry{Cut: &CutID{Window: 0, Cut: 1}})
		step(Entry{Table: &Table{Window: 1, View: 1, Start: 8, Shards: []int32{0, 1}, Quotas: []int64{1, 10}, SlotBase: []int64{4, 1}, Groups: 1}})
		counts[delivered]++
	}
	if len(counts) > 1 {
		t.Errorf("slots shard 1 delivered into window 1 once it had the table (slots: runs): %v", counts)
	}
}
