package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// logOf is a log of batches of size offsets each over [from, to).
func logOf(from, to int64, size int64) []LogBatch {
	var out []LogBatch
	for f := from; f < to; f += size {
		out = append(out, LogBatch{First: f, Last: min(f+size, to) - 1})
	}
	return out
}

// readFrom is what a log read from offset from returns: the batches holding from and after it.
func readFrom(log []LogBatch, from int64) []LogBatch {
	for i, b := range log {
		if b.Last >= from {
			return log[i:]
		}
	}
	return nil
}

func mustCheck(t *testing.T, p *Partition) {
	t.Helper()
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
}

func fetch(p *Partition, member string, now time.Time, log []LogBatch, max int) []AcquiredRecords {
	from := p.FetchOffset()
	return p.Acquire(member, now, from, readFrom(log, from), max)
}

func persist(t *testing.T, p *Partition) {
	t.Helper()
	if _, upTo, ok := p.Snapshot(); ok {
		p.Persisted(upTo, nil)
	}
}

// TestAcquireAcknowledge: whole log batches are acquired up to the soft record limit; accepted
// records move the start once persisted; a second member gets the next records.
func TestAcquireAcknowledge(t *testing.T) {
	log := logOf(100, 130, 5)
	p := New(DefaultConfig(), 100)
	a := fetch(p, "m1", t0, log, 7)
	if want := []AcquiredRecords{{100, 109, 1}}; !slices.Equal(a, want) {
		t.Fatalf("fetch(max 7) = %v; want %v (two whole batches)", a, want)
	}
	b := fetch(p, "m2", t0, log, 3)
	if want := []AcquiredRecords{{110, 114, 1}}; !slices.Equal(b, want) {
		t.Fatalf("second member's fetch = %v; want %v", b, want)
	}
	op, _, err := p.Acknowledge("m1", t0, []AckBatch{{100, 109, []AckType{Accept}}})
	if err != nil || op == 0 {
		t.Fatalf("acknowledge = %d, %v", op, err)
	}
	if p.Start() != 100 {
		t.Fatalf("start moved to %d before the acknowledgement was persisted", p.Start())
	}
	s, upTo, ok := p.Snapshot()
	if !ok || upTo != op || s.Start != 100 || s.Batches[0] != (Batch{100, 109, Acknowledged, 1}) {
		t.Fatalf("snapshot %+v up to %d; want the acknowledged batch up to op %d", s, upTo, op)
	}
	p.Persisted(upTo, nil)
	mustCheck(t, p)
	if p.Start() != 110 || p.End() != 115 {
		t.Fatalf("window [%d, %d); want [110, 115)", p.Start(), p.End())
	}
	// m2's records are not m1's to acknowledge.
	if _, _, err := p.Acknowledge("m1", t0, []AckBatch{{110, 110, []AckType{Accept}}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("acknowledging another member's record: %v; want INVALID_RECORD_STATE", err)
	}
}

// TestAcknowledgementValidation: Kafka's checks of acknowledgement batches, all before any is
// applied.
func TestAcknowledgementValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		acks []AckBatch
		want error
	}{
		{"first after last", []AckBatch{{5, 4, []AckType{Accept}}}, ErrInvalidRequest},
		{"descending", []AckBatch{{5, 6, []AckType{Accept}}, {2, 3, []AckType{Accept}}}, ErrInvalidRequest},
		{"no types", []AckBatch{{0, 3, nil}}, ErrInvalidRequest},
		{"types not one per offset", []AckBatch{{0, 3, []AckType{Accept, Reject}}}, ErrInvalidRequest},
		{"unknown type", []AckBatch{{0, 0, []AckType{7}}}, ErrInvalidRequest},
		{"past the end", []AckBatch{{8, 12, []AckType{Accept}}}, ErrInvalidRequest},
		{"not acquired", []AckBatch{{0, 9, []AckType{Accept}}}, ErrInvalidRecordState},
		{"ok", []AckBatch{{0, 1, []AckType{Accept, Reject}}, {2, 4, []AckType{Release}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(DefaultConfig(), 0)
			p.Acquire("m", t0, 0, []LogBatch{{First: 0, Last: 4}}, 100)
			p.Acquire("other", t0, 5, []LogBatch{{First: 5, Last: 9}}, 100)
			before := fmt.Sprint(p.spans)
			_, _, err := p.Acknowledge("m", t0, tc.acks)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Acknowledge(%v) = %v; want %v", tc.acks, err, tc.want)
			}
			if err != nil && fmt.Sprint(p.spans) != before {
				t.Fatalf("a refused acknowledgement changed the state:\n%s\n%v", before, p.spans)
			}
		})
	}
}

