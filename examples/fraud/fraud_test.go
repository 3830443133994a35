package main

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/speclog/speclogtest"
	"github.com/runnel-dev/runnel/speclog"
)

// TestFraudMonitor runs the example end to end on a one-node Runnel: payment generators on three
// shards, the monitor subscribed speculatively, one shard failed midway (its runner frozen).
// The alerts the monitor externalized (only once confirmed) must be exactly those a monitor
// computes from the confirmed log afterwards, although it computed on speculative records and
// rolled back at the fail notice.
func TestFraudMonitor(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "payments", 3)

	var live []Alert
	var mu sync.Mutex
	m := NewMonitor(5, 400_000, func(a Alert) { mu.Lock(); live = append(live, a); mu.Unlock() })
	subCtx, stopSub := context.WithCancel(ctx)
	sub := log.Subscribe(subCtx, 0, speclog.SubscribeOptions{})
	fails, speculative := 0, 0
	var confirmed uint64
	subDone := make(chan error, 1)
	go func() {
		for {
			ev, err := sub.Next()
			if err != nil {
				if subCtx.Err() == nil {
					subDone <- err
				} else {
					subDone <- nil
				}
				return
			}
			mu.Lock()
			switch {
			case ev.Kind == speclog.EventFail:
				fails++
			case ev.Kind == speclog.EventRecord && ev.Speculative:
				speculative++
			case ev.Kind == speclog.EventConfirm:
				confirmed = ev.UpTo
			}
			mu.Unlock()
			if err := m.Handle(ev); err != nil {
				subDone <- err
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for sh := range int32(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Generate(ctx, log, sh, 600, rand.New(rand.NewPCG(uint64(sh), 7))); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	n.Stall(t, "payments", 2, 300*time.Millisecond)
	wg.Wait()
	d, err := log.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		done := confirmed >= d.Confirmed
		mu.Unlock()
		if done {
			break
		}
	}
	stopSub()
	if err := <-subDone; err != nil {
		t.Fatal(err)
	}

	// The reference: a monitor over the confirmed log, read back.
	var want []Alert
	ref := NewMonitor(5, 400_000, func(a Alert) { want = append(want, a) })
	var last uint64
	for from := uint64(0); from < d.Confirmed; {
		evs, next, err := log.Read(ctx, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if next == from {
			break
		}
		for _, ev := range evs {
			if err := ref.Handle(ev); err != nil {
				t.Fatal(err)
			}
			last = ev.Position
		}
		from = next
	}
	ref.Handle(speclog.Event{Kind: speclog.EventConfirm, UpTo: last + 1})
	mu.Lock()
	defer mu.Unlock()
	got := slices.DeleteFunc(slices.Clone(live), func(a Alert) bool { return a.Position > last })
	if speculative == 0 {
		t.Fatalf("no speculative record: the run did not exercise speculation")
	}
	if fails == 0 { // legitimate when the monitor was not ahead of the confirmed prefix then
		t.Logf("no fail notice: the monitor had nothing speculative to roll back when the shard failed")
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("externalized %d alerts, the confirmed log gives %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	t.Logf("%d alerts, all confirmed and equal to the reference; %d fail notices, %d speculative records", len(got), fails, speculative)
}
