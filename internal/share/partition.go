// Package share is the state of a share-partition (KIP-932 share groups, "queues for Kafka"):
// for one share group and one topic partition, which records are in flight, which member holds
// each, how often each was delivered, and where the group's consumption starts. It does no I/O
// (STYLE §6): the partition's leader feeds it the log batches it read, the members'
// acknowledgements and the clock, and persists the snapshots it hands out
// (docs/share-groups.md).
//
// The window. The share-partition start offset (SPSO, Start) is the first offset not yet done
// with; End is the first offset never fetched. Every offset in [Start, End) is in exactly one
// span, in one of Kafka's four states:
//
//	Available ──acquire──▶ Acquired ──accept──▶ Acknowledged
//	    ▲                    │  │
//	    └──release, lock ────┘  └──reject, gap──▶ Archived
//	       timeout (Archived once delivered DeliveryLimit times)
//
// Acquiring counts a delivery. A record is delivered at most DeliveryLimit times: the release
// or lock timeout that follows its last delivery archives it, and so does a member leaving
// (Kafka 4.3's rule; 4.1 did not count the delivery of a member that left).
// Start moves over the leading Acknowledged and Archived records; End - Start is capped at
// MaxInFlight, past which nothing new is acquired until Start moves.
//
// Durability. Acknowledgements are tentative until a snapshot holding them is persisted: each
// Acknowledge returns an operation number, Snapshot hands out the state with every operation so
// far, and Persisted(upTo, err) commits them or, on failure, puts their records back as they
// were (still Acquired by the member, who may acknowledge again). Records with a tentative change
// can be neither acknowledged again nor acquired. Releases and lock timeouts stand whether or
// not their snapshot is written (Kafka's do too); Start only moves over committed records. A
// snapshot records Acquired records as Available with their delivery count, so a new leader
// offers them again and a crash in the middle of processing counts as a delivery.
package share

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a record's delivery state, with Kafka's numbers (which snapshots carry).
type State int8

// The delivery states. Only Available, Acknowledged and Archived are persisted.
const (
	Available    State = 0
	Acquired     State = 1
	Acknowledged State = 2
	Archived     State = 4
)

func (s State) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

func (s State) terminal() bool { return s == Acknowledged || s == Archived }

// AckType is an acknowledgement's type, as ShareFetch and ShareAcknowledge carry it.
type AckType int8

// Kafka's acknowledgement types. Gap marks an offset with no record (compaction, a control
// batch); Renew (ShareAcknowledge v2, KIP-1222) restarts the acquisition lock.
const (
	Gap     AckType = 0
	Accept  AckType = 1
	Release AckType = 2
	Reject  AckType = 3
	Renew   AckType = 4
)

// Config holds a share-partition's limits, Kafka's group.share.* broker configs (or the group's
// share.* overrides).
type Config struct {
	LockDuration  time.Duration // share.record.lock.duration.ms (30 s)
	DeliveryLimit int16         // share.delivery.count.limit (5)
	MaxInFlight   int64         // share.partition.max.record.locks (2000)
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxInFlight: 2000}
}

// WithDefaults is c with Kafka's default for each field left zero.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.LockDuration <= 0 {
		c.LockDuration = d.LockDuration
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = d.DeliveryLimit
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = d.MaxInFlight
	}
	return c
}

// Batch is a persisted run of offsets in one state: a snapshot's element.
type Batch struct {
	First, Last int64 // inclusive
	State       State // Available, Acknowledged or Archived
	Count       int16 // deliveries so far
}

// Snapshot is a share-partition's persisted state: its start offset and the runs of offsets
// from there to the window's end. The window ends after the last batch (at Start without one).
type Snapshot struct {
	Start   int64
	Batches []Batch
}

// End is the first offset past the snapshot's window.
func (s *Snapshot) End() int64 {
	if len(s.Batches) == 0 {
		return s.Start
	}
	return s.Batches[len(s.Batches)-1].Last + 1
}

