package order

import "sort"

// SlotIndex maps a shard's partition offsets to its slots and back. Each record is one slot at
// one offset; a no-op entry is one offset standing for a run of slots (docs/speclog.md), so
// slots run ahead of offsets by the no-ops' extra slots. The index keeps one entry per no-op
// entry, with the extra slots before it; a partition rebuilds it on recovery from its no-op
// control batches.
type SlotIndex struct {
	startOffset int64 // the log start: offsets below are gone
	startSlot   int64 // the slot at startOffset
	nextOffset  int64 // the log end
	noops       []noopEntry
}

type noopEntry struct {
	offset int64
	slots  int64
	extra  int64 // extra slots (slots − 1 per no-op entry) before this entry, since startOffset
}

// NewSlotIndex starts an index at a log start offset holding slot startSlot.
func NewSlotIndex(startOffset, startSlot int64) *SlotIndex {
	return &SlotIndex{startOffset: startOffset, startSlot: startSlot, nextOffset: startOffset}
}

// End is the next offset, and the next slot.
func (x *SlotIndex) End() (offset, slot int64) {
	return x.nextOffset, x.slotAt(x.nextOffset)
}

// Records notes n records appended at the log end.
func (x *SlotIndex) Records(n int64) { x.nextOffset += n }

// NoOp notes a no-op entry of slots slots appended at the log end.
func (x *SlotIndex) NoOp(slots int64) {
	extra := int64(0)
	if k := len(x.noops); k > 0 {
		extra = x.noops[k-1].extra + x.noops[k-1].slots - 1
	}
	x.noops = append(x.noops, noopEntry{offset: x.nextOffset, slots: slots, extra: extra})
	x.nextOffset++
}

// slotAt is the first slot at offset (offsets from startOffset to nextOffset).
func (x *SlotIndex) slotAt(offset int64) int64 {
	// the no-op entries before offset
	i := sort.Search(len(x.noops), func(i int) bool { return x.noops[i].offset >= offset })
	extra := int64(0)
	if i > 0 {
		extra = x.noops[i-1].extra + x.noops[i-1].slots - 1
	}
	return x.startSlot + (offset - x.startOffset) + extra
}

// Slot is the first slot at offset, and how many slots the offset holds (1 for a record);
// false outside the log.
func (x *SlotIndex) Slot(offset int64) (slot, n int64, ok bool) {
	if offset < x.startOffset || offset >= x.nextOffset {
		return 0, 0, false
	}
	n = 1
	if i := sort.Search(len(x.noops), func(i int) bool { return x.noops[i].offset >= offset }); i < len(x.noops) && x.noops[i].offset == offset {
		n = x.noops[i].slots
	}
	return x.slotAt(offset), n, true
}

// Offset is the offset holding slot (a no-op entry's offset for any of its slots); false
// outside the log.
func (x *SlotIndex) Offset(slot int64) (int64, bool) {
	if _, end := x.End(); slot < x.startSlot || slot >= end {
		return 0, false
	}
	// the last no-op entry whose first slot is at or before slot
	i := sort.Search(len(x.noops), func(i int) bool { return x.noops[i].offset+x.noops[i].extra+x.startSlot-x.startOffset > slot })
	if i == 0 {
		return x.startOffset + (slot - x.startSlot), true
	}
	e := x.noops[i-1]
	first := x.startSlot + (e.offset - x.startOffset) + e.extra
	if slot < first+e.slots {
		return e.offset, true
	}
	return e.offset + 1 + (slot - first - e.slots), true
}

// Truncate cuts the log at offset (a failed shard's unacknowledged tail, a replica truncated to
// its leader's log).
func (x *SlotIndex) Truncate(offset int64) {
	if offset >= x.nextOffset || offset < x.startOffset {
		return
	}
	i := sort.Search(len(x.noops), func(i int) bool { return x.noops[i].offset >= offset })
	x.noops = x.noops[:i]
	x.nextOffset = offset
}

// Trim moves the log start to offset (retention, DeleteRecords, SpecLog Trim).
func (x *SlotIndex) Trim(offset int64) {
	if offset <= x.startOffset || offset > x.nextOffset {
		return
	}
	slot := x.slotAt(offset)
	i := sort.Search(len(x.noops), func(i int) bool { return x.noops[i].offset >= offset })
	rest := make([]noopEntry, len(x.noops)-i)
	var extra int64
	for j, e := range x.noops[i:] {
		e.extra = extra
		extra += e.slots - 1
		rest[j] = e
	}
	x.noops, x.startOffset, x.startSlot = rest, offset, slot
}
