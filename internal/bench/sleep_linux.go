package bench

import (
	"syscall"
	"time"
)

// preciseSleep blocks the calling thread for about d with nanosleep(2), bypassing the runtime's
// millisecond-granular timers; the runtime hands the P to another thread meanwhile.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: the caller's loop waits for the rest
}

// flushPageCache writes every dirty page of the machine's file systems back (sync(2)) and
// reports how long that took.
func flushPageCache() time.Duration {
	start := time.Now()
	syscall.Sync()
	return time.Since(start)
}
