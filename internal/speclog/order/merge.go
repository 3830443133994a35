package order

import (
	"cmp"
	"slices"
	"sort"
)

// Merger turns the shards' delivery streams into one subscriber's stream in global position
// order (docs/speclog.md §6): records as soon as every lower position is known (delivered, a
// no-op, or owned by a shard the subscriber did not ask for), marked speculative until
// confirmed; confirmations as the delivered prefix reaches them; and, after a view change, a
// fail notice followed by the correct records. It needs, for a position, its owner (from the
// tables the sequencer publishes); it is I/O free like the rest of the package.
type Merger struct {
	owner     func(pos uint64) (shard int32, noOp bool, ok bool)
	wanted    func(shard int32) bool
	start     uint64 // the subscription's first position
	next      uint64 // the next position to emit
	confirmed uint64 // positions below are confirmed (as announced by the shards)
	told      uint64 // the confirmation last emitted
	view      uint64
	// fails are the view changes seen, in view order, each with its After: a delivery of an
	// older view at or after the After of a later view is void.
	fails   []viewFail
	pending map[uint64]Pending // delivered, not emitted yet
	// spec are the records emitted and the shards' own no-op slots passed, not yet confirmed,
	// in position order: a view change voids those of older views, and gives the others again
	// (records after its fail notice: a shard whose stream started in the new view will not
	// deliver them again).
	spec []emitted
	// viewAfter tells where a view began (State.ViewAfter), so that a delivery or confirmation
	// of a newer view applies its change at once, whichever stream announces it and when;
	// learned: every view up to it is applied.
	viewAfter func(view uint64) (after uint64, ok bool)
	learned   uint64
	// skips are the last unconfirmed positions passed as another shard's or a no-op slot, one
	// per view learned when they were passed (skippedBefore).
	skips []skipMark
	// size, if set (SetSize), is a record's size in bytes; held sums it over pending.
	size func(rec any) int
	held int
}

// SetSize has the merger count the bytes it holds (Held), by fn.
func (m *Merger) SetSize(fn func(rec any) int) { m.size = fn }

// Held is the bytes of the records delivered and not emitted yet (0 without SetSize).
func (m *Merger) Held() int { return m.held }

// Waiting is the shard whose delivery at the next position the merger waits for; ok is false
// when that position is not laid out yet.
func (m *Merger) Waiting() (shard int32, ok bool) {
	sh, noOp, ok := m.owner(m.next)
	return sh, ok && !noOp
}

// put keeps a delivery pending at pos.
func (m *Merger) put(pos uint64, d Pending) {
	if m.size != nil {
		if old, ok := m.pending[pos]; ok {
			m.held -= old.size
		}
		if d.Record != nil && d.size == 0 {
			d.size = m.size(d.Record)
		}
		m.held += d.size
	}
	m.pending[pos] = d
}

// drop forgets the delivery pending at pos.
func (m *Merger) drop(pos uint64) {
	if d, ok := m.pending[pos]; ok {
		m.held -= d.size
		delete(m.pending, pos)
	}
}

type skipMark struct{ learned, last uint64 }

// skippedBefore reports whether a position at or after after was passed as another shard's or
// a no-op slot while the merger had not learned view: by a layout that view may have replaced.
func (m *Merger) skippedBefore(view, after uint64) bool {
	return slices.ContainsFunc(m.skips, func(k skipMark) bool { return k.learned < view && k.last >= after })
}

// Views has the merger learn view changes from the sequencer's state (State.ViewAfter) as
// soon as a delivery or confirmation of a newer view arrives, instead of waiting for a shard to
// announce them: streams that started after a change never announce it, and their
// confirmations must not confirm records of the older view.
func (m *Merger) Views(after func(view uint64) (uint64, bool)) { m.viewAfter = after }

// learn applies the view changes up to view that the merger has not applied yet; known is
// false when one of them is not known yet (the state has not reached it).
func (m *Merger) learn(view uint64) (out []Event, known bool) {
	if m.viewAfter == nil {
		return nil, view <= m.view
	}
	for m.learned < view {
		after, ok := m.viewAfter(m.learned + 1)
		if !ok {
			return out, false
		}
		out = append(out, m.Fail(after, m.learned+1)...)
		m.learned++
	}
	return out, true
}

type viewFail struct{ view, after uint64 }

// emitted is a record given to the subscriber at pos.
type emitted struct {
	pos uint64
	Pending
}

// void reports whether a delivery at pos in view is void: a later view failed speculation at
// or before pos. The Afters grow with the views (each is the confirmed prefix when its view
// began), so the first later view decides.
func (m *Merger) void(pos, view uint64) bool {
	for _, f := range m.fails {
		if f.view > view {
			return pos >= f.after
		}
	}
	return false
}

// Pending is a record delivered by a shard, not emitted yet.
type Pending struct {
	Shard  int32
	Record any
	View   uint64
	size   int // Record's size, by SetSize's function, counted once
}

// Event is what the subscriber receives: a record, a confirmation (positions below UpTo are
// final), or a fail notice (every record emitted at or after After is void; the correct ones
// follow).
type Event struct {
	Kind        EventKind
	Position    uint64
	Shard       int32
	Record      any
	View        uint64
	Speculative bool
	UpTo        uint64 // Confirm
	After       uint64 // Fail
	Size        int    // a record's size, by SetSize's function (0 without)
}

// EventKind says what an Event is.
type EventKind int

const (
	EventRecord EventKind = iota
	EventConfirm
	EventFail
)

