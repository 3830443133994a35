package objtopic

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRangesAgainstAMap: random adds, checked against a plain set.
func TestRangesAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var r Ranges
		model := map[int64]bool{}
		for range 30 {
			from := rng.Int64N(60)
			to := from + rng.Int64N(5)
			before := fmt.Sprint(r)
			next := r.Add(from, to)
			if fmt.Sprint(r) != before {
				t.Fatalf("Add modified its receiver")
			}
			r = next
			for x := from; x <= to; x++ {
				model[x] = true
			}
			for i := range r {
				if r[i].From > r[i].To || (i > 0 && r[i].From <= r[i-1].To+1) {
					t.Fatalf("round %d: not sorted, disjoint and non-adjacent: %v", round, r)
				}
			}
			for q := range 40 {
				end := int64(q) - 1
				for model[end+1] {
					end++
				}
				if got := r.End(int64(q)); got != end {
					t.Fatalf("round %d: %v: End(%d) = %d, want %d", round, r, q, got, end)
				}
				a, b := int64(q), int64(q)+rng.Int64N(4)
				all, any := true, false
				for x := a; x <= b; x++ {
					all, any = all && model[x], any || model[x]
				}
				if r.Covers(a, b) != all || r.Overlaps(a, b) != any {
					t.Fatalf("round %d: %v: Covers(%d,%d)=%v Overlaps=%v; want %v %v", round, r, a, b, r.Covers(a, b), r.Overlaps(a, b), all, any)
				}
			}
		}
	}
	r := Ranges{}.Add(1, 5).Add(9, 9)
	if r.End(1) != 5 || r.End(0) != -1 || r.End(3) != 5 || r.End(6) != 5 || r.End(9) != 9 || r.End(10) != 9 {
		t.Errorf("End of %v: %d %d %d %d %d %d", r, r.End(1), r.End(0), r.End(3), r.End(6), r.End(9), r.End(10))
	}
	if got := r.DropBelow(1); len(got) != 1 || got[0].From != 9 {
		t.Errorf("DropBelow(1) of %v = %v", r, got)
	}
}
