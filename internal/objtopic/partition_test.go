package objtopic

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestCommitAssignsOffsets: offsets are consecutive across files; a retried idempotent batch
// (its first file's answer was lost) gets its original offsets and is not stored again; a
// batch ahead of its sequence is refused (retriable) and skipped; one extent per file.
func TestCommitAssignsOffsets(t *testing.T) {
	p := NewPartition()
	e := IndexEntry{Offset: 100, Length: 300}
	r := p.Commit("f1", e, []BatchMeta{
		{Records: 3, ProducerID: -1, MaxTimestamp: 10},
		{Records: 2, ProducerID: 7, Epoch: 0, FirstSeq: 0, MaxTimestamp: 20},
	})
	if r[0].Base != 0 || r[1].Base != 3 || r[0].Err != nil || r[1].Err != nil {
		t.Fatalf("first file: %+v", r)
	}
	r = p.Commit("f2", e, []BatchMeta{
		{Records: 2, ProducerID: 7, Epoch: 0, FirstSeq: 0, MaxTimestamp: 20}, // the retry
		{Records: 4, ProducerID: 7, Epoch: 0, FirstSeq: 2, MaxTimestamp: 30},
		{Records: 1, ProducerID: 7, Epoch: 0, FirstSeq: 9, MaxTimestamp: 31}, // a gap
		{Records: 1, ProducerID: 7, Epoch: 1, FirstSeq: 3, MaxTimestamp: 31}, // a new epoch not at 0
	})
	if !r[0].Duplicate || r[0].Base != 3 || r[0].Err != nil {
		t.Errorf("the retried batch: %+v; want a duplicate at 3", r[0])
	}
	if r[1].Base != 5 || r[1].Err != nil {
		t.Errorf("the next batch: %+v; want base 5", r[1])
	}
	if !errors.Is(r[2].Err, ErrSequenceAhead) || !kerr.IsRetriable(r[2].Err) {
		t.Errorf("a sequence gap: %+v; want a retriable refusal (its predecessor may still come)", r[2])
	}
	if !errors.Is(r[3].Err, ErrSequenceAhead) {
		t.Errorf("a new epoch's batch not at sequence 0: %+v; want a retriable refusal", r[3])
	}
	if p.Next != 9 || len(p.Extents) != 2 {
		t.Fatalf("next %d, %d extents; want 9 and 2", p.Next, len(p.Extents))
	}
	if x := p.Extents[1]; x.Base != 5 || x.Last != 8 || x.MaxTimestamp != 30 || fmt.Sprint(x.Skip) != "[0 2 3]" {
		t.Errorf("second extent %+v; want offsets 5-8, skipping batches 0, 2 and 3", x)
	}
	// A file whose batches are all refused adds no extent.
	if r := p.Commit("f3", e, []BatchMeta{{Records: 1, ProducerID: 7, Epoch: 0, FirstSeq: 20}}); r[0].Err == nil || len(p.Extents) != 2 {
		t.Errorf("an all-refused file: %+v, %d extents", r, len(p.Extents))
	}
}

func TestFindAndTrim(t *testing.T) {
	p := NewPartition()
	for i := range 4 {
		p.Commit(fmt.Sprintf("f%d", i), IndexEntry{}, []BatchMeta{{Records: 10, ProducerID: -1}})
	}
	if got := p.Find(15); len(got) != 3 || got[0].File != "f1" {
		t.Errorf("Find(15) = %+v; want f1 onwards", got)
	}
	if got := p.Find(40); len(got) != 0 {
		t.Errorf("Find(40) = %+v; want none (the end)", got)
	}
	dropped, err := p.Trim(25)
	if err != nil || fmt.Sprint(dropped) != "[f0 f1]" || p.Start != 25 {
		t.Errorf("Trim(25) = %v, %v; start %d", dropped, err, p.Start)
	}
	if got := p.Find(0); len(got) != 2 || got[0].File != "f2" {
		t.Errorf("Find below the start = %+v; want f2 onwards", got)
	}
	if _, err := p.Trim(41); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Errorf("Trim past the end = %v", err)
	}
	if dropped, _ := p.Trim(10); dropped != nil || p.Start != 25 {
		t.Errorf("Trim backwards moved the start to %d", p.Start)
	}
}

