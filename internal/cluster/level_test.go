package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
)

// TestLevelHeldByAGoneNode: a broker of an older version (level 0) taken out of service holds
// the command level back until it is unregistered, which works below level 2 (the others are
// named); with runnel.command.level.auto=false the level then waits for an operator, who can
// raise it (not while a node is below, never lower).
func TestLevelHeldByAGoneNode(t *testing.T) {
	lns, voters := listenNodes(t, 4, 3)
	older := func(c *Config) { c.olderVersion = true }
	nodes := map[int32]*testNode{}
	for id := int32(1); id <= 3; id++ {
		tune := func(*Config) {}
		if id == 3 { // an older version at first: the level stays at 0 while node 4 joins
			tune = older
		}
		nodes[id] = startNodeWith(t, id, lns[id], voters, t.TempDir(), tune)
		defer nodes[id].close()
	}
	gone := startNodeWith(t, 4, lns[4], voters, t.TempDir(), older)
	defer gone.close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitReady(t, ctx, nodes[1], nodes[2], nodes[3], gone)
	n := nodes[1]
	// Node 3 upgraded: restarted as this version on its data.
	dir3 := nodes[3].dir
	nodes[3].close()
	ln, err := net.Listen("tcp", voters[3])
	if err != nil {
		t.Fatal(err)
	}
	nodes[3] = startNode(t, 3, ln, voters, dir3)
	defer nodes[3].close()
	if err := nodes[3].WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(ctx, &controller.Command{Op: controller.OpSetNodeConfigs,
		SetNodeConfigs: &controller.SetNodeConfigs{Node: -1, Configs: map[string]string{controller.AutoLevelConfig: "false"}}}); err != nil {
		t.Fatal(err)
	}
	gone.close()
	// Fenced in node 1's image: the active controller, whichever node runs it, decides on an
	// image with everything committed before it is asked.
	waitFor(t, "node 4 fenced", 30*time.Second, func() bool { nd := n.Image().Nodes[4]; return nd != nil && nd.Fenced })
	if lvl := n.Image().Level; lvl != 0 {
		t.Fatalf("level %d with node 4 of an older version registered; want 0", lvl)
	}
	if err := n.FinalizeLevel(ctx, controller.Level, false); !errors.Is(err, controller.ErrLevelChange) {
		t.Fatalf("raising the level with node 4 below it: %v; want ErrLevelChange", err)
	}
	if err := n.UnregisterNode(ctx, 4); err != nil {
		t.Fatalf("unregister node 4 below level %d: %v", controller.LevelUnregisterNode, err)
	}
	for _, tn := range nodes {
		waitFor(t, "node 4 gone from every image", 10*time.Second, func() bool { return tn.Image().Nodes[4] == nil })
	}
	time.Sleep(time.Second) // a few of the active controller's ticks
	if lvl := n.Image().Level; lvl != 0 {
		t.Fatalf("level %d with runnel.command.level.auto=false; want it held at 0", lvl)
	}
	if err := n.FinalizeLevel(ctx, controller.Level, true); err != nil || n.Image().Level != 0 {
		t.Fatalf("validate-only: %v, level %d", err, n.Image().Level)
	}
	if err := nodes[2].FinalizeLevel(ctx, controller.Level, false); err != nil {
		t.Fatalf("raising the level: %v", err)
	}
	if lvl := nodes[2].Image().Level; lvl != controller.Level {
		t.Fatalf("level %d after the operator raised it; want %d", lvl, controller.Level)
	}
	// At once: lowering is refused even where node 1's image, or the active controller's own,
	// has not applied the raise yet.
	if err := n.FinalizeLevel(ctx, 1, false); !errors.Is(err, controller.ErrLevelChange) {
		t.Fatalf("lowering the level: %v; want ErrLevelChange", err)
	}
}

// TestSlowReconcileRegistersOnce: a node whose first reconcile is slow (many logs to recover)
// registers once, however long it takes (it registered again every 2 s, each time losing its
// leaderships); and a node that joins while the active controller's own reconcile is slow
// registers once too: the active controller's image does not wait for that reconcile (it
// refused the new incarnation's heartbeats, and the node registered again and again).
func TestSlowReconcileRegistersOnce(t *testing.T) {
	lns, voters := listenNodes(t, 3, 3)
	var blocked atomic.Int32 // the node whose reconciles wait for gate
	gate := make(chan struct{})
	nodes := map[int32]*testNode{}
	for id := int32(1); id <= 3; id++ {
		nodes[id] = startNodeWith(t, id, lns[id], voters, t.TempDir(), func(c *Config) {
			c.beforeReconcile = func() {
				if blocked.Load() == id {
					<-gate
				}
			}
		})
		defer nodes[id].close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitReady(t, ctx, nodes[1], nodes[2], nodes[3])
	var active int32
	waitFor(t, "an active controller", 10*time.Second, func() bool {
		for id, tn := range nodes {
			if tn.activeDriver() != nil {
				active = id
				return true
			}
		}
		return false
	})
	observer := nodes[1+active%3]
	incarnations := func(node int32, d time.Duration) int {
		seen := map[uint64]bool{}
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if nd := observer.Image().Nodes[node]; nd != nil {
				seen[nd.Incarnation] = true
			}
		}
		return len(seen)
	}
	start := func(id int32, tune func(*Config)) *testNode {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return startNodeWith(t, id, ln, voters, t.TempDir(), tune)
	}

	// Node 4's first reconcile takes 3 s.
	var once sync.Once
	slow := make(chan struct{})
	time.AfterFunc(3*time.Second, func() { close(slow) })
	n4 := start(4, func(c *Config) { c.beforeReconcile = func() { once.Do(func() { <-slow }) } })
	defer n4.close()
	if n := incarnations(4, 4*time.Second); n != 1 {
		t.Fatalf("node 4 registered %d times during its slow first reconcile; want once", n)
	}
	if err := n4.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	// The active controller's reconciles wait (from a change before node 5 joins) while node 5
	// joins.
	blocked.Store(active)
	if _, err := observer.Propose(ctx, &controller.Command{Op: controller.OpSetNodeConfigs,
		SetNodeConfigs: &controller.SetNodeConfigs{Node: -1, Configs: map[string]string{"log.retention.ms": "86400000"}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the active node's reconciler takes it, and waits
	n5 := start(5, func(*Config) {})
	defer n5.close()
	n := incarnations(5, 3*time.Second)
	blocked.Store(0)
	close(gate)
	if n != 1 {
		t.Fatalf("node 5 registered %d times while the active controller's reconcile was slow; want once", n)
	}
	if err := n5.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}
