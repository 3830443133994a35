package logstore

import (
	"sync/atomic"
	"testing"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// crashBefore wraps a MemFS: once armed, it counts the file-system operations that change
// state and, right before the n-th, keeps the MemFS as a power loss at that instant would leave
// it (crashed); the process goes on.
type crashBefore struct {
	mem     *vfs.MemFS
	n       int64
	armed   atomic.Bool
	seen    atomic.Int64
	crashed *vfs.MemFS
}

func (c *crashBefore) MaybeError(op vfs.Op, path string) error {
	switch op {
	case vfs.OpCreate, vfs.OpRemove, vfs.OpRename, vfs.OpSyncDir, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate:
	default:
		return nil
	}
	if c.armed.Load() && c.seen.Add(1) == c.n {
		c.crashed = c.mem.Crash(vfs.CrashOptions{})
	}
	return nil
}

// TestResetToCrashForgetsTheOldProducers: ResetTo (a replica whose log ends before its
// leader's log start) with power lost before each of its file-system operations in turn: the
// recovered log is the old one, or the new empty one without the old log's producers. Before,
// the checkpoint committed the empty log before the producer snapshots were removed, and a
// crash between the two brought back the old log's open transaction below the new log start,
// which pinned the last stable offset there for good (no marker would ever close it).
func TestResetToCrashForgetsTheOldProducers(t *testing.T) {
	reset := 0
	for n := int64(1); ; n++ {
		mem := vfs.NewMem()
		cb := &crashBefore{mem: mem, n: n}
		e := newEnv(t, vfs.NewErrorFS(mem, cb), "/p")
		l := e.open(testConfig())
		appendIdem(t, l, txnBatch(t, 7, 0, 0, 2), 0, false) // an open transaction of producer 7 at 0
		appendAll(t, l, valueBatch(t, 1, 100, 1000, 1))
		rollActive(t, l) // writes a producer snapshot holding the open transaction
		syncAll(t, l)
		cb.armed.Store(true)
		if err := l.ResetTo(1000); err != nil {
			t.Fatalf("ResetTo(1000) = %v", err)
		}
		l.Close()
		if cb.crashed == nil {
			if reset == 0 {
				t.Fatal("no crash point left the reset done")
			}
			return // n passed the reset's last operation
		}
		e.fs = cb.crashed
		l2 := e.open(testConfig())
		switch start := l2.StartOffset(); start {
		case 1000:
			reset++
			if fu, np := l2.FirstUnstableOffset(), len(l2.Producers()); fu != -1 || np != 0 {
				t.Errorf("crash before operation %d: the reset log has first unstable offset %d and %d producers of the old log; want none", n, fu, np)
			}
			appendAll(t, l2, valueBatch(t, 1, 100, 1000, 2))
			syncAll(t, l2)
			if lso := l2.LastStable(l2.EndOffset()); lso != l2.EndOffset() {
				t.Errorf("crash before operation %d: LastStable(%d) = %d; want the end", n, l2.EndOffset(), lso)
			}
		case 0:
			if fu := l2.FirstUnstableOffset(); fu != 0 {
				t.Errorf("crash before operation %d: the old log without its open transaction (first unstable %d)", n, fu)
			}
		default:
			t.Errorf("crash before operation %d: log start %d; want 0 or 1000", n, start)
		}
		l2.Close()
	}
}
