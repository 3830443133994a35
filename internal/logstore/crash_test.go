package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// model remembers every appended batch by base offset, as written (offset and epoch set).
type model map[int64][]byte

// checkRecovered asserts the recovered log holds exactly a contiguous prefix of what was
// appended (no corruption, nothing invented) that reaches at least durable.
func (m model) checkRecovered(t *testing.T, l *Log, durable int64) {
	t.Helper()
	next := l.StartOffset()
	for _, b := range readAll(t, l) {
		h, _ := batch.ParseHeader(b)
		want, ok := m[h.BaseOffset]
		switch {
		case h.BaseOffset != next:
			t.Fatalf("recovered batch at %d; want the next at %d", h.BaseOffset, next)
		case !ok:
			t.Fatalf("recovered batch at %d was never appended (phantom)", h.BaseOffset)
		case !bytes.Equal(b, want):
			t.Fatalf("recovered batch at %d differs from the one appended", h.BaseOffset)
		}
		next = h.NextOffset()
	}
	if next != l.EndOffset() {
		t.Fatalf("batches end at %d; EndOffset() = %d", next, l.EndOffset())
	}
	if next < durable {
		t.Fatalf("recovered up to %d; %d was durable before the crash (synced data lost)", next, durable)
	}
}

// randomWorkload appends random batches, syncing now and then, and returns the model and the
// durable offset reached. Segments are tiny so that rolls happen often.
func randomWorkload(t *testing.T, l *Log, rng *rand.Rand, steps int, m model) int64 {
	t.Helper()
	var durable int64
	for i := 0; i < steps; i++ {
		b := valueBatch(t, 1+rng.IntN(4), 1+rng.IntN(400), int64(1000+i), rng.IntN(1000))
		first, last, err := l.Append(b, 3)
		if err != nil {
			return durable
		}
		m[first] = bytes.Clone(b)
		if rng.IntN(4) == 0 {
			if err := l.WaitDurable(context.Background(), last+1); err != nil {
				return durable
			}
			durable = last + 1
		}
	}
	return durable
}

func crashConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4 << 10
	c.IndexIntervalBytes = 512
	return c
}

// TestCrashRecoveryRandomized: append, sync a prefix, lose power, reopen. Every synced batch is
// there, nothing corrupt, nothing phantom; then the log takes appends again. With torn writes
// (a random prefix of the unsynced bytes survives) and with garbage in the torn part.
func TestCrashRecoveryRandomized(t *testing.T) {
	modes := []struct {
		name string
		opts vfs.CrashOptions
	}{
		{"clean", vfs.CrashOptions{}},
		{"torn", vfs.CrashOptions{Tear: true}},
		{"torn-garbage", vfs.CrashOptions{Tear: true, Garbage: true}},
	}
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for _, mode := range modes {
		for seed := 0; seed < seeds; seed++ {
			t.Run(fmt.Sprintf("%s/%d", mode.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				mem := vfs.NewMem()
				e := newEnv(t, mem, "/data/p0")
				m := model{}
				l := e.open(crashConfig())
				durable := randomWorkload(t, l, rng, 20+rng.IntN(200), m)
				for round := 0; round < 3; round++ { // crash, recover, write more, crash again
					opts := mode.opts
					opts.Rand = rand.New(rand.NewPCG(uint64(seed), uint64(round)))
					e.fs = mem.Crash(opts)
					mem = e.fs.(*vfs.MemFS)
					l = e.open(crashConfig())
					m.checkRecovered(t, l, durable)
					if got := l.DurableOffset(); got != l.EndOffset() {
						t.Fatalf("DurableOffset() after recovery = %d; want %d", got, l.EndOffset())
					}
					for off := range m { // forget what the crash lost: those offsets are reused
						if off >= l.EndOffset() {
							delete(m, off)
						}
					}
					durable = max(l.EndOffset(), randomWorkload(t, l, rng, rng.IntN(200), m))
				}
			})
		}
	}
}

// TestCrashAtEveryStep kills the process (every file operation fails from step n on) at each
// step of a workload with rolls, then loses power, and checks recovery each time.
func TestCrashAtEveryStep(t *testing.T) {
	for n := 1; ; n++ {
		mem := vfs.NewMem()
		var ops atomic.Int64
		dead := vfs.InjectorFunc(func(vfs.Op, string) error {
			if ops.Add(1) >= int64(n) {
				return vfs.ErrInjected
			}
			return nil
		})
		e := newEnv(t, vfs.NewErrorFS(mem, dead), "/data/p0")
		l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: crashConfig(), Flusher: e.flusher, Logger: quiet})
		if err != nil {
			continue // died while opening
		}
		m := model{}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		durable := randomWorkload(t, l, rng, 60, m)
		if ops.Load() < int64(n) {
			return // the workload finished before step n: every step has been covered
		}
		e.fs = mem.Crash(vfs.CrashOptions{Tear: true, Rand: rng})
		m.checkRecovered(t, e.open(crashConfig()), durable)
	}
}

