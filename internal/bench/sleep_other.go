//go:build !linux

package bench

import "time"

// preciseSleep is time.Sleep where no better sleep is wired up.
func preciseSleep(d time.Duration) { time.Sleep(d) }
