package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

func voterCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// changeVoter calls AddVoter or RemoveVoter on whichever node leads, until it answers
// something other than ErrNotLeader.
func changeVoter(t *testing.T, n *testNet, add bool, node int32) error {
	t.Helper()
	ctx := voterCtx(t)
	for {
		c := leaderOf(n)
		if c == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var err error
		if add {
			err = c.AddVoter(ctx, node)
		} else {
			err = c.RemoveVoter(ctx, node)
		}
		if !errors.Is(err, ErrNotLeader) || ctx.Err() != nil {
			return err
		}
	}
}

func votersAre(cs []*Controller, want ...int32) bool {
	for _, c := range cs {
		if !slices.Equal(c.Voters(), want) {
			return false
		}
	}
	return true
}

// TestReplaceADeadVoter: a voter is lost for good; a learner is made a voter and the lost one
// removed, so the quorum again survives the loss of one more voter. The new voters persist
// across restarts started with the old --controller-voters.
func TestReplaceADeadVoter(t *testing.T) {
	fsys := vfs.NewMem()
	n, cs := startQuorum(t, fsys)
	old := []int32{1, 2, 3}
	four := startNode(t, n, fsys, 4, old)
	t.Cleanup(func() { four.Stop() })
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "four"}})
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 5, ClusterAddr: "five"}}) // never starts
	if err := four.AddVoter(voterCtx(t), 4); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AddVoter on a learner: %v; want ErrNotLeader", err)
	}

	// Voter 3 is lost. (Kept down if it leads: another one takes over.)
	n.mu.Lock()
	n.down[3] = true
	n.mu.Unlock()
	cs[3].Stop()
	delete(cs, 3)
	waitFor(t, "a leader among 1 and 2", func() bool { return leaderOf(n) != nil })

	if err := changeVoter(t, n, true, 4); err != nil {
		t.Fatalf("adding voter 4: %v", err)
	}
	if err := changeVoter(t, n, false, 3); err != nil {
		t.Fatalf("removing voter 3: %v", err)
	}
	live := []*Controller{cs[1], cs[2], four}
	waitFor(t, "voters 1, 2 and 4 everywhere", func() bool { return votersAre(live, 1, 2, 4) })

	// Refusals.
	for _, tc := range []struct {
		add  bool
		node int32
		want error
	}{
		{true, 4, ErrDuplicateVoter},
		{false, 3, ErrVoterNotFound},
		{true, 9, ErrInvalidVoterChange}, // not registered
	} {
		if err := changeVoter(t, n, tc.add, tc.node); !errors.Is(err, tc.want) {
			t.Fatalf("change add=%v node %d: %v; want %v", tc.add, tc.node, err, tc.want)
		}
	}
	// Long enough for the loop to answer at least once on a loaded machine (a context that ends
	// before the loop took the request is a plain deadline).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := leaderOf(n).AddVoter(ctx, 5)
	cancel()
	if !errors.Is(err, ErrNotCaughtUp) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("adding a node that never follows: %v; want ErrNotCaughtUp once the context ends", err)
	}

	// With voter 2 down too, 1 and 4 are a majority of the new voters (they were not of the old).
	n.mu.Lock()
	n.down[2] = true
	n.mu.Unlock()
	_, idx := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 6, ClusterAddr: "six"}})
	waitFor(t, "voters 1 and 4 applying", func() bool { return cs[1].Image().Index >= idx && four.Image().Index >= idx })
	// Removing 4 would leave 1 and 2, of which only 1 is live (2 silent for an election timeout).
	time.Sleep(3 * 10 * 10 * time.Millisecond)
	if err := changeVoter(t, n, false, 4); !errors.Is(err, ErrInvalidVoterChange) {
		t.Fatalf("a removal leaving no live majority: %v; want ErrInvalidVoterChange", err)
	}

	// Restart 1 and 4 with the old flag: the persisted voters hold, and they elect a leader.
	cs[1].Stop()
	four.Stop()
	one := startNode(t, n, fsys, 1, old)
	t.Cleanup(one.Stop)
	four = startNode(t, n, fsys, 4, old)
	if !slices.Equal(one.Voters(), []int32{1, 2, 4}) || !slices.Equal(four.Voters(), []int32{1, 2, 4}) {
		t.Fatalf("voters after a restart: %v and %v; want 1, 2, 4", one.Voters(), four.Voters())
	}
	_, idx2 := propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 7, ClusterAddr: "seven"}})
	if idx2 <= idx {
		t.Fatalf("index %d after the restart; want past %d", idx2, idx)
	}
}

// TestRemoveTheLeader: the active controller removes itself; it steps down once the change is
// applied and another voter leads.
func TestRemoveTheLeader(t *testing.T) {
	fsys := vfs.NewMem()
	n, cs := startQuorum(t, fsys)
	l := leaderOf(n)
	id := l.NodeID()
	if err := l.RemoveVoter(voterCtx(t), id); err != nil {
		t.Fatalf("the leader removing itself: %v", err)
	}
	var rest []*Controller
	var want []int32
	for v, c := range cs {
		if v != id {
			rest, want = append(rest, c), append(want, v)
		}
	}
	slices.Sort(want)
	waitFor(t, "the others' new configuration", func() bool { return votersAre(rest, want...) })
	waitFor(t, "another leader", func() bool { l := leaderOf(n); return l != nil && l.NodeID() != id })
	propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: 8, ClusterAddr: "eight"}})
	if l.IsLeader() {
		t.Fatal("the removed voter still leads")
	}
}

