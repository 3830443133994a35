package transport

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// slowReceiver starts node 1 (a sender) and node 2, whose handler blocks on a frame "slow"
// until release is closed and then passes every frame's body, copied, to got.
func slowReceiver(t *testing.T, release chan struct{}) (a *node, b *Transport, got chan string) {
	t.Helper()
	addrs, mu := map[int32]string{}, &sync.Mutex{}
	a = newNode(t, 1, addrs, mu)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	addrs[2] = ln.Addr().String()
	mu.Unlock()
	got = make(chan string, 1000)
	b = New(Config{NodeID: 2, Listener: ln,
		Resolve: func(p int32) string { mu.Lock(); defer mu.Unlock(); return addrs[p] },
		Handler: func(_ int32, _ Kind, body []byte) {
			if string(body) == "slow" {
				<-release
				if string(body) != "slow" {
					t.Errorf("the slow handler's body changed under it: %q", body)
				}
			}
			got <- string(bytes.Clone(body))
		}})
	t.Cleanup(func() { b.Close() })
	return a, b, got
}

// TestSlowHandlerHandsTheReadingOver: a handler that runs through a watchdog tick does not hold
// back the frames behind its own: a new goroutine reads them and hands them over meanwhile, each
// with its own body (the slow handler's stays intact), and when the slow handler returns the
// reading goes on once, in order, with no frame lost or seen twice.
func TestSlowHandlerHandsTheReadingOver(t *testing.T) {
	release := make(chan struct{})
	a, b, got := slowReceiver(t, release)
	a.t.Send(2, 7, []byte("slow"))
	for i := range 200 {
		a.t.Send(2, 7, []byte(fmt.Sprint(i)))
	}
	for i := range 200 {
		select {
		case s := <-got:
			if s != fmt.Sprint(i) {
				t.Fatalf("frame %q while the slow handler runs; want %d", s, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d not handed over while a slow handler ran", i)
		}
	}
	if n := b.HandOvers.Load(); n != 1 {
		t.Fatalf("%d hand-overs; want 1, past the slow handler", n)
	}
	close(release)
	if s := <-got; s != "slow" {
		t.Fatalf("got %q; want the slow frame's handler to end", s)
	}
	for i := range 200 { // the reading goes on, once
		a.t.Send(2, 7, []byte(fmt.Sprint("after", i)))
	}
	for i := range 200 {
		select {
		case s := <-got:
			if s != fmt.Sprint("after", i) {
				t.Fatalf("frame %q after the slow handler returned; want after%d", s, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("frame after%d lost", i)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("an extra frame %q", s)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestHandOverAfterTheWatchdogSlept: after two idle seconds the watchdog sleeps; the next frame
// wakes it, so a slow handler then is still handed over past.
func TestHandOverAfterTheWatchdogSlept(t *testing.T) {
	release := make(chan struct{})
	a, b, got := slowReceiver(t, release)
	defer close(release)
	a.t.Send(2, 7, []byte("first"))
	if s := <-got; s != "first" {
		t.Fatalf("got %q", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !b.watchAsleep.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog did not sleep on an idle transport")
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Send(2, 7, []byte("slow"))
	a.t.Send(2, 7, []byte("behind"))
	select {
	case s := <-got:
		if s != "behind" {
			t.Fatalf("got %q; want the frame behind the slow one", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a slow handler held the reading after the watchdog slept")
	}
}
