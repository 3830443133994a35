package order

import (
	"math/rand/v2"
	"testing"
)

// TestSlotIndex checks the index against a model (one slot list per offset) over random
// appends of records and no-op entries, truncations and trims.
func TestSlotIndex(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 3))
		startOff, startSlot := int64(rnd.IntN(100)), int64(rnd.IntN(100))
		x := NewSlotIndex(startOff, startSlot)
		var model []int64 // slots held by offset startOff+i
		for step := range 300 {
			switch r := rnd.IntN(20); {
			case r < 12:
				n := int64(1 + rnd.IntN(4))
				x.Records(n)
				for range n {
					model = append(model, 1)
				}
			case r < 17:
				n := int64(1 + rnd.IntN(9))
				x.NoOp(n)
				model = append(model, n)
			case r < 18 && len(model) > 0:
				cut := rnd.IntN(len(model) + 1)
				x.Truncate(startOff + int64(cut))
				model = model[:cut]
			case len(model) > 0:
				k := rnd.IntN(len(model) + 1)
				x.Trim(startOff + int64(k))
				for _, n := range model[:k] {
					startSlot += n
				}
				startOff += int64(k)
				model = model[k:]
			}
			slot := startSlot
			for i, n := range model {
				off := startOff + int64(i)
				s, got, ok := x.Slot(off)
				if !ok || s != slot || got != n {
					t.Fatalf("seed %d step %d: Slot(%d) = %d,%d,%v; want %d,%d", seed, step, off, s, got, ok, slot, n)
				}
				for k := range n {
					if o, ok := x.Offset(slot + k); !ok || o != off {
						t.Fatalf("seed %d step %d: Offset(%d) = %d,%v; want %d", seed, step, slot+k, o, ok, off)
					}
				}
				slot += n
			}
			if eo, es := x.End(); eo != startOff+int64(len(model)) || es != slot {
				t.Fatalf("seed %d step %d: End = %d,%d; want %d,%d", seed, step, eo, es, startOff+int64(len(model)), slot)
			}
			if _, ok := x.Offset(slot); ok {
				t.Fatalf("seed %d: Offset of the slot past the end found", seed)
			}
			if _, _, ok := x.Slot(startOff - 1); ok && startOff > 0 {
				t.Fatalf("seed %d: Slot below the log start found", seed)
			}
		}
	}
}
