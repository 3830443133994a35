//go:build !linux

package vfs

import "os"

// Device is the device of the file a FileInfo describes: on Linux only (false elsewhere).
func Device(os.FileInfo) (uint64, bool) { return 0, false }