// TestAcceptAgain: accepting records whose acceptance is persisted already (the member got them
// twice, through two sessions, and accepts both deliveries in one range) changes nothing and
// is no error; the range's records it holds are accepted. Rejecting them, or accepting records
// whose acceptance is not persisted yet, or that are available, still is INVALID_RECORD_STATE.
func TestAcceptAgain(t *testing.T) {
	p := New(DefaultConfig(), 0)
	p.Acquire("other", t0, 0, []LogBatch{{First: 0, Last: 3}}, 100) // the start stays at 0
	p.Acquire("m", t0, 4, []LogBatch{{First: 4, Last: 9}}, 100)
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{6, 7, []AckType{Accept}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{4, 9, []AckType{Accept}}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("accepting records whose acceptance is pending: %v; want INVALID_RECORD_STATE", err)
	}
	persist(t, p)
	before := fmt.Sprint(p.spans)
	for _, acks := range [][]AckBatch{
		{{4, 9, []AckType{Reject}}},
		{{4, 9, []AckType{Accept, Accept, Accept, Release, Accept, Accept}}},
		{{2, 9, []AckType{Accept}}},
	} {
		if _, _, err := p.Acknowledge("m", t0, acks); !errors.Is(err, ErrInvalidRecordState) {
			t.Fatalf("Acknowledge(%v) = %v; want INVALID_RECORD_STATE", acks, err)
		}
		if fmt.Sprint(p.spans) != before {
			t.Fatalf("a refused acknowledgement changed the state:\n%s\n%v", before, p.spans)
		}
	}
	op, n, err := p.Acknowledge("m", t0, []AckBatch{{4, 9, []AckType{Accept}}})
	if err != nil || op == 0 || n != (AckCounts{Accept: 4}) {
		t.Fatalf("accepting 4-9 with 6-7 accepted already: op %d, counts %v, %v; want 4-5 and 8-9 accepted (4 records)", op, n, err)
	}
	persist(t, p)
	if op, n, err := p.Acknowledge("m", t0, []AckBatch{{6, 9, []AckType{Accept}}}); err != nil || op != 0 || n != (AckCounts{}) {
		t.Fatalf("accepting accepted records only: op %d, counts %v, %v; want nothing to persist or count, no error", op, n, err)
	}
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 3, []AckType{Accept}}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("accepting another member's records: %v; want INVALID_RECORD_STATE", err)
	}
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
}

// TestDeliveryLimit: a record released, timed out, or held by a member that leaves after its
// DeliveryLimit-th delivery is archived; each of those counts the delivery (Kafka 4.3's rule: a
// record that crashes its consumers reaches the limit too).
func TestDeliveryLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DeliveryLimit = 3
	log := logOf(0, 1, 1) // one record: its last delivery is not throttled away (TestThrottledDelivery)
	p := New(cfg, 0)
	now := t0
	deliver := func(want int16) {
		t.Helper()
		if a := fetch(p, "m", now, log, 10); !slices.Equal(a, []AcquiredRecords{{0, 0, want}}) {
			t.Fatalf("delivery %d: %v", want, a)
		}
	}
	deliver(1)
	now = now.Add(cfg.LockDuration)
	if !p.ExpireLocks(now) {
		t.Fatal("no lock expired at its deadline")
	}
	deliver(2)
	p.ReleaseMember("m") // the consumer died holding them
	deliver(3)
	op, _, err := p.Acknowledge("m", now, []AckBatch{{0, 0, []AckType{Release}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, upTo, _ := p.Snapshot(); upTo != op {
		t.Fatalf("snapshot up to %d; want %d", upTo, op)
	} else {
		p.Persisted(upTo, nil)
	}
	mustCheck(t, p)
	if a := fetch(p, "m", now, log, 10); len(a) != 0 || p.Start() != 1 {
		t.Fatalf("after the last delivery: acquired %v, start %d; want nothing, start 1 (archived)", a, p.Start())
	}
	// A member leaving with records at their last delivery archives them.
	q := New(cfg, 0)
	for i := int16(1); i <= 3; i++ {
		if a := fetch(q, "m", now, log, 10); !slices.Equal(a, []AcquiredRecords{{0, 0, i}}) {
			t.Fatalf("delivery %d: %v", i, a)
		}
		q.ReleaseMember("m")
	}
	if q.Start() != 1 {
		t.Fatalf("start %d after three deliveries ended by leaves; want 1 (archived)", q.Start())
	}
}

// TestOverlappingAcknowledgements: two batches of one request that change the same record are
// refused as a whole (Kafka refuses a second change to a record in the middle of one); so a
// failed write can always undo a request.
func TestOverlappingAcknowledgements(t *testing.T) {
	p := New(DefaultConfig(), 0)
	fetch(p, "m", t0, logOf(0, 10, 10), 10)
	before := fmt.Sprint(p.spans)
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 5, []AckType{Accept}}, {5, 9, []AckType{Release}}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("overlapping batches: %v; want INVALID_RECORD_STATE", err)
	}
	if fmt.Sprint(p.spans) != before {
		t.Fatalf("a refused request changed the state:\n%s\n%v", before, p.spans)
	}
}

