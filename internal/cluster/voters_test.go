package cluster

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
)

// TestReplaceAVoterInACluster: voter 3 of 1, 2, 3 is lost for good; node 4, a broker, is made a
// voter and 3 removed, asked through nodes that do not lead. The controller's and the sequencer
// group's voters become 1, 2, 4 on every node, and survive the loss of voter 2 (1 and 4 are a
// majority) and a restart of node 4 started with the old --controller-voters.
func TestReplaceAVoterInACluster(t *testing.T) {
	nodes := startNodes(t, 3)
	flag := map[int32]string{}
	for id, tn := range nodes {
		flag[id] = tn.ClusterAddr(id)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir4 := t.TempDir()
	nodes[4] = startNode(t, 4, ln, flag, dir4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nodes[4].WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	nodes[3].close()
	delete(nodes, 3)

	// Through whichever of 2 and 4 does not lead.
	asker := nodes[4]
	if nodes[4].ControllerID() == 4 {
		asker = nodes[2]
	}
	if err := asker.AddVoter(ctx, 4); err != nil {
		t.Fatalf("adding voter 4: %v", err)
	}
	if err := asker.RemoveVoter(ctx, 3); err != nil {
		t.Fatalf("removing voter 3: %v", err)
	}
	want := []int32{1, 2, 4}
	waitFor(t, "voters 1, 2, 4 in both groups on every node", 20*time.Second, func() bool {
		for _, tn := range nodes {
			if !slices.Equal(tn.Voters(), want) || !slices.Equal(tn.Sequencer().Voters(), want) {
				return false
			}
		}
		return true
	})
	if err := asker.AddVoter(ctx, 4); !errors.Is(err, controller.ErrDuplicateVoter) {
		t.Fatalf("adding voter 4 again: %v; want ErrDuplicateVoter", err)
	}
	if err := asker.RemoveVoter(ctx, 3); !errors.Is(err, controller.ErrVoterNotFound) {
		t.Fatalf("removing voter 3 again: %v; want ErrVoterNotFound", err)
	}

	// The removed voter, its disk lost, is unregistered; its id started again on an empty data
	// dir with the old --controller-voters (naming it) is refused: it would start a Raft log of
	// its own as a voter.
	waitFor(t, "node 3 fenced", 20*time.Second, func() bool { nd := nodes[1].Image().Nodes[3]; return nd != nil && nd.Fenced })
	if err := asker.UnregisterNode(ctx, 3); err != nil {
		t.Fatalf("unregistering node 3: %v", err)
	}
	ln3, err := net.Listen("tcp", flag[3])
	if err != nil {
		t.Fatal(err)
	}
	if tn, err := tryStartNode(t, 3, ln3, flag, t.TempDir(), func(c *Config) { c.EmptyDataDir = true }); !errors.Is(err, ErrNotAVoter) {
		if tn != nil {
			tn.close()
		}
		t.Fatalf("node 3 on an empty data dir with the old voters: %v; want %v", err, ErrNotAVoter)
	}

	// Voter 2 goes too: 1 and 4 still commit, in both groups.
	nodes[2].close()
	delete(nodes, 2)
	create := func(name string) {
		t.Helper()
		res, err := nodes[1].Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
			Name: name, ID: controller.TopicID{byte(len(name)), 9}, Assignments: [][]int32{{1}}}})
		if err != nil || res.Err != nil {
			t.Fatalf("creating %s with voters 1 and 4 live: %v %v", name, err, res.Err)
		}
	}
	create("after-two")
	waitFor(t, "a sequencer leader among 1 and 4", 10*time.Second, func() bool {
		l := nodes[1].Sequencer().Leader()
		return l == 1 || l == 4
	})

	// Node 4 restarts with the old flag: it keeps its vote.
	nodes[4].close()
	ln4, err := net.Listen("tcp", flag4(t, nodes[1]))
	if err != nil {
		t.Fatal(err)
	}
	nodes[4] = startNode(t, 4, ln4, flag, dir4)
	if err := nodes[4].WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if v := nodes[4].Voters(); !slices.Equal(v, want) {
		t.Fatalf("node 4's voters after a restart: %v; want %v", v, want)
	}
	create("after-restart")
}

// flag4 is node 4's cluster address as the metadata has it.
func flag4(t *testing.T, n *testNode) string {
	t.Helper()
	nd := n.Image().Nodes[4]
	if nd == nil {
		t.Fatal("node 4 is not registered")
	}
	return nd.ClusterAddr
}
