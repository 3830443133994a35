package broker

import (
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
)

// TestQuotaRate: Kafka's sampled rate over at least 10 windows of 1 s, and its throttle time.
func TestQuotaRate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var r rate
	if d := r.throttle(t0, 10e6, 1e6, false); d != 0 {
		t.Fatalf("10 MB at once against 1 MB/s: throttled %v; want none (measured over 10 s)", d)
	}
	d := r.throttle(t0.Add(100*time.Millisecond), 1e6, 1e6, false)
	// 11 MB over the 10 s minimum window: 1.1 MB/s, 10% over: 10% of 10 s.
	if d < 990*time.Millisecond || d > 1010*time.Millisecond {
		t.Fatalf("throttle %v; want 1 s", d)
	}
	// 20 s later the samples have aged out.
	if d := r.throttle(t0.Add(20*time.Second), 1e6, 1e6, false); d != 0 {
		t.Fatalf("after the samples aged out: throttled %v", d)
	}
	// A steady 2 MB/s for 15 s against 1 MB/s is throttled about as long again as it ran.
	var s rate
	var last time.Duration
	for i := range 150 {
		last = s.throttle(t0.Add(time.Duration(i)*100*time.Millisecond), 200e3, 1e6, false)
	}
	if last < 9*time.Second || last > 12*time.Second {
		t.Fatalf("steady 2× the quota: throttle %v; want about the 11 s window", last)
	}
	// A value that is not sent (a throttled fetch) does not count.
	var f rate
	f.throttle(t0, 10e6, 1e6, true)
	if d := f.throttle(t0, 5e6, 1e6, true); d == 0 {
		t.Fatal("15 MB against 10 MB allowed: not throttled")
	}
	if d := f.throttle(t0, 0, 1e6, true); d != 0 {
		t.Fatalf("after an unrecorded value: throttled %v; want the 10 MB only, within the quota", d)
	}
}

// TestQuotaWindows: quota.window.num and quota.window.size.seconds set how a rate is measured
// (over at least n-1 windows) and bound how long a request quota holds a client (one window);
// controller.quota.window.* size controller_mutation_rate's burst. Sensors made under other
// windows start afresh when they change.
func TestQuotaWindows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	// 5 windows of 2 s: the rate is measured over at least 8 s.
	r := rate{w: windows{n: 5, size: 2 * time.Second}}
	if d := r.throttle(t0, 8e6, 1e6, false); d != 0 {
		t.Fatalf("8 MB against 1 MB/s over 8 s: throttled %v", d)
	}
	// 8.8 MB over 8 s: 10% over, 10% of 8 s.
	if d := r.throttle(t0.Add(100*time.Millisecond), 0.8e6, 1e6, false); d < 790*time.Millisecond || d > 810*time.Millisecond {
		t.Fatalf("throttle %v; want 800ms", d)
	}
	// The samples age out after 5 × 2 s.
	if d := r.throttle(t0.Add(10*time.Second+200*time.Millisecond), 1e6, 1e6, false); d != 0 {
		t.Fatalf("after 10 s: throttled %v; want the old samples gone", d)
	}

	cw, mw := windows{n: 3, size: 2 * time.Second}, windows{n: 2, size: 5 * time.Second}
	q := quotaManager{windows: func() (windows, windows) { return cw, mw }}
	reqQ := []*controller.ClientQuota{{Entity: controller.QuotaEntity{Client: new("busy")},
		Values: map[string]float64{controller.QuotaRequestPercentage: 10, controller.QuotaControllerMutationRate: 1}}}
	// A request quota of 10% of a thread (0.1 s/s) over 4 s: 2 s of handling at once is 5×
	// over; the hold is capped at one 2 s window.
	if d := q.record(reqQ, controller.QuotaRequestPercentage, "", "busy", 2, t0); d != 2*time.Second {
		t.Fatalf("request quota far over: held %v; want one window of 2s", d)
	}
	// controller_mutation_rate 1/s with 2 windows of 5 s: a burst of 10 partitions, then debt.
	if ok, d := q.mutate(reqQ, "", "busy", 10, true, t0); !ok || d != 0 {
		t.Fatalf("10 partitions against a burst of 10: %v %v", ok, d)
	}
	if ok, d := q.mutate(reqQ, "", "busy", 3, false, t0); !ok || d != 3*time.Second {
		t.Fatalf("3 more: %v, wait %v; want admitted (not strict), 3s of debt", ok, d)
	}
	// New windows: the sensors start afresh (a full bucket of the new burst: 11 × 1 s).
	cw, mw = defaultWindows, defaultWindows
	if ok, d := q.mutate(reqQ, "", "busy", 11, true, t0); !ok || d != 0 {
		t.Fatalf("after the windows changed, 11 partitions: %v %v; want a fresh bucket of 11", ok, d)
	}
}

