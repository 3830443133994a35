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
	// DrainAfter: a shard whose durable records waiting for slots exceed DrainAfter cuts of its
	// quota reports every cut they fill at once (the paper's back-to-back reports after a
	// burst: the others are signalled and fill the cuts between with no-ops), instead of one
	// cut per T_ord; 0: never. Below it, reports stay paced, so a clump of records made
	// durable together (an fsync) costs the others no no-ops.
	DrainAfter int
	FailAfter  time.Duration // a signalled shard that has not caught up by then is failed
	// Takeover: a shard that another replica can take over, or has (Leader.SetTakeover says
	// so: its leader died or froze, and the controller moves the partition), is failed
	// only after Takeover instead of FailAfter, so the new leader resumes it with nothing
	// failed; 0: failed after FailAfter like any other.
	Takeover time.Duration
	// Straggler mitigation: a shard whose reports come more than StragglerGap apart on average
	// (over more than StragglerReports reports), or that needed lag-fix more than
	// StragglerReports times in a window, gets quota 0 for StragglerWindows windows, then
	// quota 1, and its quota grows again from its rate.
	StragglerGap     time.Duration
	StragglerReports int
	StragglerWindows int
	// Staggered cuts: from StaggerFrom shards on, tables split the shards into StaggerGroups
	// groups, and each cut waits for one group only (0: never).
	StaggerFrom   int
	StaggerGroups int
	// Idle pacing (beyond the paper): a shard none of whose own records became durable for
	// 2·IdlePace pads a cut only every IdlePace (instead of 1.5·T_ord) and says so in its
	// reports; the sequencer signals such a shard as soon as another is one cut ahead, so an
	// idle topic commits a cut per IdlePace instead of per 1.5·T_ord, and a record arriving
	// anywhere waits one signal. 0: never idle (the paper's pace).
	IdlePace time.Duration
}

// DefaultConfig is the paper's configuration: T_ord 1 ms, W 100, initial quota 10, the next
// table decided at cut 50, a ±5% band, lag-fix at 3 cuts, a shard failed after 50 ms, a
// straggler (reports 4·T_ord apart over 3 reports) benched for 5 windows; beyond the paper, a
// shard another replica can take over waits 5 s for that before it is failed, and an idle
// shard pads a cut every 50 ms.
func DefaultConfig() Config {
	return Config{W: 100, TOrd: time.Millisecond, InitialQuota: 10, DecideAt: 50, Band: 0.05, LagFix: 3, DrainAfter: 4, FailAfter: 50 * time.Millisecond, Takeover: 5 * time.Second,
		StragglerGap: 4 * time.Millisecond, StragglerReports: 3, StragglerWindows: 5, StaggerFrom: 6, StaggerGroups: 2, IdlePace: 50 * time.Millisecond}
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
	case c.DrainAfter < 0:
		return fmt.Errorf("order: draining a backlog after %d cuts", c.DrainAfter)
	case c.Takeover < 0:
		return fmt.Errorf("order: waiting %v for a takeover", c.Takeover)
	case c.IdlePace < 0:
		return fmt.Errorf("order: an idle pace of %v", c.IdlePace)
	case c.StaggerGroups > 1 && c.W%c.StaggerGroups != 0:
		return fmt.Errorf("order: %d staggered groups do not divide a %d-cut window", c.StaggerGroups, c.W)
	}
	return nil
}

// Table is one window's fixed layout: which shards take part with how many positions per cut,
// and where the window starts, both in global positions and in each shard's own sequence of
// slots (records and no-ops, counted from the shard's beginning).
//
// With Groups g > 1 the cuts are staggered: shard index i belongs to group i mod g, and cut k
// holds only group k mod g's shards, each with g·quota positions; a cut then waits for a g-th
// of the shards, and every shard still gets its quota per cut on average. W is a multiple of g.
type Table struct {
	Window   uint64  `json:"window"`
	View     uint64  `json:"view"`
	Start    uint64  `json:"start"`            // the window's first global position
	Shards   []int32 `json:"shards"`           // ascending
	Quotas   []int64 `json:"quotas"`           // per shard; 0: takes no part in this window
	SlotBase []int64 `json:"slot_base"`        // per shard: its slots before this window
	Groups   int     `json:"groups,omitempty"` // staggering (0 or 1: every shard in every cut)
}

func (t *Table) groups() int { return max(t.Groups, 1) }

// group is shard index i's group.
func (t *Table) group(i int) int { return i % t.groups() }

