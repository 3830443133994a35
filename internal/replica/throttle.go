package replica

import (
	"math"
	"sync"
	"time"
)

// Replication quotas, as Kafka's leader/follower.replication.throttled.rate and .replicas: a
// leader holds its sends of a throttled partition to a follower that is out of sync (not in the
// ISR) to the rates that apply, so that a reassignment's catch-up cannot take all of a node's
// bandwidth. Two rules beyond Kafka's come from Runnel's quorum commit: an in-sync follower is
// never throttled (as in Kafka), and neither is a follower the high watermark waits for (a
// replica set with fewer in-sync members than its quorum without it), so a throttle never holds
// back producers — only the catch-up of replicas the commit does not need.

// Throttle tells a leader which rate buckets hold back a send.
type Throttle interface {
	// Buckets returns the buckets a send of topic's partition to follower must fit in (nil:
	// the send is not throttled). It is called only for out-of-sync followers.
	Buckets(topic string, partition, follower int32) []*Bucket
}

// Bucket is a rate limit in bytes per second, a token bucket holding at most one second of
// its rate: a send goes when the bucket is not in debt, and its bytes are taken after, so over
// time the bytes sent stay within the rate (a send larger than the bucket puts it in debt for
// longer).
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // bytes per second
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket of rate bytes per second.
func NewBucket(rate float64) *Bucket {
	return &Bucket{rate: rate, tokens: rate}
}

// SetRate changes the rate, keeping what is in the bucket (at most one second of the new rate).
func (b *Bucket) SetRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rate = rate
	b.tokens = math.Min(b.tokens, rate)
}

func (b *Bucket) refill(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = math.Min(b.rate, b.tokens+b.rate*now.Sub(b.last).Seconds())
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}

// Ready reports whether a send may go now.
func (b *Bucket) Ready(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return b.tokens > 0
}

// Take counts n bytes sent.
func (b *Bucket) Take(n int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.tokens -= float64(n)
}
