package broker

import (
	"testing"
	"time"
)

// A warning a second for a minute is let through once every 10 s, each saying how many were
// held back.
func TestWarnLimiter(t *testing.T) {
	var w warnLimiter
	t0 := time.Unix(1000, 0)
	var logged []int
	for i := range 60 {
		if n, ok := w.allow(t0.Add(time.Duration(i) * time.Second)); ok {
			logged = append(logged, n)
		}
	}
	if len(logged) != 6 || logged[0] != 0 || logged[1] != 9 {
		t.Fatalf("let through %v; want 6 warnings, the first holding back none and the next 9 each", logged)
	}
}