// LogBatch is the offsets one batch of the partition's log spans.
type LogBatch struct {
	First, Last int64
	// Aborted: records of an aborted transaction, which a read_committed share group
	// (share.isolation.level) archives instead of delivering.
	Aborted bool
}

// AcquiredRecords is a run of offsets acquired by one Acquire, as ShareFetch answers it.
type AcquiredRecords struct {
	First, Last int64
	Count       int16 // this delivery's number (1 for the first)
}

// AckBatch is one of a member's acknowledgements: one type for the whole range, or one per
// offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// span is a run of offsets in the same state, held by the same member until the same deadline,
// last changed by the same tentative operation.
type span struct {
	first, last int64
	state       State
	count       int16
	member      string    // while Acquired
	deadline    time.Time // while Acquired: the acquisition lock's expiry
	op          uint64    // the tentative acknowledgement that set this state; 0: committed
	prev        spanState // the state before op, restored if op fails
}

type spanState struct {
	state    State
	count    int16
	member   string
	deadline time.Time
}

func (s *span) current() spanState {
	return spanState{s.state, s.count, s.member, s.deadline}
}

func (s *span) set(st spanState) {
	s.state, s.count, s.member, s.deadline = st.state, st.count, st.member, st.deadline
}

// Partition is one share-partition's state. It is not safe for concurrent use.
type Partition struct {
	cfg   Config
	start int64
	end   int64
	spans []span // sorted, contiguous, covering [start, end)

	lastOp    uint64 // the last acknowledgement's operation number
	snapOp    uint64 // the operations the last snapshot handed out hold
	persisted uint64 // operations up to here are committed or rolled back
	dirty     bool   // changed since the last snapshot
}

// New returns the state of a share-partition that starts at start (share.auto.offset.reset
// resolved by the caller) with nothing in flight.
func New(cfg Config, start int64) *Partition {
	return &Partition{cfg: cfg, start: start, end: start, dirty: true}
}

// SetConfig replaces the partition's limits from now on (the group's share.* configs, which
// may change while the partition is loaded); a zero field keeps its limit. Records delivered
// as often as a lower delivery limit allows are archived when next released.
func (p *Partition) SetConfig(c Config) {
	if c.LockDuration > 0 {
		p.cfg.LockDuration = c.LockDuration
	}
	if c.DeliveryLimit > 0 {
		p.cfg.DeliveryLimit = c.DeliveryLimit
	}
	if c.MaxInFlight > 0 {
		p.cfg.MaxInFlight = c.MaxInFlight
	}
}

// Load returns the state a snapshot holds. Its Available runs are offered again, unless they
// were delivered DeliveryLimit times already (the last delivery was in flight when the snapshot
// was written: archived); offsets between its runs (a snapshot may leave them out) are
// Available, never delivered.
func Load(cfg Config, s Snapshot) (*Partition, error) {
	p := &Partition{cfg: cfg, start: s.Start, end: s.Start}
	for _, b := range s.Batches {
		if b.First > b.Last || b.First < p.end || b.Count < 0 || (b.State != Available && !b.State.terminal()) {
			return nil, fmt.Errorf("share: snapshot batch %+v does not follow offset %d or is not a persisted state", b, p.end)
		}
		if b.First > p.end {
			p.spans = append(p.spans, span{first: p.end, last: b.First - 1, state: Available})
		}
		st := b.State
		if st == Available && b.Count >= cfg.DeliveryLimit { // its last delivery was in flight
			st = Archived
		}
		p.spans = append(p.spans, span{first: b.First, last: b.Last, state: st, count: b.Count})
		p.end = b.Last + 1
	}
	p.advance()
	p.merge()
	return p, nil
}

// Start is the share-partition start offset (SPSO).
func (p *Partition) Start() int64 { return p.start }

// End is the first offset never fetched (SPEO + 1).
func (p *Partition) End() int64 { return p.end }

// InFlight is the number of offsets in the window, End - Start.
func (p *Partition) InFlight() int64 { return p.end - p.start }

