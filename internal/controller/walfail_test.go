package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// A member whose Raft log cannot be written stops cleanly: it no longer leads, its callers get
// ErrStopped at once instead of waiting, OnFailure tells the node once, the others elect a
// leader and commit without it, and Stop still returns.
func TestWALFailureStopsTheController(t *testing.T) {
	var failing atomic.Int32 // the node whose controller dir fails writes and syncs; 0: none
	fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		id := failing.Load()
		if id != 0 && (op == vfs.OpWrite || op == vfs.OpSync) && strings.HasPrefix(path, fmt.Sprintf("/n%d/controller", id)) {
			return vfs.ErrInjected
		}
		return nil
	}))
	var mu sync.Mutex
	failures := map[int32][]error{}
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}, onFailure: func(id int32, err error) {
		mu.Lock()
		failures[id] = append(failures[id], err)
		mu.Unlock()
	}}
	voters := []int32{1, 2, 3}
	cs := map[int32]*Controller{}
	for _, id := range voters {
		cs[id] = startNode(t, n, fsys, id, voters)
	}
	defer func() {
		for _, c := range cs {
			c.Stop()
		}
	}()
	waitFor(t, "a leader and the bootstrap", func() bool { l := leaderOf(n); return l != nil && l.Image().ClusterID != "" })
	old := leaderOf(n)
	failing.Store(old.NodeID())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := old.Propose(ctx, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "t", ID: TopicID{1}, Assignments: [][]int32{}}})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("a proposal on the leader whose log fails: %v after %v; want an error at once", err, time.Since(start))
	}
	waitFor(t, "the failed controller's Err", func() bool { return old.Err() != nil })
	if !errors.Is(old.Err(), vfs.ErrInjected) || !strings.Contains(old.Err().Error(), "persisting the raft log") {
		t.Fatalf("Err() = %v; want the injected write failure, named", old.Err())
	}
	if old.IsLeader() {
		t.Fatal("the failed controller still says it leads")
	}
	if _, _, err := old.Propose(ctx, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "u", ID: TopicID{2}, Assignments: [][]int32{}}}); !errors.Is(err, ErrStopped) {
		t.Fatalf("a proposal after the failure: %v; want ErrStopped", err)
	}
	if _, err := old.ReadIndex(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("ReadIndex after the failure: %v; want ErrStopped", err)
	}
	n.mu.Lock()
	n.down[old.NodeID()] = true // its loop no longer takes messages; leaderOf skips it
	n.mu.Unlock()
	_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 9, ClusterAddr: "x"}})
	for _, id := range voters {
		if c := cs[id]; c != old {
			waitFor(t, fmt.Sprintf("node %d to apply the registration committed without the failed member", id), func() bool {
				return c.Image().Index >= idx && c.Image().Nodes[9] != nil
			})
		}
	}
	mu.Lock()
	got := failures[old.NodeID()]
	others := len(failures) - min(1, len(got))
	mu.Unlock()
	if len(got) != 1 || !errors.Is(got[0], vfs.ErrInjected) || others != 0 {
		t.Fatalf("OnFailure calls: %v; want one, for node %d only", failures, old.NodeID())
	}
	done := make(chan struct{})
	go func() { old.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop after the failure did not return")
	}
}
