package logevery

import (
	"testing"
	"time"
)

// A line a second for a minute is let through once every 10 s, each saying how many were held
// back; after Reset the next one goes through at once.
func TestLimiter(t *testing.T) {
	l := Limiter{Every: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	var logged []int
	for i := range 60 {
		if n, ok := l.Allow(t0.Add(time.Duration(i) * time.Second)); ok {
			logged = append(logged, n)
		}
	}
	if len(logged) != 6 || logged[0] != 0 || logged[1] != 9 {
		t.Fatalf("let through %v; want 6 lines, the first holding back none and the next 9 each", logged)
	}
	if _, ok := l.Allow(t0.Add(59500 * time.Millisecond)); ok {
		t.Fatal("let through a line 9.5 s after the last")
	}
	l.Reset()
	if n, ok := l.Allow(t0.Add(59600 * time.Millisecond)); !ok || n != 0 {
		t.Fatalf("after Reset: Allow = %d, %v; want 0, true", n, ok)
	}
}

// Each key has its own limit.
func TestKeyed(t *testing.T) {
	k := Keyed[string]{Every: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	if _, ok := k.Allow("a", t0); !ok {
		t.Fatal("the first line of a held back")
	}
	if _, ok := k.Allow("b", t0); !ok {
		t.Fatal("b's first line held back by a's")
	}
	if _, ok := k.Allow("a", t0.Add(time.Second)); ok {
		t.Fatal("a's second line let through within 10 s")
	}
	if n, ok := k.Allow("a", t0.Add(10*time.Second)); !ok || n != 1 {
		t.Fatalf("a after 10 s: Allow = %d, %v; want 1, true", n, ok)
	}
}
