package logstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestPowerLossUnderLoad is the durability proof for the two ways a produce can be acknowledged:
// after an fsync (write.caching=false: WaitDurable), or after the append alone, with the flush
// policy syncing in the background (write.caching=true). Four appenders run at ~20k batches/s
// while the machine loses power at a random moment (the crashable file system keeps only what was synced).
// After recovery: with fsync acks, no acknowledged batch is lost; with write caching, the loss is
// confined to batches acknowledged within the last flush window before the crash.
//
// The load is paced: appenders that saturate every core starve the flusher's ticker and the
// fsync of CPU, and then flush.ms cannot hold (in Runnel as in any broker); FlushLag shows it.
func TestPowerLossUnderLoad(t *testing.T) {
	const flushMs = 50 * time.Millisecond
	// The window also has room for the flusher's 5 ms tick, the fsync and scheduling delays on
	// a loaded 2-core machine under -race; it is still far below the run's length.
	const window = flushMs + 400*time.Millisecond
	for _, caching := range []bool{false, true} {
		name := "fsync-acks"
		if caching {
			name = "write-caching"
		}
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			f := NewFlusher(0)
			defer f.Close()
			cfg := DefaultConfig()
			cfg.SegmentBytes = 1 << 30                     // no rolls: a roll syncs, and would bound the loss by itself
			cfg.FlushInterval, cfg.FlushBytes = flushMs, 0 // only the time bound, to test it
			l, err := Open(Options{FS: mem, Dir: "/p", Config: cfg, Flusher: f, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			type ack struct {
				first int64
				at    time.Time
			}
			var mu sync.Mutex
			var acks []ack
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if i%5 == 4 { // ~5k batches/s per appender: heavy produce load, not a CPU soak
							time.Sleep(time.Millisecond)
						}
						first, last, err := l.Append(valueBatch(t, 1+i%3, 200, 1, w*100000+i), 0)
						if err == nil && !caching {
							err = l.WaitDurable(context.Background(), last+1)
						}
						if err != nil {
							return
						}
						mu.Lock()
						acks = append(acks, ack{first, time.Now()})
						mu.Unlock()
					}
				}()
			}
			time.Sleep(time.Duration(1200+rand.IntN(600)) * time.Millisecond) // well past the window
			mu.Lock()                                                         // no ack is recorded between the crash and this snapshot
			// The crash point is taken before Crash copies the file system (which takes a while
			// for the ~100 MB written): measured after it, the copy time would count as flush lag.
			crashAt := time.Now()
			crashed := mem.Crash(vfs.CrashOptions{Tear: true})
			acked := append([]ack(nil), acks...)
			mu.Unlock()
			close(stop)
			wg.Wait()
			l.Close()

			l2, err := Open(Options{FS: crashed, Dir: "/p", Config: cfg, Flusher: f, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			have := map[int64]bool{}
			for _, b := range readAll(t, l2) {
				h, _ := batch.ParseHeader(b)
				have[h.BaseOffset] = true
			}
			lost, oldestLost := 0, time.Time{}
			for _, a := range acked {
				if !have[a.first] {
					lost++
					if oldestLost.IsZero() || a.at.Before(oldestLost) {
						oldestLost = a.at
					}
				}
			}
			t.Logf("%d batches acknowledged, %d lost in the power failure", len(acked), lost)
			if lost > 0 {
				t.Logf("the oldest lost batch was acknowledged %v before the crash", crashAt.Sub(oldestLost))
			}
			if len(acked) < 10 {
				t.Fatalf("only %d batches acknowledged; the load did not run", len(acked))
			}
			switch {
			case !caching && lost > 0:
				t.Errorf("%d fsync-acknowledged batches lost; want none", lost)
			case caching && lost > 0 && crashAt.Sub(oldestLost) > window:
				t.Errorf("a write-cached batch acknowledged %v before the crash was lost; want loss only within the last %v (flush.ms %v)",
					crashAt.Sub(oldestLost), window, flushMs)
			}
		})
	}
}