// TestMutationBucket: KIP-599's token bucket. It starts full (11 s of the quota), admits a
// topic of any size while not in debt, and the client waits out the debt; strict requests are
// refused while in debt, older versions are admitted and throttled.
func TestMutationBucket(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const rate = 5.0 // partitions per second: a burst of 55
	var k bucket
	if ok, d := k.take(t0, rate, 55, true); !ok || d != 0 {
		t.Fatalf("55 partitions from a full bucket of 55: admitted %v, throttle %v; want admitted, none", ok, d)
	}
	if ok, d := k.take(t0, rate, 60, true); !ok || d != 12*time.Second {
		t.Fatalf("60 more from an empty bucket (not in debt): admitted %v, throttle %v; want admitted, 60/5 = 12 s", ok, d)
	}
	if ok, d := k.take(t0.Add(2*time.Second), rate, 1, true); ok || d != 10*time.Second {
		t.Fatalf("strict, 2 s later in debt of 50: admitted %v, throttle %v; want refused, 10 s", ok, d)
	}
	if ok, d := k.take(t0.Add(2*time.Second), rate, 10, false); !ok || d != 12*time.Second {
		t.Fatalf("an old version in debt: admitted %v, throttle %v; want admitted, debt of 60 = 12 s", ok, d)
	}
	if ok, d := k.take(t0.Add(14*time.Second), rate, 3, true); !ok || d != 600*time.Millisecond {
		t.Fatalf("once the debt is paid: admitted %v, throttle %v; want admitted, 3/5 s", ok, d)
	}
	// Refilled up to the burst only.
	if ok, d := k.take(t0.Add(time.Hour), rate, 56, true); !ok || d != 200*time.Millisecond {
		t.Fatalf("56 after an hour: admitted %v, throttle %v; want admitted, 1/5 s (the burst is 55)", ok, d)
	}
	// The manager: a client with a quota, one without.
	qs := []*controller.ClientQuota{{Entity: controller.QuotaEntity{Client: new("mutator")}, Values: map[string]float64{controller.QuotaControllerMutationRate: rate}}}
	var q quotaManager
	if ok, d := q.mutate(qs, "", "mutator", 100, true, t0); !ok || d != 9*time.Second {
		t.Fatalf("100 partitions for mutator: admitted %v, throttle %v; want admitted, 9 s", ok, d)
	}
	if ok, _ := q.mutate(qs, "", "mutator", 1, true, t0.Add(time.Second)); ok {
		t.Fatal("mutator in debt: admitted; want refused")
	}
	if ok, d := q.mutate(qs, "", "other", 1000, true, t0); !ok || d != 0 {
		t.Fatalf("a client without a quota: admitted %v, throttle %v; want admitted, none", ok, d)
	}
}

// TestConnectionQuota: connection_creation_rate per client IP (KIP-612): the IP's own quota,
// else the default IP's, each IP with its own rate; a connection over it is held at most one
// window and does not count.
func TestConnectionQuota(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	qs := []*controller.ClientQuota{
		{Entity: controller.QuotaEntity{IP: new("10.0.0.1")}, Values: map[string]float64{controller.QuotaConnectionCreationRate: 2}},
		{Entity: controller.QuotaEntity{IPDefault: true}, Values: map[string]float64{controller.QuotaConnectionCreationRate: 1}},
	}
	var q quotaManager
	// 2/s measured over 10 s: 20 at once are accepted, the 21st is held and refused.
	for i := range 20 {
		if d := q.connection(qs, "10.0.0.1", t0); d != 0 {
			t.Fatalf("connection %d of 10.0.0.1 (2/s): held %v; want accepted", i+1, d)
		}
	}
	d := q.connection(qs, "10.0.0.1", t0)
	// 21 over 10 s is 2.1/s, 5% over: 5% of 10 s.
	if d != 500*time.Millisecond {
		t.Fatalf("connection 21 of 10.0.0.1: held %v; want 500ms", d)
	}
	// Refused ones do not count: after five more refusals the next is held as long again
	// (counted, 26 over 10 s would hold it 3 s, capped at one window).
	for range 5 {
		q.connection(qs, "10.0.0.1", t0)
	}
	if d := q.connection(qs, "10.0.0.1", t0); d != 500*time.Millisecond {
		t.Fatalf("after refusals: held %v; want 500ms (refused connections do not count)", d)
	}
	// Once the burst's window has aged out (11 s), connections are accepted again.
	if d := q.connection(qs, "10.0.0.1", t0.Add(11*time.Second)); d != 0 {
		t.Fatalf("11 s later: held %v; want accepted", d)
	}
	// Other IPs fall under the default, each with its own rate; far over it, held one window.
	for i := range 10 {
		if d := q.connection(qs, "10.0.0.2", t0); d != 0 {
			t.Fatalf("connection %d of 10.0.0.2 (default 1/s): held %v; want accepted", i+1, d)
		}
		if d := q.connection(qs, "10.0.0.3", t0); d != 0 {
			t.Fatalf("connection %d of 10.0.0.3 (default 1/s): held %v; want accepted", i+1, d)
		}
	}
	if d := q.connection(qs, "10.0.0.2", t0); d == 0 || d > defaultWindows.size {
		t.Fatalf("connection 11 of 10.0.0.2: held %v; want held, at most %v", d, defaultWindows.size)
	}
	// Without an ip quota nothing is held.
	if d := q.connection(qs[:1], "10.0.0.2", t0); d != 0 {
		t.Fatalf("no quota for 10.0.0.2: held %v", d)
	}
}

