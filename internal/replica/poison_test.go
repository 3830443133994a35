package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestFailedFillSyncStopsTheReplica: the fsync of a preallocation fill (logstore's zeros ahead
// of the appends) fails and poisons the log. Before, only a failed fsync of appended data told
// the replica: a leader with a poisoned log went on leading (and, deposed, voting) until its next
// append failed, and an acks=all produce waiting for its fsync timed out (REQUEST_TIMED_OUT)
// instead of getting KAFKA_STORAGE_ERROR. Now the log's durability hook hears of every
// poisoning.
func TestFailedFillSyncStopsTheReplica(t *testing.T) {
	for range 5 {
		if failFillSync(t) {
			return
		}
		// An append raced with the fill's failure and failed itself, which tells the replica
		// anyway: try again.
	}
	t.Fatal("in every run an append raced with the fill's failure")
}

// failFillSync appends fast to a lone leader until a preallocation fill's fsync fails, then
// checks that the replica stopped. It reports false if an append failed first.
func failFillSync(t *testing.T) bool {
	t.Helper()
	var failSync atomic.Bool
	syncing := make(chan struct{})
	var once sync.Once
	fsys := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && failSync.Load() {
			once.Do(func() { close(syncing) })
			return syscall.EIO
		}
		return nil
	}))
	var mu sync.Mutex
	clock := now0
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	flusher := logstore.NewFlusher(1)
	defer flusher.Close()
	cfg := logstore.DefaultConfig()
	cfg.FlushInterval, cfg.FlushBytes = 0, 0 // nothing syncs the appended data: the fill's fsync is the only one
	l, err := logstore.Open(logstore.Options{FS: fsys, Dir: "/p", Config: cfg, Flusher: flusher, Logger: slog.New(slog.DiscardHandler), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Config{NodeID: 1, TickInterval: -1, Now: now, Logger: slog.New(slog.DiscardHandler),
		Send: func(int32, transport.Kind, []byte) {}})
	defer m.Close()
	ref := controller.PartitionRef{Partition: 0}
	r, err := m.Add(ref, "t", l, fsys, "/p")
	if err != nil {
		t.Fatal(err)
	}
	m.Assign(ref, Assignment{Role: RoleLeader, Epoch: 1, Leader: 1, Sets: [][]int32{{1}}, ISR: []int32{1}, MinISR: 1})
	failSync.Store(true)
	var epoch int32
	var end int64
appends:
	for i := 0; ; i++ { // 1 KB every 100 µs by the clock: fast enough for a fill
		select {
		case <-syncing:
			break appends
		default:
		}
		if i == 20_000 {
			t.Fatal("no fill started")
		}
		recs := batch.AppendRecord(nil, 0, 0, nil, make([]byte, 1000), 0, nil)
		b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
			BaseTimestamp: 1, MaxTimestamp: 1}, recs)
		res, e, err := r.Append(b)
		switch {
		case errors.Is(err, ErrNotLeader): // the replica heard of the failure already
			break appends
		case errors.Is(err, logstore.ErrPoisoned):
			return false
		case err != nil:
			t.Fatal(err)
		}
		epoch, end = e, res.Last+1
		mu.Lock()
		clock = clock.Add(100 * time.Microsecond)
		mu.Unlock()
	}
	for deadline := time.Now().Add(5 * time.Second); l.Err() == nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(l.Err(), logstore.ErrPoisoned) {
		t.Fatalf("log error %v after the fill's failed fsync; want ErrPoisoned", l.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.WaitCommitted(ctx, epoch, end); !errors.Is(err, logstore.ErrPoisoned) {
		t.Errorf("WaitCommitted on the poisoned leader = %v; want the poisoning error", err)
	}
	if _, _, leading := r.Leading(); leading {
		t.Error("the replica still leads with a poisoned log")
	}
	return true
}