// TestFailedPersistRollsBack: an acknowledgement whose snapshot is not written puts its records
// back to Acquired by the member, who can acknowledge them again; meanwhile they are neither
// acquirable nor acknowledgeable.
func TestFailedPersistRollsBack(t *testing.T) {
	p := New(DefaultConfig(), 0)
	persist(t, p)
	fetch(p, "m", t0, logOf(0, 10, 10), 10)
	op, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 4, []AckType{Release}}, {5, 9, []AckType{Accept}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{5, 9, []AckType{Accept}}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("acknowledging records with a pending change: %v; want INVALID_RECORD_STATE", err)
	}
	if p.FetchOffset() != 10 {
		t.Fatalf("fetch offset %d while the release is pending; want 10", p.FetchOffset())
	}
	_, upTo, _ := p.Snapshot()
	p.Persisted(upTo, errors.New("the coordinator moved"))
	mustCheck(t, p)
	if p.Start() != 0 {
		t.Fatalf("start %d after a failed persist; want 0", p.Start())
	}
	s, _, ok := p.Snapshot()
	if !ok || len(s.Batches) != 1 || s.Batches[0] != (Batch{0, 9, Available, 1}) {
		t.Fatalf("snapshot after the rollback: %+v, %v; want offsets 0-9 available (acquired), delivered once", s, ok)
	}
	op2, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 9, []AckType{Accept}}})
	if err != nil || op2 <= op {
		t.Fatalf("acknowledging again after the rollback: %d, %v", op2, err)
	}
	persist(t, p)
	if p.Start() != 10 {
		t.Fatalf("start %d; want 10", p.Start())
	}
}

// TestLoadOffersAvailableAgain: a new leader loading a snapshot offers the records the old one
// had acquired (written as Available with their delivery count), and offsets the snapshot left
// out, and keeps what was done.
func TestLoadOffersAvailableAgain(t *testing.T) {
	p := New(DefaultConfig(), 0)
	log := logOf(0, 20, 5)
	fetch(p, "m", t0, log, 10) // 0-9
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{5, 9, []AckType{Accept}}}); err != nil {
		t.Fatal(err)
	}
	s, _, _ := p.Snapshot()
	q, err := Load(DefaultConfig(), s)
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, q)
	if a := fetch(q, "n", t0, log, 100); !slices.Equal(a, []AcquiredRecords{{0, 4, 2}, {10, 19, 1}}) {
		t.Fatalf("the new leader acquired %v; want 0-4 (second delivery) and 10-19", a)
	}
	// A snapshot with a hole: the offsets in it were never delivered.
	q, err = Load(DefaultConfig(), Snapshot{Start: 0, Batches: []Batch{{0, 1, Acknowledged, 1}, {5, 6, Archived, 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if q.Start() != 2 || q.End() != 7 {
		t.Fatalf("loaded window [%d, %d); want [2, 7)", q.Start(), q.End())
	}
	if a := fetch(q, "n", t0, logOf(0, 10, 1), 100); !slices.Equal(a, []AcquiredRecords{{2, 4, 1}, {7, 9, 1}}) {
		t.Fatalf("acquired %v; want the hole 2-4 and the new 7-9", a)
	}
	if _, err := Load(DefaultConfig(), Snapshot{Start: 5, Batches: []Batch{{3, 4, Available, 0}}}); err == nil {
		t.Fatal("a snapshot batch below its start was loaded")
	}
}

// TestInFlightCap: the window grows to MaxInFlight offsets (by whole batches) and no further
// until the start moves.
func TestInFlightCap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxInFlight = 10
	p := New(cfg, 0)
	log := logOf(0, 100, 4)
	fetch(p, "m", t0, log, 100)
	if p.End() != 12 || p.CanAcquire() {
		t.Fatalf("window end %d, can acquire %v; want 12 (three batches of 4), false", p.End(), p.CanAcquire())
	}
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 3, []AckType{Accept}}}); err != nil {
		t.Fatal(err)
	}
	persist(t, p)
	if a := fetch(p, "m", t0, log, 100); !slices.Equal(a, []AcquiredRecords{{12, 15, 1}}) {
		t.Fatalf("after the start moved: %v; want the next batch", a)
	}
}

