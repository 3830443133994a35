package objects

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// TestMergeOnAnotherNode: the active controller's maintainer has a worker (another node's
// maintainer on the same store) write the merged object and commits it; a worker that fails
// leaves the merge to the controller; with no worker the controller merges. The records read
// back the same each time.
func TestMergeOnAnotherNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error // the worker's failure; nil: it merges
		want   string
	}{
		{"delegated", nil, "worker"},
		{"worker fails", errors.New("node 2: connection refused"), "controller"},
		{"no worker", ErrNoWorker, "controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := objstore.OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			fc := newFakeController(t, 1)
			w := newTestWriter(t, store, fc, nil)
			ref := controller.PartitionRef{Topic: topic}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for i := range 12 {
				b := testBatch(-1, -1, fmt.Sprint(i))
				h, _ := batch.ParseHeader(b)
				p := w.Append(ref, b, h, false)
				w.Flush()
				if _, err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			read := func() string {
				data, err := NewCache(store, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 0, 1<<20, true)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for len(data) > 0 {
					n, _ := batch.Split(data)
					h, _ := batch.ParseHeader(data[:n])
					batch.EachRecord(&h, data[:n], func(r *batch.Record) {
						out = append(out, fmt.Sprintf("%d=%s", h.BaseOffset+int64(r.OffsetDelta), r.Value))
					})
					data = data[n:]
				}
				return strings.Join(out, " ")
			}
			before := read()
			cfg := MaintainerConfig{MergeMinRun: 4, MergeKeepNewest: 4, MergeTarget: 1 << 20}
			worker := newTestMaintainer(store, fc, cfg)
			asked := 0
			cfg.MergeWorker = func(ctx context.Context, r controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error) {
				asked++
				if tc.answer != nil {
					return nil, tc.answer
				}
				return worker.MergeRun(ctx, r, run)
			}
			written := map[string]int{}
			m := newTestMaintainer(&countingPuts{Store: store, puts: written, who: "controller"}, fc, cfg)
			worker.store = &countingPuts{Store: store, puts: written, who: "worker"}
			n, err := m.Merge(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n != 8 || asked != 1 {
				t.Fatalf("merged %d extents, the worker asked %d times; want 8 merged, asked once", n, asked)
			}
			if written[tc.want] != 1 || len(written) != 1 {
				t.Fatalf("merged objects written by %v; want one by the %s", written, tc.want)
			}
			exts := fc.partition(0).Object(0).Extents
			if !strings.HasPrefix(exts[0].File, "merged/") || exts[0].Base != 0 || exts[0].Last != 7 {
				t.Fatalf("first extent %+v; want the merged object for offsets 0-7", exts[0])
			}
			if after := read(); after != before {
				t.Fatalf("records changed by the merge:\n%s\n%s", before, after)
			}
		})
	}
}

// countingPuts counts, per writer, the merged objects put through it.
type countingPuts struct {
	objstore.Store
	puts map[string]int
	who  string
}

func (c *countingPuts) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if strings.HasPrefix(key, "merged/") {
		c.puts[c.who]++
	}
	return c.Store.PutIfAbsent(ctx, key, body)
}

