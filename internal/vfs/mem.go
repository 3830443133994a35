package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxMemFileSize bounds the size of a MemFS file, so that a wild offset fails instead of
// exhausting memory.
const maxMemFileSize = 1 << 34

var (
	errNegativeOffset = errors.New("vfs: negative offset")
	errReadOnly       = errors.New("vfs: file is open read-only")
	errTooLarge       = errors.New("vfs: file too large")
)

// MemFS is an in-memory FS that can crash; see NewMem and Crash. It is safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex // guards the directory tree (entries, durable, directory modTime)
	root *memNode
	boot int // the crashes this file system's contents went through: its BootID
	ids  int // the FileIDs given out (under mu)
}

// CrashOptions says how MemFS.Crash treats the unsynced writes of each file.
type CrashOptions struct {
	// Tear keeps, for each file, its unsynced writes (and truncations) in order up to a point
	// chosen with Rand, the write at that point cut at a random byte. Without Tear every
	// unsynced change is lost.
	Tear bool
	// Garbage, with Tear, replaces the kept bytes of the torn write by random bytes.
	Garbage bool
	// Rand drives Tear and Garbage; nil means a fixed seed.
	Rand *rand.Rand
}

// memNode is a file or a directory.
type memNode struct {
	fileID  int // FileID's number for it, given on first use (guarded by the MemFS's mu)
	dir     bool
	perm    fs.FileMode
	modTime time.Time // directories: guarded by MemFS.mu; files: by mu

	// Directories, guarded by MemFS.mu: current and durable entries.
	entries, durable map[string]*memNode

	// Files. data is the current contents; undo records, oldest first, every change since the
	// last Sync, so that the synced contents are data with undo reverted.
	mu   sync.RWMutex
	data []byte
	undo []undoRec
}

// undoRec reverts one write (n > 0) or truncation (n == 0).
type undoRec struct {
	off  int64  // offset of the write; new size for a truncation
	n    int    // length of the write
	prev int64  // size before the change
	old  []byte // bytes overwritten by the write, or cut off by the truncation
}

// revert undoes u on buf, the contents just after u, except that the first keep bytes of a
// write stay. It returns the contents just before u (with the kept bytes).
func (u *undoRec) revert(buf []byte, keep int) []byte {
	if u.n == 0 { // truncation
		if u.off < u.prev {
			return append(buf[:u.off], u.old...)
		}
		return buf[:u.prev]
	}
	end, size := u.off+int64(keep), u.prev
	if keep > 0 && end > size {
		size = end
	}
	if end < u.prev {
		copy(buf[end:], u.old[keep:])
	}
	return buf[:size]
}

// NewMem returns an empty in-memory file system whose root directory is "/"; relative names
// are resolved from the root.
func NewMem() *MemFS {
	return &MemFS{root: newDir(0o755)}
}

func newDir(perm fs.FileMode) *memNode {
	return &memNode{dir: true, perm: perm, modTime: time.Now(),
		entries: map[string]*memNode{}, durable: map[string]*memNode{}}
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// find resolves name. It returns the parent directory (nil for the root), the last element,
// and the node, which is nil if the parent exists but has no such entry.
func (m *MemFS) find(name string) (parent *memNode, base string, n *memNode, err error) {
	if name == "" {
		return nil, "", nil, fs.ErrNotExist
	}
	p := path.Clean("/" + name)
	if p == "/" {
		return nil, "", m.root, nil
	}
	parts := strings.Split(p[1:], "/")
	parent = m.root
	for _, elem := range parts[:len(parts)-1] {
		switch next := parent.entries[elem]; {
		case next == nil:
			return nil, "", nil, fs.ErrNotExist
		case !next.dir:
			return nil, "", nil, syscall.ENOTDIR
		default:
			parent = next
		}
	}
	base = parts[len(parts)-1]
	return parent, base, parent.entries[base], nil
}

// get resolves name, which must exist, and must be a directory if dir is set; errors are
// *fs.PathErrors for op.
func (m *MemFS) get(op, name string, dir bool) (parent *memNode, base string, n *memNode, err error) {
	parent, base, n, err = m.find(name)
	if err == nil && n == nil {
		err = fs.ErrNotExist
	} else if err == nil && dir && !n.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, "", nil, pathErr(op, name, err)
	}
	return parent, base, n, nil
}

// Create creates or truncates the named file; its parent directory must exist.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, n, err := m.find(name)
	switch {
	case err != nil:
		return nil, pathErr("open", name, err)
	case n == nil:
		n = &memNode{perm: 0o644, modTime: time.Now()}
		parent.entries[base] = n
		parent.modTime = n.modTime
	case n.dir:
		return nil, pathErr("open", name, syscall.EISDIR)
	default:
		n.mu.Lock()
		n.truncate(0)
		n.mu.Unlock()
	}
	return &memFile{n: n, name: name}, nil
}

