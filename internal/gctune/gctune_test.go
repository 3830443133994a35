package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name           string
		live, headroom uint64
		base, want     int
	}{
		{"small live heap gets the headroom", 2 * mib, 128 * mib, 100, 6400},
		{"live heap below the runtime floor counts as 1 MiB", 10, 128 * mib, 100, 12800},
		{"large live heap keeps GOGC", 512 * mib, 128 * mib, 100, 100},
		{"headroom equal to live heap", 128 * mib, 128 * mib, 100, 100},
		{"a higher base wins", 64 * mib, 128 * mib, 300, 300},
		{"bounded", 1 * mib, 1 << 60, 100, maxPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, tc.headroom, tc.base); got != tc.want {
				t.Fatalf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.headroom, tc.base, got, tc.want)
			}
		})
	}
}

var sink []byte

// churn allocates n bytes of short-lived garbage and returns how many GC cycles ran meanwhile.
func churn(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n/1024; i++ {
		sink = make([]byte, 1024)
	}
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

func TestTunerCutsCycles(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the tuner leaves the collector alone")
	}
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	runtime.GC()
	untuned := churn(64 << 20)

	tu := Start(256 << 20)
	if tu == nil {
		t.Fatal("Start returned nil without GOGC")
	}
	runtime.GC() // a cycle runs the cleanup once more
	tuned := churn(64 << 20)
	p := tu.Percent()
	tu.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop the GC percentage is %d, want the 100 it started from", got)
	}
	t.Logf("64 MiB of garbage: %d cycles at GOGC=100, %d with 256 MiB headroom (GC percent %d)", untuned, tuned, p)
	if p <= 100 {
		t.Errorf("tuner set %d%%, want more than 100 for a small live heap", p)
	}
	if tuned > 1 || untuned < 4 {
		t.Errorf("cycles: %d tuned, %d untuned; want at most 1 tuned and at least 4 untuned", tuned, untuned)
	}
}

func TestStartOffWithoutHeadroom(t *testing.T) {
	if tu := Start(0); tu != nil {
		tu.Stop()
		t.Fatal("Start(0) tuned the collector")
	}
	var tu *Tuner
	tu.Stop() // nil-safe
}
