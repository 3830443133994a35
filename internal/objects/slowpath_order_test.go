package objects

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objstore"
)

// A live writer (node 1's current run) is behind with its commits (the controller came back after a Ripcord outage longer than 30 s; the writer drains
// its queue). Its files 1-3 hold an idempotent producer's batches 0, 1, 2, acknowledged in that
// order; the PUT of file 2 finished after file 3's (writes run concurrently), so the store
// dates file 2 later. The slow path takes a live writer's files only once 30 s overdue: it
// committed files 1 and 3 and left file 2 for later, so the producer's batch 2 got a lower
// offset than its batch 1, on a healthy process (docs/object-topics.md §9.1: "On one healthy
// process, files are committed in order, so order per producer and partition holds").
func TestSlowPathKeepsALiveWritersOrder(t *testing.T) {
	root := t.TempDir()
	dir, err := objstore.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	fc := newFakeController(t, 1)
	fc.refuse = 1 << 30 // the writer's own commits do not get through (yet)
	w := startWriter(t, fc, WriterConfig{Store: dir, BatchTimeout: time.Hour, LazyCommitPatience: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for seq := range int32(3) {
		b := testBatch(5, seq, fmt.Sprint(seq))
		h, _ := batch.ParseHeader(b)
		p := w.Append(controller.PartitionRef{Topic: topic}, b, h, true)
		w.Flush()
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
	}
	now := time.Now()
	for seq, age := range map[uint64]time.Duration{1: 40 * time.Second, 2: 29 * time.Second, 3: 31 * time.Second} {
		at := now.Add(-age)
		if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(JournalKey("1-test", seq))), at, at); err != nil {
			t.Fatal(err)
		}
	}
	m := newTestMaintainer(dir, fc, MaintainerConfig{})
	for i := range 2 {
		if _, err := m.SlowPath(ctx, now.Add(time.Duration(i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	p := fc.partition(0).Object(0)
	if p.Next != 3 {
		t.Fatalf("partition next %d; want the three batches committed", p.Next)
	}
	data, err := NewCache(dir, 1<<20, nil).Read(ctx, p, 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int32
	for len(data) > 0 {
		n, err := batch.Split(data)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := batch.ParseHeader(data[:n])
		seqs = append(seqs, h.BaseSequence)
		data = data[n:]
	}
	if fmt.Sprint(seqs) != "[0 1 2]" {
		t.Fatalf("the producer's batches (sequences) at offsets 0, 1, 2: %v; want [0 1 2], the order they were acknowledged in by one live process", seqs)
	}
}
