package broker

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendQueue returns the bytes a TCP connection's socket holds unsent or unacknowledged
// (SIOCOUTQ), if it can tell.
func sendQueue(nc net.Conn) (int, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var q int
	var qerr error
	if err := rc.Control(func(fd uintptr) { q, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || qerr != nil {
		return 0, false
	}
	return q, true
}