// Stats is what a share-partition holds at one moment, for metrics.
type Stats struct {
	Start    int64 // the share-partition start offset (SPSO)
	Acquired int64 // records locked by consumers
	// Done is the records of the window below end that need no delivery any more (accepted,
	// rejected, archived): the lag is end - Start - Done, as DescribeShareGroupOffsets has it.
	Done int64
}

// Stats returns the partition's stats for a log ending at end (its high watermark).
func (p *Partition) Stats(end int64) Stats {
	st := Stats{Start: p.start}
	for _, s := range p.spans {
		switch {
		case s.state == Acquired:
			st.Acquired += s.last - s.first + 1
		case s.state.terminal() && s.first < end:
			st.Done += min(s.last, end-1) - s.first + 1
		}
	}
	return st
}

// FetchOffset is where the next fetch reads the log from: the first Available offset in the
// window, else End.
func (p *Partition) FetchOffset() int64 {
	for i := range p.spans {
		if s := &p.spans[i]; s.state == Available && s.op == 0 {
			return s.first
		}
	}
	return p.end
}

// CanAcquire reports whether an Acquire could take anything the log has: an Available offset in
// the window, or room to grow it.
func (p *Partition) CanAcquire() bool {
	return p.FetchOffset() < p.end || p.end-p.start < p.cfg.MaxInFlight
}

// Acquire takes for member, until now + LockDuration, the Available records of the log batches
// read from offset from (the caller read them from FetchOffset, in offset order), and the new
// records of the batches past End while the window has room. Like Kafka's batch-optimized
// acquisition it takes whole log batches, stopping after the batch that reaches maxRecords.
// Offsets the log no longer has (before the first batch, between batches) and the Available
// records of Aborted batches are archived. The returned runs are in offset order; the caller
// owns the slice.
func (p *Partition) Acquire(member string, now time.Time, from int64, batches []LogBatch, maxRecords int) []AcquiredRecords {
	return p.acquire(member, now, from, batches, maxRecords, false)
}

// AcquireRecords is Acquire in Kafka's record_limit mode (ShareFetch v2, KIP-1206): it takes at
// most maxRecords records, the last log batch in part; the rest of that batch stays for a later
// fetch.
func (p *Partition) AcquireRecords(member string, now time.Time, from int64, batches []LogBatch, maxRecords int) []AcquiredRecords {
	return p.acquire(member, now, from, batches, maxRecords, true)
}

func (p *Partition) acquire(member string, now time.Time, from int64, batches []LogBatch, maxRecords int, exact bool) []AcquiredRecords {
	var out []AcquiredRecords
	taken := 0
	limit := func(last, first int64) int64 { // the last offset to take from first, in exact mode
		if exact {
			return min(last, first+int64(maxRecords-taken)-1)
		}
		return last
	}
	gapFrom := max(from, p.start)
	var th throttled
	for _, b := range batches {
		if taken >= maxRecords {
			break
		}
		if b.Last < p.start || b.Last < gapFrom {
			continue
		}
		first := max(b.First, p.start)
		if first > gapFrom && gapFrom < p.end { // offsets missing from the log
			p.archiveAvailable(gapFrom, min(first, p.end)-1)
		}
		gapFrom = b.Last + 1
		if first < p.end {
			if b.Aborted {
				p.archiveAvailable(first, min(b.Last, p.end-1))
			} else {
				n, stop := p.acquireRange(member, now, first, min(b.Last, p.end-1), exact, maxRecords-taken, &th, &out)
				taken += n
				if stop {
					break
				}
			}
		}
		if b.Last >= p.end {
			if p.end-p.start >= p.cfg.MaxInFlight || (exact && taken >= maxRecords) || th.on {
				break
			}
			if b.First > p.end { // a hole in the log (compaction, retention)
				p.spans = append(p.spans, span{first: p.end, last: b.First - 1, state: Archived})
				p.end = b.First
			}
			if b.Aborted {
				p.spans = append(p.spans, span{first: p.end, last: b.Last, state: Archived})
				p.end, p.dirty = b.Last+1, true
				continue
			}
			last := limit(b.Last, p.end)
			p.spans = append(p.spans, span{first: p.end, last: last, state: Acquired, count: 1, member: member, deadline: now.Add(p.cfg.LockDuration)})
			out = appendAcquired(out, AcquiredRecords{p.end, last, 1})
			taken += int(last - p.end + 1)
			p.end = last + 1
		}
	}
	if len(out) > 0 {
		p.dirty = true
	}
	p.advance()
	p.merge()
	return out
}

