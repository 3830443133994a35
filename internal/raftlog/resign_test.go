package raftlog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Resign asks until the member no longer leads, again after each retry interval; it stops at
// the context's end, and at once on the member's own refusal.
func TestResign(t *testing.T) {
	var asks atomic.Int32
	leading := func() bool { return asks.Load() < 3 } // the third ask takes
	ask := func(context.Context) error { asks.Add(1); return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Resign(ctx, leading, ask, 10*time.Millisecond); err != nil || asks.Load() != 3 {
		t.Fatalf("Resign = %v after %d asks; want nil after 3", err, asks.Load())
	}

	asks.Store(0)
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	err := Resign(short, func() bool { return true }, ask, 10*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || asks.Load() < 2 {
		t.Fatalf("a leadership that never moves: %v after %d asks; want the deadline, having asked again", err, asks.Load())
	}

	stopped := errors.New("stopped")
	if err := Resign(ctx, func() bool { return true }, func(context.Context) error { return stopped }, time.Millisecond); !errors.Is(err, stopped) {
		t.Fatalf("a refused ask: %v; want it returned", err)
	}
	if err := Resign(ctx, func() bool { return false }, func(context.Context) error { t.Fatal("asked while not leading"); return nil }, time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
