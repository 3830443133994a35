package replica

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestAppendNoOpKeepsToItsEpoch: a total-order shard's runner decides its no-ops from the log
// of the epoch it started in; once this node leads a later epoch (it lost the leadership and
// won it back, the log possibly truncated in between), that runner's no-op is refused, and
// the new epoch's goes in.
func TestAppendNoOpKeepsToItsEpoch(t *testing.T) {
	m, r, l, ref := soloReplica(t)
	lead := func(epoch int32) {
		m.Assign(ref, Assignment{Role: RoleLeader, Epoch: epoch, Leader: 1, Sets: [][]int32{{1}}, ISR: []int32{1}, MinISR: 1})
	}
	lead(1)
	if _, _, err := r.AppendNoOp(1, batch.NoOp{Slots: 3}); err != nil {
		t.Fatalf("epoch 1's no-op in epoch 1: %v", err)
	}
	lead(2)
	if _, _, err := r.AppendNoOp(1, batch.NoOp{Slots: 3}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("epoch 1's no-op in epoch 2: %v, want ErrNotLeader", err)
	}
	if _, _, err := r.AppendNoOp(2, batch.NoOp{Slots: 3}); err != nil {
		t.Fatalf("epoch 2's no-op in epoch 2: %v", err)
	}
	if end := l.EndOffset(); end != 6 {
		t.Fatalf("log end %d, want 6 (two no-op entries of 3 slots)", end)
	}
}

// soloReplica is partition 0 of topic t hosted alone on node 1 (no peers, no ticks), with its
// log on disk in a temp dir: for tests that drive one replica's leadership by hand.
func soloReplica(t *testing.T) (*Manager, *Replica, *logstore.Log, controller.PartitionRef) {
	t.Helper()
	l, dir := diskLog(t)
	m := NewManager(Config{NodeID: 1, TickInterval: -1, Now: time.Now, Logger: slog.New(slog.DiscardHandler),
		Send: func(int32, transport.Kind, []byte) {}})
	t.Cleanup(m.Close)
	ref := controller.PartitionRef{Partition: 0}
	r, err := m.Add(ref, "t", l, vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, r, l, ref
}

// diskLog opens an empty log on disk in a temp dir (no preallocation), closed with the test.
func diskLog(t *testing.T) (*logstore.Log, string) {
	t.Helper()
	dir := t.TempDir()
	flusher := logstore.NewFlusher(1)
	t.Cleanup(flusher.Close)
	cfg := logstore.DefaultConfig()
	cfg.Preallocate = false
	l, err := logstore.Open(logstore.Options{FS: vfs.Default, Dir: dir, Config: cfg, Flusher: flusher, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}