// acquireRange acquires the Available records of [first, last] in the window for member and
// returns how many it took: at most max of them if exact. out holds what the fetch took so far.
// Records near their delivery limit are throttled (throttle, th): stop reports that the fetch
// must take nothing more.
func (p *Partition) acquireRange(member string, now time.Time, first, last int64, exact bool, max int, th *throttled, out *[]AcquiredRecords) (n int, stop bool) {
	for i := p.split(first, last); i < len(p.spans) && p.spans[i].first <= last; i++ {
		s := &p.spans[i]
		if s.state != Available || s.op != 0 {
			continue
		}
		if exact && n >= max {
			break
		}
		// A throttled acquisition starts only in a fetch that took nothing yet, so max is then
		// the fetch's whole MaxRecords.
		limit, throttle := p.throttle(s.count, max-n)
		switch {
		case th.on:
			// Only more records of the same count, up to what is left of the limit.
			if !throttle || s.count != th.count || th.left <= 0 {
				return n, true
			}
			limit = th.left
		case throttle:
			if len(*out) > 0 {
				return n, true // isolated: a later fetch delivers them on their own
			}
			th.on, th.count = true, s.count
		default:
			limit = max - n
		}
		if exact {
			limit = min(limit, max-n)
		}
		if (exact || throttle) && s.last-s.first+1 > int64(limit) {
			p.splitAt(s.first + int64(limit))
			s = &p.spans[i]
		}
		s.state, s.count, s.member, s.deadline = Acquired, s.count+1, member, now.Add(p.cfg.LockDuration)
		*out = appendAcquired(*out, AcquiredRecords{s.first, s.last, s.count})
		size := int(s.last - s.first + 1)
		n += size
		if th.on {
			th.left = limit - size
		}
	}
	return n, false
}

// throttled is one fetch's throttled acquisition: the delivery count of the records it takes,
// and how many more it may take.
type throttled struct {
	on    bool
	count int16
	left  int
}

// throttle says how many records delivered count times a fetch of up to maxRecords may take
// (Kafka's throttled delivery, KAFKA-17541): none of the first half of the deliveries is
// throttled; from there each delivery takes half as many as the one before, and the last one
// takes a single record. Such records are acquired alone (no record of a lower count in the
// same fetch), so that one record that makes its consumers fail does not take a whole batch
// to the delivery limit with it. A limit of 2 or less is not throttled.
func (p *Partition) throttle(count int16, maxRecords int) (limit int, throttled bool) {
	dl := p.cfg.DeliveryLimit
	from := (dl + 1) / 2 // the deliveries so far from which the next one is throttled
	if dl <= 2 || count < from {
		return 0, false
	}
	if count >= dl-1 {
		return 1, true
	}
	return max(maxRecords>>(count-from+1), 1), true
}

func appendAcquired(out []AcquiredRecords, a AcquiredRecords) []AcquiredRecords {
	if n := len(out); n > 0 && out[n-1].Last+1 == a.First && out[n-1].Count == a.Count {
		out[n-1].Last = a.Last
		return out
	}
	return append(out, a)
}

// archiveAvailable archives the Available records of [first, last]: the log no longer has them.
func (p *Partition) archiveAvailable(first, last int64) {
	if first > last {
		return
	}
	for i := p.split(first, last); i < len(p.spans) && p.spans[i].first <= last; i++ {
		if s := &p.spans[i]; s.state == Available && s.op == 0 {
			s.state = Archived
			p.dirty = true
		}
	}
}

