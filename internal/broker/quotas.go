package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

// Client quotas (KIP-13, KIP-55, KIP-124, KIP-546; docs/kafka-api.md): AlterClientQuotas stores
// them in the cluster metadata, every broker enforces them on its own traffic as Kafka's do.
//
// A request's quota is the first configured entity, in Kafka's order, among (user, client id),
// (user, default client), (user), (default user, client id), (default user, default client),
// (default user), (client id), (default client). The entity found decides who shares the rate:
// the user and client id of the request, the user only, or the client id only. A rate is
// measured over quotaSamples windows of quotaWindow (Kafka's quota.window.num and
// quota.window.size.seconds defaults). A request that takes it over the quota is answered with
// throttle_time_ms = (rate - quota) / quota × the measured window, and the connection reads
// nothing more from the client until that time has passed after the response (KIP-219). Request
// quotas are bounded by one window, as Kafka's. The windows are the broker configs
// quota.window.num and quota.window.size.seconds (controller_mutation_rate's:
// controller.quota.window.num and controller.quota.window.size.seconds); Kafka's defaults, 11 of
// 1 s each.

// windows is how a rate is sampled: n windows of size each.
type windows struct {
	n    int
	size time.Duration
}

// defaultWindows are Kafka's quota.window.num and quota.window.size.seconds defaults.
var defaultWindows = windows{n: 11, size: time.Second}

// or is w, or d for the zero windows.
func (w windows) or(d windows) windows {
	if w.n <= 0 || w.size <= 0 {
		return d
	}
	return w
}

// rate is a sampled rate: values summed per window, over the windows of w (the zero rate:
// defaultWindows), which are fixed when it first records.
type rate struct {
	w     windows
	start []time.Time
	sum   []float64
	cur   int
}

func (r *rate) record(now time.Time, v float64) {
	if r.start == nil {
		r.w = r.w.or(defaultWindows)
		r.start, r.sum = make([]time.Time, r.w.n), make([]float64, r.w.n)
	}
	if r.start[r.cur].IsZero() {
		r.start[r.cur] = now
	}
	if now.Sub(r.start[r.cur]) >= r.w.size {
		r.cur = (r.cur + 1) % r.w.n
		r.start[r.cur], r.sum[r.cur] = now, 0
	}
	r.sum[r.cur] += v
}

// measure returns the rate per second at now and the window it was measured over: from the
// oldest live sample, and at least n-1 windows (Kafka's Rate).
func (r *rate) measure(now time.Time) (perSecond float64, window time.Duration) {
	var total float64
	oldest := now
	for i := range r.start {
		if r.start[i].IsZero() || now.Sub(r.start[i]) >= time.Duration(r.w.n)*r.w.size {
			continue
		}
		total += r.sum[i]
		if r.start[i].Before(oldest) {
			oldest = r.start[i]
		}
	}
	window = max(now.Sub(oldest), time.Duration(r.w.n-1)*r.w.size)
	return total / window.Seconds(), window
}

// throttle records v and returns how long the client must wait for its rate to come back to
// bound: 0 if it is within it. With unrecord, a v that goes over is not kept: the caller does
// not send it (a throttled fetch is answered empty).
func (r *rate) throttle(now time.Time, v, bound float64, unrecord bool) time.Duration {
	r.record(now, v)
	perSecond, window := r.measure(now)
	if perSecond <= bound {
		return 0
	}
	if unrecord {
		r.sum[r.cur] -= v
	}
	return time.Duration((perSecond - bound) / bound * float64(window))
}

// windowSize is one of r's windows (the longest a request or connection quota holds a client).
func (r *rate) windowSize() time.Duration { return r.w.or(defaultWindows).size }

// quotaKey is a quota entity as a map key: each part absent (0), the default (1) or a name (2).
type quotaKey struct {
	user, client, ip             string
	userPart, clientPart, ipPart uint8
}

func keyOf(e controller.QuotaEntity) quotaKey {
	var k quotaKey
	switch {
	case e.UserDefault:
		k.userPart = 1
	case e.User != nil:
		k.userPart, k.user = 2, *e.User
	}
	switch {
	case e.ClientDefault:
		k.clientPart = 1
	case e.Client != nil:
		k.clientPart, k.client = 2, *e.Client
	}
	switch {
	case e.IPDefault:
		k.ipPart = 1
	case e.IP != nil:
		k.ipPart, k.ip = 2, *e.IP
	}
	return k
}

