package logstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// txnBatch is a transactional batch of n records from producer pid at epoch, starting at seq.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	b := idemBatch(t, pid, epoch, seq, n)
	h, _ := batch.ParseHeader(b)
	h.Attributes |= batch.AttrTransactional
	recs, _ := batch.Records(&h, b)
	return batch.AppendBatch(nil, h, append([]byte(nil), recs...))
}

// TestTransactionalLog: open transactions bound the last stable offset, markers close them, an
// ABORT lands in the aborted-transaction index, and a replica appending the leader's batches
// ends with the same state.
func TestTransactionalLog(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/p")
	l := e.open(testConfig())
	defer l.Close()
	appendIdem(t, l, txnBatch(t, 1, 0, 0, 2), 0, false) // 0-1: txn of 1
	appendAll(t, l, idemBatch(t, -1, -1, -1, 1))        // 2: plain
	appendIdem(t, l, txnBatch(t, 2, 0, 0, 2), 3, false) // 3-4: txn of 2
	appendIdem(t, l, txnBatch(t, 1, 0, 2, 1), 5, false) // 5: txn of 1
	if got := l.FirstUnstableOffset(); got != 0 {
		t.Fatalf("FirstUnstableOffset() = %d; want 0", got)
	}
	if got := l.LastStable(4); got != 0 {
		t.Errorf("LastStable(4) = %d; want 0", got)
	}
	if _, err := l.AppendBatch(idemBatch(t, 1, 0, 3, 1), 0); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("plain batch inside a transaction = %v; want INVALID_TXN_STATE", err)
	}
	ctl := batch.AppendControl(nil, 1, 0, batch.Control{Type: batch.ControlCommit}, 0)
	if _, err := l.AppendBatch(ctl, 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("a producer's control batch = %v; want INVALID_RECORD", err)
	}
	if off, err := l.AppendMarker(txn.Marker{ProducerID: 1, Epoch: 0, Commit: false, CoordinatorEpoch: 3}, 0, 2000); err != nil || off != 6 {
		t.Fatalf("AppendMarker(abort 1) = %d, %v; want 6", off, err)
	}
	if got := l.FirstUnstableOffset(); got != 3 {
		t.Errorf("FirstUnstableOffset() after aborting 1 = %d; want 3", got)
	}
	if _, err := l.AppendMarker(txn.Marker{ProducerID: 1, Epoch: 0, CoordinatorEpoch: 2}, 0, 2000); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Errorf("marker from an older coordinator = %v; want TRANSACTION_COORDINATOR_FENCED", err)
	}
	if off, err := l.AppendMarker(txn.Marker{ProducerID: 2, Epoch: 0, Commit: true}, 0, 2000); err != nil || off != 7 {
		t.Fatalf("AppendMarker(commit 2) = %d, %v; want 7", off, err)
	}
	if got := l.FirstUnstableOffset(); got != -1 {
		t.Errorf("FirstUnstableOffset() with nothing open = %d; want -1", got)
	}
	want := []txn.Aborted{{ProducerID: 1, First: 0, Last: 6}}
	for _, q := range []struct {
		from, upto int64
		want       []txn.Aborted
	}{{0, 8, want}, {6, 8, want}, {7, 8, nil}, {0, 1, want}} {
		if got, err := l.AbortedTransactions(q.from, q.upto); err != nil || !slices.Equal(got, q.want) {
			t.Errorf("AbortedTransactions(%d, %d) = %v, %v; want %v", q.from, q.upto, got, err, q.want)
		}
	}

	// A follower fed the leader's stored batches ends in the same state.
	f := newEnv(t, vfs.NewMem(), "/f").open(testConfig())
	defer f.Close()
	for _, b := range readAll(t, l) {
		if _, _, err := f.AppendReplica(append([]byte(nil), b...)); err != nil {
			t.Fatalf("AppendReplica = %v", err)
		}
	}
	if got, _ := f.AbortedTransactions(0, 8); !slices.Equal(got, want) || f.FirstUnstableOffset() != -1 {
		t.Errorf("follower: aborted %v, first unstable %d; want %v, -1", got, f.FirstUnstableOffset(), want)
	}
}

// txnItem is one appended batch of the randomized test, as the model sees it.
type txnItem struct {
	offset, last int64
	pid          int64 // -1: plain
	marker       int   // 0: data, 1: commit, 2: abort
	seq          int32 // data: first sequence
}

// modelTxns replays items as the log's rules say: the first unstable offset and the aborted list.
func modelTxns(items []txnItem) (int64, []txn.Aborted) {
	open := map[int64]int64{}
	var aborted []txn.Aborted
	for _, it := range items {
		switch {
		case it.pid < 0:
		case it.marker == 0:
			if _, ok := open[it.pid]; !ok {
				open[it.pid] = it.offset
			}
		default:
			if first, ok := open[it.pid]; ok {
				if it.marker == 2 {
					aborted = append(aborted, txn.Aborted{ProducerID: it.pid, First: first, Last: it.offset})
				}
				delete(open, it.pid)
			}
		}
	}
	fu := int64(-1)
	for _, f := range open {
		if fu < 0 || f < fu {
			fu = f
		}
	}
	return fu, aborted
}