// ErrInvalidRequest and ErrInvalidRecordState are Acknowledge's refusals, Kafka's
// INVALID_REQUEST and INVALID_RECORD_STATE.
var (
	ErrInvalidRequest     = kerr.InvalidRequest
	ErrInvalidRecordState = kerr.InvalidRecordState
)

// Acknowledge applies a member's acknowledgements of one request to this partition: all of
// them, or (with an error) none. Offsets below Start are skipped (done already), and so are
// accepted ones whose acceptance is persisted, when the acknowledgement accepts them too
// (span.settled). Every other offset must be Acquired by member and not in a tentative change,
// else ErrInvalidRecordState; malformed batches, or offsets past End, are ErrInvalidRequest. It
// returns the operation whose persistence makes the acknowledgements durable (Persisted), or 0
// if nothing needs persisting (only renewals, or only offsets skipped), and how many records
// of each type it applied (renewed, for Renew; skipped ones not counted).
func (p *Partition) Acknowledge(member string, now time.Time, acks []AckBatch) (uint64, AckCounts, error) {
	var counts AckCounts
	if err := p.validate(member, acks); err != nil {
		return 0, counts, err
	}
	var op uint64
	for _, a := range acks {
		if a.Last < p.start {
			continue
		}
		for i, t := range a.Types {
			first, last := a.First, a.Last
			if len(a.Types) > 1 {
				first, last = a.First+int64(i), a.First+int64(i)
			}
			first = max(first, p.start)
			if first > last {
				continue
			}
			if t == Renew {
				p.each(first, last, func(s *span) { s.deadline = now.Add(p.cfg.LockDuration) })
				counts[t] += last - first + 1
				continue
			}
			p.each(first, last, func(s *span) {
				if s.settled(t) {
					return // already what this acknowledgement makes it
				}
				counts[t] += s.last - s.first + 1
				if op == 0 {
					p.lastOp++
					op = p.lastOp
				}
				s.prev, s.op = s.current(), op
				switch t {
				case Accept:
					s.state = Acknowledged
				case Gap, Reject:
					s.state = Archived
				case Release:
					s.state = p.afterDelivery(s.count)
				}
				s.member, s.deadline = "", time.Time{}
			})
		}
	}
	if op != 0 {
		p.dirty = true
	}
	p.merge()
	return op, counts, nil
}

// AckCounts are records by acknowledgement type (indexed by AckType).
type AckCounts [Renew + 1]int64

// validate checks acknowledgements as Kafka does before applying any: their form first, then
// the records' states.
func (p *Partition) validate(member string, acks []AckBatch) error {
	prevLast := int64(-1)
	for _, a := range acks {
		if a.First > a.Last || a.First < prevLast || len(a.Types) == 0 ||
			len(a.Types) > 1 && int64(len(a.Types)) != a.Last-a.First+1 {
			return fmt.Errorf("%w: acknowledgement batch %d-%d with %d types", ErrInvalidRequest, a.First, a.Last, len(a.Types))
		}
		prevLast = a.Last
		for _, t := range a.Types {
			if t < Gap || t > Renew {
				return fmt.Errorf("%w: acknowledgement type %d", ErrInvalidRequest, t)
			}
		}
	}
	applied := int64(-1) // the last offset an earlier batch of this request changes
	for _, a := range acks {
		if a.First <= applied {
			// Two batches change one record: Kafka refuses the second change to a record in
			// the middle of one (and the rollback could not undo both).
			return fmt.Errorf("%w: acknowledgement batches overlap at offset %d", ErrInvalidRecordState, a.First)
		}
		applied = a.Last
		if a.Last < p.start {
			continue
		}
		if a.Last >= p.end {
			return fmt.Errorf("%w: offsets %d-%d past the share-partition's end %d", ErrInvalidRequest, a.First, a.Last, p.end)
		}
		var bad *span
		for i, t := range a.Types {
			first, last := a.First, a.Last
			if len(a.Types) > 1 {
				first, last = a.First+int64(i), a.First+int64(i)
			}
			if last < p.start {
				continue
			}
			p.eachOverlap(max(first, p.start), last, func(s *span) {
				if bad == nil && (s.state != Acquired || s.member != member || s.op != 0) && !s.settled(t) {
					bad = s
				}
			})
		}
		if bad != nil {
			return fmt.Errorf("%w: offsets %d-%d are %v (member %q, pending %v), not acquired by %q", ErrInvalidRecordState,
				bad.first, bad.last, bad.state, bad.member, bad.op != 0, member)
		}
	}
	return nil
}