// TestQuotaResolution: Kafka's precedence of quota entities, and who shares a sensor.
func TestQuotaResolution(t *testing.T) {
	s := func(v string) *string { return &v }
	q := func(e controller.QuotaEntity, v float64) *controller.ClientQuota {
		return &controller.ClientQuota{Entity: e, Values: map[string]float64{controller.QuotaProducerByteRate: v}}
	}
	idx := newQuotaIndex([]*controller.ClientQuota{
		q(controller.QuotaEntity{User: s("alice"), Client: s("app")}, 1),
		q(controller.QuotaEntity{User: s("alice"), ClientDefault: true}, 2),
		q(controller.QuotaEntity{User: s("bob")}, 3),
		q(controller.QuotaEntity{UserDefault: true}, 6),
		q(controller.QuotaEntity{Client: s("tool")}, 7),
		q(controller.QuotaEntity{ClientDefault: true}, 8),
	})
	for _, c := range []struct {
		user, client string
		want         float64
		sharedWith   [2]string // another (user, client) on the same sensor, or ""
	}{
		{"alice", "app", 1, [2]string{}},
		{"alice", "other", 2, [2]string{}},
		{"bob", "x", 3, [2]string{"bob", "y"}}, // a user quota: all of bob's clients share it
		{"carol", "tool", 6, [2]string{"carol", "other"}},
	} {
		bound, tag, _ := idx.resolve(controller.QuotaProducerByteRate, c.user, c.client)
		if bound != c.want {
			t.Errorf("(%s, %s): quota %v; want %v", c.user, c.client, bound, c.want)
		}
		if c.sharedWith[0] != "" {
			if _, other, _ := idx.resolve(controller.QuotaProducerByteRate, c.sharedWith[0], c.sharedWith[1]); other != tag {
				t.Errorf("(%s, %s) and %v do not share a sensor", c.user, c.client, c.sharedWith)
			}
		}
	}
	if _, a, ok := idx.resolve(controller.QuotaProducerByteRate, "carol", "x"); !ok {
		t.Fatal("no quota for carol")
	} else if _, b, _ := idx.resolve(controller.QuotaProducerByteRate, "dave", "x"); a == b {
		t.Error("two users share the default user quota's sensor: each must have its own")
	}
	// Without user quotas, client quotas apply, per client id.
	idx = newQuotaIndex([]*controller.ClientQuota{q(controller.QuotaEntity{Client: s("tool")}, 7), q(controller.QuotaEntity{ClientDefault: true}, 8)})
	if bound, _, _ := idx.resolve(controller.QuotaProducerByteRate, "carol", "tool"); bound != 7 {
		t.Errorf("client quota %v; want 7", bound)
	}
	if bound, _, _ := idx.resolve(controller.QuotaProducerByteRate, "carol", "x"); bound != 8 {
		t.Errorf("default client quota %v; want 8", bound)
	}
	if bound, tag, ok := idx.resolve(controller.QuotaConsumerByteRate, "carol", "x"); bound != 0 || ok {
		t.Errorf("another key: quota %v sensor %+v; want none", bound, tag)
	}
}
