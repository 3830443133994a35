package transport

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// refusingPeers starts node 2 of cluster "two" and node 1 of cluster "one", which dials node 2
// and is refused at each hello; it returns node 1 and the counts of node 2's accepted
// connections and of node 1's reports of node 2 down.
func refusingPeers(t *testing.T) (*Transport, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts, downs := new(atomic.Int64), new(atomic.Int64)
	t2 := New(Config{NodeID: 2, Listener: &countingListener{Listener: ln2, n: accepts}, Handler: func(int32, Kind, []byte) {}})
	t.Cleanup(func() { t2.Close() })
	t2.SetClusterID("two")
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t1 := New(Config{NodeID: 1, Listener: ln1, Resolve: func(int32) string { return ln2.Addr().String() },
		Handler: func(int32, Kind, []byte) {}, PeerDown: func(int32, bool) { downs.Add(1) }})
	t.Cleanup(func() { t1.Close() })
	t1.SetClusterID("one")
	return t1, accepts, downs
}

// TestRefusedHelloRedialsWithBackoff: a peer that takes each connection and closes it (here a
// node of another cluster at the peer's address, refusing the hello) is dialed again after a
// pause that doubles up to a second. Only failed dials used to back off: after one Send, node 1
// dialed node 2 thousands of times a second, reporting it down each time.
func TestRefusedHelloRedialsWithBackoff(t *testing.T) {
	t1, accepts, downs := refusingPeers(t)
	t1.Send(2, 1, []byte("x"))
	time.Sleep(2 * time.Second)
	// 20, 40, ... 640 ms, then a second apart: about 8 connections in 2 s.
	if n := accepts.Load(); n < 2 || n > 20 {
		t.Fatalf("2 s after one Send to a node that refuses the hello: %d connections, %d reported down; want a few (redialed with backoff)", n, downs.Load())
	}
}

// TestCloseRacesDial: Close returns also when a dial completes while it runs. The connection
// of a dial that finished just after Close broke the peers' connections used to be installed
// anyway, and its reader waited on a live peer for ever: Close hung in its wait.
func TestCloseRacesDial(t *testing.T) {
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t2 := New(Config{NodeID: 2, Listener: ln2, Handler: func(int32, Kind, []byte) {}})
	defer t2.Close()
	for i := range 2000 {
		ln1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t1 := New(Config{NodeID: 1, Listener: ln1, Resolve: func(int32) string { return ln2.Addr().String() },
			Handler: func(int32, Kind, []byte) {}})
		t1.Send(2, 1, []byte("x"))
		for spin := time.Now().Add(time.Duration(i%200) * time.Microsecond); time.Now().Before(spin); {
		}
		done := make(chan struct{})
		go func() { t1.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatalf("iteration %d: Close still waiting after 3 s (a connection dialed during Close was never closed)", i)
		}
	}
}

// TestInboundBeforeHello: a connection to the cluster port that is not a node's holds little,
// briefly: a first frame larger than a hello closes it at its header (it could name up to
// MaxFrameBytes, 64 MiB, allocated before the hello was checked), and one that sends nothing is
// closed after helloTimeout (it used to stay open for ever).
func TestInboundBeforeHello(t *testing.T) {
	defer func(d time.Duration) { helloTimeout = d }(helloTimeout)
	helloTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Config{NodeID: 2, Listener: ln, Handler: func(int32, Kind, []byte) {}})
	defer tr.Close()
	closed := func(what string, first []byte) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(first); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("%s: read %v; want the connection closed", what, err)
		}
	}
	closed("a 64 MiB first frame", []byte{4, 0, 0, 0, byte(kindHello)})
	closed("nothing sent", nil)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestRedialBackoffHoldsUnderSends: the redial pause after a quick close holds whatever wakes
// the peer's run loop. It used to live in the connection's reader alone, and every Send woke
// the run loop, which dialed at once: a node sending steadily (Raft ticks, replication) to a
// peer that refuses the hello dialed once per Send.
func TestRedialBackoffHoldsUnderSends(t *testing.T) {
	t1, accepts, downs := refusingPeers(t)
	// One frame every 10 ms for 2 s (a Raft group ticks every 50 ms; a node has several).
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		t1.Send(2, 1, []byte("x"))
	}
	// With the backoff honoured: 20, 40, ... 640 ms, then a second apart: under 20 in 2 s.
	if n := accepts.Load(); n > 20 {
		t.Fatalf("2 s of Sends every 10 ms to a node that refuses the hello: %d connections, %d reported down; want the redial backoff (<= 20)", n, downs.Load())
	}
}
