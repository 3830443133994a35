package speclog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClosedClientStaysClosed: after Close, calls on the client fail with ErrClosed and dial
// nothing: an append is not sent (the node stores nothing more) and no connection is opened
// again; a subscription fails the same way.
func TestClosedClientStaysClosed(t *testing.T) {
	n := startFakeNode(t, &fakeNode{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	log := c.Topic("x")
	if _, err := log.Append(ctx, 0, Record{Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = log.Append(ctx, 0, Record{Value: []byte("after")})
	c.mu.Lock()
	conns := len(c.conns)
	c.mu.Unlock()
	n.mu.Lock()
	stored := n.log
	n.mu.Unlock()
	if !errors.Is(err, ErrClosed) || conns != 0 || len(stored) != 1 {
		t.Fatalf("append after Close: err %v; %d connection(s) open after Close; the node stored %q", err, conns, stored)
	}
	if _, err := log.Subscribe(ctx, 0, SubscribeOptions{}).Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscription after Close: %v, want ErrClosed", err)
	}
	c.mu.Lock()
	conns = len(c.conns)
	c.mu.Unlock()
	if conns != 0 {
		t.Fatalf("%d connection(s) open after Close and a subscription", conns)
	}
}
