package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDataDirLocked is returned (wrapped) by Open when another server holds the data directory.
var ErrDataDirLocked = errors.New("server: data dir is locked by another runnel process")

// lockFileName is the file in the data directory that a running server holds an flock on.
const lockFileName = "LOCK"

// dirLock is an exclusive flock on <dir>/LOCK. The kernel drops it when the process exits, so a
// crashed server never leaves a stale lock; the file itself stays and is reused.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	name := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("server: opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 32)
		n, _ := f.ReadAt(holder, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held (pid %s); stop that server or choose another --data-dir",
				ErrDataDirLocked, name, strings.TrimSpace(string(holder[:n])))
		}
		return nil, fmt.Errorf("server: locking %s: %w", name, err)
	}
	// The pid is for the error message above only; the flock is what excludes.
	pid := strconv.Itoa(os.Getpid()) + "\n"
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(pid), 0)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock by closing the file.
func (l *dirLock) release() error {
	if l == nil { // not locked: the data dir is not on the OS file system
		return nil
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("server: releasing data dir lock: %w", err)
	}
	return nil
}