// TestGapsArchived: offsets the log no longer has (compaction) are archived when a read skips
// them, before and after the window's end; TrimTo drops what retention removed.
func TestGapsArchived(t *testing.T) {
	p := New(DefaultConfig(), 0)
	a := p.Acquire("m", t0, 0, []LogBatch{{First: 0, Last: 1}, {First: 5, Last: 6}}, 100)
	if !slices.Equal(a, []AcquiredRecords{{0, 1, 1}, {5, 6, 1}}) {
		t.Fatalf("acquired %v", a)
	}
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 1, []AckType{Accept}}}); err != nil {
		t.Fatal(err)
	}
	persist(t, p)
	if p.Start() != 5 {
		t.Fatalf("start %d; want 5 (2-4 are not in the log)", p.Start())
	}
	p.ReleaseMember("m")
	// Compaction removed 5; the read from 5 starts at 6.
	a = p.Acquire("m", t0, p.FetchOffset(), []LogBatch{{First: 6, Last: 8}}, 100)
	if !slices.Equal(a, []AcquiredRecords{{6, 6, 2}, {7, 8, 1}}) {
		t.Fatalf("acquired %v; want 6 (second delivery: the leave counted) and 7-8", a)
	}
	mustCheck(t, p)
	if p.Start() != 6 {
		t.Fatalf("start %d; want 6 (5 archived)", p.Start())
	}
	p.TrimTo(8)
	mustCheck(t, p)
	if p.Start() != 8 || p.End() != 9 {
		t.Fatalf("after TrimTo(8): [%d, %d); want [8, 9)", p.Start(), p.End())
	}
	if op, _, err := p.Acknowledge("m", t0, []AckBatch{{6, 8, []AckType{Accept}}}); err != nil || op == 0 {
		t.Fatalf("acknowledging across the trimmed start: %d, %v; want 6-7 skipped, 8 accepted", op, err)
	}
}

// TestAbortedArchived: a read_committed group's batches of aborted transactions are archived,
// never delivered, whether they are new or were Available already (released under
// read_uncommitted); the start moves over them once what precedes them is done.
func TestAbortedArchived(t *testing.T) {
	p := New(DefaultConfig(), 0)
	a := p.Acquire("m", t0, 0, []LogBatch{{First: 0, Last: 1}, {First: 2, Last: 4, Aborted: true}, {First: 5, Last: 5}}, 100)
	if !slices.Equal(a, []AcquiredRecords{{0, 1, 1}, {5, 5, 1}}) {
		t.Fatalf("acquired %v; want 0-1 and 5 (2-4 aborted)", a)
	}
	if _, _, err := p.Acknowledge("m", t0, []AckBatch{{0, 1, []AckType{Accept}}}); err != nil {
		t.Fatal(err)
	}
	persist(t, p)
	mustCheck(t, p)
	if p.Start() != 5 {
		t.Fatalf("start %d; want 5 (0-1 accepted, 2-4 archived)", p.Start())
	}
	// Records acquired before (read_uncommitted), released, then read as aborted: archived.
	q := New(DefaultConfig(), 0)
	q.Acquire("m", t0, 0, []LogBatch{{First: 0, Last: 2}}, 100)
	q.ReleaseMember("m")
	if a := q.Acquire("n", t0, q.FetchOffset(), []LogBatch{{First: 0, Last: 2, Aborted: true}, {First: 3, Last: 3}}, 100); !slices.Equal(a, []AcquiredRecords{{3, 3, 1}}) {
		t.Fatalf("acquired %v; want only 3", a)
	}
	persist(t, q)
	if q.Start() != 3 {
		t.Fatalf("start %d; want 3", q.Start())
	}
}

