package broker

import (
	"sync"
	"time"
)

// warnLimitEvery is how often a warnLimiter lets a warning through.
const warnLimitEvery = 10 * time.Second

// warnLimiter lets one warning of a kind through every warnLimitEvery and counts the others, so
// that a failure met by every request (an object store failing every GET) is logged, not
// repeated for each. The zero value is ready.
type warnLimiter struct {
	mu      sync.Mutex
	last    time.Time
	dropped int
}

// allow reports whether a warning may be logged now, and how many were held back since the last
// one logged.
func (w *warnLimiter) allow(now time.Time) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.last.IsZero() && now.Sub(w.last) < warnLimitEvery {
		w.dropped++
		return 0, false
	}
	n := w.dropped
	w.last, w.dropped = now, 0
	return n, true
}
