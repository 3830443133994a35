// Package security holds what Runnel's Kafka listeners need to be secure, free of I/O where it
// can be: listener specs (Kafka's syntax), TLS from reloadable PEM files, SCRAM credentials and
// the SASL server exchanges (PLAIN, SCRAM-SHA-256/512). Design: docs/security.md.
package security

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Protocol is a listener's security protocol, by Kafka's names.
type Protocol string

// Kafka's four security protocols.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// TLS reports whether connections of the protocol are TLS.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether connections of the protocol authenticate with SASL.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

func parseProtocol(s string) (Protocol, bool) {
	switch p := Protocol(strings.ToUpper(s)); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, true
	}
	return "", false
}

// Listener is one Kafka listener: its name, security protocol, the address it binds and the
// address clients are told.
type Listener struct {
	Name       string
	Protocol   Protocol
	Addr       string // host:port to bind; port 0 picks one
	Advertised string // host:port clients are told; port 0: the bound port
}

// Endpoint is one of a node's advertised listeners, as registered with the controller.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// ParseProtocolMap parses Kafka's listener.security.protocol.map: "NAME:PROTOCOL,...". The
// four protocol names always map to themselves.
func ParseProtocolMap(spec string) (map[string]Protocol, error) {
	m := map[string]Protocol{}
	for _, p := range []Protocol{Plaintext, SSL, SASLPlaintext, SASLSSL} {
		m[string(p)] = p
	}
	if strings.TrimSpace(spec) == "" {
		return m, nil
	}
	for _, item := range strings.Split(spec, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(item), ":")
		p, known := parseProtocol(proto)
		if !ok || name == "" || !known {
			return nil, fmt.Errorf("security: protocol map entry %q is not NAME:PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", item)
		}
		name = strings.ToUpper(name)
		if q, builtin := parseProtocol(name); builtin && q != p {
			return nil, fmt.Errorf("security: listener name %s is a security protocol and cannot map to %s", name, p)
		}
		m[name] = p
	}
	return m, nil
}

// ParseListeners parses Kafka's listeners syntax, "NAME://host:port,...", with the protocol
// map naming each listener's security protocol. Names are unique and upper-cased; the host may
// be empty (every interface).
func ParseListeners(spec string, protocols map[string]Protocol) ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("security: listener %q is not NAME://host:port", item)
		}
		name = strings.ToUpper(name)
		p, known := protocols[name]
		if !known {
			return nil, fmt.Errorf("security: listener name %s has no security protocol (use one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or map it with --listener-security-protocol-map)", name)
		}
		if _, _, err := splitHostPort(addr); err != nil {
			return nil, fmt.Errorf("security: listener %s: %w", name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("security: listener name %s appears twice", name)
		}
		seen[name] = true
		out = append(out, Listener{Name: name, Protocol: p, Addr: addr, Advertised: addr})
	}
	return out, nil
}

// Advertise sets the listeners' advertised addresses from Kafka's advertised.listeners syntax.
// Every advertised name must be a listener; listeners not named keep their bind address. An
// advertised host may not be a wildcard (0.0.0.0, ::), nor empty.
func Advertise(ls []Listener, spec string) error {
	if strings.TrimSpace(spec) != "" {
		seen := map[string]bool{}
		for _, item := range strings.Split(spec, ",") {
			item = strings.TrimSpace(item)
			name, addr, ok := strings.Cut(item, "://")
			if !ok {
				return fmt.Errorf("security: advertised listener %q is not NAME://host:port", item)
			}
			name = strings.ToUpper(name)
			i := -1
			for j := range ls {
				if ls[j].Name == name {
					i = j
				}
			}
			if i < 0 {
				return fmt.Errorf("security: advertised listener %s is not one of --listeners", name)
			}
			if seen[name] {
				return fmt.Errorf("security: advertised listener %s appears twice", name)
			}
			seen[name] = true
			if _, _, err := splitHostPort(addr); err != nil {
				return fmt.Errorf("security: advertised listener %s: %w", name, err)
			}
			ls[i].Advertised = addr
		}
	}
	for _, l := range ls {
		if host, _, _ := splitHostPort(l.Advertised); WildcardHost(host) {
			return fmt.Errorf("security: listener %s advertises %q: clients cannot connect to a wildcard address; set --advertised-listeners", l.Name, l.Advertised)
		}
	}
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q is not host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("address %q has a bad port", addr)
	}
	return host, port, nil
}

// WildcardHost reports whether host binds every interface ("", 0.0.0.0, ::): no one can
// connect to it as an address.
func WildcardHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// Loopback reports whether addr's host is a loopback address or localhost (an empty host
// binds every interface: not loopback).
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
