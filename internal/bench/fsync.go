package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FsyncProbe measures the disk's own fsync latency: count times, it appends size bytes to a
// file in dir and fsyncs it, timing the fsync alone (what a broker's acks=all waits for at
// best). It removes the file afterwards. The histogram is in the bench's units (µs).
func FsyncProbe(dir string, count, size int) (LatencySummary, error) {
	f, err := os.CreateTemp(dir, "runnel-fsync-probe-*")
	if err != nil {
		return LatencySummary{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	h := NewHistogram()
	for i := range count {
		copy(buf, fmt.Sprintf("probe %d", i))
		if _, err := f.Write(buf); err != nil {
			return LatencySummary{}, err
		}
		start := time.Now()
		if err := f.Sync(); err != nil {
			return LatencySummary{}, fmt.Errorf("fsync %s: %w", filepath.Base(f.Name()), err)
		}
		_ = h.RecordValue(max(time.Since(start).Microseconds(), 1))
	}
	return Summarize(h), nil
}
