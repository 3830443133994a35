package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// Op is a kind of file-system operation, as seen by an Injector.
type Op int

// The operations an ErrorFS can fail.
const (
	OpCreate   Op = iota // FS.Create
	OpOpen               // FS.Open and FS.OpenReadWrite
	OpRemove             // FS.Remove
	OpRename             // FS.Rename; the path is the old name
	OpMkdir              // FS.MkdirAll
	OpList               // FS.List
	OpStat               // FS.Stat and File.Stat
	OpSyncDir            // FS.SyncDir
	OpRead               // File.ReadAt
	OpWrite              // File.WriteAt
	OpSync               // File.Sync
	OpTruncate           // File.Truncate
	OpClose              // File.Close
	OpSyncFS             // FSSyncer.SyncFS; the path is the named file's
)

var opNames = [...]string{"create", "open", "remove", "rename", "mkdir", "list", "stat",
	"syncdir", "read", "write", "sync", "truncate", "close", "syncfs"}

func (op Op) String() string {
	if op >= 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// ErrInjected is the error a Rule with no Err injects.
var ErrInjected = errors.New("vfs: injected error")

// Injector decides which operations of an ErrorFS fail.
type Injector interface {
	// MaybeError is called before each operation on path (for a File, its Name); a non-nil
	// error is returned instead of performing the operation. For OpWrite, a
	// *PartialWriteError makes the write happen in part first.
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError returns f(op, path).
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// PartialWriteError, returned by an Injector for OpWrite, makes WriteAt write the first half
// (rounded down) of its data and then fail with Err, the way a full disk does.
type PartialWriteError struct{ Err error }

func (e *PartialWriteError) Error() string { return e.cause().Error() }
func (e *PartialWriteError) Unwrap() error { return e.cause() }

func (e *PartialWriteError) cause() error {
	if e.Err == nil {
		return ErrInjected
	}
	return e.Err
}

// Rule makes matching operations fail: after After of them have succeeded, the next Times
// (0: all) fail with Err.
type Rule struct {
	Op           Op
	PathContains string // "" matches every path
	After        int
	Times        int
	Err          error // nil means ErrInjected; wrap syscall.ENOSPC for a full disk
	// PartialWrite, for OpWrite, writes half of the data before failing (PartialWriteError).
	PartialWrite bool
}

// Rules is an Injector made of Rules, safe for concurrent use and changeable at any time.
// Every matching rule counts an operation; the first one due fires. The zero value injects
// nothing.
type Rules struct {
	mu    sync.Mutex
	rules []*ruleState
}

type ruleState struct {
	Rule
	seen, fired int
}

// Add appends a rule; it counts operations from now on.
func (r *Rules) Add(rule Rule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append(r.rules, &ruleState{Rule: rule})
}

// Clear removes every rule.
func (r *Rules) Clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = nil
}

// MaybeError implements Injector.
func (r *Rules) MaybeError(op Op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	for _, s := range r.rules {
		if s.Op != op || !strings.Contains(path, s.PathContains) {
			continue
		}
		s.seen++
		if err != nil || s.seen <= s.After || (s.Times > 0 && s.fired >= s.Times) {
			continue
		}
		s.fired++
		if err = s.Err; err == nil {
			err = ErrInjected
		}
		if s.PartialWrite && op == OpWrite {
			err = &PartialWriteError{Err: err}
		}
	}
	return err
}

// ErrorFS is an FS that injects errors into another one; see NewErrorFS.
type ErrorFS struct {
	inner FS
	inj   Injector
}

// NewErrorFS returns an FS that performs every operation, and those of the Files it opens,
// on inner, unless inj (nil: none) injects an error. Injected errors are returned wrapped in
// an *fs.PathError unless they are one already. File.Close closes the inner file even when
// an error is injected.
func NewErrorFS(inner FS, inj Injector) *ErrorFS { return &ErrorFS{inner: inner, inj: inj} }

func (e *ErrorFS) maybe(op Op, path string) error {
	if e.inj == nil {
		return nil
	}
	return wrapInjected(op, path, e.inj.MaybeError(op, path))
}

// wrapInjected wraps err in an *fs.PathError unless it is nil or one already.
func wrapInjected(op Op, path string, err error) error {
	var pe *fs.PathError
	if err == nil || errors.As(err, &pe) {
		return err
	}
	return &fs.PathError{Op: op.String(), Path: path, Err: err}
}

// do returns the injected error for op on path, if any, or else the results of f.
func do[T any](e *ErrorFS, op Op, path string, f func() (T, error)) (T, error) {
	if err := e.maybe(op, path); err != nil {
		var zero T
		return zero, err
	}
	return f()
}

// do0 is do for a function returning only an error.
func do0(e *ErrorFS, op Op, path string, f func() error) error {
	if err := e.maybe(op, path); err != nil {
		return err
	}
	return f()
}

func (e *ErrorFS) Create(name string) (File, error) { return e.open(OpCreate, name, e.inner.Create) }
func (e *ErrorFS) Open(name string) (File, error)   { return e.open(OpOpen, name, e.inner.Open) }
func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	return e.open(OpOpen, name, e.inner.OpenReadWrite)
}

