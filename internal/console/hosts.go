package console

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// DNS rebinding: a page of evil.example whose name then resolves to the console's address is,
// to the browser, of the same origin as the console, so the Origin check lets its forms through.
// Its requests still carry Host: evil.example. The console answers only the host names it is
// served under (Config.Hosts), an IP address (the page of an address is no attacker's name)
// and localhost (no page on the web is of localhost's origin); others get 421.

// hostSet is the host names a console answers besides IP addresses and localhost.
type hostSet struct {
	any   bool // "*": every name
	names map[string]bool
}

func newHostSet(hosts []string) hostSet {
	s := hostSet{names: map[string]bool{}}
	for _, h := range hosts {
		if h = strings.TrimSpace(h); h == "*" {
			s.any = true
		} else if name := hostName(h); name != "" {
			s.names[name] = true
		}
	}
	return s
}

// hostName is host (a Host header, or host:port) without its port, in lower case, without a
// final dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// serves reports whether a request with this Host header is for the console. No Host (HTTP/1.0)
// is no browser's request.
func (s hostSet) serves(host string) bool {
	if host == "" || s.any {
		return true
	}
	name := hostName(host)
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	return name == "localhost" || s.names[name]
}

// refuseHost answers a request whose Host is not one the console is served under.
func refuseHost(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "console: not served under the host name "+strconv.Quote(hostName(r.Host))+
		" (a page of another site may have had its name resolve to this node: DNS rebinding); "+
		"open it by the node's address, localhost or a name given to --console-hosts", http.StatusMisdirectedRequest)
}
