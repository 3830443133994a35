package transport

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

type received struct {
	from int32
	kind Kind
	body []byte
}

type node struct {
	t   *Transport
	mu  sync.Mutex
	got []received
	ch  chan received
	// down reports of PeerDown
	down chan [2]int32 // node, refused(0/1)
}

func newNode(t *testing.T, id int32, addrs map[int32]string, mu *sync.Mutex) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{ch: make(chan received, 1000), down: make(chan [2]int32, 100)}
	mu.Lock()
	addrs[id] = ln.Addr().String()
	mu.Unlock()
	n.t = New(Config{NodeID: id, Listener: ln,
		Resolve: func(p int32) string { mu.Lock(); defer mu.Unlock(); return addrs[p] },
		Handler: func(from int32, kind Kind, body []byte) {
			n.ch <- received{from, kind, bytes.Clone(body)}
		},
		PeerDown: func(p int32, refused bool) {
			r := int32(0)
			if refused {
				r = 1
			}
			select {
			case n.down <- [2]int32{p, r}:
			default:
			}
		},
	})
	t.Cleanup(func() { n.t.Close() })
	return n
}

func (n *node) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-n.ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no frame arrived")
	}
	return received{}
}

func TestSendInOrderBothWays(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	for i := 0; i < 1000; i++ {
		a.t.Send(2, 7, binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	for i := 0; i < 1000; i++ {
		r := b.next(t)
		if r.from != 1 || r.kind != 7 || binary.BigEndian.Uint32(r.body) != uint32(i) {
			t.Fatalf("frame %d = from %d kind %d body %x; want from 1 kind 7 body %d", i, r.from, r.kind, r.body, i)
		}
	}
	b.t.Send(1, 9, []byte("back"))
	if r := a.next(t); r.from != 2 || string(r.body) != "back" {
		t.Fatalf("got %+v; want \"back\" from 2", r)
	}
	if w := a.t.Writes.Load(); w >= 1000 {
		t.Errorf("1000 frames took %d writes; want them coalesced", w)
	}
}

func TestLargeFrame(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	big := bytes.Repeat([]byte("x"), 8<<20)
	a.t.Send(2, 3, big)
	if r := b.next(t); !bytes.Equal(r.body, big) {
		t.Fatalf("got %d bytes; want %d", len(r.body), len(big))
	}
}

func TestWrongNodeIsRefused(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	mu.Lock()
	addrs[3] = addrs[2] // node 3's address points at node 2
	mu.Unlock()
	a.t.Send(3, 1, []byte("lost"))
	a.t.Send(2, 1, []byte("kept"))
	if r := b.next(t); string(r.body) != "kept" {
		t.Fatalf("node 2 got %q; want only \"kept\"", r.body)
	}
	select {
	case r := <-b.ch:
		t.Fatalf("node 2 also got %q meant for node 3", r.body)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestClusterIDMismatch(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	a.t.SetClusterID("one")
	b.t.SetClusterID("two")
	a.t.Send(2, 1, []byte("x"))
	select {
	case r := <-b.ch:
		t.Fatalf("a frame crossed clusters: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestDeadPeerIsReportedRefused(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	a.t.Send(2, 1, []byte("hi"))
	b.next(t)
	b.t.Close() // the process is gone: its port refuses
	deadline := time.After(5 * time.Second)
	for {
		select {
		case d := <-a.down:
			if d[0] == 2 && d[1] == 1 {
				return
			}
		case <-deadline:
			t.Fatal("node 1 never saw node 2's port refuse")
		}
	}
}

func TestIsolateAndHeal(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	a.t.Isolate(2)
	a.t.Send(2, 1, []byte("out"))
	b.t.Send(1, 1, []byte("in"))
	select {
	case r := <-b.ch:
		t.Fatalf("isolated frame arrived at 2: %q", r.body)
	case r := <-a.ch:
		t.Fatalf("isolated frame arrived at 1: %q", r.body)
	case <-time.After(200 * time.Millisecond):
	}
	a.t.Heal()
	a.t.Send(2, 1, []byte("after"))
	if r := b.next(t); string(r.body) != "after" {
		t.Fatalf("got %q after healing", r.body)
	}
}

func TestCutConnectionsReconnects(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	a.t.Send(2, 1, []byte("one"))
	b.next(t)
	a.t.CutConnections(2)
	time.Sleep(50 * time.Millisecond)
	a.t.Send(2, 1, []byte("two"))
	if r := b.next(t); string(r.body) != "two" {
		t.Fatalf("got %q after a cut", r.body)
	}
}

// TestForgetDropsQueuedFrames: frames queued for a peer while it is away (between two dials)
// are dropped by Forget, so a process that takes its id later never gets them.
func TestForgetDropsQueuedFrames(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	mu.Lock()
	real := addrs[2]
	addrs[2] = "127.0.0.1:1" // away: refused
	mu.Unlock()
	for range 5 { // each failed dial doubles the wait before the next one: 320 ms after the fifth
		a.t.Send(2, 1, []byte("lost"))
		select {
		case <-a.down:
		case <-time.After(5 * time.Second):
			t.Fatal("no dial failure reported")
		}
	}
	a.t.Send(2, 1, []byte("stale"))
	if a.t.Queued(2) == 0 {
		t.Fatal("nothing queued while the peer is away")
	}
	a.t.Forget(2)
	if q := a.t.Queued(2); q != 0 {
		t.Fatalf("%d bytes queued after Forget", q)
	}
	mu.Lock()
	addrs[2] = real
	mu.Unlock()
	a.t.Send(2, 1, []byte("fresh"))
	if r := b.next(t); string(r.body) != "fresh" {
		t.Fatalf("the peer's first frame is %q; want the one sent after Forget", r.body)
	}
}

func FuzzParseHello(f *testing.F) {
	f.Add([]byte("RNL1\x00\x00\x00\x01\x00\x00\x00\x02\x00\x03abc"))
	f.Add([]byte("RNL1\x00\x00\x00\x01\x00\x00\x00\x02\x00\x03abc\x00\x0e127.0.0.1:9093"))
	f.Add([]byte("RNL1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHello(b)
		if err != nil {
			return
		}
		min := 14 + len(h.ClusterID)
		if h.Addr != "" {
			min += 2 + len(h.Addr)
		}
		if len(b) < min {
			t.Fatalf("parsed %+v from %d bytes", h, len(b))
		}
	})
}

// TestAnswerANodeNotInMetadata: a node that knows no address for a peer (a broker that has not
// registered yet) still answers it, at the address the peer gave in its hello.
func TestAnswerANodeNotInMetadata(t *testing.T) {
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a, b := newNode(t, 1, addrs, mu), newNode(t, 2, addrs, mu)
	mu.Lock()
	delete(addrs, 1) // only node 2's address is known
	mu.Unlock()
	a.t.Send(2, 7, []byte("hello"))
	if r := b.next(t); string(r.body) != "hello" {
		t.Fatalf("got %q", r.body)
	}
	b.t.Send(1, 9, []byte("answer"))
	if r := a.next(t); r.from != 2 || string(r.body) != "answer" {
		t.Fatalf("got %q from %d; want the answer from node 2", r.body, r.from)
	}
}
