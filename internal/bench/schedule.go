package bench

import (
	"context"
	"time"
)

// Schedule hands out the intended send times of one open-loop producer: the i-th is
// start + i/rate. The times are evenly spaced and none is ever skipped, however late the caller
// asks for the next one, so a producer that falls behind sends its backlog stamped with the
// times it should have gone out at, and the delay shows up as latency rather than as a lower
// rate (no coordinated omission). A Schedule is owned by one goroutine.
type Schedule struct {
	start  time.Time
	period float64 // nanoseconds between intended times, > 0
	next   int64   // index of the next intended time
}

// NewSchedule returns a schedule of rate records/s (> 0) starting at start.
func NewSchedule(start time.Time, rate float64) *Schedule {
	if rate <= 0 {
		panic("bench: NewSchedule with a rate <= 0")
	}
	return &Schedule{start: start, period: 1e9 / rate}
}

// Next returns the next intended send time and advances past it.
func (s *Schedule) Next() time.Time {
	// Multiplying (not adding period after period) keeps rounding from drifting.
	t := s.start.Add(time.Duration(float64(s.next) * s.period))
	s.next++
	return t
}

// Issued is how many intended times Next has handed out.
func (s *Schedule) Issued() int64 { return s.next }

// Go's timers park the runtime in epoll_pwait, whose timeout is whole milliseconds: a 100 µs
// time.Sleep takes about 1.1 ms on Linux. So a wait shorter than coarseWaitSlack is done with a
// nanosleep system call on the goroutine's thread (about 75 µs late on the 2-core test VM), and a
// longer one sleeps on a timer until coarseWaitSlack before the target and finishes the same way.
const coarseWaitSlack = 2 * time.Millisecond

// waitUntil returns at t or just after it, or false early if ctx ends. It never returns before
// t while ctx is live: a record is never sent ahead of its intended time.
func waitUntil(ctx context.Context, t time.Time) bool {
	for {
		d := time.Until(t)
		switch {
		case d <= 0:
			return true
		case d < coarseWaitSlack:
			preciseSleep(d)
		default:
			timer := time.NewTimer(d - coarseWaitSlack)
			select {
			case <-ctx.Done():
				timer.Stop()
				return false
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			return false
		}
	}
}
