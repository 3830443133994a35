package bench

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// scheduledBefore counts the intended times of a fresh schedule (start, rate) with index >= from
// that fall before end: the ground truth of "scheduled records from next up to end".
func scheduledBefore(start time.Time, rate float64, from int64, end time.Time) (next time.Time, n int64) {
	s := NewSchedule(start, rate)
	for range from {
		s.Next()
	}
	next = s.Next()
	for t := next; t.Before(end); t = s.Next() {
		n++
	}
	return next, n
}

// noteUnsent must count the intended times in [next, end), as many as the schedule would have
// handed out before end. When end-next was a whole number of periods (the common case: rate
// 1000/s and whole-millisecond windows) it counted one too many.
func TestNoteUnsentCountsExactly(t *testing.T) {
	for _, c := range []struct {
		rate float64
		from int64
		end  time.Duration // after the schedule's start
	}{
		{1000, 1500, 2 * time.Second},     // 500 left: indices 1500..1999
		{1000, 0, 100 * time.Millisecond}, // 100 left
		{3, 0, 10 * time.Second},          // 30 left
		{1000, 1500, 2*time.Second + 500*time.Microsecond},
	} {
		_, want := scheduledBefore(epoch, c.rate, c.from, epoch.Add(c.end))
		// The producer's schedule as run leaves it: next handed out (and found unsendable).
		sched := NewSchedule(epoch, c.rate)
		for range c.from {
			sched.Next()
		}
		next := sched.Next()
		p := &producer{sched: sched}
		p.noteUnsent(epoch.Add(c.end), next)
		if p.unsent != want {
			t.Errorf("rate %v/s, next = index %d, end = start+%v: noteUnsent counted %d unsent; the schedule has %d intended times in [next, end)",
				c.rate, c.from, c.end, p.unsent, want)
		}
	}
}

// Once the hard deadline (ctx) has passed, a producer that is still behind must stop and report
// the rest of its schedule as unsent (docs/bench.md: "records still unsent are reported as
// unsent and by a note"; Counts.Unsent: "scheduled but not sent by the hard deadline").
// waitUntil answered true at once for a time already past, so the backlog was handed to Produce
// with the cancelled context and counted as sent (and failed). The client here reaches no
// broker (its dialer fails): what is checked is the producer's own accounting.
func TestProducerPastHardDeadlineSendsNothing(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"),
		kgo.Dialer(func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no network in this test")
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := DefaultWorkload()
	// A producer 10 s behind: its schedule started 10 s ago and the window ended 100.5 ms after
	// that start, so all 101 intended times (0 ms .. 100 ms) are in the past.
	start := time.Now().Add(-10 * time.Second)
	end := start.Add(100*time.Millisecond + 500*time.Microsecond)
	_, want := scheduledBefore(start, 1000, 0, end)
	p := newProducer(0, cl, &w, []string{"hunt-topic"}, NewSchedule(start, 1000), window{start: start, end: end}, &errorLog{})

	scheduleCtx, cancelSchedule := context.WithCancel(context.Background())
	cancelSchedule() // past the hard deadline
	recordCtx, cancelRecords := context.WithCancel(context.Background())
	cancelRecords() // as execute does once the hard deadline passes
	p.run(scheduleCtx, recordCtx, end)

	if sent := p.stats.sent.Load(); sent != 0 || p.unsent != want {
		t.Errorf("after the hard deadline: %d records handed to Produce (sent), %d counted unsent; want 0 sent and %d unsent",
			sent, p.unsent, want)
	}
}

// The SpecLog bench staggers its appenders across one period. It divided by
// time.Duration(rate): a rate below 1/s (--rate 0.5) made it a division by zero (a panic), and
// 1.5/s was taken for 1/s.
func TestAppenderOffset(t *testing.T) {
	for _, c := range []struct {
		a, n int
		rate float64
		want time.Duration
	}{
		{0, 10, 1000, 0},
		{5, 10, 1000, 500 * time.Microsecond},
		{1, 2, 0.5, time.Second},
		{1, 3, 1.5, 222222222},
	} {
		if got := appenderOffset(c.a, c.n, c.rate); got != c.want {
			t.Errorf("appenderOffset(%d, %d, %v) = %v; want %v", c.a, c.n, c.rate, got, c.want)
		}
	}
}

// bench failover's median of an even number of rounds is the mean of the two middle ones; it
// was the upper one (the maximum of two rounds).
func TestMedianOf(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{[]time.Duration{300 * ms}, 300 * ms},
		{[]time.Duration{400 * ms, 200 * ms}, 300 * ms},
		{[]time.Duration{5 * ms, 1 * ms, 3 * ms}, 3 * ms},
		{[]time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms}, 2500 * time.Microsecond},
	} {
		if got := medianOf(c.in); got != c.want {
			t.Errorf("medianOf(%v) = %v; want %v", c.in, got, c.want)
		}
	}
}
