package broker

import (
	"maps"
	"slices"
	"testing"
)

// TestAssignmentRule checks Kafka's rack-unaware rule: no node twice in a partition, leaders
// spread evenly.
func TestAssignmentRule(t *testing.T) {
	for n := int32(1); n <= 5; n++ {
		nodes := make([]int32, n)
		for i := range nodes {
			nodes[i] = int32(i + 10)
		}
		for rf := int16(1); rf <= int16(n); rf++ {
			got := assignOver(nodes, nil, 0, 3*n+1, rf, 1)
			leaders := map[int32]int{}
			for _, r := range got {
				leaders[r[0]]++
				c := slices.Clone(r)
				slices.Sort(c)
				if len(slices.Compact(c)) != int(rf) {
					t.Fatalf("n=%d rf=%d: replicas %v name a node twice", n, rf, r)
				}
			}
			for _, id := range nodes {
				if leaders[id] < 3 {
					t.Errorf("n=%d rf=%d: node %d leads %d partitions of %d", n, rf, id, leaders[id], 3*n+1)
				}
			}
		}
	}
}

// TestRackAwareAssignment: with nodes in two racks or more, every partition spans
// min(rf, racks) racks, names no node twice, and leaders and replicas stay spread over the
// nodes; nodes all in one rack are assigned as without racks.
func TestRackAwareAssignment(t *testing.T) {
	layouts := map[string]map[int32]string{
		"2x3":            {1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "b"},
		"3x2":            {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"},
		"uneven":         {1: "a", 2: "a", 3: "a", 4: "b"},
		"one per rack":   {1: "a", 2: "b", 3: "c"},
		"some unnamed":   {1: "a", 2: "a", 3: "", 4: ""},
		"3 racks uneven": {1: "a", 2: "b", 3: "b", 4: "c", 5: "c", 6: "c", 7: "c"},
	}
	for name, racks := range layouts {
		nodes := slices.Sorted(maps.Keys(racks))
		nRacks := len(slices.Compact(slices.Sorted(maps.Values(racks))))
		n := int32(len(nodes))
		for rf := int16(1); rf <= int16(n); rf++ {
			for start := range n {
				parts := 4 * n
				got := assignOver(nodes, racks, 0, parts, rf, start)
				leaders, held := map[int32]int{}, map[int32]int{}
				for _, r := range got {
					if len(r) != int(rf) {
						t.Fatalf("%s rf=%d: replicas %v", name, rf, r)
					}
					leaders[r[0]]++
					spanned := map[string]bool{}
					for _, id := range r {
						held[id]++
						spanned[racks[id]] = true
					}
					c := slices.Clone(r)
					slices.Sort(c)
					if len(slices.Compact(c)) != int(rf) {
						t.Fatalf("%s rf=%d: replicas %v name a node twice", name, rf, r)
					}
					if len(spanned) != min(int(rf), nRacks) {
						t.Fatalf("%s rf=%d: replicas %v span %d racks, want %d", name, rf, r, len(spanned), min(int(rf), nRacks))
					}
				}
				for _, id := range nodes {
					if leaders[id] != 4 {
						t.Errorf("%s rf=%d start=%d: node %d leads %d of %d partitions", name, rf, start, id, leaders[id], parts)
					}
				}
				// Replicas spread as evenly as the racks allow: in an even layout every node
				// holds the same number.
				if name == "2x3" || name == "3x2" || name == "one per rack" {
					for _, id := range nodes {
						if want := int(parts) * int(rf) / int(n); held[id] != want {
							t.Errorf("%s rf=%d start=%d: node %d holds %d replicas, want %d", name, rf, start, id, held[id], want)
						}
					}
				}
			}
		}
	}
	one := map[int32]string{1: "a", 2: "a", 3: "a"}
	if got, want := assignOver([]int32{1, 2, 3}, one, 0, 7, 2, 1), assignOver([]int32{1, 2, 3}, nil, 0, 7, 2, 1); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("one rack: %v, want the rack-unaware %v", got, want)
	}
}