// TestCompactionOnAnotherNode: a compaction pass planned by the active controller runs on a
// worker (another node's maintainer on the same store, proposing through the same controller):
// the worker writes the compacted object and the pass removes what it would here; a failing
// worker leaves the pass to the controller.
func TestCompactionOnAnotherNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
		want   string
	}{
		{"delegated", nil, "worker"},
		{"worker fails", errors.New("node 2: connection refused"), "controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			configs := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}
			cfg := MaintainerConfig{MergeKeepNewest: 1}
			r := newCompactRig(t, configs, cfg)
			for i := range 6 {
				r.produce(t, ctx, [][]kv{{{key: "a", value: fmt.Sprint(i)}, {key: fmt.Sprint("k", i), value: "v"}}}, []int64{int64(1000 * (i + 1))}, batch.CodecNone)
			}
			written := map[string]int{}
			wcfg := cfg
			wcfg.Config = func(_, name string) string { return configs[name] }
			worker := newTestMaintainer(&countingPuts{Store: r.dir, puts: written, who: "worker"}, r.fc, wcfg)
			asked := 0
			cfg.Config = wcfg.Config
			cfg.CompactWorker = func(ctx context.Context, job CompactJob) (CompactStats, error) {
				asked++
				if tc.answer != nil {
					return CompactStats{}, tc.answer
				}
				var st CompactStats
				err := worker.CompactRun(ctx, job, &st)
				return st, err
			}
			m := newTestMaintainer(&countingPuts{Store: r.dir, puts: written, who: "controller"}, r.fc, cfg)
			st, err := m.Compact(ctx, time.UnixMilli(10000))
			if err != nil {
				t.Fatal(err)
			}
			if asked != 1 || st.Partitions != 1 || st.RecordsRemoved != 4 {
				t.Fatalf("asked %d, %+v; want one pass removing a=0 to a=3 (a=4 is the last value in the extents it may rewrite; the newest extent, a=5, is left)", asked, st)
			}
			if written[tc.want] != 1 || len(written) != 1 {
				t.Fatalf("compacted objects written by %v; want one by the %s", written, tc.want)
			}
			if _, read, _ := st.Local(); (tc.want == "worker") != (read == 0) {
				t.Fatalf("bytes this node read %d; want none when the worker did the pass", read)
			}
			_, recs := readKV(t, ctx, NewCache(r.dir, 1<<20, nil), r.fc, 0, nil)
			if got := latestValues(slices.Sorted(maps.Keys(recs)), recs); got["a"] != "5" || len(got) != 7 {
				t.Fatalf("latest values %v; want a=5 and k0..k5", got)
			}
		})
	}
}

// countingDeletes counts, per node, the objects deleted through it.
type countingDeletes struct {
	objstore.Store
	deletes map[string]int
	who     string
}

func (c *countingDeletes) Delete(ctx context.Context, key string) error {
	c.deletes[c.who]++
	return c.Store.Delete(ctx, key)
}

// gcRig is an object partition of 12 one-batch files whose 8 oldest a merge replaced: 8 journal
// files and no merged object are garbage.
func gcRig(t *testing.T, ctx context.Context) (objstore.Store, *fakeController, *controller.Image) {
	store := testDir(t)
	fc := newFakeController(t, 1)
	w := newTestWriter(t, store, fc, nil)
	for i := range 12 {
		b := testBatch(-1, -1, fmt.Sprint(i))
		h, _ := batch.ParseHeader(b)
		p := w.Append(controller.PartitionRef{Topic: topic}, b, h, false)
		w.Flush()
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := fc.img.Clone()
	m := newTestMaintainer(store, fc, MaintainerConfig{MergeMinRun: 4, MergeKeepNewest: 4, MergeTarget: 1 << 20})
	if n, err := m.Merge(ctx); err != nil || n != 8 {
		t.Fatalf("merged %d extents, %v; want 8", n, err)
	}
	return store, fc, before
}

// TestGCOnAnotherNode: a garbage collection pass planned by the active controller runs on a
// worker (another node's maintainer on the same store) which deletes the merged-away files once
// its passes have seen them unreferenced for the grace period; a failing worker, or none, leaves
// the pass to the controller.
func TestGCOnAnotherNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
		want   string
	}{
		{"delegated", nil, "worker"},
		{"worker fails", errors.New("node 2: connection refused"), "controller"},
		{"no worker", ErrNoWorker, "controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			store, fc, _ := gcRig(t, ctx)
			deleted := map[string]int{}
			worker := newTestMaintainer(&countingDeletes{Store: store, deletes: deleted, who: "worker"}, fc, MaintainerConfig{})
			now := time.Now()
			asked := 0
			cfg := MaintainerConfig{GCWorker: func(ctx context.Context, job GCJob) (int, error) {
				asked++
				if tc.answer != nil {
					return 0, tc.answer
				}
				return worker.GCRun(ctx, job, now)
			}}
			m := newTestMaintainer(&countingDeletes{Store: store, deletes: deleted, who: "controller"}, fc, cfg)
			m.collect(ctx, now) // the grace period starts
			now = now.Add(11 * time.Minute)
			m.collect(ctx, now)
			if asked != 2 {
				t.Fatalf("the worker was asked %d times; want 2", asked)
			}
			if deleted[tc.want] != 8 || len(deleted) != 1 {
				t.Fatalf("objects deleted by %v; want the 8 merged-away files by the %s", deleted, tc.want)
			}
			data, err := NewCache(store, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 0, 1<<20, true)
			if err != nil || len(data) == 0 {
				t.Fatalf("reading after GC: %d bytes, %v", len(data), err)
			}
		})
	}
}

