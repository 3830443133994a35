//go:build !linux

package broker

import "net"

// sendQueue cannot tell a socket's unsent bytes here: a client draining a long response counts
// as progress only through the writes that fill its socket.
func sendQueue(net.Conn) (int, bool) { return 0, false }
