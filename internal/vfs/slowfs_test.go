package vfs

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestSlowFSIsAnFS(t *testing.T) {
	runSuite(t, func(t *testing.T) (FS, string) {
		f := NewSlowFS(Default)
		f.Set(Slowness{Write: time.Microsecond, Sync: time.Microsecond})
		return f, t.TempDir()
	})
}

// A SlowFS slows the syncs (and SyncFS) of the files its slowness covers, has their writes
// wait while a sync runs if asked to, keeps an operating-system file's descriptor, and slows
// nothing once healed.
func TestSlowFS(t *testing.T) {
	dir := t.TempDir()
	sfs := NewSlowFS(Default)
	if err := sfs.MkdirAll(filepath.Join(dir, "slow"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := sfs.Create(filepath.Join(dir, "slow", "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(interface{ Fd() uintptr }); !ok {
		t.Fatalf("%T shows no descriptor: zero-copy reads would stop", f)
	}
	const d = 300 * time.Millisecond
	sfs.Set(Slowness{PathContains: "/slow/", Sync: d, WritesWaitForSync: true})

	start := time.Now()
	if err := sfs.SyncFS(f); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("SyncFS took %v; want at least %v", took, d)
	}

	var synced atomic.Bool
	go func() {
		if err := f.Sync(); err != nil {
			t.Error(err)
		}
		synced.Store(true)
	}()
	sf := f.(*slowOSFile).slowFile
	for sf.syncing.TryRLock() { // until the Sync holds the file
		sf.syncing.RUnlock()
		time.Sleep(time.Millisecond)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if !synced.Load() {
		t.Fatal("a write went on while a sync of its file ran")
	}

	sfs.Set(Slowness{})
	if sfs.s.Load() != nil {
		t.Fatal("the zero slowness left a slowness set")
	}
	other, err := sfs.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sfs.Set(Slowness{PathContains: "/slow/", Sync: time.Hour})
	if err := other.Sync(); err != nil { // not covered: would take an hour otherwise
		t.Fatal(err)
	}
}