// OpenReadWrite opens an existing file for reading and writing.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open(name, false) }

// Open opens an existing file for reading.
func (m *MemFS) Open(name string) (File, error) { return m.open(name, true) }

func (m *MemFS) open(name string, readOnly bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.get("open", name, false)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &memFile{n: n, name: name, readOnly: readOnly}, nil
}

// Remove removes a file or an empty directory. Open files stay usable.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, n, err := m.get("remove", name, false)
	switch {
	case err != nil:
		return err
	case parent == nil:
		return pathErr("remove", name, syscall.EBUSY)
	case n.dir && len(n.entries) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(parent.entries, base)
	parent.modTime = time.Now()
	return nil
}

// Rename moves a file or directory, replacing a file or empty directory at newname.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	op, ob, on, err := m.find(oldname)
	if err == nil && on == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return lerr(err)
	}
	np, nb, nn, err := m.find(newname)
	switch {
	case err != nil:
		return lerr(err)
	case on == nn:
		return nil
	case op == nil || np == nil:
		return lerr(syscall.EBUSY)
	case on.dir && strings.HasPrefix(path.Clean("/"+newname), path.Clean("/"+oldname)+"/"):
		return lerr(syscall.EINVAL)
	case nn != nil && nn.dir && !on.dir:
		return lerr(syscall.EISDIR)
	case nn != nil && !nn.dir && on.dir:
		return lerr(syscall.ENOTDIR)
	case nn != nil && nn.dir && len(nn.entries) > 0:
		return lerr(syscall.ENOTEMPTY)
	}
	delete(op.entries, ob)
	np.entries[nb] = on
	op.modTime, np.modTime = time.Now(), time.Now()
	return nil
}

// MkdirAll creates dir and any missing parents; they are durable at once.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if dir == "" {
		return pathErr("mkdir", dir, fs.ErrNotExist)
	}
	p := path.Clean("/" + dir)
	n := m.root
	for _, elem := range strings.Split(p[1:], "/") {
		if elem == "" { // p is "/"
			break
		}
		next := n.entries[elem]
		if next == nil {
			next = newDir(perm & fs.ModePerm)
			n.entries[elem], n.durable[elem] = next, next
			n.modTime = next.modTime
		} else if !next.dir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = next
	}
	return nil
}

// List returns the sorted names of the entries of dir.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.get("open", dir, true)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(n.entries)), nil
}

// Stat describes the named file or directory.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.get("stat", name, false)
	if err != nil {
		return nil, err
	}
	return n.info(path.Base(path.Clean(name))), nil
}

// SyncDir makes the current entries of dir durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.get("sync", dir, true)
	if err != nil {
		return err
	}
	n.durable = maps.Clone(n.entries)
	return nil
}

// SyncFSScope: one file system, whose SyncFS makes every file durable.
func (m *MemFS) SyncFSScope(string) (uint64, bool) { return 0, true }

// SyncFS makes the contents of every file durable, as syncfs(2) does (directory entries are
// left to SyncDir, the stricter model). f only names the file system.
func (m *MemFS) SyncFS(f File) error {
	if mf, ok := f.(*memFile); ok {
		if err := mf.check("sync", false); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if !n.dir {
			n.mu.Lock()
			n.forgetUndo()
			n.mu.Unlock()
			return
		}
		for _, c := range n.entries {
			walk(c)
		}
	}
	walk(m.root)
	return nil
}

// FileID names the named file by its node: a copy is another node ("" if there is none).
func (m *MemFS) FileID(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.find(name)
	if err != nil || n == nil {
		return ""
	}
	if n.fileID == 0 {
		m.ids++
		n.fileID = m.ids
	}
	return fmt.Sprintf("memfs-file-%d", n.fileID)
}

// BootID names the machine boot the file system is in: a crash (Crash) is a new boot.
func (m *MemFS) BootID(string) (string, error) { return fmt.Sprintf("memfs-boot-%d", m.boot), nil }

// Crash returns a new, independent MemFS holding what a power loss would leave of m: the
// durable directory entries, and for each file its synced contents, plus, as opts says, part
// of its unsynced writes. m and its open files keep working on the state before the crash.
func (m *MemFS) Crash(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := opts.Rand
	if r == nil {
		r = rand.New(rand.NewPCG(1, 2))
	}
	copies := map[*memNode]*memNode{} // keeps hard links (an unsynced rename) and cycles sound
	var crash func(n *memNode) *memNode
	crash = func(n *memNode) *memNode {
		if c := copies[n]; c != nil {
			return c
		}
		c := &memNode{dir: n.dir, perm: n.perm, fileID: n.fileID} // the same file on disk
		copies[n] = c
		if n.dir {
			c.modTime = n.modTime // a file's modTime is guarded by its own lock: crashData reads it
		} else {
			c.data, c.modTime = n.crashData(opts, r)
			return c
		}
		c.entries = make(map[string]*memNode, len(n.durable))
		for _, name := range slices.Sorted(maps.Keys(n.durable)) { // sorted: deterministic with r
			c.entries[name] = crash(n.durable[name])
		}
		c.durable = maps.Clone(c.entries)
		return c
	}
	return &MemFS{root: crash(m.root), boot: m.boot + 1, ids: m.ids}
}

