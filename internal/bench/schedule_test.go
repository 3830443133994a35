package bench

import (
	"context"
	"testing"
	"time"
)

var epoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestScheduleEvenlySpaced(t *testing.T) {
	for _, rate := range []int64{1, 3, 4, 7, 1000, 10000, 333333} {
		s := NewSchedule(epoch, float64(rate))
		for i := range int64(200000) {
			got := s.Next().Sub(epoch)
			// i/rate seconds, exactly, give or take a nanosecond of rounding: the i-th time is
			// computed, not accumulated, so it does not drift.
			want := time.Duration(i * 1e9 / rate)
			if d := got - want; d < -1 || d > 1 {
				t.Fatalf("rate %d: Next() #%d = start+%v; want start+%v", rate, i, got, want)
			}
		}
	}
}

// A schedule never looks at the clock: however late the caller asks, the next intended time
// is the one after the last, so falling behind skips nothing.
func TestScheduleFallingBehindSkipsNothing(t *testing.T) {
	start := time.Now().Add(-time.Hour) // an hour behind before the first call
	s := NewSchedule(start, 1000)
	prev := s.Next()
	for i := 1; i < 5000; i++ {
		got := s.Next()
		if d := got.Sub(prev); d < time.Millisecond-time.Nanosecond || d > time.Millisecond+time.Nanosecond {
			t.Fatalf("Next() #%d - #%d = %v; want 1ms", i, i-1, d)
		}
		prev = got
	}
	if got := s.Issued(); got != 5000 {
		t.Errorf("Issued() = %d; want 5000", got)
	}
	if !prev.Before(time.Now()) {
		t.Errorf("intended times raced ahead to %v; want them still in the past", prev)
	}
}

func TestNewSchedulesInterleave(t *testing.T) {
	const producers, total = 3, 300.0
	scheds := newSchedules(epoch, total, producers)
	var times []time.Time
	for range 100 {
		for _, s := range scheds {
			times = append(times, s.Next())
		}
	}
	for i, got := range times {
		want := epoch.Add(time.Duration(float64(i) * 1e9 / total))
		if d := got.Sub(want); d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("merged intended time #%d = %v; want %v", i, got.Sub(epoch), want.Sub(epoch))
		}
	}
	for i, s := range newSchedules(epoch, 0, producers) {
		if s != nil {
			t.Errorf("newSchedules(rate 0)[%d] = %v; want nil (maximum rate)", i, s)
		}
	}
}

func TestWaitUntilNeverEarly(t *testing.T) {
	ctx := context.Background()
	if !waitUntil(ctx, time.Now().Add(-time.Second)) {
		t.Fatal("waitUntil(past) = false; want true")
	}
	for _, d := range []time.Duration{50 * time.Microsecond, 500 * time.Microsecond, 3 * time.Millisecond} {
		target := time.Now().Add(d)
		if !waitUntil(ctx, target) {
			t.Fatalf("waitUntil(+%v) = false; want true", d)
		}
		if now := time.Now(); now.Before(target) {
			t.Errorf("waitUntil(+%v) returned %v early", d, target.Sub(now))
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if waitUntil(cctx, time.Now().Add(time.Hour)) {
		t.Error("waitUntil(+1h) with a cancelled context = true; want false")
	}
}
