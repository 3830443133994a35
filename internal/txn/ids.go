package txn

import (
	"fmt"
	"math"
	"sync"
)

// IDBlockSize is how many producer ids the allocator reserves with one durable write.
const IDBlockSize = 1000

// IDAllocator hands out producer ids that are never reused, across restarts: before it hands
// out the first id of a block it persists the end of the block, and a restarted allocator starts
// at the persisted end. A crash loses at most the unused rest of one block.
type IDAllocator struct {
	mu      sync.Mutex
	next    int64
	limit   int64 // ids below limit are reserved durably
	persist func(limit int64) error
}

// NewIDAllocator returns an allocator that starts at start (the limit persisted last, or 0) and
// calls persist with each new limit before using ids below it. persist must be durable when it
// returns nil.
func NewIDAllocator(start int64, persist func(limit int64) error) *IDAllocator {
	return &IDAllocator{next: start, limit: start, persist: persist}
}

// Next returns a new producer id.
func (a *IDAllocator) Next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == a.limit {
		if a.limit > math.MaxInt64-IDBlockSize {
			return 0, fmt.Errorf("txn: producer ids exhausted at %d", a.limit)
		}
		if err := a.persist(a.limit + IDBlockSize); err != nil {
			return 0, fmt.Errorf("txn: reserving producer ids: %w", err)
		}
		a.limit += IDBlockSize
	}
	id := a.next
	a.next++
	return id, nil
}