// CutSize is the positions of g consecutive cuts divided by g: the sum of the quotas (every
// cut's size without staggering).
func (t *Table) CutSize() uint64 {
	var q uint64
	for _, x := range t.Quotas {
		q += uint64(x)
	}
	return q
}

// groupSize is the positions of a cut of group j.
func (t *Table) groupSize(j int) uint64 {
	var q uint64
	for i, x := range t.Quotas {
		if t.group(i) == j {
			q += uint64(x)
		}
	}
	return q * uint64(t.groups())
}

// End is the first position after the window.
func (t *Table) End(w int) uint64 { return t.Start + uint64(w)*t.CutSize() }

// Prefix is the first position after cut k (-1: the window's start).
func (t *Table) Prefix(k int) uint64 {
	g := t.groups()
	n := k + 1 // cuts covered
	p := t.Start + uint64(n/g)*uint64(g)*t.CutSize()
	for j := range n % g {
		p += t.groupSize(j)
	}
	return p
}

// Index is a shard's index in the table (-1 if absent).
func (t *Table) Index(shard int32) int {
	for i, s := range t.Shards {
		if s == shard {
			return i
		}
	}
	return -1
}

// InCut reports whether shard index i has positions in cut k.
func (t *Table) InCut(i, k int) bool { return t.Quotas[i] > 0 && k%t.groups() == t.group(i) }

// offset is the first position of shard index i within its group's cut.
func (t *Table) offset(i int) uint64 {
	var o uint64
	for j, q := range t.Quotas[:i] {
		if t.group(j) == t.group(i) {
			o += uint64(q)
		}
	}
	return o * uint64(t.groups())
}

// Span is where a shard's slot lies in this window: its position, how many of the shard's
// slots from it lie at consecutive positions (to the end of its cut), and the cut.
func (t *Table) Span(w int, shard int32, slot int64) (pos uint64, n int64, cut int, ok bool) {
	i := t.Index(shard)
	if i < 0 || t.Quotas[i] == 0 {
		return 0, 0, 0, false
	}
	g := t.groups()
	per := t.Quotas[i] * int64(g) // its slots per cut it is in
	j := slot - t.SlotBase[i]
	if j < 0 || j >= int64(w)*t.Quotas[i] {
		return 0, 0, 0, false
	}
	round, in := int(j/per), j%per
	cut = round*g + t.group(i)
	return t.Prefix(cut-1) + t.offset(i) + uint64(in), per - in, cut, true
}

// Position is the global position of a shard's slot (counted from the shard's beginning), and
// whether the slot lies in this window.
func (t *Table) Position(w int, shard int32, slot int64) (uint64, bool) {
	p, _, _, ok := t.Span(w, shard, slot)
	return p, ok
}

// Owner is the shard, slot and cut of a global position in this window.
func (t *Table) Owner(w int, pos uint64) (shard int32, slot int64, cut int, ok bool) {
	if t.CutSize() == 0 || pos < t.Start || pos >= t.End(w) {
		return 0, 0, 0, false
	}
	g := t.groups()
	round := int((pos - t.Start) / (uint64(g) * t.CutSize()))
	cut = round * g
	for ; t.Prefix(cut) <= pos; cut++ {
	}
	in := pos - t.Prefix(cut-1)
	for i, q := range t.Quotas {
		if !t.InCut(i, cut) {
			continue
		}
		size := uint64(q) * uint64(g)
		if in < size {
			return t.Shards[i], t.SlotBase[i] + int64(round)*int64(size) + int64(in), cut, true
		}
		in -= size
	}
	panic("unreachable")
}

// SlotsThrough is how many of a shard's slots (from its beginning) cuts 0..k of this window
// cover.
func (t *Table) SlotsThrough(shard int32, k int) int64 {
	i := t.Index(shard)
	if i < 0 {
		return 0
	}
	g := t.groups()
	if k < t.group(i) {
		return t.SlotBase[i]
	}
	cuts := (k-t.group(i))/g + 1 // the cuts it is in, through k
	return t.SlotBase[i] + int64(cuts)*int64(g)*t.Quotas[i]
}

// Next is the table of the following window with the given quotas per shard (shards absent
// from quotas leave), view and slot bases continuing from this window.
func (t *Table) Next(w int, view uint64, quotas map[int32]int64, base map[int32]int64) *Table {
	n := &Table{Window: t.Window + 1, View: view, Start: t.End(w), Groups: t.Groups}
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
