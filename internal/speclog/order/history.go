package order

import "slices"

// History is every window's layout since the log's trim point, so that any position can be
// mapped to its shard and slot (reads, subscriptions from an old position, trim) long after its
// table left the sequencer's working state. Consecutive windows laid out alike are one Run, so
// under a steady load the history grows by an entry only when quotas, shards or views change.
type History struct {
	Runs  []Run     `json:"runs"`
	Fails []Failure `json:"fails,omitempty"` // whole-shard failures: their later slots in the window are no-ops
}

// Run is consecutive windows with the same shards, quotas, groups and view.
type Run struct {
	First    uint64  `json:"first"` // the first window
	Count    uint64  `json:"count"`
	Start    uint64  `json:"start"` // the first window's first position
	View     uint64  `json:"view"`
	Shards   []int32 `json:"shards"`
	Quotas   []int64 `json:"quotas"`
	SlotBase []int64 `json:"slot_base"` // of the first window
	Groups   int     `json:"groups,omitempty"`
}

// Failure is a shard failed in a window after a cut (Cut -1: before its first).
type Failure struct {
	Window uint64 `json:"window"`
	Shard  int32  `json:"shard"`
	After  int    `json:"after"`
}

// table is window w's table in run r (w in the run).
func (r *Run) table(w int, window uint64) *Table {
	k := int64(window - r.First)
	t := &Table{Window: window, View: r.View, Shards: r.Shards, Quotas: r.Quotas, Groups: r.Groups,
		SlotBase: make([]int64, len(r.Shards))}
	for i, q := range r.Quotas {
		t.SlotBase[i] = r.SlotBase[i] + k*int64(w)*q
	}
	t.Start = r.Start + uint64(k)*uint64(w)*t.CutSize()
	return t
}

// end is the first position after the run.
func (r *Run) end(w int) uint64 {
	t := Table{Quotas: r.Quotas}
	return r.Start + r.Count*uint64(w)*t.CutSize()
}

// Add appends window t (the one after the last), merging it into the last run if laid out
// alike.
func (h *History) Add(w int, t *Table) {
	if n := len(h.Runs); n > 0 {
		r := &h.Runs[n-1]
		if t.Window == r.First+r.Count && t.View == r.View && t.Groups == r.Groups && slices.Equal(t.Shards, r.Shards) &&
			slices.Equal(t.Quotas, r.Quotas) && t.Start == r.end(w) && slices.Equal(t.SlotBase, r.table(w, t.Window).SlotBase) {
			r.Count++
			return
		}
	}
	h.Runs = append(h.Runs, Run{First: t.Window, Count: 1, Start: t.Start, View: t.View, Shards: slices.Clone(t.Shards),
		Quotas: slices.Clone(t.Quotas), SlotBase: slices.Clone(t.SlotBase), Groups: t.Groups})
}

// Fail records a whole-shard failure in a window.
func (h *History) Fail(f Failure) { h.Fails = append(h.Fails, f) }

// failedAt reports whether a shard's slot in cut c of window is a no-op by a failure.
func (h *History) failedAt(window uint64, shard int32, cut int) bool {
	for _, f := range h.Fails {
		if f.Window == window && f.Shard == shard && cut > f.After {
			return true
		}
	}
	return false
}

// Table is the table of the window holding position pos.
func (h *History) Table(w int, pos uint64) (*Table, bool) {
	i, _ := slices.BinarySearchFunc(h.Runs, pos, func(r Run, p uint64) int {
		switch {
		case r.end(w) <= p:
			return -1
		case r.Start > p:
			return 1
		}
		return 0
	})
	if i >= len(h.Runs) || h.Runs[i].Start > pos || h.Runs[i].end(w) <= pos {
		return nil, false
	}
	r := &h.Runs[i]
	t := (&Table{Quotas: r.Quotas}).CutSize()
	if t == 0 {
		return nil, false
	}
	return r.table(w, r.First+(pos-r.Start)/(uint64(w)*t)), true
}

// Owner is the shard and slot at position pos; noOp is set when the position is a no-op slot of
// a failed shard (its slot number is then meaningless).
func (h *History) Owner(w int, pos uint64) (shard int32, slot int64, noOp, ok bool) {
	t, ok := h.Table(w, pos)
	if !ok {
		return 0, 0, false, false
	}
	shard, slot, cut, ok := t.Owner(w, pos)
	return shard, slot, ok && h.failedAt(t.Window, shard, cut), ok
}

// Position is the global position of a shard's slot.
func (h *History) Position(w int, shard int32, slot int64) (uint64, bool) {
	p, _, ok := h.Span(w, shard, slot)
	return p, ok
}

// Span is the global position of a shard's slot, and how many of its slots from it lie at
// consecutive positions.
func (h *History) Span(w int, shard int32, slot int64) (uint64, int64, bool) {
	for ri := len(h.Runs) - 1; ri >= 0; ri-- {
		r := &h.Runs[ri]
		i := slices.Index(r.Shards, shard)
		if i < 0 || r.Quotas[i] == 0 || slot < r.SlotBase[i] {
			continue
		}
		perWindow := int64(w) * r.Quotas[i]
		k := (slot - r.SlotBase[i]) / perWindow
		if uint64(k) >= r.Count {
			return 0, 0, false // past the run: not laid out yet
		}
		t := r.table(w, r.First+uint64(k))
		p, n, cut, ok := t.Span(w, shard, slot)
		if !ok || h.failedAt(t.Window, shard, cut) {
			return 0, 0, false // a slot the shard lost with its failure
		}
		return p, n, true
	}
	return 0, 0, false
}

// TrimBefore drops the runs wholly before pos.
func (h *History) TrimBefore(w int, pos uint64) {
	i := 0
	for i < len(h.Runs)-1 && h.Runs[i].end(w) <= pos {
		i++
	}
	if i > 0 {
		first := h.Runs[i].First
		h.Runs = slices.Delete(h.Runs, 0, i)
		h.Fails = slices.DeleteFunc(h.Fails, func(f Failure) bool { return f.Window < first })
	}
}
