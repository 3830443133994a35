package objects

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
)

// TestCloseInRipcordAfterEagerGivenUp: an eager file waits for its commit, the process
// enters Ripcord mode (its eager batch is failed at once and the file is turned into its slow
// form), the controller stays away, and the process shuts down. Close cancels the writer's
// context; commit() then fails the file again, closing the eager Pending's channel a second time.
func TestCloseInRipcordAfterEagerGivenUp(t *testing.T) {
	dir := testDir(t)
	fc := newFakeController(t, 1)
	fc.refuse = 1 << 30
	var ripcord atomic.Bool
	w := NewWriter(WriterConfig{Store: dir, Commit: fc.commit, Node: 1, Run: "1-test", Incarnation: func() uint64 { return 1 },
		BatchTimeout: time.Hour, Ripcording: ripcord.Load})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := testBatch(5, 0, "e")
	h, _ := batch.ParseHeader(b)
	p := w.Append(controller.PartitionRef{Topic: topic}, b, h, false)
	w.Flush()
	time.Sleep(100 * time.Millisecond)
	ripcord.Store(true)
	if _, err := p.Wait(ctx); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("eager batch in Ripcord mode: %v", err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer ccancel()
	w.Close(cctx) // panicked in commitLoop (close of closed channel): a second answer to the failed eager batches
	t.Log("closed cleanly")
}

// TestCloseAfterStaleMixedFile: the same double answer without Ripcord: a file with an eager
// and a lazy section gets ErrStaleWriter (the node registered again), its eager batch is failed
// and the file retried in the slow form; the controller is then unreachable and the process
// stops: commit() fails the eager batch a second time.
func TestCloseAfterStaleMixedFile(t *testing.T) {
	dir := testDir(t)
	var calls atomic.Int32
	commit := func(context.Context, *controller.CommitFile) (controller.Result, error) {
		if calls.Add(1) == 1 {
			return controller.Result{}, controller.ErrStaleWriter
		}
		return controller.Result{}, errors.New("the controller is unreachable")
	}
	w := NewWriter(WriterConfig{Store: dir, Commit: commit, Node: 1, Run: "1-test", Incarnation: func() uint64 { return 1 },
		BatchTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eb, lb := testBatch(5, 0, "e"), testBatch(6, 0, "l")
	eh, _ := batch.ParseHeader(eb)
	lh, _ := batch.ParseHeader(lb)
	ep := w.Append(controller.PartitionRef{Topic: topic, Partition: 0}, eb, eh, false)
	w.Append(controller.PartitionRef{Topic: topic, Partition: 1}, lb, lh, true)
	w.Flush()
	if _, err := ep.Wait(ctx); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("eager batch after a stale commit: %v", err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer ccancel()
	w.Close(cctx) // panicked in commitLoop (close of closed channel): a second answer to the failed eager batches
	t.Log("closed cleanly")
}