// quotaIndex is the configured quotas of one metadata image, by entity.
type quotaIndex map[quotaKey]map[string]float64

func newQuotaIndex(qs []*controller.ClientQuota) quotaIndex {
	idx := quotaIndex{}
	for _, q := range qs {
		idx[keyOf(q.Entity)] = q.Values
	}
	return idx
}

// quotaLevels is Kafka's order of the entities a request may fall under, as the parts of a
// quotaKey: (user, client id) first, (default client id) last.
var quotaLevels = [8][2]uint8{{2, 2}, {2, 1}, {2, 0}, {1, 2}, {1, 1}, {1, 0}, {0, 2}, {0, 1}}

// sensorKey names a rate: the quota key and the request's user and client id where the entity
// found has that part (whoever shares them shares the rate), or the client's IP.
type sensorKey struct {
	quota, user, client, ip string
	hasUser, hasClient      bool
}

// resolveIP finds the connection_creation_rate of a client IP: its own quota, else the default
// IP's; each IP has its own rate either way (Kafka's).
func (idx quotaIndex) resolveIP(ip string) (bound float64, sensor sensorKey, ok bool) {
	for _, k := range []quotaKey{{ipPart: 2, ip: ip}, {ipPart: 1}} {
		if v, found := idx[k][controller.QuotaConnectionCreationRate]; found {
			return v, sensorKey{quota: controller.QuotaConnectionCreationRate, ip: ip}, true
		}
	}
	return 0, sensorKey{}, false
}

// resolve finds the quota of key for a request of user and client id, and the sensor it counts
// against; ok is false if none applies.
func (idx quotaIndex) resolve(key, user, clientID string) (bound float64, sensor sensorKey, ok bool) {
	for _, l := range quotaLevels {
		k := quotaKey{userPart: l[0], clientPart: l[1]}
		if l[0] == 2 {
			k.user = user
		}
		if l[1] == 2 {
			k.client = clientID
		}
		if v, found := idx[k][key]; found {
			sensor = sensorKey{quota: key, hasUser: l[0] != 0, hasClient: l[1] != 0}
			if sensor.hasUser {
				sensor.user = user
			}
			if sensor.hasClient {
				sensor.client = clientID
			}
			return v, sensor, true
		}
	}
	return 0, sensorKey{}, false
}

// quotaManager is a broker's quota sensors.
type quotaManager struct {
	mu      sync.Mutex
	img     []*controller.ClientQuota // the quotas idx was built from
	idx     quotaIndex
	sensors map[sensorKey]*sensor
	// windows returns the client quotas' windows and controller_mutation_rate's (nil: the
	// defaults); sensors made with others start afresh when they change.
	windows      func() (client, mutation windows)
	w, mutationW windows
}

type sensor struct {
	r    rate
	k    bucket // controller_mutation_rate's
	last time.Time
}

// bucket is KIP-599's token bucket for controller_mutation_rate. It fills at the quota's rate
// up to its windows' worth of it (Kafka's burst: quota × controller.quota.window.num ×
// controller.quota.window.size.seconds), starts full, and may go into debt: a topic of any size
// is admitted whenever the bucket is not in debt, and its client then waits until the debt is
// paid.
type bucket struct {
	w      windows // the zero bucket: defaultWindows
	tokens float64
	at     time.Time // of the last refill; zero: never used
}

// take refills the bucket at rate until now and spends n, unless strict and in debt; it
// reports whether it spent them and how long until the bucket is out of debt.
func (k *bucket) take(now time.Time, rate, n float64, strict bool) (bool, time.Duration) {
	w := k.w.or(defaultWindows)
	burst := rate * float64(w.n) * w.size.Seconds()
	if k.at.IsZero() {
		k.tokens = burst
	} else if elapsed := now.Sub(k.at); elapsed > 0 {
		k.tokens = min(k.tokens+elapsed.Seconds()*rate, burst)
	}
	if now.After(k.at) {
		k.at = now
	}
	admitted := !strict || k.tokens >= 0
	if admitted {
		k.tokens -= n
	}
	if k.tokens >= 0 {
		return admitted, 0
	}
	return admitted, time.Duration(-k.tokens / rate * float64(time.Second))
}