// settled reports whether an acknowledgement of type t finds s already durably what it asks
// for: an acceptance of accepted records. It changes nothing and is no error, as it is none for
// records below the start: a member that got records twice (through two share sessions, while
// an object partition's owner moved) and accepts both deliveries, or one range spanning both,
// has the outcome it asks for. Kafka refuses the whole acknowledgement batch
// (INVALID_RECORD_STATE), and the batch's other records then wait for their locks to expire.
func (s *span) settled(t AckType) bool {
	return t == Accept && s.state == Acknowledged && s.op == 0
}

// afterDelivery is where a record that was delivered count times goes when it comes back.
func (p *Partition) afterDelivery(count int16) State {
	if count >= p.cfg.DeliveryLimit {
		return Archived
	}
	return Available
}

// ReleaseMember makes every record member holds Available again (Archived if that was its last
// delivery): the member left, or its share session or connection ended. The delivery counts, as
// in Kafka 4.3: a record that makes its consumer crash must still reach the limit.
func (p *Partition) ReleaseMember(member string) {
	for i := range p.spans {
		if s := &p.spans[i]; s.state == Acquired && s.member == member && s.op == 0 {
			s.state, s.member, s.deadline = p.afterDelivery(s.count), "", time.Time{}
			p.dirty = true
		}
	}
	p.advance()
	p.merge()
}

// ReleaseRuns is ReleaseMember limited to the records of runs (what one share session of the
// member acquired) still held at the runs' delivery counts: the member's records acquired
// through another session stay its own, also when that session acquired the same records
// again later (each acquisition counts a delivery).
func (p *Partition) ReleaseRuns(member string, runs []AcquiredRecords) {
	for _, r := range runs {
		first, last := max(r.First, p.start), min(r.Last, p.end-1)
		if first > last {
			continue
		}
		p.each(first, last, func(s *span) {
			if s.state == Acquired && s.member == member && s.count == r.Count && s.op == 0 {
				s.state, s.member, s.deadline = p.afterDelivery(s.count), "", time.Time{}
				p.dirty = true
			}
		})
	}
	p.advance()
	p.merge()
}

// Holds reports whether a record of runs is still acquired at its run's delivery count (by
// anyone: the acquisition the run names, or none if another took the count since).
func (p *Partition) Holds(runs []AcquiredRecords) bool {
	for _, r := range runs {
		first, last := max(r.First, p.start), min(r.Last, p.end-1)
		held := false
		if first <= last {
			p.eachOverlap(first, last, func(s *span) { held = held || s.state == Acquired && s.count == r.Count })
		}
		if held {
			return true
		}
	}
	return false
}

// ExpireLocks makes the records whose acquisition lock expired by now Available again (or
// Archived, if that was their last delivery). It reports whether any did.
func (p *Partition) ExpireLocks(now time.Time) bool {
	changed := false
	for i := range p.spans {
		if s := &p.spans[i]; s.state == Acquired && s.op == 0 && !now.Before(s.deadline) {
			s.state, s.member, s.deadline = p.afterDelivery(s.count), "", time.Time{}
			changed = true
		}
	}
	if changed {
		p.dirty = true
		p.advance()
		p.merge()
	}
	return changed
}