// TestVoterChangesUnderLossAndCrashes: random voter changes (a learner added, a voter removed,
// at least three voters kept) among five nodes, each on its own file system, while topics are
// created, 10% of the messages are lost and nodes crash (losing what they had not synced) and
// restart. Every acknowledged topic survives on every node, the nodes' images agree at the end,
// and every node's voters are the leader's.
func TestVoterChangesUnderLossAndCrashes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 7))
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}, loss: 0.1, rnd: rand.New(rand.NewPCG(seed, 8))}
	fss := map[int32]*vfs.MemFS{}
	cs := map[int32]*Controller{}
	first := []int32{1, 2, 3}
	for id := int32(1); id <= 5; id++ {
		fss[id] = vfs.NewMem()
		cs[id] = startNode(t, n, fss[id], id, first)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Stop()
		}
	})
	waitFor(t, "a leader and the bootstrap", func() bool { l := leaderOf(n); return l != nil && l.Image().ClusterID != "" })
	for id := int32(1); id <= 5; id++ {
		propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: id, ClusterAddr: fmt.Sprint(id)}})
	}
	var acked []string
	topic := 0
	create := func() {
		topic++
		name := fmt.Sprintf("t%d", topic)
		c := leaderOf(n)
		if c == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, _, err := c.Propose(ctx, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: name, ID: TopicID{byte(topic), byte(topic >> 8), 1}, Assignments: [][]int32{{1}}}})
		cancel()
		if err == nil && res.Err == nil {
			acked = append(acked, name)
		}
	}
	for round := range 12 {
		for range 5 {
			create()
		}
		l := leaderOf(n)
		if l == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		voters := l.Voters()
		var learners []int32
		for id := int32(1); id <= 5; id++ {
			if !slices.Contains(voters, id) {
				learners = append(learners, id)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		switch op := rnd.IntN(3); {
		case op == 0 && len(learners) > 0:
			id := learners[rnd.IntN(len(learners))]
			err := l.AddVoter(ctx, id)
			t.Logf("round %d: add %d to %v: %v", round, id, voters, err)
		case op == 1 && len(voters) > 3:
			id := voters[rnd.IntN(len(voters))]
			err := l.RemoveVoter(ctx, id)
			t.Logf("round %d: remove %d from %v: %v", round, id, voters, err)
		default: // crash a node and restart it on what its disk kept
			id := int32(1 + rnd.IntN(5))
			cs[id].Stop()
			fss[id] = fss[id].Crash(vfs.CrashOptions{Tear: true, Rand: rand.New(rand.NewPCG(seed, uint64(round)))})
			cs[id] = startNode(t, n, fss[id], id, first)
			t.Logf("round %d: crashed and restarted %d (voters %v)", round, id, voters)
		}
		cancel()
	}
	n.mu.Lock()
	n.loss = 0
	n.mu.Unlock()
	res, idx := propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "last", ID: TopicID{0, 0, 2}, Assignments: [][]int32{{1}}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	acked = append(acked, "last")
	waitFor(t, "every node at the last index", func() bool {
		for _, c := range cs {
			if c.Image().Index < idx {
				return false
			}
		}
		return true
	})
	want := leaderOf(n).Voters()
	waitFor(t, "every node's voters the leader's", func() bool { return votersAre(slices.Collect(maps.Values(cs)), want...) })
	if len(want) < 3 {
		t.Fatalf("voters %v; want at least 3", want)
	}
	ref := cs[1].Image()
	for id, c := range cs {
		img := c.Image()
		for _, name := range acked {
			if _, ok := img.Topics[name]; !ok {
				t.Fatalf("node %d (image index %d, %d topics; node 1: index %d, %d topics; last proposed at %d) lacks acknowledged topic %s", id, img.Index, len(img.Topics), ref.Index, len(ref.Topics), idx, name)
			}
		}
		if len(img.Topics) != len(ref.Topics) {
			t.Fatalf("node %d has %d topics, node 1 %d", id, len(img.Topics), len(ref.Topics))
		}
		for name, tp := range ref.Topics {
			if img.Topics[name] == nil || img.Topics[name].ID != tp.ID {
				t.Fatalf("node %d's topic %s differs from node 1's", id, name)
			}
		}
	}
	t.Logf("%d topics acknowledged; voters %v", len(acked), want)
}

// TestGrowFromOneVoter: a one-node cluster (the embedded default) grows to three voters by
// adding two learners, after which it survives the loss of the first node.
func TestGrowFromOneVoter(t *testing.T) {
	fsys := vfs.NewMem()
	n := &testNet{nodes: map[int32]*Controller{}, down: map[int32]bool{}}
	cs := map[int32]*Controller{1: startNode(t, n, fsys, 1, nil)}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Stop()
		}
	})
	waitFor(t, "the bootstrap", func() bool { return cs[1].Image().ClusterID != "" })
	for _, id := range []int32{2, 3} {
		cs[id] = startNode(t, n, fsys, id, []int32{1})
		propose(t, n, &Command{Op: OpRegister, Register: &Register{Node: id, ClusterAddr: fmt.Sprint(id)}})
		if err := changeVoter(t, n, true, id); err != nil {
			t.Fatalf("adding voter %d: %v", id, err)
		}
	}
	all := []*Controller{cs[1], cs[2], cs[3]}
	waitFor(t, "voters 1, 2, 3 everywhere", func() bool { return votersAre(all, 1, 2, 3) })
	n.mu.Lock()
	n.down[1] = true
	n.mu.Unlock()
	waitFor(t, "a leader among 2 and 3", func() bool { l := leaderOf(n); return l != nil && l.NodeID() != 1 })
	propose(t, n, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "after", ID: TopicID{7}, Assignments: [][]int32{{2}}}})
}
