package broker

import (
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
			got := assignOver(nodes, 0, 3*n+1, rf, 1)
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