// NextDeadline is the earliest acquisition lock expiry, or the zero time if nothing is held.
func (p *Partition) NextDeadline() time.Time {
	var next time.Time
	for i := range p.spans {
		if s := &p.spans[i]; s.state == Acquired && (next.IsZero() || s.deadline.Before(next)) {
			next = s.deadline
		}
	}
	return next
}

// TrimTo moves Start to the log's start offset when the log no longer has the records before it
// (retention, DeleteRecords): what was in flight there is dropped, and acknowledgements of it
// are skipped as done.
func (p *Partition) TrimTo(logStart int64) {
	if logStart <= p.start {
		return
	}
	i := sort.Search(len(p.spans), func(i int) bool { return p.spans[i].last >= logStart })
	p.spans = slices.Delete(p.spans, 0, i)
	if len(p.spans) > 0 && p.spans[0].first < logStart {
		p.spans[0].first = logStart
	}
	p.start = logStart
	if p.end < logStart {
		p.end = logStart
	}
	p.dirty = true
	p.advance()
}

// Dirty reports whether the state changed since the last snapshot taken (or a snapshot's write
// failed): forgetting it now would lose those changes.
func (p *Partition) Dirty() bool { return p.dirty }

// Snapshot returns the state to persist, with every operation so far (upTo), if anything changed
// since the last one. The caller owns the batches.
func (p *Partition) Snapshot() (s Snapshot, upTo uint64, ok bool) {
	if !p.dirty {
		return Snapshot{}, 0, false
	}
	p.dirty = false
	p.snapOp = p.lastOp
	s.Start = p.start
	for i := range p.spans {
		sp := &p.spans[i]
		st := sp.state
		if st == Acquired {
			st = Available
		}
		if n := len(s.Batches); n > 0 && s.Batches[n-1].State == st && s.Batches[n-1].Count == sp.count {
			s.Batches[n-1].Last = sp.last
			continue
		}
		s.Batches = append(s.Batches, Batch{First: sp.first, Last: sp.last, State: st, Count: sp.count})
	}
	return s, p.snapOp, true
}

// Persisted reports the outcome of writing the snapshot that held operations up to upTo: on
// success they are committed (Start may move), on failure their records go back to what they
// were before, and the state is to be snapshotted again. Operations are persisted in order: a
// later snapshot holds every earlier operation.
func (p *Partition) Persisted(upTo uint64, err error) {
	if err != nil {
		p.dirty = true // what the failed snapshot held is written again
	}
	if upTo <= p.persisted {
		return
	}
	p.persisted = upTo
	for i := range p.spans {
		s := &p.spans[i]
		if s.op == 0 || s.op > upTo {
			continue
		}
		if err != nil {
			s.set(s.prev)
		}
		s.op, s.prev = 0, spanState{}
	}
	p.advance()
	p.merge()
}

// advance moves Start over the leading committed Acknowledged and Archived records.
func (p *Partition) advance() {
	i := 0
	for i < len(p.spans) && p.spans[i].state.terminal() && p.spans[i].op == 0 {
		i++
	}
	if i == 0 {
		return
	}
	p.start = p.spans[i-1].last + 1
	p.spans = slices.Delete(p.spans, 0, i)
	p.dirty = true
}

// merge joins neighbouring spans in the same state: the window stays a few spans long however
// many records it holds.
func (p *Partition) merge() {
	out := p.spans[:0]
	for _, s := range p.spans {
		if n := len(out); n > 0 {
			l := &out[n-1]
			if l.op == 0 && s.op == 0 && l.state == s.state && l.count == s.count && l.member == s.member && l.deadline.Equal(s.deadline) {
				l.last = s.last
				continue
			}
		}
		out = append(out, s)
	}
	clear(p.spans[len(out):])
	p.spans = out
}

// split makes first and last+1 span boundaries (within the window) and returns the index of the
// span starting at first.
func (p *Partition) split(first, last int64) int {
	p.splitAt(last + 1)
	return p.splitAt(first)
}

