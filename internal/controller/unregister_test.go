package controller

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestUnregisterNode: a node taken out of service is forgotten only once it is fenced and holds
// no replica; below LevelUnregisterNode only when every other node is known to apply the
// command (by registration or heartbeats) and every Raft member is registered, and a
// registration since the command was made cancels it; once forgotten it no longer holds the
// command level back; a retried request gets the first attempt's answer.
func TestUnregisterNode(t *testing.T) {
	im := cluster3(t) // nodes 1-3 registered as an older version would (level 0)
	idx := uint64(100)
	apply := func(img *Image, c *Command) Result { idx++; return Apply(img, idx, c) }
	register := func(node int32, level int) {
		t.Helper()
		if r := apply(im, &Command{Op: OpRegister, Register: &Register{Node: node, KafkaHost: "h", KafkaPort: 9000 + node, ClusterAddr: "a", Level: level}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	fence := func(node int32) {
		apply(im, &Command{Op: OpFence, Fence: &Fence{Node: node, Incarnation: im.Nodes[node].Incarnation}})
	}
	register(2, Level)
	register(3, Level)
	register(4, LevelForgottenWriters) // an older version, taken out of service: it never returns
	fence(4)
	now := time.Unix(1000, 0)
	a := NewActive(testActiveConfig(), im.Clone(), now)
	a.SetMembers([]int32{1, 2, 3, 4})
	tick := finalizeTicks(a, im, &now)
	tick()

	refused := []struct {
		node int32
		want error
		msg  string
	}{
		{9, ErrUnknownNode, "not registered"},
		{2, ErrNodeLive, "heartbeating"},
		{4, ErrLevelPending, "node 1 applies command level 0"}, // node 1 registered through an older controller
	}
	for _, r := range refused {
		if c, err := a.UnregisterNode(r.node, nil); !errors.Is(err, r.want) || !strings.Contains(err.Error(), r.msg) {
			t.Fatalf("unregister %d: %v, %v; want %v (%q)", r.node, c, err, r.want, r.msg)
		}
	}
	fence(3)
	tick()
	if _, err := a.UnregisterNode(3, nil); !errors.Is(err, ErrNodeHostsReplicas) || !strings.Contains(err.Error(), "t-0, t-1") {
		t.Fatalf("unregister 3, which holds replicas: %v; want ErrNodeHostsReplicas naming t-0, t-1", err)
	}
	register(3, Level) // back
	a.ReportLevel(1, im.Nodes[1].Incarnation, Level)
	tick()
	if f := tick(); len(f) != 0 && f[0].FinalizeLevel.Level >= LevelUnregisterNode {
		t.Fatalf("node 4 registered at %d: proposed %v", LevelForgottenWriters, f[0].FinalizeLevel)
	}
	a.SetMembers([]int32{1, 2, 3, 4, 9}) // a learner whose removal is pending: asked again
	if _, err := a.UnregisterNode(4, nil); !errors.Is(err, ErrNodesChanged) {
		t.Fatalf("with member 9 not registered: %v; want ErrNodesChanged", err)
	}
	a.SetMembers([]int32{1, 2, 3, 4})
	req := &Request{Run: "1-r", Seq: 7}
	cmd, err := a.UnregisterNode(4, req)
	if err != nil {
		t.Fatal(err)
	}
	if u := cmd.UnregisterNode; u.Node != 4 || u.Incarnation != im.Nodes[4].Incarnation || len(u.Others) != 3 {
		t.Fatalf("command %+v; want node 4 at its incarnation, naming 3 others", u)
	}
	decoded, err := DecodeCommand(cmd.Encode())
	if err != nil {
		t.Fatal(err)
	}

	// A node registered again meanwhile (maybe by an older version) cancels it.
	moved := im.Clone()
	Apply(moved, idx+1, &Command{Op: OpRegister, Register: &Register{Node: 2, ClusterAddr: "a", Level: Level}})
	if r := Apply(moved, idx+2, decoded); !errors.Is(r.Err, ErrNodesChanged) || moved.Nodes[4] == nil {
		t.Fatalf("after node 2 registered again: %v, node 4 %v; want ErrNodesChanged and node 4 kept", r.Err, moved.Nodes[4])
	}
	restarted := im.Clone()
	Apply(restarted, idx+1, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a", Level: LevelForgottenWriters}})
	if r := Apply(restarted, idx+2, decoded); !errors.Is(r.Err, ErrNodeLive) || restarted.Nodes[4] == nil {
		t.Fatalf("after node 4 came back: %v; want ErrNodeLive and node 4 kept", r.Err)
	}

	if r := apply(im, decoded); r.Err != nil || im.Nodes[4] != nil {
		t.Fatalf("unregister 4: %v, node %+v; want it gone", r.Err, im.Nodes[4])
	}
	// The answer of a retry is the first one's, though the node is gone now.
	tick()
	again, err := a.UnregisterNode(4, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := apply(im, again); r.Err != nil {
		t.Fatalf("the retried request: %v; want the first answer", r.Err)
	}
	if _, err := a.UnregisterNode(4, &Request{Run: "1-r", Seq: 8}); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("a new request for node 4: %v; want ErrUnknownNode", err)
	}

	// Its Raft learner, until removed, still holds the level back; then the level rises.
	if f := tick(); len(f) != 0 {
		t.Fatalf("with member 4 not yet removed: proposed %v", f)
	}
	a.SetMembers([]int32{1, 2, 3})
	f := tick()
	if len(f) != 1 || f[0].FinalizeLevel.Level != Level {
		t.Fatalf("proposed %v; want finalize-level %d", f, Level)
	}
	apply(im, f[0])
	if im.Level != Level {
		t.Fatalf("level %d; want %d", im.Level, Level)
	}

	// At the level no others are named; a snapshot keeps the node forgotten.
	register(5, Level)
	fence(5)
	tick()
	cmd, err = a.UnregisterNode(5, nil)
	if err != nil || cmd.UnregisterNode.Others != nil {
		t.Fatalf("at level %d: %+v, %v; want a command naming no others", Level, cmd, err)
	}
	if r := apply(im, cmd); r.Err != nil {
		t.Fatal(r.Err)
	}
	back, err := DecodeImage(EncodeImage(im))
	if err != nil || back.Nodes[5] != nil || back.Nodes[4] != nil || len(back.Nodes) != 3 {
		t.Fatalf("after a snapshot: nodes %v, %v; want 1-3", back.NodeIDs(), err)
	}
}
