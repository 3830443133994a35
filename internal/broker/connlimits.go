package broker

import (
	"math"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/runnel-dev/runnel/internal/topics"
)

// Connection limits (Kafka's max.connections, max.connections.per.ip and
// max.connections.per.ip.overrides, KIP-402, and max.connection.creation.rate, KIP-612): dynamic
// broker configs, for this node or the whole cluster, read at every accept. A connection that
// would take its IP over its limit is closed at once, before anything is read from it; at
// max.connections the listeners accept nothing until a connection closes; over the creation
// rate they wait before accepting the next, as Kafka's acceptors do. (Per-IP creation rates are
// client quotas: quotas.go.)

// connIP is a connection's client IP in canonical form, as ip quota entities and the overrides
// name it; ok is false for a connection that has none (a test's pipe). The per-IP limits and the
// per-IP creation rate (quotas.go) both take it from here.
func connIP(nc net.Conn) (string, bool) {
	ap, err := netip.ParseAddrPort(nc.RemoteAddr().String())
	if err != nil {
		return "", false
	}
	return ap.Addr().Unmap().String(), true
}

// ipLimit is how many connections ip may have open: its override, else max.connections.per.ip.
func (b *Broker) ipLimit(ip string) int {
	if v, _, _ := b.topics.BrokerConfig("max.connections.per.ip.overrides"); v != "" {
		if overrides, err := topics.ParseConnectionOverrides(v); err == nil {
			if n, ok := overrides[ip]; ok {
				return n
			}
		}
	}
	return b.brokerLimit("max.connections.per.ip")
}

// admitIP counts a new connection against its IP's limit; b.mu is held. It returns false
// (counting nothing) when the IP already has as many as it may.
func (b *Broker) admitIP(ip string) bool {
	if b.perIP[ip] >= b.ipLimit(ip) {
		return false
	}
	b.perIP[ip]++
	return true
}

// releaseIP uncounts a closed connection; b.mu is held.
func (b *Broker) releaseIP(ip string) {
	if b.perIP[ip]--; b.perIP[ip] <= 0 {
		delete(b.perIP, ip)
	}
}

// quotaWindows are the windows client quotas (and max.connection.creation.rate) are measured
// over, and controller_mutation_rate's: the broker configs quota.window.num and
// quota.window.size.seconds, controller.quota.window.num and
// controller.quota.window.size.seconds.
func (b *Broker) quotaWindows() (client, mutation windows) {
	return windows{n: b.brokerLimit("quota.window.num"), size: time.Duration(b.brokerLimit("quota.window.size.seconds")) * time.Second}.or(defaultWindows),
		windows{n: b.brokerLimit("controller.quota.window.num"), size: time.Duration(b.brokerLimit("controller.quota.window.size.seconds")) * time.Second}.or(defaultWindows)
}

// brokerLimit reads an int broker config of the node (a connection limit, a quota window).
func (b *Broker) brokerLimit(name string) int {
	v, _, _ := b.topics.BrokerConfig(name)
	n, err := strconv.Atoi(v)
	if err != nil {
		return math.MaxInt32 // the configs' default: no limit
	}
	return n
}

// waitConnSlot waits until the node has fewer open Kafka connections than max.connections. It
// reports false once the broker is shutting down.
func (b *Broker) waitConnSlot() bool {
	for {
		b.mu.Lock()
		open := len(b.conns)
		b.mu.Unlock()
		if open < b.brokerLimit("max.connections") {
			return true
		}
		select { // a closing connection or a raised limit is seen within 10 ms
		case <-b.stopped:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// paceAccepts counts an accepted connection against max.connection.creation.rate and, over it,
// waits until the node's rate is back within it (at most one quota window) before the next
// accept. It reports false once the broker is shutting down.
func (b *Broker) paceAccepts() bool {
	limit := b.brokerLimit("max.connection.creation.rate")
	w, _ := b.quotaWindows()
	b.acceptMu.Lock()
	if b.accepts.w != w { // measured afresh over new windows
		b.accepts = rate{w: w}
	}
	d := min(b.accepts.throttle(time.Now(), 1, float64(limit), false), w.size)
	b.acceptMu.Unlock()
	if d <= 0 {
		return true
	}
	b.cfg.Metrics.Throttled("max.connection.creation.rate", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.stopped:
		return false
	case <-t.C:
		return true
	}
}
