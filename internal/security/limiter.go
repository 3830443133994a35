package security

import (
	"sync"
	"time"
)

// FailureLimiter slows down failed logins per client host: the first failure is answered after
// base, each further one from the same host within window after twice the previous delay, up to
// max. It keeps one small entry per host that failed within the window.
type FailureLimiter struct {
	base, max, window time.Duration

	mu    sync.Mutex
	hosts map[string]*hostFailures
}

type hostFailures struct {
	n    int
	last time.Time
}

// NewFailureLimiter returns a limiter; base 0 delays nothing.
func NewFailureLimiter(base, max, window time.Duration) *FailureLimiter {
	return &FailureLimiter{base: base, max: max, window: window, hosts: map[string]*hostFailures{}}
}

// Fail records a failed login from host at now and returns how long to wait before answering.
func (l *FailureLimiter) Fail(host string, now time.Time) time.Duration {
	if l.base <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.hosts) > 10000 {
		for h, f := range l.hosts {
			if now.Sub(f.last) > l.window {
				delete(l.hosts, h)
			}
		}
	}
	f := l.hosts[host]
	if f == nil || now.Sub(f.last) > l.window {
		f = &hostFailures{}
		l.hosts[host] = f
	}
	f.n++
	f.last = now
	d := l.base
	for i := 1; i < f.n && d < l.max; i++ {
		d *= 2
	}
	return min(d, l.max)
}
