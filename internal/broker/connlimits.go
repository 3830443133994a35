package broker

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/runnel-dev/runnel/internal/topics"
)

// Connection limits per client IP (Kafka's max.connections.per.ip and
// max.connections.per.ip.overrides, KIP-402): dynamic broker configs, for this node or the
// whole cluster. A connection that would take its IP over the limit is closed at once, before
// anything is read from it, as Kafka does.

// connIP is a connection's client IP in canonical form; ok is false for a connection that has
// none (a test's pipe).
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
	v, _, _ := b.topics.BrokerConfig("max.connections.per.ip")
	n, err := strconv.Atoi(v)
	if err != nil {
		return int(^uint32(0) >> 1)
	}
	return n
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
