package objstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// recordSyncs replaces syncDir for the test with one that also records the directories synced.
func recordSyncs(t *testing.T) func() []string {
	var mu sync.Mutex
	var synced []string
	real := syncDir
	syncDir = func(dir string) error {
		mu.Lock()
		synced = append(synced, dir)
		mu.Unlock()
		return real(dir)
	}
	t.Cleanup(func() { syncDir = real })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(synced)
		synced = nil
		return out
	}
}

// A directory another writer has just created may not be durable yet (its entry in its parent
// not synced): a write into it returned, and was acknowledged, though a crash could take the
// directory, and the object with it. A Dir now syncs the parent of every directory it writes
// into once, whoever created it.
func TestWriteIntoAnotherWritersNewDirectory(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	synced := recordSyncs(t)
	// Another writer (a goroutine or a process sharing the store) made the directories and
	// has not synced their parents yet.
	if err := os.MkdirAll(filepath.Join(root, "journal", "run1", "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.PutIfAbsent(ctx, "journal/run1/7/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	got := synced()
	for _, want := range []string{root, filepath.Join(root, "journal"), filepath.Join(root, "journal", "run1"), filepath.Join(root, "journal", "run1", "7")} {
		if !slices.Contains(got, want) {
			t.Errorf("synced %v; want %s among them (the entry of a directory the write depends on)", got, want)
		}
	}
	// Once known durable, a directory's parent is not synced again.
	if err := d.Put(ctx, "journal/run1/7/g", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if got := synced(); !slices.Equal(got, []string{filepath.Join(root, "journal", "run1", "7")}) {
		t.Errorf("second write synced %v; want only its own directory", got)
	}
}

// PutIfAbsent of a key that exists (maybe this writer's own earlier attempt, whose directory
// sync failed) syncs the directory before answering ErrExists: the caller goes by the object.
func TestPutIfAbsentExistingSyncsItsDirectory(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutIfAbsent(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	synced := recordSyncs(t)
	if err := d.PutIfAbsent(ctx, "a/b", []byte("x")); !errors.Is(err, ErrExists) {
		t.Fatalf("second PutIfAbsent: %v; want ErrExists", err)
	}
	if got := synced(); !slices.Contains(got, filepath.Join(root, "a")) {
		t.Errorf("synced %v on ErrExists; want the object's directory", got)
	}
}

// Delete removes the directories it empties; a later write into one (this process's, or after
// another process's Delete) creates it again.
func TestWriteAfterItsDirectoryWasRemoved(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := d.Put(ctx, "p/q/r", []byte("x")); err != nil {
			t.Fatalf("round %d: put: %v", i, err)
		}
		if i == 0 {
			if err := d.Delete(ctx, "p/q/r"); err != nil {
				t.Fatal(err)
			}
		} else { // another process deletes it
			if err := os.Remove(filepath.Join(root, "p", "q", "r")); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(root, "p", "q"))
			os.Remove(filepath.Join(root, "p"))
			if err := d.Put(ctx, "p/q/r", []byte("y")); err != nil {
				t.Fatalf("put after another process removed the directories: %v", err)
			}
		}
	}
}