// splitAt makes off a span boundary and returns the index of the span starting there
// (len(spans) if off is at or past End).
func (p *Partition) splitAt(off int64) int {
	i := sort.Search(len(p.spans), func(i int) bool { return p.spans[i].last >= off })
	if i == len(p.spans) || p.spans[i].first >= off {
		return i
	}
	s := p.spans[i]
	left, right := s, s
	left.last, right.first = off-1, off
	p.spans = slices.Insert(p.spans, i+1, right)
	p.spans[i] = left
	return i + 1
}

// each calls f for every span of [first, last] (within the window), split to fit exactly.
func (p *Partition) each(first, last int64, f func(*span)) {
	for i := p.split(first, last); i < len(p.spans) && p.spans[i].first <= last; i++ {
		f(&p.spans[i])
	}
}

// eachOverlap calls f for every span that overlaps [first, last], without splitting.
func (p *Partition) eachOverlap(first, last int64, f func(*span)) {
	i := sort.Search(len(p.spans), func(i int) bool { return p.spans[i].last >= first })
	for ; i < len(p.spans) && p.spans[i].first <= last; i++ {
		f(&p.spans[i])
	}
}

// check reports a broken invariant of the window (tests call it after every step).
func (p *Partition) check() error {
	if p.start > p.end {
		return fmt.Errorf("start %d past end %d", p.start, p.end)
	}
	next := p.start
	for _, s := range p.spans {
		if s.first != next || s.last < s.first {
			return fmt.Errorf("span %d-%d does not follow offset %d", s.first, s.last, next)
		}
		if (s.state == Acquired) != (s.member != "") {
			return fmt.Errorf("span %d-%d is %v held by %q", s.first, s.last, s.state, s.member)
		}
		next = s.last + 1
	}
	if next != p.end {
		return fmt.Errorf("spans end at %d, the window at %d", next, p.end)
	}
	if len(p.spans) > 0 && p.spans[0].state.terminal() && p.spans[0].op == 0 {
		return errors.New("start not advanced over a committed terminal span")
	}
	return nil
}

// AppendTo appends the snapshot's encoding to b (docs/share-groups.md §5):
//
//	start int64 | batches int32, each: first int64 | last int64 | state int8 | count int16
func (s *Snapshot) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(s.Start))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Batches)))
	for _, x := range s.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(x.First))
		b = binary.BigEndian.AppendUint64(b, uint64(x.Last))
		b = append(b, byte(x.State))
		b = binary.BigEndian.AppendUint16(b, uint16(x.Count))
	}
	return b
}

// snapshotBatchSize is one batch's encoded size.
const snapshotBatchSize = 8 + 8 + 1 + 2

// DecodeSnapshot decodes what AppendTo wrote, checking that the batches follow each other from
// the start in persisted states; the snapshot does not alias b.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	if len(b) < 12 {
		return Snapshot{}, fmt.Errorf("share: snapshot of %d bytes", len(b))
	}
	s := Snapshot{Start: int64(binary.BigEndian.Uint64(b))}
	n := int(binary.BigEndian.Uint32(b[8:]))
	b = b[12:]
	if n < 0 || len(b) != n*snapshotBatchSize {
		return Snapshot{}, fmt.Errorf("share: snapshot of %d batches in %d bytes", n, len(b))
	}
	next := s.Start
	for i := 0; i < n; i++ {
		x := Batch{First: int64(binary.BigEndian.Uint64(b)), Last: int64(binary.BigEndian.Uint64(b[8:])),
			State: State(b[16]), Count: int16(binary.BigEndian.Uint16(b[17:]))}
		b = b[snapshotBatchSize:]
		if x.First < next || x.Last < x.First || x.Count < 0 || (x.State != Available && !x.State.terminal()) {
			return Snapshot{}, fmt.Errorf("share: snapshot batch %+v after offset %d", x, next)
		}
		next = x.Last + 1
		s.Batches = append(s.Batches, x)
	}
	return s, nil
}
