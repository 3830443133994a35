package vfs

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

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
		return &fs.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	return nil
}

// syncFSTypes are the file systems (statfs(2) f_type) whose syncfs(2) writes back and flushes
// every file's data and reports writeback errors (their sync_fs does): the local block file
// systems a data dir lives on, and tmpfs (nothing is durable there, fsync included). Others are
// left out, and their files fsynced one by one: FUSE's syncfs reaches the server only on
// virtiofs and otherwise returns success without syncing anything, and a network file
// system's may not flush its server's storage.
var syncFSTypes = map[int64]string{
	0xEF53:     "ext4", // ext2/ext3/ext4
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0xF2F52010: "f2fs",
	0x01021994: "tmpfs",
}

// SyncFSScope names dir's file system by its device and says whether its syncfs(2) makes files
// durable (syncFSTypes).
func (osFS) SyncFSScope(dir string) (uint64, bool) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return 0, false
	}
	if _, ok := syncFSTypes[int64(sfs.Type)]; !ok {
		return 0, false
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, false
	}
	return st.Dev, true
}

// BootID names this boot of the machine (the kernel's boot id) and the mount dir is on (its
// mount id, unique for the boot from Linux 6.8, else one the kernel may give again after an
// unmount). Before Linux 5.8, syncfs(2) does not report writeback errors, so there is none; nor
// on a file system whose syncfs is not known to (SyncFSScope: FUSE, network file systems).
func (osFS) BootID(dir string) (string, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return "", fmt.Errorf("vfs: boot id: %w", err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil || major < 5 || major == 5 && minor < 8 {
		return "", fmt.Errorf("vfs: boot id: Linux %s: syncfs reports writeback errors from 5.8 only", release)
	}
	if _, ok := (osFS{}).SyncFSScope(dir); !ok {
		var sfs unix.Statfs_t
		unix.Statfs(dir, &sfs)
		return "", fmt.Errorf("vfs: boot id: syncfs on %s's file system (type %#x) is not known to report writeback errors", dir, sfs.Type)
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("vfs: boot id: %w", err)
	}
	var stx unix.Statx_t
	mask := unix.STATX_MNT_ID_UNIQUE
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, mask, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		mask = unix.STATX_MNT_ID
		if err := unix.Statx(unix.AT_FDCWD, dir, 0, mask, &stx); err != nil {
			return "", fmt.Errorf("vfs: boot id: the mount of %s: %w", dir, err)
		}
		if stx.Mask&unix.STATX_MNT_ID == 0 {
			return "", fmt.Errorf("vfs: boot id: the kernel names no mount of %s", dir)
		}
	}
	return fmt.Sprintf("%s/mnt-%d", strings.TrimSpace(string(b)), stx.Mnt_id), nil
}

// FileID names the named file by its device, inode and birth time: a copy of a file is another
// file, even one that took an inode number freed by the file it replaced. "" for a file with
// other hard links (a copy made with links shares them) or on a file system without birth
// times.
func (osFS) FileID(name string) string {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_NLINK|unix.STATX_BTIME, &stx); err != nil {
		return ""
	}
	if stx.Mask&unix.STATX_BTIME == 0 || stx.Mask&unix.STATX_NLINK == 0 || stx.Nlink != 1 {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%09d", stx.Dev_major, stx.Dev_minor, stx.Ino, stx.Btime.Sec, stx.Btime.Nsec)
}

// Device is the device of the file a FileInfo of the operating system's file system describes
// (false for another file system's).
func Device(fi os.FileInfo) (uint64, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Dev, true
	}
	return 0, false
}
