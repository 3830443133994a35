package controller

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCommandLevel: the cluster's level rises only once every registered node is known to
// apply it, by its registration or its heartbeats (a node registered through an older active
// controller is in the image at 0), and every voter is registered; applying finalize-level
// reads only node ids and incarnations, so an image whose node levels an older snapshot
// dropped decides the same, and a registration since the proposal cancels it; a node below
// the cluster's level is refused registration; the level is kept and never lowered.
func TestCommandLevel(t *testing.T) {
	im := cluster3(t) // registered as an older version would: no level
	now := time.Unix(1000, 0)
	a := NewActive(testActiveConfig(), im.Clone(), now)
	tick := finalizeTicks(a, im, &now)
	idx := uint64(100)
	apply := func(img *Image, c *Command) Result { idx++; return Apply(img, idx, c) }
	register := func(node int32, level int) Result {
		return apply(im, &Command{Op: OpRegister, Register: &Register{Node: node, KafkaHost: "h", KafkaPort: 9000 + node, ClusterAddr: "a", Level: level}})
	}
	for _, n := range []int32{1, 2} { // two of three nodes upgraded
		if r := register(n, Level); r.Err != nil {
			t.Fatal(r.Err)
		}
		if f := tick(); len(f) != 0 {
			t.Fatalf("with node 3 of an older version: proposed %v", f)
		}
	}
	// Node 3 runs this version but registered through an older controller (level 0 in the
	// image): its heartbeats say otherwise, but a Raft member not registered (a voter not
	// started yet, a learner whose removal is pending) holds it back.
	a.ReportLevel(3, im.Nodes[3].Incarnation, Level)
	a.SetMembers([]int32{1, 2, 3, 4})
	if f := tick(); len(f) != 0 {
		t.Fatalf("with member 4 unregistered: proposed %v", f)
	}
	a.SetMembers([]int32{1, 2, 3})
	f := tick()
	if len(f) != 1 || f[0].FinalizeLevel.Level != Level || len(f[0].FinalizeLevel.Nodes) != 3 {
		t.Fatalf("every node at this level: proposed %v; want one finalize-level %d naming 3 nodes", f, Level)
	}
	for _, c := range a.Tick(now.Add(time.Millisecond)).Propose {
		if c.Op == OpFinalizeLevel {
			t.Fatalf("asked again at once: %v", c)
		}
	}
	// A replica whose image came from an older version's snapshot (no node levels) applies it
	// the same.
	b := EncodeImage(im)
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, n := range raw["nodes"].(map[string]any) {
		delete(n.(map[string]any), "level")
	}
	b, _ = json.Marshal(raw)
	old, err := DecodeImage(b)
	if err != nil {
		t.Fatal(err)
	}
	apply(im, f[0])
	apply(old, f[0])
	if im.Level != Level || old.Level != Level || old.Nodes[3].Level != Level || im.NodesLevel() != Level {
		t.Fatalf("after finalize-level: level %d (from an older snapshot %d, its node 3 at %d), nodes' %d; want %d",
			im.Level, old.Level, old.Nodes[3].Level, im.NodesLevel(), Level)
	}
	if f := tick(); len(f) != 0 {
		t.Fatalf("proposed %v at the cluster's level", f)
	}
	// A node of an older version (a downgrade, or a new node) is refused; its entry stays.
	before := *im.Nodes[2]
	if r := register(2, 0); !errors.Is(r.Err, ErrLevel) || im.Nodes[2].Incarnation != before.Incarnation {
		t.Fatalf("an older node's registration: %v, node %+v; want ErrLevel and no change", r.Err, im.Nodes[2])
	}
	if r := register(7, 0); !errors.Is(r.Err, ErrLevel) || im.Nodes[7] != nil {
		t.Fatalf("a new node of an older version: %v, node %+v; want ErrLevel and no node", r.Err, im.Nodes[7])
	}
	// Never lowered; kept in a snapshot.
	apply(im, &Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: 0, Nodes: f[0].FinalizeLevel.Nodes}})
	back, err := DecodeImage(EncodeImage(im))
	if err != nil || back.Level != Level || back.Nodes[1].Level != Level {
		t.Fatalf("after a lower finalize and a snapshot: level %d, node 1 level %d, %v", back.Level, back.Nodes[1].Level, err)
	}
}

