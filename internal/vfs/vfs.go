// Package vfs is the small file-system interface the storage layers are written against.
//
// Three implementations share one test suite:
//
//   - Default, the operating system;
//   - NewMem, an in-memory file system that can crash: a crash keeps only what was synced
//     (file contents by File.Sync, directory entries by FS.SyncDir) and can tear the last
//     unsynced write of each file;
//   - NewErrorFS, a wrapper that injects errors (failed writes, failed fsyncs, ENOSPC) into
//     any other implementation.
//
// Names are slash-separated paths. Every method is safe for concurrent use; a File may be
// read (ReadAt) concurrently with writes to other ranges of it.
//
// Durability model (the contract the storage layers rely on, and the one NewMem enforces):
// bytes written to a file are durable once File.Sync returns nil; a created, renamed or
// removed directory entry is durable once SyncDir of its parent directory returns nil.
// Directories made by MkdirAll are durable when MkdirAll returns.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// FS is a file system.
type FS interface {
	// Create creates the named file, or truncates it if it exists, open for reading and
	// writing.
	Create(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing, without truncating it.
	OpenReadWrite(name string) (File, error)
	// Open opens an existing file for reading only.
	Open(name string) (File, error)
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// Rename renames oldname to newname, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the entries of dir (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// FSSyncer is implemented by a file system that can make every file written so far durable in
// one call (syncfs(2) on Linux): much cheaper than one fsync per file when many are dirty. f is
// any open file of the file system; the file contents written before the call are durable when
// it returns nil, as if each file had been synced. Directory entries still need SyncDir.
type FSSyncer interface {
	SyncFS(f File) error
	// SyncFSScope names the file system holding dir (files under dirs of one key are covered by
	// one SyncFS) and reports whether SyncFS makes that file system's files durable and reports
	// their writeback errors. Where it does not (FUSE, whose servers the kernel passes syncfs to
	// only for virtiofs: syncfs returns success and syncs nothing; network file systems), each
	// file must be synced itself.
	SyncFSScope(dir string) (key uint64, ok bool)
}

// Booter is implemented by a file system that can name the machine boot its process runs in
// and the mount a directory is on. What a process wrote to the file system without syncing
// outlives the process (it is in the page cache) while the boot and the mount last, barring a
// writeback error, which a later SyncFS (through a file opened after the error) reports. An
// implementation that cannot promise that returns an error.
type Booter interface {
	BootID(dir string) (string, error)
}

// FileIdentifier is implemented by a file system that can tell a file from a copy of it.
// FileID names the named file ("" if it cannot: then no copy can be told apart).
type FileIdentifier interface {
	FileID(name string) string
}

// File is an open file. Offsets are absolute; a File has no current position.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes every byte written so far durable.
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Stat describes the file; Size() is its current size.
	Stat() (os.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
}

// ErrNotExist is returned (wrapped) for a missing file; test with errors.Is(err, fs.ErrNotExist).
var ErrNotExist = fs.ErrNotExist

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error  { return os.Rename(oldname, newname) }
func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// MkdirAll creates dir and any missing parents, then syncs every directory it created and the
// parent of each, deepest first, so the new entries survive a crash.
func (fsys osFS) MkdirAll(dir string, perm os.FileMode) error {
	var missing []string // deepest first
	for d := filepath.Clean(dir); ; {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range missing {
		if err := fsys.SyncDir(d); err != nil {
			return err
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fsys.SyncDir(filepath.Dir(missing[len(missing)-1]))
}

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	return errors.Join(serr, cerr)
}

// IsSyncError reports whether err is a failed fsync (File.Sync, SyncDir, SyncFS), whatever its
// errno: after one, the kernel may have dropped pages it could not write while the page cache
// still shows them.
func IsSyncError(err error) bool {
	var pe *fs.PathError
	for e := err; errors.As(e, &pe); e = pe.Err {
		switch pe.Op {
		case "sync", "syncdir", "syncfs", "fsync", "fdatasync":
			return true
		}
	}
	return false
}

// WriteFileAtomic replaces dir/name with b durably: it writes and syncs dir/name.tmp, renames it
// over dir/name, and syncs dir. A crash leaves either the old file or the new one (and perhaps
// a stale name.tmp, which the next call overwrites).
func WriteFileAtomic(fs FS, dir, name string, b []byte) error {
	tmp := dir + "/" + name + ".tmp"
	if err := WriteFileSync(fs, tmp, b); err != nil {
		return err
	}
	if err := fs.Rename(tmp, dir+"/"+name); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// WriteFileSync creates (or truncates) the named file, writes b and syncs it. Its directory
// entry is durable only once the caller syncs the directory.
func WriteFileSync(fs FS, name string, b []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// ReadFile returns the contents of the named file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err == io.EOF && n == len(b) {
		err = nil
	}
	return b[:n], err
}

// RemoveAll removes dir and everything in it; a missing dir is not an error. The removal is
// not durable until the caller syncs dir's parent.
func RemoveAll(fs FS, dir string) error {
	fi, err := fs.Stat(dir)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		names, err := fs.List(dir)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := RemoveAll(fs, dir+"/"+name); err != nil {
				return err
			}
		}
	}
	return fs.Remove(dir)
}