func (e *ErrorFS) open(op Op, name string, open func(string) (File, error)) (File, error) {
	return do(e, op, name, func() (File, error) {
		f, err := open(name)
		if err != nil {
			return nil, err
		}
		return &errorFile{e: e, f: f}, nil
	})
}

func (e *ErrorFS) Remove(name string) error {
	return do0(e, OpRemove, name, func() error { return e.inner.Remove(name) })
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	return do0(e, OpRename, oldname, func() error { return e.inner.Rename(oldname, newname) })
}

func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	return do0(e, OpMkdir, dir, func() error { return e.inner.MkdirAll(dir, perm) })
}

func (e *ErrorFS) List(dir string) ([]string, error) {
	return do(e, OpList, dir, func() ([]string, error) { return e.inner.List(dir) })
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	return do(e, OpStat, name, func() (os.FileInfo, error) { return e.inner.Stat(name) })
}

// BootID passes through to the inner file system's BootID, if it has one.
func (e *ErrorFS) BootID(dir string) (string, error) {
	inner, ok := e.inner.(Booter)
	if !ok {
		return "", errors.New("vfs: the file system names no boot")
	}
	return inner.BootID(dir)
}

// FileID passes through to the inner file system's FileID, if it has one.
func (e *ErrorFS) FileID(name string) string {
	if inner, ok := e.inner.(FileIdentifier); ok {
		return inner.FileID(name)
	}
	return ""
}

// SyncFSScope passes through to the inner file system's, if it has one (false otherwise).
func (e *ErrorFS) SyncFSScope(dir string) (uint64, bool) {
	if inner, ok := e.inner.(FSSyncer); ok {
		return inner.SyncFSScope(dir)
	}
	return 0, false
}

// SyncFS passes through to the inner file system's SyncFS, if it has one.
func (e *ErrorFS) SyncFS(f File) error {
	inner, ok := e.inner.(FSSyncer)
	if !ok {
		return fmt.Errorf("vfs: %T cannot syncfs", e.inner)
	}
	if ef, ok := f.(*errorFile); ok {
		f = ef.f
	}
	return do0(e, OpSyncFS, f.Name(), func() error { return inner.SyncFS(f) })
}

func (e *ErrorFS) SyncDir(dir string) error {
	return do0(e, OpSyncDir, dir, func() error { return e.inner.SyncDir(dir) })
}

// errorFile is a File of an ErrorFS.
type errorFile struct {
	e *ErrorFS
	f File
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	return do(f.e, OpRead, f.f.Name(), func() (int, error) { return f.f.ReadAt(p, off) })
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	err := f.e.maybe(OpWrite, f.f.Name())
	var pw *PartialWriteError
	if !errors.As(err, &pw) {
		if err != nil {
			return 0, err
		}
		return f.f.WriteAt(p, off)
	}
	n, werr := f.f.WriteAt(p[:len(p)/2], off)
	if werr != nil {
		return n, werr
	}
	return n, wrapInjected(OpWrite, f.f.Name(), pw.cause())
}

func (f *errorFile) Sync() error { return do0(f.e, OpSync, f.f.Name(), f.f.Sync) }

func (f *errorFile) Truncate(size int64) error {
	return do0(f.e, OpTruncate, f.f.Name(), func() error { return f.f.Truncate(size) })
}

func (f *errorFile) Stat() (os.FileInfo, error) { return do(f.e, OpStat, f.f.Name(), f.f.Stat) }

func (f *errorFile) Name() string { return f.f.Name() }

func (f *errorFile) Close() error {
	err := f.e.maybe(OpClose, f.f.Name())
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}