// TestGCAfterAnotherNodesPasses: a node counts the time an object has been unreferenced only over
// consecutive passes of one planner: after a pass it did not run (the planner collected itself,
// or asked another node), or a pass of another planner (a new active controller), its grace
// periods start afresh, since a file may have been referenced and dropped again meanwhile.
func TestGCAfterAnotherNodesPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store, fc, _ := gcRig(t, ctx)
	w := newTestMaintainer(store, fc, MaintainerConfig{})
	t0 := time.Now()
	for _, step := range []struct {
		job  GCJob
		at   time.Duration
		want int
	}{
		{GCJob{"1-a", 1}, 0, 0},
		{GCJob{"1-a", 3}, 11 * time.Minute, 0}, // pass 2 ran elsewhere: the grace starts again
		{GCJob{"2-b", 4}, 22 * time.Minute, 0}, // another planner: again
		{GCJob{"2-b", 5}, 30 * time.Minute, 0}, // consecutive, but within the grace period
		{GCJob{"2-b", 6}, 33 * time.Minute, 8}, // consecutive, 11 minutes after pass 4
	} {
		n, err := w.GCRun(ctx, step.job, t0.Add(step.at))
		if err != nil || n != step.want {
			t.Fatalf("pass %+v at +%v deleted %d, %v; want %d", step.job, step.at, n, err, step.want)
		}
	}
}

// TestGCWaitsForTheControllersImage: a worker whose image trails the controller's (it has not
// applied the merge yet, so the merged object looks unreferenced) catches up through the Barrier
// before it collects: it deletes the merged-away files, never the merged object.
func TestGCWaitsForTheControllersImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	store, fc, stale := gcRig(t, ctx)
	caughtUp := false
	cfg := MaintainerConfig{Barrier: func(context.Context) error { caughtUp = true; return nil }}
	w := newTestMaintainer(store, fc, cfg)
	w.cfg.Image = func() *controller.Image {
		if caughtUp {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return fc.img.Clone()
		}
		return stale
	}
	now := time.Now()
	for i, at := range []time.Duration{0, 11 * time.Minute} {
		caughtUp = false
		if _, err := w.GCRun(ctx, GCJob{"1-a", uint64(i + 1)}, now.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	data, err := NewCache(store, 1<<20, nil).Read(ctx, fc.partition(0).Object(0), 0, 1<<20, true)
	if err != nil || len(data) == 0 {
		t.Fatalf("reading after GC: %d bytes, %v", len(data), err)
	}
	objs, err := store.List(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var journal, merged int
	for _, o := range objs {
		journal += b2i(strings.HasPrefix(o.Key, "journal/"))
		merged += b2i(strings.HasPrefix(o.Key, "merged/"))
	}
	if journal != 4 || merged != 1 {
		t.Fatalf("%d journal files and %d merged objects left; want the 4 newest files and the merged object", journal, merged)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
