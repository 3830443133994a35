package replica

import (
	"testing"
	"time"
)

// TestBucketHoldsTheRate: over a long run the bytes a bucket lets through stay within its rate
// (plus the one second it may hold), whatever the send sizes.
func TestBucketHoldsTheRate(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBucket(1 << 20) // 1 MiB/s
	sent := 0
	for i := range 10_000 { // 10 s in 1 ms steps, sends of 64 KiB to 1 MiB
		now = now.Add(time.Millisecond)
		if b.Ready(now) {
			n := 64<<10 + (i%16)*64<<10
			b.Take(n, now)
			sent += n
		}
	}
	if limit := 11 << 20; sent > limit+1<<20 || sent < 9<<20 {
		t.Fatalf("%d bytes in 10 s at 1 MiB/s; want about 10 MiB (at most %d)", sent, limit+1<<20)
	}
	b.SetRate(0)
	now = now.Add(time.Hour)
	if b.Ready(now) {
		t.Fatal("a bucket of rate 0 let a send through")
	}
}

// TestThrottleableFollowers: a follower in sync, or one the high watermark waits for, is never
// throttled; an out-of-sync follower not needed for the quorum is, and a new replica is until
// it has caught up once.
func TestThrottleableFollowers(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLeader(1, 1, 100, 100, [][]int32{{1, 2, 3}}, true, 1, 10*time.Second, now)
	l.SetLocal(200, 200, true)
	for _, n := range []int32{2, 3} {
		l.Join(n, 100)
	}
	l.Ack(2, 200, 200, now) // caught up
	l.Ack(3, 150, 150, now) // behind, never caught up
	if l.Throttleable(2, now) {
		t.Error("an in-sync follower is throttleable")
	}
	if !l.Throttleable(3, now) {
		t.Error("a lagging follower not needed for the quorum (1 and 2 are 2 of 3) is not throttleable")
	}
	// 2 drops out of sync too: the quorum needs one of them, so neither is throttled.
	l.Stop(2, true)
	if l.Throttleable(3, now) || l.Throttleable(2, now) {
		t.Error("a follower the high watermark waits for is throttleable")
	}

	// A reassignment {1} → {1, 4}: while the target set learns, the high watermark does not
	// wait for 4, so it is throttled (as Kafka throttles a moving replica); once it caught up
	// the sets commit jointly, and 4 is needed for the target set's quorum (2 of 2).
	// {1, 2, 3} → {1, 2, 4}: 4 is not needed.
	l2 := NewLeader(1, 1, 100, 100, [][]int32{{1}, {1, 4}}, true, 1, 10*time.Second, now)
	l2.SetLocal(200, 200, true)
	l2.Join(4, 0)
	l2.Ack(4, 50, 50, now)
	if !l2.Throttleable(4, now) {
		t.Error("a new replica of a learning target set is not throttleable")
	}
	l2.Ack(4, 200, 200, now)
	l2.Ack(4, 150, 150, now.Add(time.Minute)) // behind again, and out of sync: still needed
	if l2.Throttleable(4, now.Add(time.Minute)) {
		t.Error("a new replica the joint target set's quorum needs is throttleable")
	}
	l3 := NewLeader(1, 1, 100, 100, [][]int32{{1, 2, 3}, {1, 2, 4}}, true, 1, 10*time.Second, now)
	l3.SetLocal(200, 200, true)
	for _, n := range []int32{2, 3, 4} {
		l3.Join(n, 100)
	}
	l3.Ack(2, 200, 200, now)
	l3.Ack(3, 200, 200, now)
	l3.Ack(4, 120, 120, now) // within LagMax of the reassignment's start, but never caught up
	if !l3.Throttleable(4, now) {
		t.Error("a new replica not needed for any quorum is not throttleable before it caught up")
	}
	l3.Ack(4, 200, 200, now.Add(time.Second))
	if l3.Throttleable(4, now.Add(time.Second)) {
		t.Error("a new replica that caught up is still throttleable")
	}
}
