package objtopic

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
)

// TestTransactions: transactional batches open a transaction whose first offset bounds the last
// stable offset; markers are inline extents of one control batch at their own offset; an abort
// enters the aborted-transaction index; the producer-state rules (Kafka's) refuse what they
// refuse; retention and the snapshot keep the index consistent.
func TestTransactions(t *testing.T) {
	p := NewPartition()
	e := IndexEntry{Length: 100}
	commit := func(file string, b ...BatchMeta) []BatchResult { return p.Commit(file, e, b) }

	commit("f0", BatchMeta{Records: 2, ProducerID: -1})                                           // 0-1
	r := commit("f1", BatchMeta{Records: 3, ProducerID: 7, Transactional: true, MaxTimestamp: 5}) // 2-4
	if r[0].Err != nil || r[0].Base != 2 {
		t.Fatalf("a transactional batch: %+v", r)
	}
	commit("f2", BatchMeta{Records: 1, ProducerID: -1}) // 5
	if got := p.LastStable(); got != 2 {
		t.Errorf("last stable offset %d with producer 7's transaction open from 2; want 2", got)
	}
	if first, epoch, ok := p.OpenTransaction(7); !ok || first != 2 || epoch != 0 {
		t.Errorf("open transaction of 7: %d %d %v", first, epoch, ok)
	}
	// The same producer's non-transactional batch while its transaction is open: refused.
	if r := commit("f3", BatchMeta{Records: 1, ProducerID: 7, FirstSeq: 3}); !errors.Is(r[0].Err, kerr.InvalidTxnState) {
		t.Errorf("a non-transactional batch inside an open transaction: %+v", r)
	}
	// A batch of a newer epoch while this one is open: retriable, the marker is on the way.
	if r := commit("f3", BatchMeta{Records: 1, ProducerID: 7, Epoch: 1, Transactional: true}); !errors.Is(r[0].Err, kerr.NotEnoughReplicas) {
		t.Errorf("a next-epoch batch before the marker: %+v", r)
	}
	// A lazily sequenced section cannot hold one (acknowledged before any check).
	if r := p.CommitLazy("f3", e, []BatchMeta{{Records: 1, ProducerID: 9, Transactional: true}}); !errors.Is(r[0].Err, kerr.InvalidTxnState) {
		t.Errorf("a lazy transactional batch: %+v", r)
	}
	off, err := p.AppendMarker(txn.Marker{ProducerID: 7, Epoch: 0, Commit: true, CoordinatorEpoch: 3}, 1000)
	if err != nil || off != 6 {
		t.Fatalf("commit marker: %d, %v; want offset 6", off, err)
	}
	if got := p.LastStable(); got != 7 || len(p.Aborted) != 0 {
		t.Errorf("after the commit: last stable %d, aborted %v; want 7, none", got, p.Aborted)
	}
	m := p.Extents[len(p.Extents)-1]
	if m.File != "" || m.Base != 6 || m.Last != 6 || int(m.Length) != len(m.Inline) || m.MaxTimestamp != 1000 {
		t.Errorf("marker extent %+v", m)
	}
	var seen []string
	if err := EachBatch(m, m.Inline, func(b []byte, h batch.Header, base int64) error {
		c, err := batch.ParseControl(&h, b)
		seen = append(seen, fmt.Sprintf("%d %d/%d type %d coord %d", base, h.ProducerID, h.ProducerEpoch, c.Type, c.CoordinatorEpoch))
		return err
	}); err != nil || fmt.Sprint(seen) != "[6 7/0 type 1 coord 3]" {
		t.Errorf("marker batch: %v, %v", seen, err)
	}

	// Two transactions, one aborted, one still open: the index and the last stable offset.
	commit("f4", BatchMeta{Records: 2, ProducerID: 8, Transactional: true})                                   // 7-8
	commit("f5", BatchMeta{Records: 2, ProducerID: 9, Transactional: true})                                   // 9-10
	if _, err := p.AppendMarker(txn.Marker{ProducerID: 8, Epoch: 0, CoordinatorEpoch: 1}, 1001); err != nil { // 11
		t.Fatal(err)
	}
	if got := p.LastStable(); got != 9 {
		t.Errorf("last stable %d with 9's transaction open from 9; want 9", got)
	}
	if want := []AbortedTxn{{ProducerID: 8, First: 7, Last: 11, Stable: 9}}; fmt.Sprint(p.Aborted) != fmt.Sprint(want) {
		t.Errorf("aborted %v; want %v", p.Aborted, want)
	}
	if got := p.AbortedIn(0, 9); len(got) != 1 {
		t.Errorf("aborted in [0, 9): %v", got)
	}
	if got := p.AbortedIn(12, 12); len(got) != 0 {
		t.Errorf("aborted in [12, 12): %v", got)
	}
	// Markers the producer state refuses: an older producer epoch, an older coordinator epoch.
	if _, err := p.AppendMarker(txn.Marker{ProducerID: 9, Epoch: 0, Commit: true, CoordinatorEpoch: 0}, 1002); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendMarker(txn.Marker{ProducerID: 7, Epoch: 0, Commit: true, CoordinatorEpoch: 2}, 1003); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Errorf("a fenced coordinator's marker: %v", err)
	}
	commit("f6", BatchMeta{Records: 1, ProducerID: 9, Epoch: 2, Transactional: true}) // 13
	if _, err := p.AppendMarker(txn.Marker{ProducerID: 9, Epoch: 1, CoordinatorEpoch: 0}, 1004); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("an older epoch's marker: %v", err)
	}
	// A zombie's batch (an older epoch) while the newer transaction is open: fenced, not retried.
	if r := commit("f7", BatchMeta{Records: 1, ProducerID: 9, Epoch: 1, FirstSeq: 1, Transactional: true}); !errors.Is(r[0].Err, kerr.InvalidProducerEpoch) {
		t.Errorf("an older epoch's batch inside a newer open transaction: %+v", r)
	}
	next := p.Next

	// The snapshot keeps the open transaction, the index and the inline markers.
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Partition
	if err := json.Unmarshal(js, &q); err != nil {
		t.Fatal(err)
	}
	if q.LastStable() != 13 || fmt.Sprint(q.Aborted) != fmt.Sprint(p.Aborted) || string(q.Extents[4].Inline) != string(p.Extents[4].Inline) {
		t.Errorf("decoded: last stable %d, aborted %v, marker %x", q.LastStable(), q.Aborted, q.Extents[4].Inline)
	}
	// Retention drops the aborted entries below the new start, and reports only files.
	dropped, err := q.Trim(12)
	if err != nil || fmt.Sprint(dropped) != "[f0 f1 f2 f4 f5]" || len(q.Aborted) != 0 {
		t.Errorf("trim: dropped %v, %v, aborted %v", dropped, err, q.Aborted)
	}
	if q.Next != next {
		t.Errorf("next %d; want %d", q.Next, next)
	}
}

