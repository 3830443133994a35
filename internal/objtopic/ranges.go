package objtopic

import "sort"

// Range is an inclusive range of integers.
type Range struct {
	From int64 `json:"f"`
	To   int64 `json:"t"`
}

// Ranges is a set of integers as sorted, disjoint, non-adjacent inclusive ranges: compact when
// the set is mostly contiguous (committed file numbers of a writer, committed sequence numbers
// of a producer). The zero value is empty. Methods that change it return a new slice when they
// must not disturb a published copy (Add copies).
type Ranges []Range

// Covers reports whether every integer of [from, to] is in the set.
func (r Ranges) Covers(from, to int64) bool {
	i := sort.Search(len(r), func(i int) bool { return r[i].To >= from })
	return i < len(r) && r[i].From <= from && r[i].To >= to
}

// Overlaps reports whether any integer of [from, to] is in the set.
func (r Ranges) Overlaps(from, to int64) bool {
	i := sort.Search(len(r), func(i int) bool { return r[i].To >= from })
	return i < len(r) && r[i].From <= to
}

// Add returns the set with [from, to] added (a new slice; r is not modified).
func (r Ranges) Add(from, to int64) Ranges {
	out := make(Ranges, 0, len(r)+1)
	i := 0
	for ; i < len(r) && r[i].To < from-1; i++ {
		out = append(out, r[i])
	}
	for ; i < len(r) && r[i].From <= to+1; i++ {
		from, to = min(from, r[i].From), max(to, r[i].To)
	}
	out = append(out, Range{from, to})
	return append(out, r[i:]...)
}

// DropBelow returns the set without its lowest ranges while it has more than max of them.
func (r Ranges) DropBelow(maxRanges int) Ranges {
	if len(r) <= maxRanges {
		return r
	}
	return append(Ranges(nil), r[len(r)-maxRanges:]...)
}

// End returns the end of the range holding x, or x-1 if x is not in the set: everything from
// x to the result is in the set.
func (r Ranges) End(x int64) int64 {
	i := sort.Search(len(r), func(i int) bool { return r[i].To >= x })
	if i < len(r) && r[i].From <= x {
		return r[i].To
	}
	return x - 1
}
