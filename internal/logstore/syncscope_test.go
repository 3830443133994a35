package logstore

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// scopedFS is a file system whose SyncFSScope a test sets: which dirs share a syncfs, and where
// syncfs syncs nothing (as on FUSE).
type scopedFS struct {
	*vfs.ErrorFS
	scope func(dir string) (uint64, bool)
}

func (s *scopedFS) SyncFSScope(dir string) (uint64, bool) { return s.scope(dir) }

// TestSyncFSOnlyWhereItSyncs: the flusher groups logs for one SyncFS by the file system under
// them, and syncs one by one the logs on a file system whose syncfs makes nothing durable (FUSE
// returns success and syncs nothing): before, every log of one vfs.FS shared one syncfs of the
// first log's file system, whatever file system the others were on.
func TestSyncFSOnlyWhereItSyncs(t *testing.T) {
	fsys := &scopedFS{ErrorFS: vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(vfs.Op, string) error { return nil })),
		scope: func(dir string) (uint64, bool) {
			switch {
			case strings.HasPrefix(dir, "/fuse/"):
				return 0, false
			case strings.HasPrefix(dir, "/a/"):
				return 1, true
			default:
				return 2, true
			}
		}}
	e := newEnv(t, fsys, "/")
	cfg := testConfig()
	var logs []*Log
	for _, mount := range []string{"fuse", "a", "b"} {
		for i := range syncFSThreshold {
			l, err := Open(Options{FS: fsys, Dir: fmt.Sprintf("/%s/l%d", mount, i), Config: cfg, Flusher: e.flusher, Logger: quiet, Now: e.clock.now})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			logs = append(logs, l)
		}
	}
	groups, single := e.flusher.bySyncer(logs)
	var got []string
	for scope, ls := range groups {
		var dirs []string
		for _, l := range ls {
			dirs = append(dirs, l.dir)
		}
		sort.Strings(dirs)
		got = append(got, fmt.Sprintf("key %d: %s", scope.key, strings.Join(dirs, " ")))
	}
	sort.Strings(got)
	want := []string{"key 1: /a/l0 /a/l1 /a/l2 /a/l3", "key 2: /b/l0 /b/l1 /b/l2 /b/l3"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("SyncFS groups %q; want %q", got, want)
	}
	var singles []string
	for _, l := range single {
		singles = append(singles, l.dir)
	}
	sort.Strings(singles)
	if strings.Join(singles, " ") != "/fuse/l0 /fuse/l1 /fuse/l2 /fuse/l3" {
		t.Fatalf("synced one by one: %v; want the logs on the file system whose syncfs syncs nothing", singles)
	}
}

// The operating system's file systems: a data dir's usual ones share a syncfs by device; /proc
// (not a file system syncfs makes anything durable on) is not grouped.
func TestSyncFSScopeOfTheOS(t *testing.T) {
	s, ok := vfs.Default.(vfs.FSSyncer)
	if !ok {
		t.Skip("no syncfs on this platform")
	}
	if _, ok := s.SyncFSScope("/proc"); ok {
		t.Error("procfs taken for a file system whose syncfs makes files durable")
	}
	dir := t.TempDir()
	k1, ok1 := s.SyncFSScope(dir)
	k2, ok2 := s.SyncFSScope(dir + "/.")
	if ok1 != ok2 || k1 != k2 {
		t.Errorf("one dir, two scopes: %d %v, %d %v", k1, ok1, k2, ok2)
	}
	t.Logf("%s: key %d, syncfs used: %v", dir, k1, ok1)
}