// TestAbortedInAgainstAScan: AbortedIn returns exactly the aborted transactions overlapping
// [from, upto), compared with a scan of the whole index, over many random histories.
func TestAbortedInAgainstAScan(t *testing.T) {
	for seed := range 50 {
		p := NewPartition()
		x := uint64(seed)*2654435761 + 1
		rnd := func(n int) int { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return int(x % uint64(n)) }
		seq := map[int64]int32{}
		for range 200 {
			pid := int64(rnd(4))
			if _, _, open := p.OpenTransaction(pid); open && rnd(3) == 0 {
				if _, err := p.AppendMarker(txn.Marker{ProducerID: pid, Commit: rnd(2) == 0}, 1); err != nil {
					t.Fatal(err)
				}
				continue
			}
			n := int32(1 + rnd(3))
			if r := p.Commit("f", IndexEntry{}, []BatchMeta{{Records: n, ProducerID: pid, Transactional: true, FirstSeq: seq[pid]}}); r[0].Err != nil {
				t.Fatal(r[0].Err)
			}
			seq[pid] += n
		}
		if len(p.Aborted) < 5 {
			t.Fatalf("seed %d: only %d aborted transactions", seed, len(p.Aborted))
		}
		lso := p.LastStable()
		for from := int64(0); from <= lso; from++ {
			var want []AbortedTxn
			for _, a := range p.Aborted {
				if a.Last >= from && a.First < lso {
					want = append(want, a)
				}
			}
			if got := p.AbortedIn(from, lso); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("seed %d: aborted in [%d, %d): %v; want %v", seed, from, lso, got, want)
			}
		}
	}
}
