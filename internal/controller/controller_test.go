package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// testNet connects in-process controllers: Send hands the message to the target's Step.
type testNet struct {
	mu    sync.Mutex
	nodes map[int32]*Controller
	down  map[int32]bool
	mute  map[int32]bool // messages from these nodes are lost
	// muteAfterSnap: these nodes are muted once a snapshot is sent to them.
	muteAfterSnap map[int32]bool
	// loss, with rnd, drops that fraction of the messages.
	loss float64
	rnd  *rand.Rand
	// chunkBytes > 0: nodes started send snapshots in chunks of that size. chunks counts the
	// chunks sent, snaps the snapshot messages sent whole; dropChunk, if set, loses a chunk
	// (by its order among the chunks sent).
	chunkBytes    int
	chunks, snaps int
	dropChunk     func(n int) bool
	// onFailure, if set, is the nodes' OnFailure (with the node's id).
	onFailure func(id int32, err error)
}

// sendChunk delivers a snapshot's chunk, as send a message.
func (n *testNet) sendChunk(from int32) func(to int32, chunk []byte) {
	return func(to int32, chunk []byte) {
		n.mu.Lock()
		n.chunks++
		c := n.nodes[to]
		drop := n.down[to] || n.down[from] || n.mute[from] || (n.dropChunk != nil && n.dropChunk(n.chunks-1))
		n.mu.Unlock()
		if c != nil && !drop {
			c.StepChunk(from, chunk)
		}
	}
}

func (n *testNet) send(from int32) func(to int32, body []byte) {
	return func(to int32, body []byte) {
		n.mu.Lock()
		m := &pb.Message{}
		if proto.Unmarshal(body, m) == nil && m.GetType() == pb.MessageType_MsgSnap {
			n.snaps++
			if n.muteAfterSnap[to] {
				n.mute[to] = true
			}
		}
		c := n.nodes[to]
		drop := n.down[to] || n.down[from] || n.mute[from] || (n.loss > 0 && n.rnd.Float64() < n.loss)
		n.mu.Unlock()
		if c != nil && !drop {
			c.Step(from, append([]byte(nil), body...))
		}
	}
}

func startNode(t *testing.T, n *testNet, fsys vfs.FS, id int32, voters []int32) *Controller {
	t.Helper()
	cfg := Config{NodeID: id, Voters: voters, FS: fsys, Dir: fmt.Sprintf("/n%d/controller", id),
		Send: n.send(id), TickInterval: 10 * time.Millisecond, SnapshotEvery: 20,
		Bootstrap: func() *Bootstrap { return &Bootstrap{ClusterID: "test-cluster"} }}
	if n.chunkBytes > 0 {
		cfg.SendChunk, cfg.Queued, cfg.ChunkBytes = n.sendChunk(id), func(int32) int { return 0 }, n.chunkBytes
	}
	if f := n.onFailure; f != nil {
		cfg.OnFailure = func(err error) { f(id, err) }
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.nodes[id] = c
	n.mu.Unlock()
	c.Start()
	return c
}

// startQuorum starts voters 1, 2 and 3 on a new network, stopped when the test ends, and waits
// for a leader and the bootstrap.
func startQuorum(t *testing.T, fsys vfs.FS) (*testNet, map[int32]*Controller) {
	t.Helper()
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}}
	voters := []int32{1, 2, 3}
	cs := map[int32]*Controller{}
	for _, id := range voters {
		cs[id] = startNode(t, n, fsys, id, voters)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Stop()
		}
	})
	waitFor(t, "a leader and the bootstrap", func() bool { l := leaderOf(n); return l != nil && l.Image().ClusterID != "" })
	return n, cs
}

// compactPast commits enough to compact the log past its start (SnapshotEvery is 20): a learner
// starting afterwards needs a snapshot.
func compactPast(t *testing.T, n *testNet) {
	t.Helper()
	for i := range 40 {
		propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: fmt.Sprintf("t%d", i), ID: TopicID{byte(i + 10)}, Assignments: [][]int32{}}})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaderOf(n *testNet) *Controller {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, c := range n.nodes {
		if c.IsLeader() && !n.down[id] {
			return c
		}
	}
	return nil
}

