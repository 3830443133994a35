// Package logevery bounds how often a log line that keeps coming back is written: a failure met
// by every request, every retry or every tick (an object store failing each GET, a full disk
// failing a task every 2 s) is logged, not repeated for each.
package logevery

import (
	"sync"
	"time"
)

// Limiter lets a line through at most once every Every and counts the ones it held back. Safe
// for concurrent use; a Limiter must not be copied after first use.
type Limiter struct {
	Every time.Duration

	mu   sync.Mutex
	last time.Time
	held int
}

// Allow reports whether the line may be logged at now, and how many were held back since the
// last one let through.
func (l *Limiter) Allow(now time.Time) (held int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.Every {
		l.held++
		return 0, false
	}
	held = l.held
	l.last, l.held = now, 0
	return held, true
}

// Reset forgets the last line let through: the next one goes through at once (the condition it
// reports ended, and a new one is news).
func (l *Limiter) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.held = time.Time{}, 0
}

// Keyed is a Limiter per key (a peer's address, a partition), each letting a line through at
// most once every Every. Safe for concurrent use; the zero value needs Every set.
type Keyed[K comparable] struct {
	Every time.Duration

	mu  sync.Mutex
	per map[K]*Limiter
}

// Allow is Limiter.Allow for key's line.
func (k *Keyed[K]) Allow(key K, now time.Time) (held int, ok bool) {
	k.mu.Lock()
	l := k.per[key]
	if l == nil {
		if k.per == nil {
			k.per = map[K]*Limiter{}
		}
		l = &Limiter{Every: k.Every}
		k.per[key] = l
	}
	k.mu.Unlock()
	return l.Allow(now)
}
