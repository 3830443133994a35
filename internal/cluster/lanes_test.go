package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestLanes: each peer's frames are handled in order, on goroutines of the peer's own, one per
// direction: a handler that blocks holds back its lane's later frames, not the pushes of them,
// nor the same peer's frames of the other direction, nor another peer's; a frame that finds its
// lane full is dropped, not waited for; close waits for the handlers under way.
func TestLanes(t *testing.T) {
	var mu sync.Mutex
	got := map[int32][]string{}
	release := make(chan struct{})
	handled := make(chan struct{}, 100)
	l := newLanes(func(from int32, _ transport.Kind, body []byte) {
		if string(body) == "block" {
			<-release
		}
		mu.Lock()
		got[from] = append(got[from], string(body))
		mu.Unlock()
		handled <- struct{}{}
	}, quiet)
	l.push(1, replica.KindAppend, []byte("block")) // a follower's write waiting on a slow disk
	for i := range 5 {
		l.push(1, replica.KindAppend, []byte(fmt.Sprint(i))) // returns at once
	}
	l.push(1, replica.KindFollow, []byte("follow")) // the same peer, as a follower of this node
	l.push(2, replica.KindAppend, []byte("other"))
	<-handled
	<-handled // the Follow and peer 2's frame, while peer 1's first append is blocked
	mu.Lock()
	if fmt.Sprint(got[1]) != "[follow]" || len(got[2]) != 1 {
		t.Fatalf("handled %v; want peer 1's Follow and peer 2's frame only", got)
	}
	got[1] = nil
	mu.Unlock()
	close(release)
	for range 6 {
		<-handled
	}
	mu.Lock()
	if want := []string{"block", "0", "1", "2", "3", "4"}; fmt.Sprint(got[1]) != fmt.Sprint(want) {
		t.Fatalf("peer 1's appends handled as %v; want %v", got[1], want)
	}
	mu.Unlock()

	// A full lane drops the frame that does not fit, at once.
	block := make(chan struct{})
	var n atomic.Int32
	l2 := newLanes(func(int32, transport.Kind, []byte) { <-block; n.Add(1) }, quiet)
	l2.push(1, replica.KindAppend, make([]byte, maxLaneBytes/2)) // taken by the handler, blocked
	waitFor(t, "the handler to take the first frame", 5*time.Second, func() bool {
		l2.mu.Lock()
		defer l2.mu.Unlock()
		return len(l2.byKey[laneKey{peer: 1}].frames) == 0
	})
	l2.push(1, replica.KindAppend, make([]byte, maxLaneBytes/2)) // queued
	l2.push(1, replica.KindAppend, make([]byte, maxLaneBytes/2)) // queued: the lane is full
	l2.push(1, replica.KindAppend, make([]byte, maxLaneBytes/2)) // dropped
	close(block)
	waitFor(t, "the queued frames", 5*time.Second, func() bool { return n.Load() == 3 })
	time.Sleep(50 * time.Millisecond)
	l2.close()
	if n.Load() != 3 {
		t.Fatalf("%d frames handled; want 3, the one past the lane's bound dropped", n.Load())
	}
}

// TestSlowFollowerDiskDoesNotHoldBackHeartbeats: the active controller follows a partition on a
// disk whose writes take 2 s. Its leader's appends wait on that disk; its heartbeats, on the
// same connection, do not, so the controller fences nobody (it fenced the leader, its
// heartbeats late behind the appends, before replication frames had lanes of their own).
func TestSlowFollowerDiskDoesNotHoldBackHeartbeats(t *testing.T) {
	var slow [4]atomic.Bool
	lns, voters := listenNodes(t, 3, 3)
	nodes := map[int32]*testNode{}
	for id := int32(1); id <= 3; id++ {
		inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
			if op == vfs.OpWrite && slow[id].Load() && strings.Contains(path, "/topics/slow/") {
				time.Sleep(2 * time.Second)
			}
			return nil
		})
		nodes[id] = startNodeWith(t, id, lns[id], voters, t.TempDir(), func(c *Config) { c.FS = vfs.NewErrorFS(vfs.Default, inj) })
	}
	t.Cleanup(func() {
		for id := range slow {
			slow[id].Store(false)
		}
		for _, tn := range nodes {
			tn.close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitReady(t, ctx, nodes[1], nodes[2], nodes[3])
	var ctl int32
	waitFor(t, "an active controller", 10*time.Second, func() bool { ctl = nodes[1].ctrl.Leader(); return ctl > 0 })
	lead := ctl%3 + 1
	res, err := nodes[ctl].Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: "slow", ID: controller.TopicID{7}, Configs: map[string]string{"write.caching": "false"}, Assignments: [][]int32{{lead, ctl}}}})
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	var r *replica.Replica
	waitFor(t, "the leader", 10*time.Second, func() bool {
		tn, rr := leaderReplica(nodes, "slow", 0)
		r = rr
		return tn != nil && tn.NodeID() == lead
	})
	one, epoch, err := r.Append(oneRecord("before"))
	if err != nil {
		t.Fatal(err)
	}
	r.Log.SyncSoon()
	if err := r.WaitCommitted(ctx, epoch, one.Last+1); err != nil {
		t.Fatal(err)
	}

	slow[ctl].Store(true)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if _, _, err := r.Append(oneRecord("during")); err != nil {
			t.Fatalf("the leader lost the partition while the controller's follower disk was slow: %v", err)
		}
		r.Log.SyncSoon()
		for id, n := range nodes[ctl].Image().Nodes {
			if n.Fenced {
				t.Fatalf("node %d fenced while the controller's follower disk is slow", id)
			}
		}
	}
	slow[ctl].Store(false)
}
