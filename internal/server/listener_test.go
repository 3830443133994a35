package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first Accept with EMFILE (out of file descriptors for a moment), or,
// closed, every Accept with net.ErrClosed as a listener closed under its server does.
type failingListener struct {
	net.Listener
	closed bool
	failed atomic.Bool
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.closed {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// serveOn starts s serving ln; the returned channel has Serve's result.
func serveOn(t *testing.T, ln net.Listener) (*Server, <-chan error) {
	t.Helper()
	var console bytes.Buffer
	cfg := testConfig(t, t.TempDir(), &console)
	cfg.Logger, cfg.Console = nil, io.Discard
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served, done := make(chan error, 1), make(chan struct{})
	go func() { served <- s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
		}
		ln.Close()
		s.Close()
	})
	waitJoined(t, s)
	return s, served
}

// TestAcceptErrorKeepsListening: a transient accept error (EMFILE under a burst of connections)
// leaves the Kafka listener serving, as Kafka's acceptor does. It used to end the listener, and
// Serve then hung in its waits for the maintenance loops: a node in the cluster, leading its
// partitions, serving no client and never exiting.
func TestAcceptErrorKeepsListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, served := serveOn(t, &failingListener{Listener: ln})
	nc, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := []byte{0, 18, 0, 0, 0, 0, 0, 7, 0, 0} // ApiVersions v0, correlation id 7, client id ""
	if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(req))), req...)); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[4:]) != 7 {
		select {
		case err := <-served:
			t.Fatalf("after one EMFILE from accept: no answer; Serve returned %v", err)
		default:
			t.Fatalf("after one EMFILE from accept: no answer (%v)", err)
		}
	}
}

// TestListenerLostStopsServe: a Kafka listener that cannot go on (closed under the node) stops
// the node, which Serve reports, instead of leaving Serve waiting for ever.
func TestListenerLostStopsServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, served := serveOn(t, &failingListener{Listener: ln, closed: true})
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "listener") {
			t.Fatalf("Serve returned %v; want the lost listener's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its Kafka listener was lost")
	}
}