// crashData returns a fresh copy of the contents of file n after a crash.
func (n *memNode) crashData(opts CrashOptions, r *rand.Rand) ([]byte, time.Time) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	buf := bytes.Clone(n.data)
	if len(n.undo) == 0 {
		return buf, n.modTime
	}
	keep, cut := 0, 0 // keep undo[:keep] whole and the first cut bytes of undo[keep]
	if opts.Tear {
		keep = r.IntN(len(n.undo) + 1)
		if keep < len(n.undo) && n.undo[keep].n > 0 {
			cut = r.IntN(n.undo[keep].n)
		}
	}
	for i := len(n.undo) - 1; i > keep; i-- {
		buf = n.undo[i].revert(buf, 0)
	}
	if keep < len(n.undo) {
		u := &n.undo[keep]
		buf = u.revert(buf, cut)
		if opts.Garbage {
			for i := range cut {
				buf[u.off+int64(i)] = byte(r.Uint32())
			}
		}
	}
	return buf, n.modTime
}

// write writes p at off; n.mu must be held.
func (n *memNode) write(p []byte, off int64) {
	end, prev := off+int64(len(p)), int64(len(n.data))
	u := undoRec{off: off, n: len(p), prev: prev}
	if off < prev {
		u.old = bytes.Clone(n.data[off:min(end, prev)])
	}
	if end > prev {
		n.data = resize(n.data, end)
	}
	copy(n.data[off:], p)
	n.undo = append(n.undo, u)
	n.modTime = time.Now()
}

// truncate changes the size of the file; n.mu must be held.
func (n *memNode) truncate(size int64) {
	prev := int64(len(n.data))
	if size == prev {
		return
	}
	u := undoRec{off: size, prev: prev}
	if size < prev {
		u.old = bytes.Clone(n.data[size:])
	}
	n.data = resize(n.data, size)
	n.undo = append(n.undo, u)
	n.modTime = time.Now()
}

// resize returns b with length size, zero-filled past its old length.
func resize(b []byte, size int64) []byte {
	old := int64(len(b))
	if size <= old {
		return b[:size]
	}
	b = slices.Grow(b, int(size-old))[:size]
	clear(b[old:])
	return b
}

// info describes n; MemFS.mu must be held for a directory.
func (n *memNode) info(name string) os.FileInfo {
	if n.dir {
		return &memInfo{name: name, mode: fs.ModeDir | n.perm, modTime: n.modTime}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return &memInfo{name: name, size: int64(len(n.data)), mode: n.perm, modTime: n.modTime}
}

type memInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (i *memInfo) Name() string       { return i.name }
func (i *memInfo) Size() int64        { return i.size }
func (i *memInfo) Mode() fs.FileMode  { return i.mode }
func (i *memInfo) ModTime() time.Time { return i.modTime }
func (i *memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *memInfo) Sys() any           { return nil }

// memFile is an open MemFS file.
type memFile struct {
	n        *memNode
	name     string
	readOnly bool
	closed   atomic.Bool
}

// check reports an error if f is closed, or read-only and write is set.
func (f *memFile) check(op string, write bool) error {
	if f.closed.Load() {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if write && f.readOnly {
		return pathErr(op, f.name, errReadOnly)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errNegativeOffset)
	}
	if len(p) == 0 {
		return 0, nil
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("writeat", f.name, errNegativeOffset)
	}
	if off > maxMemFileSize-int64(len(p)) {
		return 0, pathErr("write", f.name, errTooLarge)
	}
	if len(p) == 0 {
		return 0, nil
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.write(p, off)
	f.n.modTime = time.Now() // as a file system's mtime: the log ages timestamp-less segments by it
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 || size > maxMemFileSize {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.truncate(size)
	f.n.modTime = time.Now()
	return nil
}

// Sync makes the contents durable: it forgets the undo records, in time proportional to them.
func (f *memFile) Sync() error {
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.forgetUndo()
	return nil
}

// forgetUndo makes the node's contents durable by dropping its undo records. Callers hold n.mu.
func (n *memNode) forgetUndo() {
	clear(n.undo)
	n.undo = n.undo[:0]
}

func (f *memFile) Stat() (os.FileInfo, error) {
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return f.n.info(path.Base(path.Clean(f.name))), nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	return nil
}