// TestCloneAndJSON: a published copy does not see later commits; the JSON form carries the
// producer state, so a duplicate is still recognized after a controller snapshot is loaded.
func TestCloneAndJSON(t *testing.T) {
	p := NewPartition()
	p.Commit("f1", IndexEntry{}, []BatchMeta{{Records: 2, ProducerID: 5, Epoch: 1, FirstSeq: 0, MaxTimestamp: 9}})
	pub := p.Clone()
	p.Commit("f2", IndexEntry{}, []BatchMeta{{Records: 3, ProducerID: 5, Epoch: 1, FirstSeq: 2}})
	if pub.Next != 2 || len(pub.Extents) != 1 || len(p.Extents) != 2 {
		t.Errorf("the copy saw a later commit: next %d, %d extents", pub.Next, len(pub.Extents))
	}
	if r := pub.Commit("f3", IndexEntry{}, []BatchMeta{{Records: 3, ProducerID: 5, Epoch: 1, FirstSeq: 2}}); r[0].Err != nil || r[0].Duplicate {
		t.Errorf("the copy's producer state moved with the original: %+v", r[0])
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Partition
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if q.Next != 5 || len(q.Extents) != 2 || q.Extents[1].File != "f2" {
		t.Errorf("decoded %+v", q)
	}
	if r := q.Commit("f4", IndexEntry{}, []BatchMeta{{Records: 3, ProducerID: 5, Epoch: 1, FirstSeq: 2}}); !r[0].Duplicate || r[0].Base != 2 {
		t.Errorf("a retry after the snapshot round trip: %+v; want the duplicate at 2", r[0])
	}
	if err := json.Unmarshal([]byte(`{"start":9,"next":2,"producers":""}`), &q); err == nil {
		t.Error("a start past the end decoded")
	}
}

func TestRetentionStart(t *testing.T) {
	p := NewPartition()
	for i := range 4 { // extents of 10 records, 100 bytes, newest timestamps 1000, 2000, 3000, 4000
		p.Commit(fmt.Sprintf("f%d", i), IndexEntry{Length: 100}, []BatchMeta{{Records: 10, ProducerID: -1, MaxTimestamp: int64(1000 * (i + 1))}})
	}
	for _, tc := range []struct {
		now, ms, bytes, want int64
	}{
		{5000, -1, -1, 0},     // no limits
		{5000, 2500, -1, 20},  // extents newer than 2500 stay
		{5000, 500, -1, 40},   // all expired: the start moves to the end
		{5000, -1, 250, 10},   // 400 bytes, keep at least 250: drop one (300 stay)
		{5000, -1, 400, 0},    // exactly at the limit: nothing
		{5000, 3500, 150, 20}, // time drops one, size a second
	} {
		if got := p.RetentionStart(tc.now, tc.ms, tc.bytes); got != tc.want {
			t.Errorf("RetentionStart(now %d, ms %d, bytes %d) = %d; want %d", tc.now, tc.ms, tc.bytes, got, tc.want)
		}
	}
	if _, err := p.Trim(20); err != nil {
		t.Fatal(err)
	}
	if got := p.RetentionStart(5000, -1, 100); got != 30 {
		t.Errorf("after trimming to 20, keeping 100 bytes: %d; want 30", got)
	}
}

// TestCommitLazy: lazy sections refuse nothing for sequence or epoch; a batch journaled twice
// is stored once, whichever copy commits first, even far apart; gaps and reorderings are
// accepted in commit order.
func TestCommitLazy(t *testing.T) {
	p := NewPartition()
	b := func(seq int32, n int32) BatchMeta {
		return BatchMeta{Records: n, ProducerID: 4, Epoch: 1, FirstSeq: seq}
	}
	r := p.CommitLazy("f1", IndexEntry{}, []BatchMeta{b(0, 2), b(5, 1)}) // a gap: 2-4 are in a file the slow path commits later
	if r[0].Err != nil || r[1].Err != nil || r[1].Base != 2 {
		t.Fatalf("first file: %+v", r)
	}
	for i := range 10 { // far more than Kafka's five remembered batches
		p.CommitLazy(fmt.Sprintf("g%d", i), IndexEntry{}, []BatchMeta{b(6+int32(i), 1)})
	}
	r = p.CommitLazy("slow", IndexEntry{}, []BatchMeta{b(2, 3), b(0, 2), b(5, 1)}) // the late file, and two retries
	if r[0].Duplicate || r[0].Base != 13 || !r[1].Duplicate || !r[2].Duplicate {
		t.Fatalf("late commit: %+v; want 2-4 stored at 13, the retries dropped", r)
	}
	if p.Next != 16 {
		t.Fatalf("next %d; want 16 (2+1+10+3)", p.Next)
	}
	// An older epoch is accepted (it was acknowledged), a newer one starts afresh.
	r = p.CommitLazy("h", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 4, Epoch: 0, FirstSeq: 0}, {Records: 1, ProducerID: 4, Epoch: 2, FirstSeq: 0}})
	if r[0].Err != nil || r[0].Duplicate || r[1].Err != nil || r[1].Duplicate {
		t.Fatalf("epochs: %+v", r)
	}
	// The state survives a snapshot.
	js, _ := json.Marshal(p)
	var q Partition
	if err := json.Unmarshal(js, &q); err != nil {
		t.Fatal(err)
	}
	if r := q.CommitLazy("i", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 4, Epoch: 2, FirstSeq: 0}}); !r[0].Duplicate {
		t.Fatalf("after a snapshot, a duplicate: %+v", r)
	}
}

