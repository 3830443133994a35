package order

// Merger turns the shards' delivery streams into one subscriber's stream in global position
// order (docs/speclog.md §6): records as soon as every lower position is known (delivered, a
// no-op, or owned by a shard the subscriber did not ask for), marked speculative until
// confirmed; confirmations as the delivered prefix reaches them; and, after a view change, a
// fail notice followed by the correct records. It needs, for a position, its owner (from the
// tables the sequencer publishes); it is I/O free like the rest of the package.
type Merger struct {
	owner     func(pos uint64) (shard int32, noOp bool, ok bool)
	wanted    func(shard int32) bool
	next      uint64 // the next position to emit
	confirmed uint64 // positions below are confirmed (as announced by the shards)
	told      uint64 // the confirmation last emitted
	view      uint64
	failAfter uint64             // the After of the last fail notice: confirmed below it
	pending   map[uint64]Pending // delivered, not emitted yet
}

// Pending is a record delivered by a shard, not emitted yet.
type Pending struct {
	Shard  int32
	Record any
	View   uint64
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
	return &Merger{owner: owner, wanted: wanted, next: from, confirmed: from, told: from, pending: map[uint64]Pending{}}
}

// Deliver takes a record a shard delivered at pos in view (nil: a no-op slot, which the
// subscriber does not see), and returns the events it unblocks.
func (m *Merger) Deliver(pos uint64, shard int32, rec any, view uint64) []Event {
	if pos < m.next || (view < m.view && pos >= m.failAfter) {
		// emitted already, or from a view a fail notice voided: only positions at or after
		// its After change; below it they were confirmed (a shard catching up late may still
		// send them in the older view)
		return nil
	}
	m.pending[pos] = Pending{Shard: shard, Record: rec, View: view}
	return m.drain(nil)
}

// Confirm takes a confirmation: positions below upTo are final.
func (m *Merger) Confirm(upTo uint64) []Event {
	if upTo > m.confirmed {
		m.confirmed = upTo
	}
	return m.drain(nil)
}

// Fail takes a view change: every speculation at or after after failed; records delivered in
// the new view follow.
func (m *Merger) Fail(after, view uint64) []Event {
	if view <= m.view {
		return nil // this view change was handled (several shards announce it)
	}
	m.view, m.failAfter = view, after
	var out []Event
	for p := range m.pending {
		// Only what lies at or after the failure is void: a record below it, still waiting for
		// an earlier position, is confirmed and is not delivered again.
		if p >= after {
			delete(m.pending, p)
		}
	}
	if m.next > after {
		out = append(out, Event{Kind: EventFail, After: after, View: view})
		m.next = after
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
			m.next++
			continue
		}
		d, have := m.pending[m.next]
		if !have {
			break
		}
		delete(m.pending, m.next)
		if d.Record == nil { // a no-op slot of the shard's own: nothing to deliver
			m.next++
			continue
		}
		out = append(out, Event{Kind: EventRecord, Position: m.next, Shard: d.Shard, Record: d.Record, View: d.View,
			Speculative: m.next >= m.confirmed})
		m.next++
	}
	if c := min(m.confirmed, m.next); c > m.told {
		out = append(out, Event{Kind: EventConfirm, UpTo: c, View: m.view})
		m.told = c
	}
	return out
}
