package vfs

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// SyncFS makes every file of the file system holding f durable with one syncfs(2): the data
// of every dirty file and the journal, in one device flush. Since Linux 5.8 it reports a
// writeback error of any file of the file system since f was opened.
func (osFS) SyncFS(f File) error {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return fmt.Errorf("vfs: syncfs: %s is not an operating-system file", f.Name())
	}
	if err := unix.Syncfs(int(fd.Fd())); err != nil {
		return fmt.Errorf("vfs: syncfs %s: %w", f.Name(), err)
	}
	return nil
}

// BootID is the kernel's id of this boot of the machine.
func (osFS) BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("vfs: boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
