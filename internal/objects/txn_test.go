package objects

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
)

// TestTransactionsOnObjects: transactional batches and their markers on an object partition, as
// a read_committed fetch, compaction and merge see them: markers are read inline until merged
// into an object; a read below the last stable offset stops at the open transaction;
// compaction cleans only below it, drops the aborted records (which supersede nothing) and
// keeps the markers.
func TestTransactionsOnObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	configs := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "delete.retention.ms": "1000", "retention.ms": "-1"}
	r := newCompactRig(t, configs, MaintainerConfig{MergeKeepNewest: 1, MergeTarget: 1})
	produce, marker, read := txnRig(t, ctx, r)

	produce(-1, kv{key: "a", value: "1"})                          // 0
	produce(5, kv{key: "a", value: "2"}, kv{key: "b", value: "1"}) // 1-2, aborted
	if off := marker(5, false); off != 3 {
		t.Fatalf("abort marker at %d; want 3", off)
	}
	produce(6, kv{key: "b", value: "2"})  // 4, committed
	marker(6, true)                       // 5
	produce(7, kv{key: "c", value: "1"})  // 6, open
	produce(-1, kv{key: "d", value: "1"}) // 7
	p := r.fc.partition(0).Object(0)
	if p.LastStable() != 6 || len(p.AbortedIn(0, 6)) != 1 {
		t.Fatalf("last stable %d, aborted %v; want 6 and one", p.LastStable(), p.Aborted)
	}
	const committed = "0:a=1 1:a=2 2:b=1 3:ABORT(5) 4:b=2 5:COMMIT(6)"
	if got := read(6); got != committed {
		t.Fatalf("read below the last stable offset:\n got %s\nwant %s", got, committed)
	}
	if got := read(p.Next); got != committed+" 6:c=1 7:d=1" {
		t.Fatalf("read to the end: %s", got)
	}

	// Compaction: only below the open transaction; the aborted records go, a=1 (superseded
	// only by an aborted a=2) stays, the markers stay.
	st, err := r.m.Compact(ctx, time.UnixMilli(10_000))
	if err != nil {
		t.Fatal(err)
	}
	if st.RecordsRemoved != 2 {
		t.Errorf("compaction removed %d records; want the 2 aborted ones", st.RecordsRemoved)
	}
	const compacted = "0:a=1 3:ABORT(5) 4:b=2 5:COMMIT(6) 6:c=1 7:d=1"
	if got := read(8); got != compacted {
		t.Fatalf("after compaction:\n got %s\nwant %s", got, compacted)
	}
	for _, e := range r.fc.partition(0).Object(0).Extents {
		if e.Last < 6 && e.Inline != nil {
			t.Errorf("marker extent %d still inline after compaction rewrote its run", e.Base)
		}
		if e.Base >= 6 && e.Clean {
			t.Errorf("extent %d at or past the last stable offset compacted", e.Base)
		}
		// The ABORT's transaction has no record left: its marker got a delete horizon.
		if e.Base <= 3 && e.Last >= 3 && e.Horizon != 11_000 {
			t.Errorf("the extent of the emptied transaction's ABORT has horizon %d; want 11000", e.Horizon)
		}
	}

	// The transaction commits: the next pass may clean its record too, which c=2 supersedes.
	marker(7, true)                       // 8
	produce(-1, kv{key: "c", value: "2"}) // 9
	produce(-1, kv{key: "e", value: "1"}) // 10: active
	if _, err := r.m.Compact(ctx, time.UnixMilli(20_000)); err != nil {
		t.Fatal(err)
	}
	// Past the ABORT's horizon it goes, and its index entry with it; the COMMIT of 7 has no
	// record left now (c=2 superseded it) and gets its horizon.
	if got, want := read(11), "0:a=1 4:b=2 5:COMMIT(6) 7:d=1 8:COMMIT(7) 9:c=2 10:e=1"; got != want {
		t.Fatalf("after the commit and another pass:\n got %s\nwant %s", got, want)
	}
	if p := r.fc.partition(0).Object(0); len(p.Aborted) != 0 {
		t.Fatalf("aborted-transaction index %v after its ABORT was dropped; want empty", p.Aborted)
	}
	if _, err := r.m.Compact(ctx, time.UnixMilli(21_500)); err != nil {
		t.Fatal(err)
	}
	if got, want := read(11), "0:a=1 4:b=2 5:COMMIT(6) 7:d=1 9:c=2 10:e=1"; got != want {
		t.Fatalf("past the COMMIT's horizon:\n got %s\nwant %s", got, want)
	}
}