// TestExpireProducers: idempotent producers idle past producer.id.expiration.ms are forgotten,
// with their lazily committed sequence ranges; one with an open transaction, or a recent
// batch, is kept. A forgotten producer is an unknown one again: its next batch is taken at any
// sequence (Kafka's rule), not answered as a duplicate.
func TestExpireProducers(t *testing.T) {
	p := NewPartition()
	r := p.Commit("f", IndexEntry{}, []BatchMeta{
		{Records: 1, ProducerID: 3, FirstSeq: 0, MaxTimestamp: 1_000},
		{Records: 1, ProducerID: 5, FirstSeq: 0, MaxTimestamp: 5_000},
		{Records: 1, ProducerID: 6, FirstSeq: 0, MaxTimestamp: 1_000, Transactional: true},
	})
	r = append(r, p.CommitLazy("g", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 4, FirstSeq: 0, MaxTimestamp: 1_000}})...)
	for _, res := range r {
		if res.Err != nil || res.Duplicate {
			t.Fatalf("commits: %+v", r)
		}
	}
	before := p.Clone()
	if !p.ProducersExpirable(3_000, 2_000) {
		t.Fatal("nothing expirable at 3,000 ms with an expiration of 2,000")
	}
	if n := p.ExpireProducers(3_000, 2_000); n != 2 {
		t.Fatalf("expired %d producers; want 2 (3 and 4; 5 is recent, 6 in a transaction)", n)
	}
	for id, known := range map[int64]bool{3: false, 4: false, 5: true, 6: true} {
		if _, _, ok := p.producers.Sequence(id); ok != known {
			t.Fatalf("producer %d known %v after expiry; want %v", id, ok, known)
		}
	}
	if p.lazy[4] != nil || before.lazy[4] == nil {
		t.Fatalf("producer 4's lazy ranges: %v, in the clone taken before %v; want gone, kept", p.lazy[4], before.lazy[4])
	}
	if p.ProducersExpirable(3_000, 2_000) {
		t.Fatal("still expirable after expiry")
	}
	// Their sequence 0 again is a new producer's first batch, not a duplicate.
	r = p.Commit("h", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 3, FirstSeq: 0, MaxTimestamp: 3_000}})
	r = append(r, p.CommitLazy("i", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 4, FirstSeq: 0, MaxTimestamp: 3_000}})...)
	if r[0].Err != nil || r[0].Duplicate || r[1].Err != nil || r[1].Duplicate {
		t.Fatalf("a forgotten producer's batches: %+v; want both stored", r)
	}
	// The state survives a snapshot.
	js, _ := json.Marshal(p)
	var q Partition
	if err := json.Unmarshal(js, &q); err != nil {
		t.Fatal(err)
	}
	if !q.ProducersExpirable(10_000, 2_000) || q.ExpireProducers(10_000, 2_000) != 3 {
		t.Fatal("after a snapshot: want producers 3, 4 and 5 expirable at 10,000 ms")
	}
}