func propose(t *testing.T, n *testNet, cmd *Command) (Result, uint64) {
	t.Helper()
	for range 50 {
		c := leaderOf(n)
		if c == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, idx, err := c.Propose(ctx, cmd)
		cancel()
		if err == nil {
			return res, idx
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("could not propose %s", cmd.Op)
	return Result{}, 0
}

func TestSingleVoterBootstrapsAndSurvivesRestart(t *testing.T) {
	fsys := vfs.NewMem()
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}}
	c := startNode(t, n, fsys, 0, nil)
	waitFor(t, "bootstrap", func() bool { return c.Image().ClusterID == "test-cluster" })
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 0, ClusterAddr: "x"}})
	for i := range 30 { // past SnapshotEvery: the restart loads a snapshot and replays the rest
		propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: fmt.Sprintf("t%d", i), ID: TopicID{byte(i + 1)}, Assignments: [][]int32{{0}}}})
	}
	res, _ := propose(t, n, &Command{Op: OpAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Node: 0, Count: 1000}})
	if res.Value != 0 {
		t.Fatalf("first producer id block at %d", res.Value)
	}
	before := c.Image()
	c.Stop()
	c = startNode(t, n, fsys, 0, nil)
	defer c.Stop()
	waitFor(t, "replay", func() bool { return c.Image().Index >= before.Index })
	after := c.Image()
	if len(after.Topics) != 30 || after.NextProducerID != 1000 || after.ClusterID != "test-cluster" {
		t.Fatalf("after restart: %d topics, next id %d, cluster %q", len(after.Topics), after.NextProducerID, after.ClusterID)
	}
	res, _ = propose(t, n, &Command{Op: OpAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Node: 0, Count: 1000}})
	if res.Value != 1000 {
		t.Fatalf("block after restart at %d; want 1000 (never reused)", res.Value)
	}
}

func TestThreeVotersSurviveALeaderLoss(t *testing.T) {
	n, cs := startQuorum(t, vfs.NewMem())
	voters := []int32{1, 2, 3}
	propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "x", ID: TopicID{1}, Assignments: [][]int32{}}})
	for _, id := range voters {
		propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: id, ClusterAddr: "a"}})
	}
	_, idx := propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "a", ID: TopicID{2}, Assignments: [][]int32{{1, 2, 3}}}})
	for _, c := range cs {
		waitFor(t, "every voter applied", func() bool { return c.Image().Index >= idx })
		if _, ok := c.Image().Topics["a"]; !ok {
			t.Fatal("topic a missing on a voter")
		}
	}
	old := leaderOf(n)
	n.mu.Lock()
	n.down[old.NodeID()] = true
	n.mu.Unlock()
	waitFor(t, "a new leader", func() bool { l := leaderOf(n); return l != nil && l != old })
	_, idx = propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "b", ID: TopicID{3}, Assignments: [][]int32{{1, 2, 3}}}})
	n.mu.Lock()
	n.down[old.NodeID()] = false
	n.mu.Unlock()
	waitFor(t, "the old leader caught up", func() bool { return old.Image().Index >= idx })
	if _, ok := old.Image().Topics["b"]; !ok {
		t.Fatal("topic b missing on the returned voter")
	}
}

func TestLearnerJoinsAndGetsTheLog(t *testing.T) {
	fsys := vfs.NewMem()
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}}
	voters := []int32{1, 2, 3}
	var cs []*Controller
	for _, id := range voters {
		cs = append(cs, startNode(t, n, fsys, id, voters))
	}
	waitFor(t, "a leader", func() bool { return leaderOf(n) != nil })
	compactPast(t, n)
	learner := startNode(t, n, fsys, 7, voters)
	cs = append(cs, learner)
	defer func() {
		for _, c := range cs {
			c.Stop()
		}
	}()
	_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 7, ClusterAddr: "l"}})
	waitFor(t, "the learner caught up", func() bool { return learner.Image().Index >= idx })
	if learner.Image().Nodes[7] == nil || learner.Leader() < 1 {
		t.Fatalf("learner image lacks its registration or knows no leader (%d)", learner.Leader())
	}
	if learner.IsLeader() {
		t.Fatal("a learner became leader")
	}
}

