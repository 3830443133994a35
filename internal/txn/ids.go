package txn

import (
	"fmt"
	"math"
	"sync"
)

// IDBlockSize is how many producer ids the allocator reserves at a time.
const IDBlockSize = 1000

// IDAllocator hands out producer ids that are never reused, across restarts and nodes: it
// hands out the ids of a reserved block, and reserves the next block (durably, so nobody reserves
// it again) when the block is used up. A crash loses at most the unused rest of one block.
type IDAllocator struct {
	mu      sync.Mutex
	next    int64
	limit   int64 // ids in [next, limit) are reserved for this allocator
	reserve func() (first int64, err error)
}

// NewIDAllocator returns an allocator that keeps its own reservations: it starts at start (the
// limit persisted last, or 0) and calls persist with each new limit before using ids below it.
// persist must be durable when it returns nil.
func NewIDAllocator(start int64, persist func(limit int64) error) *IDAllocator {
	a := &IDAllocator{next: start, limit: start}
	a.reserve = func() (int64, error) {
		if a.limit > math.MaxInt64-IDBlockSize {
			return 0, fmt.Errorf("txn: producer ids exhausted at %d", a.limit)
		}
		if err := persist(a.limit + IDBlockSize); err != nil {
			return 0, err
		}
		return a.limit, nil
	}
	return a
}

// NewBlockAllocator returns an allocator whose blocks come from reserve, which returns the
// first id of a newly reserved block of IDBlockSize ids (the cluster's controller hands them
// out).
func NewBlockAllocator(reserve func() (first int64, err error)) *IDAllocator {
	return &IDAllocator{reserve: reserve}
}

// Next returns a new producer id.
func (a *IDAllocator) Next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == a.limit {
		first, err := a.reserve()
		if err != nil {
			return 0, fmt.Errorf("txn: reserving producer ids: %w", err)
		}
		if first < 0 || first > math.MaxInt64-IDBlockSize {
			return 0, fmt.Errorf("txn: producer ids exhausted at %d", first)
		}
		a.next, a.limit = first, first+IDBlockSize
	}
	id := a.next
	a.next++
	return id, nil
}