// FuzzPartitionJSON: a partition state from a snapshot decodes without panicking, and what
// decodes encodes and decodes to the same state.
func FuzzPartitionJSON(f *testing.F) {
	p := NewPartition()
	p.Commit("f", IndexEntry{Length: 9}, []BatchMeta{{Records: 2, ProducerID: 3, FirstSeq: 0, MaxTimestamp: 4}})
	p.CommitLazy("g", IndexEntry{Length: 9}, []BatchMeta{{Records: 1, ProducerID: 5, Epoch: 1, FirstSeq: 7}})
	seed, _ := json.Marshal(p)
	f.Add(seed)
	f.Add([]byte(`{"start":0,"next":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q Partition
		if err := json.Unmarshal(b, &q); err != nil {
			return
		}
		again, err := json.Marshal(&q)
		if err != nil {
			t.Fatalf("a decoded partition does not encode: %v", err)
		}
		var r Partition
		if err := json.Unmarshal(again, &r); err != nil {
			t.Fatalf("a re-encoded partition does not decode: %v", err)
		}
		third, _ := json.Marshal(&r)
		if string(third) != string(again) {
			t.Fatalf("encoding is not stable:\n%s\n%s", again, third)
		}
		q.Commit("h", IndexEntry{}, []BatchMeta{{Records: 1, ProducerID: 5, Epoch: 1, FirstSeq: 8}}) // never panics
	})
}

// TestEagerAndLazyCopies: a batch committed eagerly and journaled again lazily (a Ripcord
// retry), or the reverse, is stored once, however far apart; a lazy stream in sequence moves
// Kafka's producer state on, so an eager stream can follow it without a sequence error.
func TestEagerAndLazyCopies(t *testing.T) {
	p := NewPartition()
	b := func(seq int32) BatchMeta { return BatchMeta{Records: 1, ProducerID: 9, Epoch: 0, FirstSeq: seq} }
	p.Commit("e0", IndexEntry{}, []BatchMeta{b(0)})
	for i := int32(1); i <= 10; i++ {
		if r := p.CommitLazy(fmt.Sprint("l", i), IndexEntry{}, []BatchMeta{b(i)}); r[0].Duplicate || r[0].Err != nil {
			t.Fatalf("lazy %d: %+v", i, r)
		}
	}
	if r := p.CommitLazy("late", IndexEntry{}, []BatchMeta{b(0)}); !r[0].Duplicate {
		t.Fatalf("a lazy copy of an eagerly committed batch, ten batches later: %+v; want a duplicate", r)
	}
	if r := p.Commit("e11", IndexEntry{}, []BatchMeta{b(11)}); r[0].Err != nil || r[0].Duplicate {
		t.Fatalf("an eager batch after a lazy stream: %+v; want it in sequence", r)
	}
	if r := p.Commit("e-retry", IndexEntry{}, []BatchMeta{b(3)}); !r[0].Duplicate || r[0].Err != nil {
		t.Fatalf("an eager retry of a lazily committed batch: %+v; want a duplicate", r)
	}
	if p.Next != 12 {
		t.Fatalf("next %d; want 12 records stored", p.Next)
	}
}

// TestEagerAfterLazyOutOfOrder: lazy batches committed out of order (2 and 3 before 1, which
// was retried after a lost answer) leave Kafka's state at 1; an eager batch 4 that follows them
// is in sequence, not refused as out of order (which would make the producer bump its epoch and
// resend batches already stored). One with a gap before it is still refused.
func TestEagerAfterLazyOutOfOrder(t *testing.T) {
	p := NewPartition()
	b := func(seq int32) BatchMeta { return BatchMeta{Records: 1, ProducerID: 9, Epoch: 0, FirstSeq: seq} }
	if r := p.Commit("e0", IndexEntry{}, []BatchMeta{b(0)}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	for _, seq := range []int32{2, 3, 1} {
		if r := p.CommitLazy(fmt.Sprint("l", seq), IndexEntry{}, []BatchMeta{b(seq)}); r[0].Duplicate || r[0].Err != nil {
			t.Fatalf("lazy %d: %+v", seq, r)
		}
	}
	if r := p.Commit("e4", IndexEntry{}, []BatchMeta{b(4)}); r[0].Err != nil || r[0].Duplicate || r[0].Base != 4 {
		t.Fatalf("an eager batch following lazy ones committed out of order: %+v; want it stored at 4", r)
	}
	if r := p.Commit("e5", IndexEntry{}, []BatchMeta{b(5)}); r[0].Err != nil || r[0].Base != 5 {
		t.Fatalf("the next eager batch: %+v; want it stored at 5", r)
	}
	if r := p.Commit("e7", IndexEntry{}, []BatchMeta{b(7)}); !errors.Is(r[0].Err, ErrSequenceAhead) {
		t.Fatalf("an eager batch after a gap: %+v; want a retriable refusal", r)
	}
	if r := p.Commit("e2", IndexEntry{}, []BatchMeta{b(2)}); !r[0].Duplicate {
		t.Fatalf("an eager retry of a stored batch: %+v; want a duplicate", r)
	}
	// Lazy 9 stored while 8 is still on its way: an eager retry of 9 is a duplicate, not a
	// batch ahead of its sequence (refused, it would be retried until 8 came).
	if r := p.CommitLazy("l9", IndexEntry{}, []BatchMeta{b(9)}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if r := p.Commit("e9", IndexEntry{}, []BatchMeta{b(9)}); !r[0].Duplicate || r[0].Err != nil {
		t.Fatalf("an eager retry of a lazily stored batch ahead of a gap: %+v; want a duplicate", r)
	}
}

// TestBatchAheadWaitsForItsPredecessor: a producer's batch 1 waits in one writer's queue while
// its batch 2, sent to another writer after the partition's traffic moved, commits first. The
// early batch is refused retriably, not as out of order (an epoch bump would send batch 1 again
// under the new epoch while its first copy is still on its way); batch 1 then commits, the
// retried batch 2 follows it, and batch 1's late second copy is a duplicate. Sequences wrap.
func TestBatchAheadWaitsForItsPredecessor(t *testing.T) {
	p := NewPartition()
	b := func(epoch int16, seq int32) BatchMeta {
		return BatchMeta{Records: 1, ProducerID: 4, Epoch: epoch, FirstSeq: seq}
	}
	if r := p.Commit("a0", IndexEntry{}, []BatchMeta{b(0, 0)}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	r := p.Commit("b2", IndexEntry{}, []BatchMeta{b(0, 2)})
	if !errors.Is(r[0].Err, ErrSequenceAhead) || !kerr.IsRetriable(r[0].Err) || errors.Is(r[0].Err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("a batch ahead of its predecessor: %+v; want a retriable refusal", r)
	}
	if r := p.Commit("a1", IndexEntry{}, []BatchMeta{b(0, 1)}); r[0].Err != nil || r[0].Base != 1 {
		t.Fatalf("the predecessor: %+v; want it at 1", r)
	}
	if r := p.Commit("b2'", IndexEntry{}, []BatchMeta{b(0, 2)}); r[0].Err != nil || r[0].Base != 2 {
		t.Fatalf("the retried batch: %+v; want it at 2", r)
	}
	if r := p.Commit("a1'", IndexEntry{}, []BatchMeta{b(0, 1)}); !r[0].Duplicate {
		t.Fatalf("the predecessor's late copy: %+v; want a duplicate", r)
	}
	// Behind (an overlap that is no retry) is still Kafka's out of order; so is an older epoch's
	// batch refused as fenced, and a new epoch must start at 0.
	if r := p.Commit("x", IndexEntry{}, []BatchMeta{{Records: 2, ProducerID: 4, FirstSeq: 2}}); !errors.Is(r[0].Err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("an overlapping batch: %+v; want OUT_OF_ORDER_SEQUENCE_NUMBER", r)
	}
	if r := p.Commit("e1", IndexEntry{}, []BatchMeta{b(1, 3)}); !errors.Is(r[0].Err, ErrSequenceAhead) {
		t.Fatalf("a new epoch's batch after sequence 0: %+v; want a retriable refusal", r)
	}
	for _, c := range []struct {
		a, b  int32
		after bool
	}{{5, 3, true}, {3, 3, false}, {3, 5, false}, {1, math.MaxInt32, true}, {math.MaxInt32, 1, false}} {
		if got := seqAfter(c.a, c.b); got != c.after {
			t.Errorf("seqAfter(%d, %d) = %v; want %v", c.a, c.b, got, c.after)
		}
	}
}

// FuzzEachBatch: walking any section as any extent never panics, and a walk that succeeds
// hands out batches whose offsets ascend within the extent's.
func FuzzEachBatch(f *testing.F) {
	var sec []byte
	for i := range 3 {
		body := batch.AppendRecord(nil, 0, 0, []byte("k"), []byte("v"), 0, nil)
		sec = batch.AppendBatch(sec, batch.Header{BaseOffset: int64(10 * i), RecordCount: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, body)
	}
	f.Add(sec, true, int64(0), int64(20), uint32(9))
	f.Add(sec, false, int64(5), int64(7), uint32(1))
	f.Fuzz(func(t *testing.T, data []byte, absolute bool, base, last int64, skip uint32) {
		if base < 0 || last < base-1 || last > 1<<50 {
			return
		}
		e := Extent{File: "f", Base: base, Last: last, Absolute: absolute, Skip: []uint32{skip}}
		next := base
		err := EachBatch(e, data, func(b []byte, h batch.Header, at int64) error {
			if at < next || at+int64(h.LastOffsetDelta) > last || len(b) != h.Size() {
				t.Fatalf("batch at %d (next %d, extent %d-%d), %d bytes of %d", at, next, base, last, len(b), h.Size())
			}
			next = at + int64(h.LastOffsetDelta) + 1
			return nil
		})
		if err != nil && !errors.Is(err, ErrBadFile) {
			t.Fatalf("error %v is not ErrBadFile", err)
		}
	})
}

// TestSequenceWrap: a producer's sequence wraps past MaxInt32 to 0 (as Kafka's does). The batch
// after the wrap is stored, not taken for the batch of the same number committed long before,
// and a retry on either side of the wrap, eager or lazy, is still a duplicate.
func TestSequenceWrap(t *testing.T) {
	const max = math.MaxInt32
	p := NewPartition()
	for _, b := range []BatchMeta{
		{Records: 1, FirstSeq: 0},
		{Records: max - 11, FirstSeq: 1}, // up to max-11
		{Records: 2, FirstSeq: max - 10},
		{Records: 2, FirstSeq: max - 8},
		{Records: 2, FirstSeq: max - 6},
		{Records: 2, FirstSeq: max - 4},
		{Records: 3, FirstSeq: max - 2}, // max-2, max-1, max
		{Records: 2, FirstSeq: 0},       // wrapped
		{Records: 2, FirstSeq: 2},
	} {
		b.ProducerID = 7
		before := p.Next
		r := p.Commit("f", IndexEntry{}, []BatchMeta{b})
		if r[0].Err != nil || r[0].Duplicate || p.Next != before+int64(b.Records) {
			t.Fatalf("seq %d (+%d): %+v, stored %d; want stored", b.FirstSeq, b.Records, r[0], p.Next-before)
		}
	}
	next := p.Next
	for _, b := range []BatchMeta{{Records: 2, FirstSeq: 0}, {Records: 3, FirstSeq: max - 2}} {
		b.ProducerID = 7
		if r := p.Commit("retry", IndexEntry{}, []BatchMeta{b}); !r[0].Duplicate || r[0].Err != nil {
			t.Errorf("an eager retry of seq %d: %+v; want a duplicate", b.FirstSeq, r[0])
		}
		if r := p.CommitLazy("retry", IndexEntry{}, []BatchMeta{b}); !r[0].Duplicate || r[0].Err != nil {
			t.Errorf("a lazy retry of seq %d: %+v; want a duplicate", b.FirstSeq, r[0])
		}
	}
	if p.Next != next {
		t.Fatalf("retries stored %d records", p.Next-next)
	}
	// Lazy batches, one spanning the wrap (max-1, max, 0), and their retries.
	q := NewPartition()
	for i, b := range []BatchMeta{{Records: 3, FirstSeq: max - 1}, {Records: 2, FirstSeq: 1}, {Records: 3, FirstSeq: max - 1}, {Records: 2, FirstSeq: 1}} {
		b.ProducerID, b.Epoch = 8, 1
		r := q.CommitLazy("f", IndexEntry{}, []BatchMeta{b})
		if retry := i >= 2; r[0].Duplicate != retry || r[0].Err != nil {
			t.Errorf("lazy seq %d (+%d), a retry: %v: %+v", b.FirstSeq, b.Records, retry, r[0])
		}
	}
	if q.Next != 5 {
		t.Errorf("lazy: %d records stored, want 5", q.Next)
	}
}

// TestRetentionOfRecordsWithoutTimestamps: an extent whose batches carry no timestamp (-1) is
// aged by the time its writer's file was written (runs/<run>/<unix ns>), as Kafka ages such a
// segment by its modification time, or, with no time to go by (a merged file), not at all;
// such records were older than any retention and dropped at the next pass.
func TestRetentionOfRecordsWithoutTimestamps(t *testing.T) {
	written := int64(1_800_000_000_000) // ms
	p := NewPartition()
	p.Commit(fmt.Sprintf("runs/1-a/%020d", written*1_000_000), IndexEntry{Length: 100}, []BatchMeta{{Records: 10, ProducerID: -1, MaxTimestamp: -1}})
	p.Commit("merged/t/0/x", IndexEntry{Length: 100}, []BatchMeta{{Records: 10, ProducerID: -1, MaxTimestamp: -1}})
	if got := p.Extents[0].AgeMs(); got != written {
		t.Errorf("AgeMs of a writer's file = %d; want its write time %d", got, written)
	}
	if got := p.Extents[1].AgeMs(); got != math.MaxInt64 {
		t.Errorf("AgeMs of a merged file = %d; want no age", got)
	}
	if got := p.RetentionStart(written+500, 1000, -1); got != 0 {
		t.Errorf("0.5 s after the write, retention.ms 1 s: start %d; want 0", got)
	}
	if got := p.RetentionStart(written+5000, 1000, -1); got != 10 {
		t.Errorf("5 s after the write, retention.ms 1 s: start %d; want 10 (the merged extent stays)", got)
	}
}