func TestWriteFailurePoisons(t *testing.T) {
	tests := []struct {
		name string
		rule vfs.Rule
		want error
	}{
		{"write error", vfs.Rule{Op: vfs.OpWrite, PathContains: ".log"}, vfs.ErrInjected},
		{"ENOSPC partial write", vfs.Rule{Op: vfs.OpWrite, PathContains: ".log", Err: syscall.ENOSPC, PartialWrite: true}, syscall.ENOSPC},
		{"fsync error", vfs.Rule{Op: vfs.OpSync, PathContains: ".log", Err: syscall.EIO}, syscall.EIO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			rules := &vfs.Rules{}
			e := newEnv(t, vfs.NewErrorFS(mem, rules), "/p")
			l := e.open(testConfig())
			m := model{}
			for i := 0; i < 5; i++ {
				b := valueBatch(t, 2, 100, 1, i)
				first := appendAll(t, l, b)[0]
				m[first] = bytes.Clone(b)
			}
			syncAll(t, l)
			durable := l.DurableOffset()
			rules.Add(tt.rule)
			_, last, err := l.Append(valueBatch(t, 2, 100, 1, 9), 0)
			if err == nil {
				err = l.WaitDurable(context.Background(), last+1)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("first failure = %v; want %v", err, tt.want)
			}
			rules.Clear() // the disk works again, but the log stays poisoned
			if _, _, err2 := l.Append(valueBatch(t, 1, 10, 1, 10), 0); !errors.Is(err2, tt.want) {
				t.Errorf("Append after failure = %v; want the first error %v", err2, tt.want)
			}
			if err2 := l.WaitDurable(context.Background(), l.EndOffset()); !errors.Is(err2, tt.want) {
				t.Errorf("WaitDurable after failure = %v; want the first error", err2)
			}
			if got := l.DurableOffset(); got != durable {
				t.Errorf("DurableOffset() = %d after a failure; want it unchanged at %d", got, durable)
			}
			// Power loss, reopen: the synced prefix is intact and the log is usable.
			e.fs = mem.Crash(vfs.CrashOptions{Tear: true})
			l2 := e.open(testConfig())
			m.checkRecovered(t, l2, durable)
			appendAll(t, l2, valueBatch(t, 1, 10, 1, 11))
			l2.Close()
		})
	}
}

// FuzzRecovery appends arbitrary bytes to the tail of a log's last segment (as a torn or corrupt
// write would leave them) and reopens: recovery never panics, keeps every batch that was there,
// and leaves only valid batches.
func FuzzRecovery(f *testing.F) {
	good := valueBatch(f, 3, 20, 1000, 1)
	f.Add([]byte{}, uint16(0))
	f.Add(good[:40], uint16(0))
	f.Add(good, uint16(5))
	f.Add(bytes.Repeat([]byte{0xff}, 100), uint16(0))
	f.Fuzz(func(t *testing.T, tail []byte, flip uint16) {
		mem := vfs.NewMem()
		e := newEnv(t, mem, "/p")
		l := e.open(testConfig())
		m := model{}
		for i := 0; i < 3; i++ {
			b := valueBatch(t, 2, 30, 1000, i)
			m[appendAll(t, l, b)[0]] = bytes.Clone(b)
		}
		end := l.EndOffset()
		l.Close()
		seg, _ := mem.OpenReadWrite(segmentName("/p", 0, logSuffix))
		info, _ := seg.Stat()
		if len(tail) > 0 && flip > 0 { // corrupt a byte of the tail as well
			tail[int(flip)%len(tail)] ^= byte(flip >> 8)
		}
		seg.WriteAt(tail, info.Size())
		seg.Close()
		l2, err := Open(Options{FS: mem, Dir: "/p", Config: testConfig(), Flusher: e.flusher, Logger: quiet})
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		defer l2.Close()
		if l2.EndOffset() < end {
			t.Fatalf("EndOffset() = %d; the intact batches reach %d", l2.EndOffset(), end)
		}
		got := readAll(t, l2) // checks every batch is whole and valid
		for i := 0; i < 3; i++ {
			h, _ := batch.ParseHeader(got[i])
			if !bytes.Equal(got[i], m[h.BaseOffset]) {
				t.Fatalf("batch %d changed in recovery", i)
			}
		}
		appendAll(t, l2, good) // and the log is usable
	})
}