// TestAcquireRecordLimit: record_limit mode takes exactly as many records as asked, splitting a
// log batch; its rest is taken by the next fetch; Available runs in the window are split too.
func TestAcquireRecordLimit(t *testing.T) {
	p := New(DefaultConfig(), 0)
	if a := p.AcquireRecords("m", t0, 0, []LogBatch{{First: 0, Last: 9}}, 4); !slices.Equal(a, []AcquiredRecords{{0, 3, 1}}) {
		t.Fatalf("acquired %v; want 0-3", a)
	}
	if p.End() != 4 || p.FetchOffset() != 4 {
		t.Fatalf("end %d, fetch offset %d; want 4 and 4 (4-9 not in flight yet)", p.End(), p.FetchOffset())
	}
	// The next fetch reads the same log batch from 4.
	if a := p.AcquireRecords("n", t0, 4, []LogBatch{{First: 0, Last: 9}, {First: 10, Last: 11}}, 7); !slices.Equal(a, []AcquiredRecords{{4, 10, 1}}) {
		t.Fatalf("acquired %v; want 4-10", a)
	}
	mustCheck(t, p)
	p.ReleaseMember("m") // 0-3 Available again
	if a := p.AcquireRecords("o", t0, p.FetchOffset(), []LogBatch{{First: 0, Last: 9}, {First: 10, Last: 11}}, 3); !slices.Equal(a, []AcquiredRecords{{0, 2, 2}}) {
		t.Fatalf("acquired %v; want 0-2 (second delivery)", a)
	}
	mustCheck(t, p)
	// Batch-optimized takes whole batches past the limit.
	q := New(DefaultConfig(), 0)
	if a := q.Acquire("m", t0, 0, []LogBatch{{First: 0, Last: 9}}, 4); !slices.Equal(a, []AcquiredRecords{{0, 9, 1}}) {
		t.Fatalf("batch-optimized acquired %v; want the whole batch 0-9", a)
	}
}

// TestSimulation runs random members against one share-partition: fetches, acknowledgements of
// every type (several batches a request, whole and per offset), leaves, lock expiry, persists
// that fail, leader changes (the state reloaded from the last persisted snapshot), and checks
// what a share group promises against a model of who holds what: a record is never given to a
// member while another holds it (until its lock expires, its holder releases or leaves, a
// persisted acknowledgement ends the hold, or a new leader loads), never delivered more than
// DeliveryLimit times, never delivered again once its acceptance was persisted, and the start
// never goes back; at the end, with every member accepting, every record is done.
func TestSimulation(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed) })
	}
}

// simHold is the model's view of a record held by a member.
type simHold struct {
	member   string
	deadline time.Time
	op       uint64 // an acknowledgement of it awaiting persistence; 0: none
}

