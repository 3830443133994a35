package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// A barrier on any member, voter or learner, returns only once that member's image has every
// entry committed before the call; a member cut off from the quorum does not answer from its
// stale image, and answers once it is back.
func TestBarrierCoversWhatWasCommitted(t *testing.T) {
	fsys := vfs.NewMem()
	n, quorum := startQuorum(t, fsys)
	learner := startNode(t, n, fsys, 7, []int32{1, 2, 3})
	t.Cleanup(learner.Stop)
	cs := []*Controller{quorum[1], quorum[2], quorum[3], learner}
	_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 7, ClusterAddr: "l"}})
	waitFor(t, "the learner caught up", func() bool { return learner.Image().Index >= idx })

	// Every member, over and over, right after a commit: its image has the commit when the
	// barrier returns.
	for i := range 30 {
		_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: int32(100 + i), ClusterAddr: fmt.Sprint(i)}})
		c := cs[i%len(cs)]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Barrier(ctx)
		cancel()
		if err != nil {
			t.Fatalf("barrier on node %d: %v", c.NodeID(), err)
		}
		if got := c.Image().Index; got < idx {
			t.Fatalf("node %d: barrier returned with its image at %d, before the commit at %d", c.NodeID(), got, idx)
		}
	}

	// Many at once on one member (they share quorum rounds): each sees the commit made before
	// it was called.
	_, idx = propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 98, ClusterAddr: "many"}})
	errs := make(chan error, 64)
	for range 64 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := learner.Barrier(ctx); err != nil {
				errs <- err
				return
			}
			if got := learner.Image().Index; got < idx {
				errs <- fmt.Errorf("image at %d after the barrier, the commit at %d", got, idx)
				return
			}
			errs <- nil
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent barriers on the learner: %v", err)
		}
	}

	// The learner cut off: what is committed meanwhile is not in its image, so its barrier must
	// not return until it is back.
	n.mu.Lock()
	n.down[7] = true
	n.mu.Unlock()
	_, idx = propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 99, ClusterAddr: "while-away"}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := learner.Barrier(ctx)
	cancel()
	if err == nil {
		t.Fatalf("a barrier on a cut-off learner returned (its image at %d, the commit at %d)", learner.Image().Index, idx)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- learner.Barrier(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	n.mu.Lock()
	n.down[7] = false
	n.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("barrier after the learner is back: %v", err)
	}
	if _, ok := learner.Image().Nodes[99]; !ok {
		t.Fatalf("the learner's barrier returned before its image had the commit made while it was away (image at %d, commit at %d, leader image has it: %v)", learner.Image().Index, idx, leaderOf(n).Image().Nodes[99] != nil)
	}
}

// A leader cut off from the quorum cannot confirm it still leads: its barrier does not return
// while another leader commits.
func TestBarrierOnADeposedLeader(t *testing.T) {
	n, _ := startQuorum(t, vfs.NewMem())
	old := leaderOf(n)
	n.mu.Lock()
	n.down[old.NodeID()] = true
	n.mu.Unlock()
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res <- old.Barrier(ctx)
	}()
	waitFor(t, "a new leader", func() bool { l := leaderOf(n); return l != nil && l != old })
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 99, ClusterAddr: "new"}})
	err := <-res
	if err == nil {
		if _, ok := old.Image().Nodes[99]; !ok {
			t.Fatal("the cut-off old leader's barrier returned without the new leader's commit")
		}
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("barrier: %v", err)
	}
}
