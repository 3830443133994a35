// Package gctune gives the Go garbage collector a floor of heap headroom.
//
// A broker's live heap is small (a few MiB: indexes, producer state, group state) while it
// allocates fast (a request buffer per produce). With the default GOGC=100 the collector then
// runs whenever the heap doubles from almost nothing: measured, 4 cycles a second at 5,000
// produce requests a second, each taking a core for about a millisecond. On a machine with few
// cores that is the produce latency tail. Headroom lets the heap grow at least that many bytes
// past the live heap before the next cycle: GOGC stays the rule when the live heap is large
// (the next target is max(live × GOGC/100, headroom) above live), and cycles become rare when it
// is small.
//
// The tuner re-reads the live heap after every cycle (a cleanup attached to a sentinel object
// runs once per cycle) and sets the GC percentage from it. A GOMEMLIMIT still bounds the heap:
// the collector runs early when the limit is near, whatever the percentage says.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// maxPercent bounds the percentage the tuner sets (a live heap of a few KiB would ask for more).
const maxPercent = 1_000_000

// Tuner keeps the GC percentage at what gives the configured headroom. Stop ends it.
type Tuner struct {
	headroom uint64
	base     int // the percentage in force when the tuner started (GOGC, default 100)
	stopped  atomic.Bool
	sample   []metrics.Sample
	mu       sync.Mutex // serializes adjust with Stop
	last     int
}

// Start tunes the collector for headroom bytes unless headroom is 0 or the GOGC environment
// variable is set (an explicit setting wins). It returns nil when it does nothing.
func Start(headroom uint64) *Tuner {
	if headroom == 0 || os.Getenv("GOGC") != "" {
		return nil
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return nil // GC off: nothing to tune
	}
	t := &Tuner{headroom: headroom, base: base, last: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.adjust()
	t.arm()
	return t
}

// Percent computes the GC percentage that gives at least headroom bytes above a live heap of
// live bytes, never below base.
func Percent(live, headroom uint64, base int) int {
	live = max(live, 1<<20) // the runtime's own floor on the heap target is 4 MiB
	p := headroom * 100 / live
	if p > maxPercent {
		p = maxPercent
	}
	return max(int(p), base)
}

// arm attaches a cleanup to a fresh sentinel: it runs after the next cycle finds the sentinel
// unreachable, adjusts, and arms again.
func (t *Tuner) arm() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	}, t)
}

func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(t.sample[0].Value.Uint64(), t.headroom, t.base)
	// Skip small changes: every SetGCPercent recomputes the pacer.
	if p != t.last && (p > t.last+t.last/8 || p < t.last-t.last/8 || p == t.base) {
		debug.SetGCPercent(p)
		t.last = p
	}
}

// Percent reports the percentage the tuner last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Stop restores the percentage the tuner found. Safe on nil.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(t.base)
}