func simulate(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{LockDuration: time.Duration(1+rng.IntN(5)) * time.Second, DeliveryLimit: int16(2 + rng.IntN(4)), MaxInFlight: int64(5 + rng.IntN(40))}
	var log []LogBatch
	for off := int64(0); off < 300; {
		n := int64(1 + rng.IntN(6))
		if rng.IntN(8) > 0 { // else a hole compaction left
			// One in ten an aborted transaction's (read_committed): never delivered.
			log = append(log, LogBatch{First: off, Last: off + n - 1, Aborted: rng.IntN(10) == 0})
		}
		off += n
	}
	aborted := map[int64]bool{}
	for _, b := range log {
		for o := b.First; b.Aborted && o <= b.Last; o++ {
			aborted[o] = true
		}
	}
	p := New(cfg, 0)
	durable := Snapshot{Start: 0}
	accepted := map[int64]bool{} // acceptance persisted
	holds := map[int64]*simHold{}
	members := []string{"a", "b", "c"}
	held := map[string][]AcquiredRecords{}
	type pendingAck struct {
		op      uint64
		accepts []int64
	}
	var pending []pendingAck
	now := t0
	lastStart := int64(0)
	for step := 0; step < 400; step++ {
		m := members[rng.IntN(len(members))]
		switch k := rng.IntN(10); {
		case k < 4: // fetch, batch-optimized or (half the time) record_limit: at most max records
			max := 1 + rng.IntN(12)
			from := p.FetchOffset()
			var got []AcquiredRecords
			if rng.IntN(2) == 0 {
				got = p.Acquire(m, now, from, readFrom(log, from), max)
			} else {
				got = p.AcquireRecords(m, now, from, readFrom(log, from), max)
				n := int64(0)
				for _, a := range got {
					n += a.Last - a.First + 1
				}
				if n > int64(max) {
					t.Fatalf("step %d: record_limit fetch of at most %d took %d records: %v", step, max, n, got)
				}
			}
			for _, a := range got {
				if a.Count > cfg.DeliveryLimit {
					t.Fatalf("offsets %d-%d delivered %d times; limit %d", a.First, a.Last, a.Count, cfg.DeliveryLimit)
				}
				for o := a.First; o <= a.Last; o++ {
					if accepted[o] {
						t.Fatalf("offset %d delivered to %s after its acceptance was persisted", o, m)
					}
					if aborted[o] {
						t.Fatalf("offset %d of an aborted transaction delivered to %s", o, m)
					}
					if h := holds[o]; h != nil {
						t.Fatalf("step %d: offset %d given to %s while %s holds it (deadline %v, now %v, ack pending %d)",
							step, o, m, h.member, h.deadline.Sub(t0), now.Sub(t0), h.op)
					}
					holds[o] = &simHold{member: m, deadline: now.Add(cfg.LockDuration)}
				}
				held[m] = append(held[m], a)
			}
		case k < 7: // acknowledge some of what m holds, in one to three batches
			if len(held[m]) == 0 {
				continue
			}
			var acks []AckBatch
			for n := 1 + rng.IntN(3); n > 0 && len(held[m]) > 0; n-- {
				a := held[m][0]
				held[m] = held[m][1:]
				types := make([]AckType, 1)
				if a.Last > a.First && rng.IntN(2) == 0 {
					types = make([]AckType, a.Last-a.First+1)
				}
				for i := range types {
					types[i] = []AckType{Accept, Accept, Accept, Release, Reject, Renew, Gap}[rng.IntN(7)]
				}
				acks = append(acks, AckBatch{a.First, a.Last, types})
			}
			if rng.IntN(10) == 0 && len(acks) > 1 { // a malformed request: out of order
				acks[0], acks[1] = acks[1], acks[0]
			}
			op, counts, err := p.Acknowledge(m, now, acks)
			if err != nil {
				if !errors.Is(err, ErrInvalidRecordState) && !errors.Is(err, ErrInvalidRequest) {
					t.Fatal(err)
				}
				continue // a lock expired, a release, a new leader, or the malformed request
			}
			var accepts []int64
			var want AckCounts
			for _, a := range acks {
				for i := range a.Last - a.First + 1 {
					o := a.First + i
					h := holds[o]
					typ := a.Types[min(int(i), len(a.Types)-1)]
					if o < p.Start() && h == nil || typ == Accept && accepted[o] && h == nil {
						continue // done already: below the start, or its acceptance persisted
					}
					if h == nil || h.member != m {
						t.Fatalf("step %d: %s acknowledged offset %d, held by %+v", step, m, o, h)
					}
					want[typ]++
					if typ == Renew {
						h.deadline = now.Add(cfg.LockDuration)
						continue
					}
					h.op = op
					if typ == Accept {
						accepts = append(accepts, o)
					}
				}
			}
			if counts != want {
				t.Fatalf("step %d: %v counted %v; want %v", step, acks, counts, want)
			}
			if op != 0 {
				pending = append(pending, pendingAck{op, accepts})
			}
		case k == 7: // persist, maybe failing
			s, upTo, ok := p.Snapshot()
			if !ok {
				continue
			}
			var err error
			if rng.IntN(5) == 0 {
				err = errors.New("write failed")
			} else {
				if s.Start < durable.Start {
					t.Fatalf("snapshot start %d below the persisted %d", s.Start, durable.Start)
				}
				durable = s
			}
			p.Persisted(upTo, err)
			for o, h := range holds {
				if h.op != 0 && h.op <= upTo {
					if err == nil {
						delete(holds, o) // acknowledged: held no more
					} else {
						h.op = 0 // rolled back: still held, its lock running
					}
				}
			}
			keep := pending[:0]
			for _, pa := range pending {
				if pa.op > upTo {
					keep = append(keep, pa)
				} else if err == nil {
					for _, o := range pa.accepts {
						accepted[o] = true
					}
				}
			}
			pending = keep
		case k == 8: // time passes; or a member leaves
			if rng.IntN(2) == 0 {
				now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
				p.ExpireLocks(now)
				for o, h := range holds {
					if h.op == 0 && !now.Before(h.deadline) {
						delete(holds, o)
					}
				}
			} else {
				p.ReleaseMember(m)
				held[m] = nil
				for o, h := range holds {
					if h.member == m && h.op == 0 {
						delete(holds, o)
					}
				}
			}
		default: // rarely, a new leader loads the last persisted snapshot
			if rng.IntN(4) != 0 {
				continue
			}
			q, err := Load(cfg, durable)
			if err != nil {
				t.Fatal(err)
			}
			p, pending, held, holds = q, nil, map[string][]AcquiredRecords{}, map[int64]*simHold{}
			// What the old leader had moved past without persisting it comes back.
			lastStart = p.Start()
		}
		if err := p.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if p.Start() < lastStart {
			t.Fatalf("step %d: start went back from %d to %d", step, lastStart, p.Start())
		}
		lastStart = p.Start()
		checkHolders(t, p)
	}
	// Drain: every member accepts whatever it gets; time passes for the locks of the gone.
	logEnd := log[len(log)-1].Last + 1
	for round := 0; p.Start() < logEnd && round < 2000; round++ {
		now = now.Add(cfg.LockDuration)
		p.ExpireLocks(now)
		for _, a := range fetch(p, "drain", now, log, 50) {
			if _, _, err := p.Acknowledge("drain", now, []AckBatch{{a.First, a.Last, []AckType{Accept}}}); err != nil {
				t.Fatal(err)
			}
		}
		s, upTo, ok := p.Snapshot()
		if ok {
			p.Persisted(upTo, nil)
			durable = s
		}
	}
	if p.Start() != logEnd || p.End() != logEnd {
		t.Fatalf("after draining: window [%d, %d); want [%d, %[3]d)", p.Start(), p.End(), logEnd)
	}
}

