package chaos

import (
	"slices"
	"testing"
)

// TestDescribeDuplicates: a duplicated record is described with every copy's place and its
// batch's producer id and epoch, records in order, at most the limit.
func TestDescribeDuplicates(t *testing.T) {
	offs := map[int32]map[int64]int64{0: {10: 7, 11: 8, 14: 7}, 1: {3: 9, 4: 8, 5: 9}}
	producers := map[int32]map[int64][2]int64{0: {10: {5, 0}, 14: {5, 1}, 11: {5, 0}}, 1: {3: {6, 0}, 4: {5, 0}, 5: {6, 0}}}
	seen := map[int64]int{7: 2, 8: 2, 9: 2}
	got := describeDuplicates(offs, producers, seen, 2)
	want := []string{
		"record 7: p0@10 (producer 5 epoch 0), p0@14 (producer 5 epoch 1)",
		"record 8: p0@11 (producer 5 epoch 0), p1@4 (producer 5 epoch 0)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
