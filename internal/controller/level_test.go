package controller

import (
	"errors"
	"testing"
	"time"
)

// TestCommandLevel: the cluster's level rises only once every registered node applies it (a
// rolling upgrade: nodes registered by an older version count as level 0); the active
// controller proposes it then, and not before; a node below the cluster's level is refused
// registration and its entry is not changed; the level is kept in snapshots and never lowered.
func TestCommandLevel(t *testing.T) {
	im := cluster3(t) // registered as an older version would: no level
	t0 := time.Unix(1000, 0)
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	finalizes := func(eff Effects) []*Command {
		var out []*Command
		for _, c := range eff.Propose {
			if c.Op == OpFinalizeLevel {
				out = append(out, c)
			}
		}
		return out
	}
	idx := uint64(100)
	apply := func(c *Command) Result { idx++; return Apply(im, idx, c) }
	register := func(node int32, level int) Result {
		return apply(&Command{Op: OpRegister, Register: &Register{Node: node, KafkaHost: "h", KafkaPort: 9000 + node, ClusterAddr: "a", Level: level}})
	}
	now := t0
	for _, n := range []int32{1, 2} { // two of three nodes upgraded
		if r := register(n, Level); r.Err != nil {
			t.Fatal(r.Err)
		}
		now = now.Add(time.Second)
		a.SetImage(im.Clone(), now)
		if f := finalizes(a.Tick(now)); len(f) != 0 || im.NodesLevel() != 0 {
			t.Fatalf("with node 3 of an older version: proposed %v, nodes' level %d; want nothing, 0", f, im.NodesLevel())
		}
	}
	// A finalize-level applied now (an older proposal, or one racing a registration) changes nothing.
	apply(&Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: Level}})
	if im.Level != 0 {
		t.Fatalf("the level rose to %d with a node of an older version registered", im.Level)
	}
	register(3, Level)
	now = now.Add(time.Second)
	a.SetImage(im.Clone(), now)
	f := finalizes(a.Tick(now))
	if len(f) != 1 || f[0].FinalizeLevel.Level != Level {
		t.Fatalf("every node upgraded: proposed %v; want finalize-level %d", f, Level)
	}
	if f := finalizes(a.Tick(now.Add(time.Millisecond))); len(f) != 0 {
		t.Fatalf("asked again at once: %v", f)
	}
	apply(f[0])
	if im.Level != Level {
		t.Fatalf("level %d after finalize-level; want %d", im.Level, Level)
	}
	a.SetImage(im.Clone(), now.Add(time.Minute))
	if f := finalizes(a.Tick(now.Add(time.Minute))); len(f) != 0 {
		t.Fatalf("proposed %v at the cluster's level", f)
	}
	// A node of an older version (a downgrade, or a new node) is refused; its entry stays.
	before := *im.Nodes[2]
	if r := register(2, 0); !errors.Is(r.Err, ErrLevel) || im.Nodes[2].Incarnation != before.Incarnation || im.Nodes[2].Level != Level {
		t.Fatalf("an older node's registration: %v, node %+v; want ErrLevel and no change", r.Err, im.Nodes[2])
	}
	if r := register(7, 0); !errors.Is(r.Err, ErrLevel) || im.Nodes[7] != nil {
		t.Fatalf("a new node of an older version: %v, node %+v; want ErrLevel and no node", r.Err, im.Nodes[7])
	}
	// Never lowered, kept in a snapshot.
	apply(&Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: 0}})
	back, err := DecodeImage(EncodeImage(im))
	if err != nil || back.Level != Level || back.Nodes[1].Level != Level {
		t.Fatalf("after a lower finalize and a snapshot: level %d, node 1 level %d, %v", back.Level, back.Nodes[1].Level, err)
	}
}
