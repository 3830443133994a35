//go:build !linux

package bench

import "time"

// preciseSleep is time.Sleep where no better sleep is wired up.
func preciseSleep(d time.Duration) { time.Sleep(d) }

// flushPageCache does nothing where sync(2) is not wired up.
func flushPageCache() time.Duration { return 0 }
