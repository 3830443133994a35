package logstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestConcurrentAppendReadMaintain runs appenders, durable waiters, readers, compaction and
// retention at once (meant for -race): readers always get whole valid batches.
func TestConcurrentAppendReadMaintain(t *testing.T) {
	e := newEnv(t, vfs.Default, t.TempDir())
	cfg := compactConfig()
	cfg.Delete = true
	cfg.RetentionBytes = 64 << 10
	l := e.open(cfg)
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				b := makeBatch(t, batch.CodecNone, kv(fmt.Sprint(i%17), fmt.Sprintf("w%d-%d%s", w, i, make([]byte, 200))))
				_, last, err := l.Append(b, 1)
				if err == nil && i%10 == 0 {
					err = l.WaitDurable(ctx, last+1)
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var maint sync.WaitGroup
	maint.Add(2)
	go func() { // readers
		defer maint.Done()
		var dst []byte
		for ctx.Err() == nil {
			from := l.StartOffset()
			var err error
			dst, err = l.Read(dst[:0], from, 4096)
			if errors.Is(err, ErrOffsetOutOfRange) {
				continue // retention moved the start meanwhile
			}
			for b := dst; err == nil && len(b) > 0; {
				n, serr := batch.Split(b)
				if serr == nil {
					_, serr = batch.ValidateStored(b[:n])
				}
				if serr != nil {
					err = serr
					break
				}
				b = b[n:]
			}
			if err != nil {
				errc <- fmt.Errorf("read at %d: %w", from, err)
				return
			}
		}
	}()
	go func() { // maintenance
		defer maint.Done()
		c := NewCompactor(0)
		for ctx.Err() == nil {
			if _, err := c.Compact(ctx, l); err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
			if _, err := l.EnforceRetention(); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	cancel()
	maint.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