// checkHolders: no offset is in two spans (so held by two members) — check verifies the spans
// are disjoint and contiguous; here, every Acquired span has one member.
func checkHolders(t *testing.T, p *Partition) {
	t.Helper()
	for _, s := range p.spans {
		if s.state == Acquired && s.member == "" {
			t.Fatalf("span %d-%d acquired by nobody", s.first, s.last)
		}
		if s.count > p.cfg.DeliveryLimit {
			t.Fatalf("span %d-%d delivered %d times; limit %d", s.first, s.last, s.count, p.cfg.DeliveryLimit)
		}
	}
}

// FuzzDecodeSnapshot: no input makes DecodeSnapshot panic; what it accepts re-encodes to the same
// bytes and loads.
func FuzzDecodeSnapshot(f *testing.F) {
	s := Snapshot{Start: 5, Batches: []Batch{{5, 9, Acknowledged, 1}, {12, 20, Available, 3}}}
	f.Add(s.AppendTo(nil))
	f.Add((&Snapshot{Start: 0}).AppendTo(nil))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		if again := s.AppendTo(nil); string(again) != string(b) {
			t.Fatalf("re-encoded %x; want %x", again, b)
		}
		if _, err := Load(DefaultConfig(), s); err != nil {
			t.Fatalf("a decoded snapshot does not load: %v", err)
		}
	})
}

// TestThrottledDelivery: redeliveries in the second half of the delivery limit take half as many
// records per fetch each time, and the last one a single record, acquired alone (Kafka's
// throttled delivery, KAFKA-17541): a record that makes every consumer fail reaches the limit
// on its own, not with its whole batch. A limit of 2 is not throttled.
func TestThrottledDelivery(t *testing.T) {
	cfg := DefaultConfig() // delivery limit 5: deliveries 4 and 5 are throttled
	log := logOf(0, 8, 8)
	p := New(cfg, 0)
	now := t0
	releaseAll := func() {
		t.Helper()
		now = now.Add(cfg.LockDuration)
		p.ExpireLocks(now)
	}
	for want := int16(1); want <= 3; want++ { // whole batch
		if a := fetch(p, "m", now, log, 8); !slices.Equal(a, []AcquiredRecords{{0, 7, want}}) {
			t.Fatalf("delivery %d: %v; want the whole batch", want, a)
		}
		releaseAll()
	}
	// The fourth delivery: half the fetch's 8 records at a time.
	for _, want := range [][]AcquiredRecords{{{0, 3, 4}}, {{4, 7, 4}}} {
		if a := fetch(p, "m", now, log, 8); !slices.Equal(a, want) {
			t.Fatalf("fourth delivery: %v; want %v", a, want)
		}
	}
	releaseAll()
	// The fifth and last: one record per fetch.
	for off := int64(0); off < 8; off++ {
		if a := fetch(p, "m", now, log, 8); !slices.Equal(a, []AcquiredRecords{{off, off, 5}}) {
			t.Fatalf("last delivery: %v; want offset %d alone", a, off)
		}
		if off == 2 { // a record at a lower count comes back: later fetches still isolate
			if _, _, err := p.Acknowledge("m", now, []AckBatch{{2, 2, []AckType{Accept}}}); err != nil {
				t.Fatal(err)
			}
			persist(t, p)
		}
	}
	mustCheck(t, p)

	// Throttled records are not acquired with others: a fetch that took records of a lower count
	// stops before them.
	q := New(cfg, 0)
	log = logOf(0, 4, 2)
	for range 4 { // records 0-1: four deliveries so far
		fetch(q, "m", now, log[:1], 8)
		now = now.Add(cfg.LockDuration)
		q.ExpireLocks(now)
	}
	if a := q.Acquire("m", now, 0, log, 8); !slices.Equal(a, []AcquiredRecords{{0, 0, 5}}) {
		t.Fatalf("acquired %v; want only offset 0 (its last delivery, alone)", a)
	}
	if a := q.Acquire("m", now, 1, log[0:], 8); !slices.Equal(a, []AcquiredRecords{{1, 1, 5}}) {
		t.Fatalf("acquired %v; want only offset 1", a)
	}
	if a := q.Acquire("m", now, 2, log[1:], 8); !slices.Equal(a, []AcquiredRecords{{2, 3, 1}}) {
		t.Fatalf("acquired %v; want the new batch 2-3", a)
	}

	// A limit of 2: nothing is throttled.
	cfg.DeliveryLimit = 2
	r := New(cfg, 0)
	for want := int16(1); want <= 2; want++ {
		if a := fetch(r, "m", now, logOf(0, 8, 8), 8); !slices.Equal(a, []AcquiredRecords{{0, 7, want}}) {
			t.Fatalf("limit 2, delivery %d: %v; want the whole batch", want, a)
		}
		now = now.Add(cfg.LockDuration)
		r.ExpireLocks(now)
	}
}

