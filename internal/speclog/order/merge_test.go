package order

import "testing"

// TestMergerRewindsOverNoOpsOnRedecidedTable: a shard fails in window 0 after the table of
// window 1 (which has it) was decided; State.Apply drops that table and the leader decides it
// again without the failed shard, so window 1's positions move. A subscriber that had passed
// into window 1 over the shards' own no-op slots only (an idle topic) emitted nothing past
// the failure point; Merger.Fail must still rewind (it did not: its next position stayed where the old
// table put it, and a record the new table placed below it was dropped as "emitted already").
func TestMergerRewindsOverNoOpsOnRedecidedTable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.W, cfg.DecideAt = 4, 2
	first := &Table{Window: 0, Start: 0, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{0, 0, 0}}
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
	apply(Entry{Cut: &CutID{Window: 0, Cut: 0}})
	apply(Entry{Cut: &CutID{Window: 0, Cut: 1}})
	apply(Entry{Table: &Table{Window: 1, Start: 12, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{4, 4, 4}}})
	apply(Entry{Cut: &CutID{Window: 0, Cut: 2}}) // committed prefix 9

	m := NewMerger(0, func(pos uint64) (int32, bool, bool) {
		sh, _, noOp, ok := st.Owner(pos)
		return sh, noOp, ok
	}, nil)
	m.Views(st.ViewAfter)
	var got []Event
	for p := uint64(0); p < 9; p++ {
		got = append(got, m.Deliver(p, int32(p%3), "r", 0)...)
	}
	got = append(got, m.Confirm(9, 0)...)
	// Idle shards pad speculatively through the end of window 0 and into window 1 (old table):
	// 9 sh0, 10 sh1, 11 sh2, 12 sh0, 13 sh1, 14 sh2, 15 sh0 — all own no-op slots.
	for p := uint64(9); p < 16; p++ {
		got = append(got, m.Deliver(p, int32(p%3), nil, 0)...)
	}
	if m.Next() != 16 {
		t.Fatalf("setup: next %d, want 16", m.Next())
	}
	// Shard 1 fails after cut 2; window 1 is decided again without it.
	apply(Entry{Fail: &FailEntry{Shard: 1, After: CutID{Window: 0, Cut: 2}}})
	apply(Entry{Table: &Table{Window: 1, View: 1, Start: 12, Shards: []int32{0, 2}, Quotas: []int64{1, 1}, SlotBase: []int64{4, 4}}})
	if p, _ := st.Position(2, 5); p != 15 {
		t.Fatalf("setup: shard 2 slot 5 at %d, want 15", p)
	}
	// The shards re-deliver from the confirmed prefix in view 1 (new positions); shard 2's
	// slot 5 (position 15 now) is a record.
	got = append(got, m.Deliver(11, 2, nil, 1)...)
	got = append(got, m.Deliver(13, 2, nil, 1)...)
	got = append(got, m.Deliver(15, 2, "c15", 1)...)
	got = append(got, m.Deliver(9, 0, nil, 1)...)
	got = append(got, m.Deliver(12, 0, nil, 1)...)
	got = append(got, m.Deliver(14, 0, nil, 1)...)
	got = append(got, m.Deliver(16, 0, "a16", 1)...)
	seen := map[uint64]bool{}
	for _, e := range got {
		if e.Kind == EventRecord {
			seen[e.Position] = true
		}
	}
	if !seen[16] {
		t.Fatalf("a16 not emitted: %s", recordsAndFails(got))
	}
	if !seen[15] {
		t.Fatalf("shard 2's record at 15 (new table) was never given, but 16 was: %s", recordsAndFails(got))
	}
}

// TestMergerKeepsDeliveriesOfAViewNotLearnedYet: the merger's node lags a view change that a
// remote shard leader has applied (its stream started after the change, so it announces no
// Fail). Its view-1 deliveries below Next must be kept, not dropped as passed (learn cannot
// apply view 1 yet): when the local state catches up, another shard's Fail rewinds the merger
// to After, and it would wait there for a dropped delivery for good.
func TestMergerKeepsDeliveriesOfAViewNotLearnedYet(t *testing.T) {
	cfg := DefaultConfig()
	cfg.W, cfg.DecideAt = 4, 2
	first := &Table{Window: 0, Start: 0, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{0, 0, 0}}
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
	apply(Entry{Cut: &CutID{Window: 0, Cut: 0}})
	apply(Entry{Cut: &CutID{Window: 0, Cut: 1}})
	apply(Entry{Table: &Table{Window: 1, Start: 12, Shards: []int32{0, 1, 2}, Quotas: []int64{1, 1, 1}, SlotBase: []int64{4, 4, 4}}})
	apply(Entry{Cut: &CutID{Window: 0, Cut: 2}}) // committed prefix 9

	m := NewMerger(0, func(pos uint64) (int32, bool, bool) {
		sh, _, noOp, ok := st.Owner(pos)
		return sh, noOp, ok
	}, nil)
	m.Views(st.ViewAfter)
	var got []Event
	for p := uint64(0); p < 9; p++ {
		got = append(got, m.Deliver(p, int32(p%3), "r", 0)...)
	}
	got = append(got, m.Confirm(9, 0)...)
	for p := uint64(9); p < 16; p++ {
		got = append(got, m.Deliver(p, int32(p%3), nil, 0)...)
	}
	// Shard 0's (remote) stream, already in view 1 on its leader's node: its slots 3..5 at
	// 9, 12, 14 by the new layout. This node's state does not know view 1 yet.
	got = append(got, m.Deliver(9, 0, nil, 1)...)
	got = append(got, m.Deliver(12, 0, nil, 1)...)
	got = append(got, m.Deliver(14, 0, nil, 1)...)
	// This node's state catches up: shard 1 failed after cut 2, window 1 decided again.
	apply(Entry{Fail: &FailEntry{Shard: 1, After: CutID{Window: 0, Cut: 2}}})
	apply(Entry{Table: &Table{Window: 1, View: 1, Start: 12, Shards: []int32{0, 2}, Quotas: []int64{1, 1}, SlotBase: []int64{4, 4}}})
	// Shard 2 (local runner) announces the change and delivers again in view 1.
	got = append(got, m.Fail(9, 1)...)
	got = append(got, m.Deliver(11, 2, nil, 1)...)
	got = append(got, m.Deliver(13, 2, nil, 1)...)
	got = append(got, m.Deliver(15, 2, "c15", 1)...)
	got = append(got, m.Deliver(16, 0, "a16", 1)...)
	got = append(got, m.Confirm(0, 0)...)
	seen := map[uint64]bool{}
	for _, e := range got {
		if e.Kind == EventRecord {
			seen[e.Position] = true
		}
	}
	if !seen[15] || !seen[16] {
		t.Fatalf("merger stuck at %d (c15 given %v, a16 given %v): %s", m.Next(), seen[15], seen[16], recordsAndFails(got))
	}
}