// NewMerger starts a subscription at position from. owner maps a position to its shard (noOp:
// a failed shard's slot; ok false: not laid out yet); wanted says which shards the subscriber
// reads (nil: all).
func NewMerger(from uint64, owner func(pos uint64) (shard int32, noOp bool, ok bool), wanted func(int32) bool) *Merger {
	if wanted == nil {
		wanted = func(int32) bool { return true }
	}
	return &Merger{owner: owner, wanted: wanted, start: from, next: from, confirmed: from, told: from, pending: map[uint64]Pending{}}
}

// Deliver takes a record a shard delivered at pos in view (nil: a no-op slot, which the
// subscriber does not see), and returns the events it unblocks.
func (m *Merger) Deliver(pos uint64, shard int32, rec any, view uint64) []Event {
	out, known := m.learn(view)
	if m.void(pos, view) {
		// from a view a fail notice voided: only positions at or after its After change;
		// below it they were confirmed (a shard catching up late may still send them in the
		// older view)
		return out
	}
	if pos < m.next && known {
		return out // emitted (or passed) already
	}
	// At or past the next position; or below it in a view whose change the sequencer state
	// here has not reached yet (a stream that started after it never announces it): kept,
	// since applying the change may take the merger back over it, and this stream will not
	// deliver it again.
	m.put(pos, Pending{Shard: shard, Record: rec, View: view})
	return m.drain(out)
}

// Confirm takes a confirmation made in view: positions below upTo are final. A confirmation
// of a view whose change is not known yet is left for a later one (they come every cut).
func (m *Merger) Confirm(upTo, view uint64) []Event {
	out, known := m.learn(view)
	if known && upTo > m.confirmed {
		m.confirmed = upTo
	}
	return m.drain(out)
}

// Fail takes a view change: every speculation of an older view at or after after failed;
// records delivered in the new view follow. Several shards announce the same change, and
// streams that started at different times announce different ones, in any order across
// streams: each change is applied once, whenever it comes. Deliveries already in a view at
// least as new (from a shard whose stream started after the change) are not void: they are
// kept, or given again after the fail notice.
func (m *Merger) Fail(after, view uint64) []Event {
	i, known := slices.BinarySearchFunc(m.fails, view, func(f viewFail, v uint64) int { return cmp.Compare(f.view, v) })
	if known {
		return nil // this view change was applied (several shards announce it)
	}
	m.fails = slices.Insert(m.fails, i, viewFail{view, after})
	m.view = max(m.view, view)
	for p, d := range m.pending {
		// Only what lies at or after the failure is void: a record below it, still waiting for
		// an earlier position, is confirmed and is not delivered again.
		if p >= after && d.View < view {
			m.drop(p)
		}
	}
	var out []Event
	from := sort.Search(len(m.spec), func(j int) bool { return m.spec[j].pos >= after })
	past := m.spec[from:]
	// The positions at or after the change may be laid out anew (a window's table decided
	// again without the failed shard): unless what was passed there is all of the new view
	// already, the merger goes over them again by the new layout, also when it passed them
	// over no-op slots only (its shards' own, kept in spec for this, or other shards') and
	// emitted nothing: it would otherwise drop a record the new layout puts there as emitted
	// already. The shards deliver them again in the new view; what was passed in it already
	// is given again (records after the fail notice).
	// Also when all of it is in the new view already, if the merger passed a position at or
	// after the change by a layout the change may have replaced (another shard's, or a no-op
	// slot: not in spec): the new layout may put a wanted record there. A filtered
	// subscription on a node whose state lagged the change passed a record of its shard that
	// way, and confirmed past it.
	if len(past) == 0 || slices.ContainsFunc(past, func(e emitted) bool { return e.View < view }) || m.skippedBefore(view, after) {
		if slices.ContainsFunc(past, func(e emitted) bool { return e.Record != nil }) {
			out = append(out, Event{Kind: EventFail, After: after, View: m.view})
		}
		for _, e := range past {
			if !m.void(e.pos, e.View) {
				m.put(e.pos, e.Pending) // still right: given again
			}
		}
		m.spec = m.spec[:from]
		m.next = min(m.next, max(after, m.start))
	}
	for p := range m.pending { // below the next position: kept for a change (Deliver), passed
		if p < m.next {
			m.drop(p)
		}
	}
	return m.drain(out)
}

// Next is the next position the subscriber will be given.
func (m *Merger) Next() uint64 { return m.next }

func (m *Merger) drain(out []Event) []Event {
	for {
		shard, noOp, ok := m.owner(m.next)
		if !ok {
			break
		}
		if noOp || !m.wanted(shard) {
			if m.next >= m.confirmed {
				if n := len(m.skips); n > 0 && m.skips[n-1].learned == m.learned {
					m.skips[n-1].last = m.next
				} else {
					m.skips = append(m.skips, skipMark{m.learned, m.next})
				}
			}
			m.next++
			continue
		}
		d, have := m.pending[m.next]
		if !have {
			break
		}
		m.drop(m.next)
		if d.Record == nil { // a no-op slot of the shard's own: nothing to deliver
			if m.next >= m.confirmed {
				m.spec = append(m.spec, emitted{m.next, d}) // passed speculatively (Fail)
			}
			m.next++
			continue
		}
		out = append(out, Event{Kind: EventRecord, Position: m.next, Shard: d.Shard, Record: d.Record, View: d.View,
			Speculative: m.next >= m.confirmed, Size: d.size})
		if m.next >= m.confirmed {
			m.spec = append(m.spec, emitted{m.next, d})
		}
		m.next++
	}
	if c := min(m.confirmed, m.next); c > m.told {
		out = append(out, Event{Kind: EventConfirm, UpTo: c, View: m.view})
		m.told = c
		n := 0
		for n < len(m.spec) && m.spec[n].pos < c {
			n++
		}
		m.spec = m.spec[n:] // final
		m.skips = slices.DeleteFunc(m.skips, func(k skipMark) bool { return k.last < c })

	}
	return out
}