// TestReleaseRuns: releasing what one share session of a member acquired leaves what the same
// member acquired through another session (two nodes forwarding to one owner), including the
// part of a span the two acquisitions share, and skips what was acknowledged or is outside the
// window.
func TestReleaseRuns(t *testing.T) {
	cfg := DefaultConfig()
	now := time.UnixMilli(1_700_000_000_000)
	p := New(cfg, 0)
	log := logOf(0, 30, 5)
	first := fetch(p, "m", now, log, 10)  // session 1: 0-9
	second := fetch(p, "m", now, log, 10) // session 2: 10-19, adjacent to session 1's
	if !slices.Equal(first, []AcquiredRecords{{0, 9, 1}}) || !slices.Equal(second, []AcquiredRecords{{10, 19, 1}}) {
		t.Fatalf("acquired %v then %v", first, second)
	}
	if _, _, err := p.Acknowledge("m", now, []AckBatch{{0, 2, []AckType{Accept}}}); err != nil {
		t.Fatal(err)
	}
	persist(t, p)
	p.ReleaseRuns("m", append(first, AcquiredRecords{40, 50, 1})) // and offsets past the window
	mustCheck(t, p)
	// 3-9 are available again; 10-19 still session 2's, acknowledgeable by the member.
	if _, _, err := p.Acknowledge("m", now, []AckBatch{{10, 19, []AckType{Accept}}}); err != nil {
		t.Fatalf("acknowledging session 2's records after session 1's release: %v", err)
	}
	persist(t, p)
	if a := fetch(p, "n", now, log, 10); !slices.Equal(a, []AcquiredRecords{{3, 9, 2}, {20, 24, 1}}) {
		t.Fatalf("another member acquired %v; want 3-9 at their second delivery, then the next batch", a)
	}
	mustCheck(t, p)
	if !p.Holds([]AcquiredRecords{{20, 24, 1}}) || p.Holds(first) || p.Holds(second) {
		t.Fatalf("Holds: 20-24/1 %v, session 1's runs %v, session 2's %v; want true, false, false",
			p.Holds([]AcquiredRecords{{20, 24, 1}}), p.Holds(first), p.Holds(second))
	}

	// A session's runs whose lock expired and which the member's other session acquired again
	// (a later delivery) are not released by the first session's end.
	q := New(cfg, 0)
	old := fetch(q, "m", now, log, 5) // session 1: 0-4, delivery 1
	now = now.Add(cfg.LockDuration)
	q.ExpireLocks(now)
	again := fetch(q, "m", now, log, 5) // session 2: 0-4, delivery 2
	if !slices.Equal(old, []AcquiredRecords{{0, 4, 1}}) || !slices.Equal(again, []AcquiredRecords{{0, 4, 2}}) {
		t.Fatalf("acquired %v, then after the lock %v", old, again)
	}
	q.ReleaseRuns("m", old)
	mustCheck(t, q)
	if _, _, err := q.Acknowledge("m", now, []AckBatch{{0, 4, []AckType{Accept}}}); err != nil {
		t.Fatalf("acknowledging session 2's records after session 1's end: %v", err)
	}
}