// sensorIdle is how long an unused sensor is kept.
const sensorIdle = time.Hour

// record counts v against the quota of key that applies to (user, client id) and returns how
// long to throttle the client; 0 when no quota applies or it is kept.
func (q *quotaManager) record(quotas []*controller.ClientQuota, key, user, clientID string, v float64, now time.Time) time.Duration {
	if len(quotas) == 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s, bound, ok := q.sensorFor(quotas, now, func(idx quotaIndex) (float64, sensorKey, bool) { return idx.resolve(key, user, clientID) })
	if !ok {
		return 0
	}
	switch key {
	case controller.QuotaRequestPercentage:
		bound /= 100 // a percentage of one thread: seconds of handling per second
		return min(s.r.throttle(now, v, bound, false), s.r.windowSize())
	case controller.QuotaConsumerByteRate:
		return s.r.throttle(now, v, bound, true)
	}
	return s.r.throttle(now, v, bound, false)
}

// consumerFetchCap is Kafka's getMaxValueInQuotaWindow for a fetch: the consumer_byte_rate of
// (user, client id) times (quota.window.num − 1) × quota.window.size, and whether a quota
// applies. A fetch reads at most that much, as Kafka's: a larger one would be throttled, and a
// throttled fetch is answered without records, so a backlog bigger than it blocked the consumer
// for good.
func (q *quotaManager) consumerFetchCap(quotas []*controller.ClientQuota, user, clientID string, now time.Time) (int, bool) {
	if len(quotas) == 0 {
		return 0, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s, bound, ok := q.sensorFor(quotas, now, func(idx quotaIndex) (float64, sensorKey, bool) {
		return idx.resolve(controller.QuotaConsumerByteRate, user, clientID)
	})
	if !ok {
		return 0, false
	}
	return int(min(bound*float64(s.r.w.n-1)*s.r.w.size.Seconds(), math.MaxInt32)), true
}

// mutate takes n partition mutations from the controller_mutation_rate bucket of (user, client
// id): it reports whether they are admitted and how long the client must wait for the bucket to
// be out of debt (0: it is not). Strict (the request versions that can be answered
// THROTTLING_QUOTA_EXCEEDED) refuses them while the bucket is in debt; otherwise they are always
// taken and only throttle.
func (q *quotaManager) mutate(quotas []*controller.ClientQuota, user, clientID string, n float64, strict bool, now time.Time) (bool, time.Duration) {
	if len(quotas) == 0 {
		return true, 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s, bound, ok := q.sensorFor(quotas, now, func(idx quotaIndex) (float64, sensorKey, bool) {
		return idx.resolve(controller.QuotaControllerMutationRate, user, clientID)
	})
	if !ok {
		return true, 0
	}
	return s.k.take(now, bound, n, strict)
}

// connection counts a new connection from ip (canonical form) against its
// connection_creation_rate (KIP-612) and returns 0 to accept it, else how long to hold it
// before closing it unread: until the rate is back within the quota, at most one window. A
// refused connection does not count, as in Kafka.
func (q *quotaManager) connection(quotas []*controller.ClientQuota, ip string, now time.Time) time.Duration {
	if len(quotas) == 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s, bound, ok := q.sensorFor(quotas, now, func(idx quotaIndex) (float64, sensorKey, bool) { return idx.resolveIP(ip) })
	if !ok {
		return 0
	}
	return min(s.r.throttle(now, 1, bound, true), s.r.windowSize())
}

// sensorFor returns the sensor of the quota resolve finds in the quotas, and the quota; ok is
// false when none applies. q.mu is held.
func (q *quotaManager) sensorFor(quotas []*controller.ClientQuota, now time.Time, resolve func(quotaIndex) (float64, sensorKey, bool)) (*sensor, float64, bool) {
	if len(q.img) != len(quotas) || (len(quotas) > 0 && &q.img[0] != &quotas[0]) {
		q.img, q.idx = quotas, newQuotaIndex(quotas)
	}
	bound, tag, ok := resolve(q.idx)
	if !ok {
		return nil, 0, false
	}
	if q.windows != nil {
		if w, mw := q.windows(); w != q.w || mw != q.mutationW {
			q.w, q.mutationW, q.sensors = w, mw, nil // measured afresh over the new windows
		}
	}
	if q.sensors == nil {
		q.sensors = map[sensorKey]*sensor{}
	}
	s := q.sensors[tag]
	if s == nil {
		if len(q.sensors) > 1024 { // forget the sensors of clients long gone
			for k, o := range q.sensors {
				if now.Sub(o.last) > sensorIdle {
					delete(q.sensors, k)
				}
			}
		}
		s = &sensor{r: rate{w: q.w}, k: bucket{w: q.mutationW}}
		q.sensors[tag] = s
	}
	s.last = now
	return s, bound, true
}

// quotaUser is the user entity name of a principal ("User:alice" → "alice").
func quotaUser(principal string) string {
	_, name, ok := strings.Cut(principal, ":")
	if !ok {
		return principal
	}
	return name
}

// quotaExempt are the requests no request quota throttles: a client must always be able to
// learn the versions and authenticate.
func quotaExempt(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// mutations is one admin request's use of its client's controller_mutation_rate (KIP-599):
// each topic's partitions created or deleted are admitted before the change is made.
type mutations struct {
	r        *request
	strict   bool          // the request's version can be answered THROTTLING_QUOTA_EXCEEDED
	throttle time.Duration // how long the client must wait afterwards
}

// mutations starts the request's count; versions from strictSince on are refused while the
// client's bucket is in debt, older ones are only throttled (they have no error to tell it).
func (r *request) mutations(strictSince int16) *mutations {
	return &mutations{r: r, strict: r.version >= strictSince}
}

// admit takes n partition mutations from the client's quota, or refuses them. The quota is the
// cluster's, as Kafka's controller enforces it: the active controller's node keeps the
// buckets; while none answers, this node's own count stands in.
func (m *mutations) admit(n int32) *adminError {
	c := m.r.conn
	if len(c.b.cl.Image().ClientQuotas) == 0 {
		return nil
	}
	req := mutationRequest{User: quotaUser(c.principal), Client: m.r.clientID, N: float64(n), Strict: m.strict}
	var resp mutationResponse
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	err := c.b.cl.CallController(ctx, mutationMethod, req, &resp)
	cancel()
	if err != nil {
		c.b.logger.Debug("broker: controller_mutation_rate counted on this node: no active controller answered", "err", err)
		resp = c.b.mutate(req)
	}
	m.throttle = max(m.throttle, time.Duration(resp.ThrottleMs)*time.Millisecond)
	if !resp.OK {
		return adminErr(kerr.ThrottlingQuotaExceeded, "The throttling quota has been exceeded.")
	}
	return nil
}

// mutationMethod is the active controller's RPC that counts controller_mutation_rate.
const mutationMethod = "mutation-quota"

type mutationRequest struct {
	User   string  `json:"user"`
	Client string  `json:"client"`
	N      float64 `json:"n"`
	Strict bool    `json:"strict"`
}

type mutationResponse struct {
	OK         bool  `json:"ok"`
	ThrottleMs int64 `json:"throttle_ms"`
}

// mutate counts a mutation request against this node's buckets.
func (b *Broker) mutate(req mutationRequest) mutationResponse {
	ok, d := b.quotas.mutate(b.cl.Image().ClientQuotas, req.User, req.Client, req.N, req.Strict, time.Now())
	return mutationResponse{OK: ok, ThrottleMs: d.Milliseconds()}
}

// handleMutationQuota serves mutationMethod on the active controller's node.
func (b *Broker) handleMutationQuota(_ context.Context, _ int32, payload []byte) (any, error) {
	var req mutationRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	return b.mutate(req), nil
}

// requestQuotas counts a handled request against its client's produce and request quotas, and
// takes the throttle its handler asked for (controller_mutation_rate).
func (c *conn) requestQuotas(f *inflight) {
	if f.reply.throttle > 0 {
		c.throttle(f, controller.QuotaControllerMutationRate, f.reply.throttle)
	}
	quotas := c.b.cl.Image().ClientQuotas
	if len(quotas) == 0 || f.r == nil {
		return
	}
	user := quotaUser(c.principal)
	if f.r.key == kmsg.Produce.Int16() {
		c.throttle(f, controller.QuotaProducerByteRate, c.b.quotas.record(quotas, controller.QuotaProducerByteRate, user, f.r.clientID, float64(f.size), f.handled))
	}
	if !quotaExempt(f.r.key) {
		busy := f.handled.Sub(f.received).Seconds()
		c.throttle(f, controller.QuotaRequestPercentage, c.b.quotas.record(quotas, controller.QuotaRequestPercentage, user, f.r.clientID, busy, f.handled))
	}
}

// throttle makes f's throttle time at least d, which quota asked for.
func (c *conn) throttle(f *inflight, quota string, d time.Duration) {
	c.b.cfg.Metrics.Throttled(quota, d)
	f.throttle = max(f.throttle, d)
}

// responseQuotas counts a fetch response of size bytes (plus its zero-copy ranges) against its
// client's consumer quota, and sets the response's throttle time if the client is throttled. A
// throttled fetch is answered without records, as Kafka does: the client fetches them again
// once the throttle time has passed, and they do not count. It reports whether it changed the
// response.
func (c *conn) responseQuotas(f *inflight, size int) bool {
	quotas := c.b.cl.Image().ClientQuotas
	emptied := false
	if fr, ok := f.reply.resp.(*kmsg.FetchResponse); ok && len(quotas) > 0 {
		if f.reply.files != nil {
			for _, r := range f.reply.files.ranges {
				size += r.slice.Size - markerSize
			}
		}
		c.throttle(f, controller.QuotaConsumerByteRate, c.b.quotas.record(quotas, controller.QuotaConsumerByteRate, quotaUser(c.principal), f.r.clientID, float64(size), time.Now()))
		if f.throttle > 0 {
			f.reply.files.release()
			for i := range fr.Topics {
				for j := range fr.Topics[i].Partitions {
					p := &fr.Topics[i].Partitions[j]
					if len(p.RecordBatches) > 0 {
						p.RecordBatches, p.AbortedTransactions, emptied = []byte{}, nil, true
					}
				}
			}
		}
	}
	t, ok := f.reply.resp.(interface {
		kmsg.ThrottleResponse
		kmsg.SetThrottleResponse
	})
	if f.throttle <= 0 || !ok {
		return false
	}
	ms := int32(min(f.throttle.Milliseconds()+1, math.MaxInt32))
	if got, _ := t.Throttle(); got >= ms {
		return emptied
	}
	t.SetThrottle(ms)
	return true
}

// mute keeps the connection from handling another request for d from now.
func (c *conn) mute(d time.Duration) {
	if d <= 0 {
		return
	}
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitMuted waits until a throttled connection may go on.
func (c *conn) waitMuted() error {
	d := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

func init() {
	register(kmsg.DescribeClientQuotas, 0, 1, handleDescribeClientQuotas)
	register(kmsg.AlterClientQuotas, 0, 1, handleAlterClientQuotas)
}

// quotaEntityOf reads a request's entity: user and client-id parts, or an ip part alone, each a
// name or the default (a null name).
func quotaEntityOf(parts map[string]*string) (controller.QuotaEntity, error) {
	var e controller.QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("an empty entity")
	}
	for typ, name := range parts {
		switch typ {
		case "user":
			if name == nil {
				e.UserDefault = true
			} else if *name == "" {
				return e, fmt.Errorf("an empty user name")
			} else {
				e.User = name
			}
		case "client-id":
			if name == nil {
				e.ClientDefault = true
			} else if *name == "" { // as Kafka's validateEntity: "Empty client-id not supported"
				return e, fmt.Errorf("an empty client-id")
			} else {
				e.Client = name
			}
		case "ip":
			if name == nil {
				e.IPDefault = true
				continue
			}
			if *name == "" {
				return e, fmt.Errorf("an empty ip")
			}
			addr, err := netip.ParseAddr(*name)
			if err != nil {
				return e, fmt.Errorf("%q is not an IP address", *name)
			}
			e.IP = new(addr.Unmap().String())
		default:
			return e, fmt.Errorf("unknown entity type %s", typ)
		}
	}
	if e.HasIP() && (e.HasUser() || e.HasClient()) {
		return e, fmt.Errorf("an ip entity cannot be combined with user or client-id")
	}
	return e, nil
}

func handleAlterClientQuotas(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	b := r.conn.b
	allowed := r.allowedCluster(kmsg.ACLOperationAlterConfigs)
	cmd := &controller.AlterClientQuotas{}
	codes := make([]int16, len(req.Entries))
	msgs := make([]*string, len(req.Entries))
	seen := map[string]bool{}
	for i, e := range req.Entries {
		fail := func(code int16, format string, args ...any) {
			codes[i], msgs[i] = code, strp(fmt.Sprintf(format, args...))
		}
		parts := map[string]*string{}
		dup := false
		for _, p := range e.Entity {
			if _, ok := parts[p.Type]; ok {
				dup = true
			}
			parts[p.Type] = p.Name
		}
		ent, err := quotaEntityOf(parts)
		switch {
		case !allowed:
			fail(kerr.ClusterAuthorizationFailed.Code, "Cluster authorization failed")
			continue
		case dup:
			fail(kerr.InvalidRequest.Code, "An entity type appears twice in the entity")
			continue
		case err != nil:
			fail(kerr.InvalidRequest.Code, "Invalid quota entity: %v", err)
			continue
		case seen[ent.Key()]:
			fail(kerr.InvalidRequest.Code, "The entity %s appears twice in the request", ent)
			continue
		}
		seen[ent.Key()] = true
		alt := controller.QuotaAlteration{Entity: ent, Set: map[string]float64{}}
		keys := map[string]bool{}
		for _, op := range e.Ops {
			dup := keys[op.Key]
			keys[op.Key] = true
			switch {
			case dup: // as Kafka: the entity is left as it is
				fail(kerr.InvalidRequest.Code, "Duplicate quota key %s for %s", op.Key, ent)
			case op.Remove:
				// As Kafka's ClientQuotaControlManager, which validates the keys of values set
				// only: removing a key the entity cannot have removes nothing, and is no error.
				if slices.Contains(ent.KeysFor(), op.Key) {
					alt.Remove = append(alt.Remove, op.Key)
				}
			case !slices.Contains(ent.KeysFor(), op.Key):
				fail(kerr.InvalidRequest.Code, "Invalid configuration key %s for %s (supported: %s)", op.Key, ent, strings.Join(ent.KeysFor(), ", "))
			case math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0:
				fail(kerr.InvalidRequest.Code, "Invalid value %v for %s: it must be positive", op.Value, op.Key)
			case op.Key == controller.QuotaRequestPercentage && op.Value > math.MaxInt32:
				fail(kerr.InvalidRequest.Code, "Invalid value %v for %s", op.Value, op.Key)
			case op.Key == controller.QuotaConnectionCreationRate && (op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt32):
				fail(kerr.InvalidRequest.Code, "Invalid value %v for %s: it must be an integer", op.Value, op.Key)
			case (op.Key == controller.QuotaProducerByteRate || op.Key == controller.QuotaConsumerByteRate) && op.Value != math.Trunc(op.Value):
				// Long configs in Kafka (getErrorForIntegralQuotaValue).
				fail(kerr.InvalidRequest.Code, "%s cannot be a fractional value: %v", op.Key, op.Value)
			default:
				alt.Set[op.Key] = op.Value
			}
		}
		if codes[i] == 0 && !req.ValidateOnly {
			cmd.Entries = append(cmd.Entries, alt)
		}
	}
	var aerr *adminError
	if len(cmd.Entries) > 0 {
		_, aerr = b.propose(ctx, &controller.Command{Op: controller.OpAlterClientQuotas, ClientQuotas: cmd})
	}
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ent)
		}
		switch {
		case codes[i] != 0:
			re.ErrorCode, re.ErrorMessage = codes[i], msgs[i]
		case aerr != nil:
			re.ErrorCode, re.ErrorMessage = aerr.code.Code, strp(aerr.msg)
		}
		resp.Entries = append(resp.Entries, re)
	}
	if aerr == nil && len(cmd.Entries) > 0 {
		b.logger.Info("broker: client quotas altered", "entries", len(cmd.Entries), "by", r.conn.principal)
	}
	return reply{resp: resp}
}

func handleDescribeClientQuotas(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !r.allowedCluster(kmsg.ACLOperationDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}
	}
	exact := map[string]*string{} // type → name (nil: the default)
	any := map[string]bool{}
	fail := func(code int16, msg string) reply {
		resp.ErrorCode, resp.ErrorMessage = code, strp(msg)
		return reply{resp: resp}
	}
	for _, c := range req.Components {
		_, inExact := exact[c.EntityType]
		switch {
		case c.EntityType == "": // as Kafka's ClientQuotasImage.describe, before the type's check
			return fail(kerr.InvalidRequest.Code, "Invalid empty entity type.")
		case c.EntityType != "user" && c.EntityType != "client-id" && c.EntityType != "ip":
			return fail(kerr.UnsupportedVersion.Code, "Unsupported entity type "+c.EntityType)
		case inExact || any[c.EntityType]:
			return fail(kerr.InvalidRequest.Code, "Entity type "+c.EntityType+" cannot appear more than once in the filter")
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest.Code, "MATCH_TYPE_EXACT needs a match string")
			}
			exact[c.EntityType] = c.Match
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return fail(kerr.InvalidRequest.Code, "MATCH_TYPE_DEFAULT takes no match string")
			}
			exact[c.EntityType] = nil
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return fail(kerr.InvalidRequest.Code, "MATCH_TYPE_SPECIFIED takes no match string")
			}
			any[c.EntityType] = true
		default:
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("Unknown match type %d", c.MatchType))
		}
	}
	_, ipExact := exact["ip"]
	_, userExact := exact["user"]
	_, clientExact := exact["client-id"]
	if (ipExact || any["ip"]) && (userExact || clientExact || any["user"] || any["client-id"]) {
		// As Kafka's ClientQuotasImage.describe: ip quotas are an entity of their own.
		return fail(kerr.InvalidRequest.Code, "IP filter component should not be used with user or clientId filter component.")
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, q := range r.conn.b.cl.Image().ClientQuotas {
		parts := map[string]*string{}
		if q.Entity.HasUser() {
			parts["user"] = q.Entity.User
		}
		if q.Entity.HasClient() {
			parts["client-id"] = q.Entity.Client
		}
		if q.Entity.HasIP() {
			parts["ip"] = q.Entity.IP
		}
		if !quotaMatches(parts, exact, any, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, typ := range []string{"user", "client-id", "ip"} {
			if name, ok := parts[typ]; ok {
				ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
				ent.Type, ent.Name = typ, name
				e.Entity = append(e.Entity, ent)
			}
		}
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return reply{resp: resp}
}

// quotaMatches is Kafka's filter: every exact component names the entity's part (nil: its
// default), every "specified" component's type is a part of it, and with strict nothing else is.
func quotaMatches(parts, exact map[string]*string, any map[string]bool, strict bool) bool {
	if strict && len(parts) != len(exact)+len(any) {
		return false
	}
	for typ, name := range exact {
		got, ok := parts[typ]
		if !ok || (got == nil) != (name == nil) || (got != nil && *got != *name) {
			return false
		}
	}
	for typ := range any {
		if _, ok := parts[typ]; !ok {
			return false
		}
	}
	return true
}

// overConnectionQuota applies the client IP's connection_creation_rate to a new connection
// from ip (canonical form; "": none, a test's pipe): one over the quota is held unread until the
// rate is back within it (at most one window, KIP-612) and then refused, so a client
// reconnecting in a loop is slowed rather than served.
func (c *conn) overConnectionQuota(ip string) bool {
	quotas := c.b.cl.Image().ClientQuotas
	if len(quotas) == 0 || ip == "" {
		return false
	}
	d := c.b.quotas.connection(quotas, ip, time.Now())
	if d <= 0 {
		return false
	}
	c.b.cfg.Metrics.Throttled(controller.QuotaConnectionCreationRate, d)
	c.b.logger.Debug("broker: connection over its IP's connection_creation_rate, closed", "remote", c.remote, "after", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
	return true
}