// TestFinalizeLevelCancelled: a node registered (again) between the proposal and its apply
// cancels finalize-level: the proposal named another incarnation, or not the node at all.
func TestFinalizeLevelCancelled(t *testing.T) {
	im := cluster3(t)
	nodes := map[int32]uint64{}
	for id, n := range im.Nodes {
		nodes[id] = n.Incarnation
	}
	c := &Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: Level, Nodes: nodes}}
	restarted := im.Clone()
	Apply(restarted, 50, &Command{Op: OpRegister, Register: &Register{Node: 2, ClusterAddr: "a"}}) // an older version's restart
	Apply(restarted, 51, c)
	added := im.Clone()
	Apply(added, 50, &Command{Op: OpRegister, Register: &Register{Node: 9, ClusterAddr: "a"}})
	Apply(added, 51, c)
	Apply(im, 50, c)
	if restarted.Level != 0 || added.Level != 0 || im.Level != Level {
		t.Fatalf("levels: after a restart %d, after a new node %d, unchanged %d; want 0, 0, %d", restarted.Level, added.Level, im.Level, Level)
	}
}

// TestCommandLevelHeld: with runnel.command.level.auto=false the active controller does not
// raise the level by itself; an operator raises it (FinalizeTo), never lowers it, never above
// this version's level or what a node applies.
func TestCommandLevelHeld(t *testing.T) {
	im := cluster3(t)
	idx := uint64(100)
	apply := func(c *Command) Result { idx++; return Apply(im, idx, c) }
	apply(&Command{Op: OpSetNodeConfigs, SetNodeConfigs: &SetNodeConfigs{Node: -1, Configs: map[string]string{AutoLevelConfig: "false"}}})
	for n := int32(1); n <= 3; n++ {
		lvl := Level
		if n == 3 {
			lvl = LevelForgottenWriters // an older version
		}
		apply(&Command{Op: OpRegister, Register: &Register{Node: n, KafkaHost: "h", KafkaPort: 9000 + n, ClusterAddr: "a", Level: lvl}})
	}
	now := time.Unix(1000, 0)
	a := NewActive(testActiveConfig(), im.Clone(), now)
	a.SetMembers([]int32{1, 2, 3})
	tick := finalizeTicks(a, im, &now)
	if f := tick(); len(f) != 0 {
		t.Fatalf("held: proposed %v", f)
	}
	if _, err := a.FinalizeTo(Level + 1); !errors.Is(err, ErrLevelChange) {
		t.Fatalf("FinalizeTo(%d) above this version: %v; want ErrLevelChange", Level+1, err)
	}
	if _, err := a.FinalizeTo(Level); !errors.Is(err, ErrLevelChange) || !strings.Contains(err.Error(), "node 3 applies command level 1") {
		t.Fatalf("FinalizeTo(%d) with node 3 at 1: %v; want ErrLevelChange naming node 3", Level, err)
	}
	c, err := a.FinalizeTo(LevelForgottenWriters)
	if err != nil || c.FinalizeLevel.Level != LevelForgottenWriters {
		t.Fatalf("FinalizeTo(1): %+v, %v", c, err)
	}
	apply(c)
	if im.Level != LevelForgottenWriters {
		t.Fatalf("level %d after FinalizeTo(1)", im.Level)
	}
	tick()
	if c, err := a.FinalizeTo(LevelForgottenWriters); c != nil || err != nil {
		t.Fatalf("FinalizeTo(the level): %v, %v; want nothing to do", c, err)
	}
	if _, err := a.FinalizeTo(0); !errors.Is(err, ErrLevelChange) || !strings.Contains(err.Error(), "never lowered") {
		t.Fatalf("FinalizeTo(0): %v; want it refused", err)
	}
	apply(&Command{Op: OpRegister, Register: &Register{Node: 3, KafkaHost: "h", KafkaPort: 9003, ClusterAddr: "a", Level: Level}})
	if f := tick(); len(f) != 0 {
		t.Fatalf("held, every node at %d: proposed %v", Level, f)
	}
	apply(&Command{Op: OpSetNodeConfigs, SetNodeConfigs: &SetNodeConfigs{Node: -1, Configs: map[string]string{}}})
	if f := tick(); len(f) != 1 || f[0].FinalizeLevel.Level != Level {
		t.Fatalf("auto again: proposed %v; want finalize-level %d", f, Level)
	}
}

// finalizeTicks returns a tick of the active controller a second after the last (*now), on a
// copy of im: the finalize-level commands it proposes.
func finalizeTicks(a *Active, im *Image, now *time.Time) func() []*Command {
	return func() (out []*Command) {
		*now = now.Add(time.Second)
		a.SetImage(im.Clone(), *now)
		for _, c := range a.Tick(*now).Propose {
			if c.Op == OpFinalizeLevel {
				out = append(out, c)
			}
		}
		return out
	}
}
