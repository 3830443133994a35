package objects

import (
	"context"
	"errors"
	"fmt"
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
		{"no worker", ErrNoMergeWorker, "controller"},
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
