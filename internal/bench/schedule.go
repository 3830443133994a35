package bench

import (
	"context"
	"math"
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
	t := s.at(s.next)
	s.next++
	return t
}

// at is the k-th intended time. Multiplying (not adding period after period) keeps rounding
// from drifting.
func (s *Schedule) at(k int64) time.Time {
	return s.start.Add(time.Duration(float64(k) * s.period))
}

// CountBefore is how many intended times not handed out yet fall before end.
func (s *Schedule) CountBefore(end time.Time) int64 {
	// The first index at or after end, from its estimate, nudged by the times themselves.
	k := max(int64(math.Ceil(float64(end.Sub(s.start))/s.period)), 0)
	for k > 0 && !s.at(k-1).Before(end) {
		k--
	}
	for s.at(k).Before(end) {
		k++
	}
	return max(k-s.next, 0)
}

// Issued is how many intended times Next has handed out.
func (s *Schedule) Issued() int64 { return s.next }

// Go's timers park the runtime in epoll_pwait, whose timeout is whole milliseconds: a 100 µs
// time.Sleep takes about 1.1 ms on Linux. So a wait shorter than coarseWaitSlack is done with a
// nanosleep system call on the goroutine's thread (about 75 µs late on the 2-core test VM), and a
// longer one sleeps on a timer until coarseWaitSlack before the target and finishes the same way.
const coarseWaitSlack = 2 * time.Millisecond

// waitUntil returns at t or just after it, or false once ctx has ended (also for a time already
// past). It never returns before t while ctx is live: a record is never sent ahead of its
// intended time.
func waitUntil(ctx context.Context, t time.Time) bool {
	for {
		if ctx.Err() != nil { // also for a time already past: after the deadline, nothing goes
			return false
		}
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