// TestLearnerRecoversFromALostSnapshotAck: a learner that needs a snapshot installs it, but
// what it answers is lost. The leader must not wait for that answer forever (etcd raft keeps a
// follower it sent a snapshot to paused until the snapshot is reported): the learner catches
// up once its messages get through again.
func TestLearnerRecoversFromALostSnapshotAck(t *testing.T) {
	fsys := vfs.NewMem()
	n, _ := startQuorum(t, fsys)
	n.mu.Lock()
	n.mute, n.muteAfterSnap = map[int32]bool{}, map[int32]bool{7: true}
	n.mu.Unlock()
	compactPast(t, n)
	learner := startNode(t, n, fsys, 7, []int32{1, 2, 3})
	t.Cleanup(learner.Stop)
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 7, ClusterAddr: "l"}})
	waitFor(t, "the learner installed a snapshot", func() bool { return learner.Image().Index > 0 })
	time.Sleep(100 * time.Millisecond) // its answers, and heartbeat answers, are lost meanwhile
	n.mu.Lock()
	n.mute, n.muteAfterSnap = map[int32]bool{}, nil
	n.mu.Unlock()
	_, idx := propose(t, n, &Command{Op: OpAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Node: 1, Count: 1}})
	waitFor(t, "the learner caught up past the snapshot", func() bool { return learner.Image().Index >= idx })
}

// TestSnapshotInChunks: from command level 11 a learner that needs a snapshot larger than a
// chunk gets it in chunks, and a lost chunk makes raft send the snapshot again; below that
// level the snapshot goes whole, as an older version expects.
func TestSnapshotInChunks(t *testing.T) {
	for _, level := range []int{LevelChunkedSnapshots - 1, LevelChunkedSnapshots} {
		t.Run(fmt.Sprintf("level %d", level), func(t *testing.T) {
			fsys := vfs.NewMem()
			n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}, chunkBytes: 256}
			voters := []int32{1, 2, 3}
			for _, id := range voters {
				c := startNode(t, n, fsys, id, voters)
				t.Cleanup(c.Stop)
			}
			waitFor(t, "a leader", func() bool { l := leaderOf(n); return l != nil && l.Image().ClusterID != "" })
			for _, id := range voters {
				propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: id, ClusterAddr: "a", Level: Level}})
			}
			// A registration whose proposal timed out under load and was proposed again may
			// still apply after its retry (a new incarnation): finalize against the latest.
			for try := 0; leaderOf(n).Image().Level != level; try++ {
				if try == 10 {
					t.Fatalf("the cluster at level %d; want %d", leaderOf(n).Image().Level, level)
				}
				nodes := map[int32]uint64{}
				for id, nd := range leaderOf(n).Image().Nodes {
					nodes[id] = nd.Incarnation
				}
				propose(t, n, &Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: level, Nodes: nodes}})
			}
			for i := range 40 { // past SnapshotEvery (20): the learner needs a snapshot
				if r, _ := propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: fmt.Sprintf("t%d", i), ID: TopicID{byte(i + 10)}, Assignments: [][]int32{{1, 2, 3}}}}); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			n.mu.Lock()
			n.chunks, n.snaps = 0, 0
			n.dropChunk = func(i int) bool { return i == 3 } // the first stream loses its fourth chunk
			n.mu.Unlock()
			learner := startNode(t, n, fsys, 7, voters)
			t.Cleanup(learner.Stop)
			_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 7, ClusterAddr: "l", Level: Level}})
			waitFor(t, "the learner caught up", func() bool { return learner.Image().Index >= idx })
			if len(learner.Image().Topics) != 40 {
				t.Fatalf("the learner has %d topics; want 40", len(learner.Image().Topics))
			}
			n.mu.Lock()
			chunks, snaps := n.chunks, n.snaps
			n.mu.Unlock()
			size := len(EncodeImage(leaderOf(n).Image()))
			if level < LevelChunkedSnapshots {
				if chunks != 0 || snaps == 0 {
					t.Fatalf("below level %d: %d chunks and %d whole snapshots sent; want none and some", LevelChunkedSnapshots, chunks, snaps)
				}
				return
			}
			// The image is many chunks; the first stream lost one, so a second went too.
			if snaps != 0 || chunks < 2*size/256 {
				t.Fatalf("%d chunks (of 256 bytes; the image is %d bytes) and %d whole snapshots sent; want at least two streams' worth and none", chunks, size, snaps)
			}
		})
	}
}