// TestPowerLossManyLogs: eight logs on one file system, each with an appender that waits for
// durability, so the flusher's rounds sync them together with one SyncFS; the power fails at a
// random moment; no acknowledged batch of any log is lost.
func TestPowerLossManyLogs(t *testing.T) {
	const logs = 8
	mem := vfs.NewMem()
	// Syncs take a moment, as on a disk, so waiters pile up and rounds hold many logs.
	var syncFS atomic.Int64
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op, _ string) error {
		switch op {
		case vfs.OpSync, vfs.OpSyncFS:
			time.Sleep(200 * time.Microsecond)
			if op == vfs.OpSyncFS {
				syncFS.Add(1)
			}
		}
		return nil
	}))
	f := NewFlusher(0)
	defer f.Close()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 256 << 10 // rolls too
	var ls []*Log
	for i := range logs {
		l, err := Open(Options{FS: fsys, Dir: fmt.Sprintf("/p%d", i), Config: cfg, Flusher: f, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	var mu sync.Mutex
	acked := make([][]int64, logs) // first offsets acknowledged, per log
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				first, last, err := l.Append(valueBatch(t, 1+n%3, 100, 1, i*100000+n), 0)
				if err == nil {
					err = l.WaitDurable(context.Background(), last+1)
				}
				if err != nil {
					return
				}
				mu.Lock()
				acked[i] = append(acked[i], first)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Duration(500+rand.IntN(500)) * time.Millisecond)
	mu.Lock()
	crashed := mem.Crash(vfs.CrashOptions{Tear: true, Garbage: true})
	snapshot := make([][]int64, logs)
	for i := range acked {
		snapshot[i] = append([]int64(nil), acked[i]...)
	}
	mu.Unlock()
	close(stop)
	wg.Wait()
	for _, l := range ls {
		l.Close()
	}
	if syncFS.Load() == 0 {
		t.Fatal("no round synced its logs with one SyncFS; the test tested nothing")
	}
	total := 0
	for i := range logs {
		l, err := Open(Options{FS: crashed, Dir: fmt.Sprintf("/p%d", i), Config: cfg, Flusher: f, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		have := map[int64]bool{}
		for _, b := range readAll(t, l) {
			h, _ := batch.ParseHeader(b)
			have[h.BaseOffset] = true
		}
		l.Close()
		for _, first := range snapshot[i] {
			if !have[first] {
				t.Errorf("log %d: batch at %d was acknowledged durable and is gone after the power failure", i, first)
			}
		}
		total += len(snapshot[i])
	}
	t.Logf("%d batches acknowledged across %d logs; %d sync calls (%d SyncFS) in %d rounds", total, logs, f.Stats().Syncs, syncFS.Load(), f.Stats().Rounds)
	if total < 100 {
		t.Fatalf("only %d batches acknowledged; the load did not run", total)
	}
}

// TestSyncTogether: one SyncFS makes every log it covers durable; if it fails, every one of
// them is poisoned (the error does not say which file lost data).
func TestSyncTogether(t *testing.T) {
	for _, fail := range []bool{false, true} {
		fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, _ string) error {
			if fail && op == vfs.OpSyncFS {
				return vfs.ErrInjected
			}
			return nil
		}))
		e := newEnv(t, fsys, "/")
		poisoned := make(chan error, 8)
		e.flusher.OnPoison(func(err error) { poisoned <- err })
		cfg := testConfig()
		cfg.FlushInterval, cfg.FlushBytes, cfg.FlushMessages = 0, 0, 0
		var logs []*Log
		for i := range 4 {
			l, err := Open(Options{FS: fsys, Dir: fmt.Sprintf("/l%d", i), Config: cfg, Flusher: e.flusher, Logger: quiet, Now: e.clock.now})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			appendAll(t, l, valueBatch(t, 2, 50, 1, i))
			logs = append(logs, l)
		}
		if n := syncTogether(fsys, logs); n != 4 {
			t.Fatalf("syncTogether synced %d logs; want 4", n)
		}
		for i, l := range logs {
			switch {
			case !fail && (l.DurableOffset() != 2 || l.Err() != nil):
				t.Errorf("log %d after a SyncFS: durable %d, err %v; want 2, nil", i, l.DurableOffset(), l.Err())
			case fail && (!errors.Is(l.Err(), ErrPoisoned) || l.DurableOffset() != 0):
				t.Errorf("log %d after a failed SyncFS: durable %d, err %v; want 0, ErrPoisoned", i, l.DurableOffset(), l.Err())
			}
		}
		if fail { // the flusher's OnPoison hears of every poisoned log (the boot mark withdraws)
			for range logs {
				if err := <-poisoned; !errors.Is(err, ErrPoisoned) {
					t.Errorf("OnPoison got %v; want ErrPoisoned", err)
				}
			}
		}
		if len(poisoned) != 0 {
			t.Errorf("OnPoison called %d more times; want once per poisoned log", len(poisoned))
		}
	}
}

// TestFailedRecoveryTellsOnPoison: a log whose recovery fails a sync (its unsynced tail, left by
// the process before, may be lost: the kernel reports a writeback error once) is reported to
// OnPoison before Open returns, so the node's boot mark is withdrawn and it registers as one that
// may have lost writes before the log is opened again (a retry may succeed).
func TestFailedRecoveryTellsOnPoison(t *testing.T) {
	var rules vfs.Rules
	fsys := vfs.NewErrorFS(vfs.NewMem(), &rules)
	e := newEnv(t, fsys, "/log")
	l := e.open(testConfig())
	appendAll(t, l, valueBatch(t, 3, 10, 0, 1))
	l.Close()

	poisoned := make(chan error, 4)
	e.flusher.OnPoison(func(err error) { poisoned <- err })
	rules.Add(vfs.Rule{Op: vfs.OpSync, Times: 1})
	if _, err := Open(Options{FS: fsys, Dir: "/log", Config: testConfig(), Flusher: e.flusher, Logger: quiet}); err == nil {
		t.Fatal("Open whose recovery sync failed: no error")
	}
	select {
	case err := <-poisoned:
		if !errors.Is(err, vfs.ErrInjected) {
			t.Errorf("OnPoison got %v; want the injected failure", err)
		}
	default:
		t.Error("OnPoison not called before Open returned a failed recovery")
	}
	l2, err := Open(Options{FS: fsys, Dir: "/log", Config: testConfig(), Flusher: e.flusher, Logger: quiet})
	if err != nil {
		t.Fatalf("Open again = %v", err)
	}
	if end := l2.EndOffset(); end != 3 {
		t.Errorf("recovered end %d; want 3", end)
	}
	l2.Close()
	if len(poisoned) != 0 {
		t.Errorf("OnPoison called %d more times", len(poisoned))
	}
}
