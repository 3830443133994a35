package sequencer

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/speclog/order"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestTopicOfANewerImageIsNotDropped: the leader keeps a topic that its metadata image lacks
// while that image is older than the one the topic was created from (its node's metadata
// trails, as just after a restart): dropping it would lose the topic's order, its slots and
// trim point. From an image at least as new, the topic's absence is its deletion.
func TestTopicOfANewerImageIsNotDropped(t *testing.T) {
	var mu sync.Mutex
	specs, index := []Spec{{ID: "t1", Name: "t", Shards: 2, Config: order.DefaultConfig()}}, uint64(10)
	g, err := Open(Config{NodeID: 1, Voters: []int32{1}, FS: vfs.NewMem(), Dir: "/seq", TickInterval: 10 * time.Millisecond,
		ReconcileInterval: 10 * time.Millisecond, Send: func(int32, transport.Kind, []byte) {},
		Topics: func() ([]Spec, uint64) {
			mu.Lock()
			defer mu.Unlock()
			return specs, index
		}})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	defer g.Stop()
	has := func() bool { return g.Read("t1", func(*Topic) {}) }
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	wait("the topic created", has)
	mu.Lock()
	specs, index = nil, 9 // an older image: the topic is not in it yet
	mu.Unlock()
	time.Sleep(200 * time.Millisecond) // twenty reconciles
	if !has() {
		t.Fatal("the topic was dropped on an image older than the one it was created from")
	}
	mu.Lock()
	index = 10 // the topic deleted at or before this index
	mu.Unlock()
	wait("the deleted topic dropped", func() bool { return !has() })
}

// TestWALFailureStopsTheGroup: a member whose Raft log cannot be written stops for good instead
// of crashing the process: it leads no more, OnFailure tells the node once, and Stop returns.
func TestWALFailureStopsTheGroup(t *testing.T) {
	var failing atomic.Bool
	fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if failing.Load() && (op == vfs.OpWrite || op == vfs.OpSync) {
			return vfs.ErrInjected
		}
		return nil
	}))
	var mu sync.Mutex
	specs, index := []Spec(nil), uint64(1)
	failures := make(chan error, 4)
	g, err := Open(Config{NodeID: 1, Voters: []int32{1}, FS: fsys, Dir: "/seq", TickInterval: 10 * time.Millisecond,
		ReconcileInterval: 10 * time.Millisecond, Send: func(int32, transport.Kind, []byte) {},
		OnFailure: func(err error) { failures <- err },
		Topics: func() ([]Spec, uint64) {
			mu.Lock()
			defer mu.Unlock()
			return specs, index
		}})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	for deadline := time.Now().Add(10 * time.Second); !g.IsLeader(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
	}
	failing.Store(true)
	mu.Lock()
	specs, index = []Spec{{ID: "t1", Name: "t", Shards: 2, Config: order.DefaultConfig()}}, 2 // a topic to create: an entry to write
	mu.Unlock()
	select {
	case err := <-failures:
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("OnFailure(%v); want the injected write failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not report its log's failure")
	}
	if g.IsLeader() {
		t.Fatal("the failed member still leads")
	}
	done := make(chan struct{})
	go func() { g.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop after the failure did not return")
	}
	if len(failures) != 0 {
		t.Fatalf("OnFailure called %d more times", len(failures))
	}
}