// TestTransactionalLogRandomized: random transactional appends, markers, plain batches, clean
// restarts, power losses (after a sync or not) and truncations, checked after every step against a model
// that replays what the log holds.
func TestTransactionalLogRandomized(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			mem := vfs.NewMem()
			e := newEnv(t, mem, "/p")
			cfg := testConfig()
			cfg.SegmentBytes = 2000 // rolls, so snapshots, every few batches
			l := e.open(cfg)
			defer func() { l.Close() }()
			var items []txnItem
			nextSeq := func(pid int64) int32 {
				for i := len(items) - 1; i >= 0; i-- {
					if it := items[i]; it.pid == pid && it.marker == 0 {
						return it.seq + int32(it.last-it.offset) + 1
					}
				}
				return 0
			}
			survive := func() {
				end := l.EndOffset()
				items = slices.DeleteFunc(items, func(it txnItem) bool { return it.offset >= end })
			}
			for step := range 300 {
				switch r := rng.IntN(100); {
				case r < 45:
					pid := int64(1 + rng.IntN(3))
					n := 1 + rng.IntN(3)
					seq := nextSeq(pid)
					res, err := l.AppendBatch(txnBatch(t, pid, 0, seq, n), 1)
					if err != nil {
						t.Fatalf("step %d: AppendBatch = %v", step, err)
					}
					items = append(items, txnItem{offset: res.First, last: res.Last, pid: pid, seq: seq})
				case r < 55:
					first, last, err := l.Append(idemBatch(t, -1, -1, -1, 1), 1)
					if err != nil {
						t.Fatal(err)
					}
					items = append(items, txnItem{offset: first, last: last, pid: -1})
				case r < 80:
					pid := int64(1 + rng.IntN(3))
					commit := rng.IntN(2) == 0
					off, err := l.AppendMarker(txn.Marker{ProducerID: pid, Commit: commit}, 1, 1000)
					if err != nil {
						t.Fatalf("step %d: AppendMarker = %v", step, err)
					}
					m := 2
					if commit {
						m = 1
					}
					items = append(items, txnItem{offset: off, last: off, pid: pid, marker: m})
				case r < 85:
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					l = e.open(cfg)
				case r < 90:
					if rng.IntN(2) == 0 {
						if err := l.WaitDurable(t.Context(), l.EndOffset()); err != nil {
							t.Fatal(err)
						}
					}
					e.fs = mem.Crash(vfs.CrashOptions{})
					mem = e.fs.(*vfs.MemFS)
					l.Close()
					l = e.open(cfg)
					survive()
				default:
					if len(items) > 0 {
						cut := items[rng.IntN(len(items))].offset
						if _, err := l.Truncate(cut); err != nil {
							t.Fatalf("step %d: Truncate(%d) = %v", step, cut, err)
						}
						survive()
					}
				}
				wantFU, wantAborted := modelTxns(items)
				if got := l.FirstUnstableOffset(); got != wantFU {
					t.Fatalf("step %d: FirstUnstableOffset() = %d; the model says %d", step, got, wantFU)
				}
				end := l.EndOffset()
				from := int64(0)
				if end > 0 {
					from = rng.Int64N(end)
				}
				upto := from + rng.Int64N(end-from+1)
				var want []txn.Aborted
				for _, a := range wantAborted {
					if a.Last >= from && a.First < upto {
						want = append(want, a)
					}
				}
				got, err := l.AbortedTransactions(from, upto)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("step %d: AbortedTransactions(%d, %d) = %v, %v; the model says %v", step, from, upto, got, err, want)
				}
			}
		})
	}
}

// TestAbortedIndexRetentionAndTornTail: retention trims the index once most entries are below
// the log start; a torn tail is cut at open and derived again from the log.
func TestAbortedIndexRetentionAndTornTail(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/p")
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	l := e.open(cfg)
	var want []txn.Aborted
	for i := range 40 {
		first, _ := l.AppendBatch(txnBatch(t, 5, 0, int32(i), 1), 1)
		off, err := l.AppendMarker(txn.Marker{ProducerID: 5}, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, txn.Aborted{ProducerID: 5, First: first.First, Last: off})
	}
	size := func() int64 {
		f, err := mem.Open("/p/" + abortedName)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		return fi.Size()
	}
	if got := size(); got != abortedHeader+40*abortedEntrySize {
		t.Fatalf("index size = %d; want 40 entries", got)
	}
	if err := l.AdvanceStartOffset(want[30].First); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != abortedHeader+10*abortedEntrySize {
		t.Errorf("index size after retention = %d; want the last 10 entries", got)
	}
	if got, err := l.AbortedTransactions(want[30].First, l.EndOffset()); err != nil || !slices.Equal(got, want[30:]) {
		t.Errorf("AbortedTransactions after retention = %v, %v; want %v", got, err, want[30:])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := mem.OpenReadWrite("/p/" + abortedName)
	f.WriteAt([]byte("torn entry"), size())
	f.Close()
	l = e.open(cfg)
	defer l.Close()
	if got, err := l.AbortedTransactions(want[30].First, l.EndOffset()); err != nil || !slices.Equal(got, want[30:]) {
		t.Errorf("AbortedTransactions after a torn tail = %v, %v; want %v", got, err, want[30:])
	}
}

// FuzzAbortedIndex: any file content opens without panicking, keeps only whole valid entries,
// and answers queries.
func FuzzAbortedIndex(f *testing.F) {
	good := []byte(abortedMagic + "\x00\x00\x00\x01")
	good = abortedEntry{Aborted: txn.Aborted{ProducerID: 1, First: 2, Last: 5}, LastStable: 6}.encode(good)
	f.Add(good)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/p", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileSync(mem, "/p/"+abortedName, b); err != nil {
			t.Fatal(err)
		}
		x, err := openAbortedIndex(mem, "/p")
		if err != nil {
			t.Fatal(err)
		}
		defer x.close()
		for i := range x.n {
			if _, err := x.entry(i); err != nil {
				t.Fatalf("entry %d kept after open: %v", i, err)
			}
		}
		if _, err := x.collect(0, 1<<62); err != nil {
			t.Fatalf("collect = %v", err)
		}
	})
}
