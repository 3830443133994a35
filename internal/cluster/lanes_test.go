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

// TestLanes: an idle lane's frame is handled at once, on the caller; while a handler runs (the
// transport handed the reading on past it), the frames of its lane are queued and handled after
// it, in order, by the goroutine in it; frames of the same peer's other direction, and of other
// peers, are handled at once; a frame that finds its lane full is dropped.
func TestLanes(t *testing.T) {
	var mu sync.Mutex
	var got []string
	release := make(chan struct{})
	l := newLanes(func(from int32, _ transport.Kind, body []byte) {
		if string(body) == "block" {
			<-release
		}
		mu.Lock()
		got = append(got, fmt.Sprintf("%d:%s", from, body))
		mu.Unlock()
	}, quiet)
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		l.push(1, replica.KindAppend, []byte("block")) // a follower's write waiting on a slow disk
	}()
	waitFor(t, "the first append in its handler", 5*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		q := l.byKey[laneKey{peer: 1}]
		return q != nil && q.busy
	})
	// The reading, handed on, goes on: these return at once.
	for i := range 3 {
		l.push(1, replica.KindAppend, []byte(fmt.Sprint(i)))
	}
	l.push(1, replica.KindFollow, []byte("follow")) // the same peer, as a follower of this node
	l.push(2, replica.KindAppend, []byte("other"))
	l.push(1, replica.KindAppend, make([]byte, maxLaneBytes)) // past the lane's bound: dropped
	mu.Lock()
	if fmt.Sprint(got) != "[1:follow 2:other]" {
		t.Fatalf("handled %v; want peer 1's Follow and peer 2's append only", got)
	}
	got = nil
	mu.Unlock()
	close(release)
	<-blocked // the goroutine in the lane took the queued frames before it returned
	mu.Lock()
	defer mu.Unlock()
	if want := "[1:block 1:0 1:1 1:2]"; fmt.Sprint(got) != want {
		t.Fatalf("peer 1's appends handled as %v; want %v", got, want)
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