// TestLearnersRegisteredTogether: nodes that register one right after the other all become
// learners. Raft takes one membership change at a time and silently drops one proposed before
// it has seen the previous one applied; each must still be proposed again.
func TestLearnersRegisteredTogether(t *testing.T) {
	fsys := vfs.NewMem()
	n, _ := startQuorum(t, fsys)
	var learners []*Controller
	for _, id := range []int32{7, 8, 9} {
		l := startNode(t, n, fsys, id, []int32{1, 2, 3})
		t.Cleanup(l.Stop)
		learners = append(learners, l)
	}
	var last uint64
	for _, l := range learners {
		_, last = propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: l.cfg.NodeID, ClusterAddr: "l"}})
	}
	for _, l := range learners {
		waitFor(t, fmt.Sprintf("learner %d caught up", l.cfg.NodeID), func() bool { return l.Image().Index >= last })
	}
}

func TestWALTornTailIsCut(t *testing.T) {
	fsys := vfs.NewMem()
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}}
	c := startNode(t, n, fsys, 0, nil)
	waitFor(t, "bootstrap", func() bool { return c.Image().ClusterID != "" })
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 0, ClusterAddr: "x"}})
	idx := c.Image().Index
	c.Stop()
	f, err := fsys.OpenReadWrite("/n0/controller/wal")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.WriteAt([]byte{0, 0, 1, 0, 9, 9, 9, 9, 1, 2, 3}, st.Size()) // a torn record
	f.Close()
	c = startNode(t, n, fsys, 0, nil)
	defer c.Stop()
	waitFor(t, "replay", func() bool { return c.Image().Index >= idx })
	res, _ := propose(t, n, &Command{Op: OpAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Node: 0, Count: 5}})
	if res.Value != 0 {
		t.Fatalf("alloc after a torn tail = %d", res.Value)
	}
}

// TestFollowerDropsProposals: a proposal that reaches raft on a node that is no longer the
// leader (it checked IsLeader, then a message of a newer term made it a follower before its loop
// took the proposal: a controller paused and resumed) is refused with ErrNotLeader and never
// committed. etcd/raft forwards a follower's proposals to the leader unless told not to, and the
// new leader committed a stale active controller's fence of a healthy node that way.
func TestFollowerDropsProposals(t *testing.T) {
	fsys := vfs.NewMem()
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}}
	voters := []int32{1, 2, 3}
	for _, id := range voters {
		c := startNode(t, n, fsys, id, voters)
		t.Cleanup(c.Stop)
	}
	waitFor(t, "a leader", func() bool { l := leaderOf(n); return l != nil && l.Image().ClusterID != "" })
	leader := leaderOf(n)
	var follower *Controller
	for _, c := range n.nodes {
		if c != leader && c.Leader() == leader.cfg.NodeID {
			follower = c
		}
	}
	if follower == nil {
		t.Fatal("no follower knows the leader")
	}
	// What Propose does past its IsLeader check, on the follower.
	p := proposal{data: (&Command{Op: OpRegister, Register: &Register{Node: 9, ClusterAddr: "stale"}}).Encode(), err: make(chan error, 1)}
	follower.propc <- p
	if err := <-p.err; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's proposal: %v; want ErrNotLeader", err)
	}
	// A proposal through the leader after it is applied after anything forwarded before it.
	if r, _ := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 8, ClusterAddr: "fresh"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, c := range n.nodes {
		if _, ok := c.Image().Nodes[9]; ok {
			t.Fatalf("node %d applied the follower's proposal", c.cfg.NodeID)
		}
	}
}