// TestMergeWritesMarkers: a merge writes inline markers into its object with their neighbours;
// reads are the same before and after.
func TestMergeWritesMarkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := newCompactRig(t, map[string]string{"cleanup.policy": "delete"}, MaintainerConfig{MergeKeepNewest: 1, MergeMinRun: 2, MergeSmall: 1 << 20, MergeTarget: 1 << 20})
	produce, marker, read := txnRig(t, ctx, r)
	produce(5, kv{key: "a", value: "1"})  // 0
	marker(5, false)                      // 1
	produce(6, kv{key: "b", value: "1"})  // 2
	marker(6, true)                       // 3
	produce(-1, kv{key: "c", value: "1"}) // 4: the newest, left alone
	const want = "0:a=1 1:ABORT(5) 2:b=1 3:COMMIT(6) 4:c=1"
	if got := read(5); got != want {
		t.Fatalf("before the merge: %s", got)
	}
	if n, err := r.m.Merge(ctx); err != nil || n != 4 {
		t.Fatalf("merge: %d extents, %v; want 4", n, err)
	}
	exts := r.fc.partition(0).Object(0).Extents
	if len(exts) != 2 || exts[0].Inline != nil || exts[0].File == "" || exts[0].Last != 3 {
		t.Fatalf("extents after the merge: %+v; want one object for 0-3 and the newest", exts)
	}
	if got := read(5); got != want {
		t.Fatalf("after the merge:\n got %s\nwant %s", got, want)
	}
}

// txnRig returns a compaction rig's helpers for transactions: produce a batch (transactional
// for producer pid >= 0) as one file and return its base offset; write a marker and return its
// offset; read what a fetch from 0 below upto holds, as "offset:key=value" per record and
// "offset:COMMIT/ABORT(pid)" per marker.
func txnRig(t *testing.T, ctx context.Context, r *compactRig) (func(int64, ...kv) int64, func(int64, bool) int64, func(int64) string) {
	produce := func(pid int64, recs ...kv) int64 {
		t.Helper()
		b := kvBatch(batch.CodecNone, 100, recs...)
		if pid >= 0 { // a transactional batch of producer pid, epoch 0, its first sequence 0
			h, _ := batch.ParseHeader(b)
			body, _ := batch.Records(&h, b)
			h.Attributes |= batch.AttrTransactional
			h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, 0, 0
			b = batch.AppendBatch(nil, h, body)
		}
		h, _ := batch.ParseHeader(b)
		p := r.w.Append(controller.PartitionRef{Topic: topic}, b, h, false)
		r.w.Flush()
		base, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return base
	}
	marker := func(pid int64, commit bool) int64 {
		t.Helper()
		r.fc.mu.Lock()
		defer r.fc.mu.Unlock()
		r.fc.index++
		res := controller.Apply(r.fc.img, r.fc.index, &controller.Command{Op: controller.OpObjectMarker, ObjectMarker: &controller.ObjectMarker{
			PartitionRef: controller.PartitionRef{Topic: topic}, ProducerID: pid, Commit: commit, Timestamp: 100}})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res.Value
	}
	// read returns what a fetch from 0 below upto holds: "offset:key=value" per record,
	// "offset:COMMIT/ABORT(pid)" per marker.
	read := func(upto int64) string {
		t.Helper()
		p := r.fc.partition(0).Object(0)
		data, err := NewCache(r.dir, 1<<20, nil).ReadBelow(ctx, p, 0, upto, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for len(data) > 0 {
			n, _ := batch.Split(data)
			h, err := batch.ValidateStored(data[:n])
			if err != nil {
				t.Fatal(err)
			}
			if h.IsControl() {
				c, err := batch.ParseControl(&h, data[:n])
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d:%s(%d)", h.BaseOffset, map[int16]string{0: "ABORT", 1: "COMMIT"}[c.Type], h.ProducerID))
			} else if err := batch.EachRecord(&h, data[:n], func(rec *batch.Record) {
				out = append(out, fmt.Sprintf("%d:%s=%s", h.BaseOffset+int64(rec.OffsetDelta), rec.Key, rec.Value))
			}); err != nil {
				t.Fatal(err)
			}
			data = data[n:]
		}
		return strings.Join(out, " ")
	}
	return produce, marker, read
}
