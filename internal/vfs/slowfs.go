package vfs

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Slowness is what a SlowFS does to the files whose paths contain PathContains ("": every
// file): a grey disk failure, a disk that works but slowly.
type Slowness struct {
	PathContains string
	Write        time.Duration // added before each File.WriteAt
	Sync         time.Duration // added before each File.Sync, SyncFS and SyncDir
	// WritesWaitForSync makes a file's writes wait while a Sync of it runs, as on FUSE, where the
	// kernel holds the file's inode lock across FUSE_FSYNC (ext4 lets writes go on meanwhile).
	WritesWaitForSync bool
}

func (s *Slowness) covers(path string) bool {
	return s != nil && strings.Contains(path, s.PathContains)
}

// SlowFS is an FS that performs every operation on another one, slowed down as its Slowness
// says (none until Set): for fault tests of whole processes, which set it at run time. Reads
// are not slowed, and a File of the operating system's file system keeps its descriptor (Fd),
// so zero-copy reads go on as without the SlowFS.
type SlowFS struct {
	inner FS
	s     atomic.Pointer[Slowness]
}

// NewSlowFS returns a SlowFS over inner, slowing nothing yet.
func NewSlowFS(inner FS) *SlowFS { return &SlowFS{inner: inner} }

// Set replaces the slowness from now on; the zero Slowness slows nothing.
func (f *SlowFS) Set(s Slowness) {
	if s == (Slowness{}) {
		f.s.Store(nil)
		return
	}
	f.s.Store(&s)
}

// syncDelay sleeps the sync delay, if the current slowness covers path.
func (f *SlowFS) syncDelay(path string) {
	if s := f.s.Load(); s.covers(path) {
		time.Sleep(s.Sync)
	}
}

func (f *SlowFS) Create(name string) (File, error)        { return f.wrap(f.inner.Create(name)) }
func (f *SlowFS) Open(name string) (File, error)          { return f.wrap(f.inner.Open(name)) }
func (f *SlowFS) OpenReadWrite(name string) (File, error) { return f.wrap(f.inner.OpenReadWrite(name)) }
func (f *SlowFS) Remove(name string) error                { return f.inner.Remove(name) }
func (f *SlowFS) Rename(oldname, newname string) error    { return f.inner.Rename(oldname, newname) }
func (f *SlowFS) MkdirAll(dir string, perm os.FileMode) error {
	return f.inner.MkdirAll(dir, perm)
}
func (f *SlowFS) List(dir string) ([]string, error)     { return f.inner.List(dir) }
func (f *SlowFS) Stat(name string) (os.FileInfo, error) { return f.inner.Stat(name) }

func (f *SlowFS) SyncDir(dir string) error {
	f.syncDelay(dir)
	return f.inner.SyncDir(dir)
}

// The optional interfaces pass through to the inner file system, as ErrorFS's do, but for
// SyncFSScope: a SlowFS's files are synced one by one, as on FUSE (where a slow disk was met),
// so that a slowness set at any time slows the syncs of the files it covers, and theirs only.

func (f *SlowFS) BootID(dir string) (string, error)     { return f.passThrough().BootID(dir) }
func (f *SlowFS) FileID(name string) string             { return f.passThrough().FileID(name) }
func (f *SlowFS) SyncFSScope(dir string) (uint64, bool) { return 0, false }

// passThrough is an ErrorFS injecting nothing over the inner file system.
func (f *SlowFS) passThrough() *ErrorFS { return NewErrorFS(f.inner, nil) }

// SyncFS is the inner file system's, slowed as a Sync.
func (f *SlowFS) SyncFS(file File) error {
	if sf, ok := file.(interface{ unwrap() File }); ok {
		file = sf.unwrap()
	}
	f.syncDelay(file.Name())
	return f.passThrough().SyncFS(file)
}

func (f *SlowFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	sf := &slowFile{fs: f, f: file}
	if fd, ok := file.(interface{ Fd() uintptr }); ok {
		return &slowOSFile{slowFile: sf, fd: fd}, nil
	}
	return sf, nil
}

// slowFile is a File of a SlowFS.
type slowFile struct {
	fs *SlowFS
	f  File
	// syncing is held for writing across a Sync, for reading across a write, when the slowness
	// has writes wait for syncs.
	syncing sync.RWMutex
}

func (f *slowFile) unwrap() File { return f.f }

func (f *slowFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f *slowFile) WriteAt(p []byte, off int64) (int, error) {
	s := f.fs.s.Load()
	if !s.covers(f.f.Name()) {
		return f.f.WriteAt(p, off)
	}
	if s.WritesWaitForSync {
		f.syncing.RLock()
		defer f.syncing.RUnlock()
	}
	time.Sleep(s.Write)
	return f.f.WriteAt(p, off)
}

func (f *slowFile) Sync() error {
	s := f.fs.s.Load()
	if !s.covers(f.f.Name()) {
		return f.f.Sync()
	}
	if s.WritesWaitForSync {
		f.syncing.Lock()
		defer f.syncing.Unlock()
	}
	time.Sleep(s.Sync)
	return f.f.Sync()
}

func (f *slowFile) Truncate(size int64) error  { return f.f.Truncate(size) }
func (f *slowFile) Stat() (os.FileInfo, error) { return f.f.Stat() }
func (f *slowFile) Name() string               { return f.f.Name() }
func (f *slowFile) Close() error               { return f.f.Close() }

// slowOSFile is a slowFile over an operating-system file, whose descriptor it shows.
type slowOSFile struct {
	*slowFile
	fd interface{ Fd() uintptr }
}

func (f *slowOSFile) Fd() uintptr { return f.fd.Fd() }
