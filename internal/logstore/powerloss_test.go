package logstore

import (
	"context"
	"math/rand/v2"
	"sync"
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
