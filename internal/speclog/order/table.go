// Package order is the I/O-free core of total-order topics (docs/speclog.md): fix-ante position
// arithmetic, the sequencer's replicated state and leader logic, and a shard's state machine.
// Nothing here reads a clock, a socket or a file: callers feed time and messages in and carry
// the outputs out, so the logic runs the same in deterministic simulations and in the nodes.
package order

import (
	"fmt"
	"slices"
	"time"
)

// Config holds the protocol's parameters (the paper's defaults in DefaultConfig).
type Config struct {
	W            int           // cuts per window (the speculation lease)
	TOrd         time.Duration // the target interval between a shard's reports
	InitialQuota int64         // a shard's quota in its first window
	DecideAt     int           // the cut of a window at which the next window's table is decided
	Band         float64       // a quota changes only if the rate is more than this far off target
	LagFix       int           // cuts behind the most advanced shard that get a shard signalled
	FailAfter    time.Duration // a signalled shard that has not caught up by then is failed
	// Straggler mitigation: a shard whose reports come more than StragglerGap apart on average
	// (over more than StragglerReports reports), or that needed lag-fix more than
	// StragglerReports times in a window, gets quota 0 for StragglerWindows windows, then
	// quota 1, and its quota grows again from its rate.
	StragglerGap     time.Duration
	StragglerReports int
	StragglerWindows int
}

// DefaultConfig is the paper's configuration: T_ord 1 ms, W 100, initial quota 10, the next
// table decided at cut 50, a ±5% band, lag-fix at 3 cuts, a shard failed after 50 ms, a
// straggler (reports 4·T_ord apart over 3 reports) benched for 5 windows.
func DefaultConfig() Config {
	return Config{W: 100, TOrd: time.Millisecond, InitialQuota: 10, DecideAt: 50, Band: 0.05, LagFix: 3, FailAfter: 50 * time.Millisecond,
		StragglerGap: 4 * time.Millisecond, StragglerReports: 3, StragglerWindows: 5}
}

// Check reports a configuration that cannot work.
func (c Config) Check() error {
	switch {
	case c.W < 2:
		return fmt.Errorf("order: a window of %d cuts (at least 2)", c.W)
	case c.TOrd <= 0:
		return fmt.Errorf("order: T_ord %v", c.TOrd)
	case c.InitialQuota < 1:
		return fmt.Errorf("order: initial quota %d (at least 1)", c.InitialQuota)
	case c.DecideAt < 0 || c.DecideAt >= c.W:
		return fmt.Errorf("order: deciding the next table at cut %d of a %d-cut window", c.DecideAt, c.W)
	case c.LagFix < 1:
		return fmt.Errorf("order: lag-fix at %d cuts", c.LagFix)
	}
	return nil
}

// Table is one window's fixed layout: which shards take part with how many positions per cut,
// and where the window starts, both in global positions and in each shard's own sequence of
// slots (records and no-ops, counted from the shard's beginning).
type Table struct {
	Window   uint64  `json:"window"`
	View     uint64  `json:"view"`
	Start    uint64  `json:"start"`     // the window's first global position
	Shards   []int32 `json:"shards"`    // ascending
	Quotas   []int64 `json:"quotas"`    // per shard; 0: takes no part in this window
	SlotBase []int64 `json:"slot_base"` // per shard: its slots before this window
}

// CutSize is the positions of one cut: the sum of the quotas.
func (t *Table) CutSize() uint64 {
	var q uint64
	for _, x := range t.Quotas {
		q += uint64(x)
	}
	return q
}

// End is the first position after the window.
func (t *Table) End(w int) uint64 { return t.Start + uint64(w)*t.CutSize() }

// Index is a shard's index in the table (-1 if absent).
func (t *Table) Index(shard int32) int {
	for i, s := range t.Shards {
		if s == shard {
			return i
		}
	}
	return -1
}

// offset is the first position of shard index i within a cut.
func (t *Table) offset(i int) uint64 {
	var o uint64
	for _, q := range t.Quotas[:i] {
		o += uint64(q)
	}
	return o
}

// Position is the global position of a shard's slot (counted from the shard's beginning), and
// whether the slot lies in this window.
func (t *Table) Position(w int, shard int32, slot int64) (uint64, bool) {
	i := t.Index(shard)
	if i < 0 || t.Quotas[i] == 0 {
		return 0, false
	}
	j := slot - t.SlotBase[i]
	if j < 0 || j >= int64(w)*t.Quotas[i] {
		return 0, false
	}
	q := t.Quotas[i]
	return t.Start + uint64(j/q)*t.CutSize() + t.offset(i) + uint64(j%q), true
}

// Owner is the shard, slot and cut of a global position in this window.
func (t *Table) Owner(w int, pos uint64) (shard int32, slot int64, cut int, ok bool) {
	Q := t.CutSize()
	if Q == 0 || pos < t.Start || pos >= t.End(w) {
		return 0, 0, 0, false
	}
	rel := pos - t.Start
	cut, in := int(rel/Q), rel%Q
	for i, q := range t.Quotas {
		if in < uint64(q) {
			return t.Shards[i], t.SlotBase[i] + int64(cut)*q + int64(in), cut, true
		}
		in -= uint64(q)
	}
	panic("unreachable")
}

// SlotsThrough is how many of a shard's slots (from its beginning) cut k of this window covers.
func (t *Table) SlotsThrough(shard int32, k int) int64 {
	i := t.Index(shard)
	if i < 0 {
		return 0
	}
	return t.SlotBase[i] + int64(k+1)*t.Quotas[i]
}

// Next is the table of the following window with the given quotas per shard (shards absent
// from quotas leave), view and slot bases continuing from this window.
func (t *Table) Next(w int, view uint64, quotas map[int32]int64, base map[int32]int64) *Table {
	n := &Table{Window: t.Window + 1, View: view, Start: t.End(w)}
	for s := range quotas {
		n.Shards = append(n.Shards, s)
	}
	slices.Sort(n.Shards)
	for _, s := range n.Shards {
		b, ok := base[s]
		if !ok {
			if i := t.Index(s); i >= 0 {
				b = t.SlotBase[i] + int64(w)*t.Quotas[i]
			}
		}
		n.Quotas = append(n.Quotas, quotas[s])
		n.SlotBase = append(n.SlotBase, b)
	}
	return n
}
