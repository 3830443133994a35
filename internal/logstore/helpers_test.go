package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// rec is a record for tests; a nil value is a tombstone.
type rec struct {
	key, value []byte
	ts         int64
}

// makeBatch encodes records into a producer batch (base offset 0) with codec.
func makeBatch(t testing.TB, codec batch.Codec, recs ...rec) []byte {
	t.Helper()
	var body []byte
	base, maxTs := recs[0].ts, recs[0].ts
	for _, r := range recs {
		base, maxTs = min(base, r.ts), max(maxTs, r.ts)
	}
	for i, r := range recs {
		body = batch.AppendRecord(body, r.ts-base, int32(i), r.key, r.value, 0, nil)
	}
	body, err := batch.Compress(codec, body)
	if err != nil {
		t.Fatal(err)
	}
	return batch.AppendBatch(nil, batch.Header{
		Attributes: int16(codec), LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: base,
		MaxTimestamp: maxTs, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(recs)),
	}, body)
}

// valueBatch is a batch of n records of size bytes each, stamped ts, with values derived from seed.
func valueBatch(t testing.TB, n, size int, ts int64, seed int) []byte {
	t.Helper()
	recs := make([]rec, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte(seed + i)}, size)
		copy(v, fmt.Sprintf("%d/%d", seed, i))
		recs[i] = rec{key: []byte(fmt.Sprintf("k%d", seed*1000+i)), value: v, ts: ts}
	}
	return makeBatch(t, batch.CodecNone, recs...)
}

// testConfig is the default config with small segments.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.IndexIntervalBytes = 1024
	return c
}

// fakeClock is a settable clock, safe for concurrent use (the flusher's ticker reads it).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

type env struct {
	t       testing.TB
	fs      vfs.FS
	dir     string
	flusher *Flusher
	clock   *fakeClock
}

func newEnv(t testing.TB, fs vfs.FS, dir string) *env {
	f := NewFlusher(0)
	t.Cleanup(f.Close)
	return &env{t: t, fs: fs, dir: dir, flusher: f, clock: newClock()}
}

func (e *env) open(cfg Config) *Log {
	e.t.Helper()
	l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: cfg, Flusher: e.flusher, Now: e.clock.now, Logger: quiet})
	if err != nil {
		e.t.Fatalf("Open = %v", err)
	}
	return l
}

// appendAll appends batches and returns their first offsets.
func appendAll(t testing.TB, l *Log, batches ...[]byte) []int64 {
	t.Helper()
	var firsts []int64
	for _, b := range batches {
		first, _, err := l.Append(b, 1)
		if err != nil {
			t.Fatalf("Append = %v", err)
		}
		firsts = append(firsts, first)
	}
	return firsts
}

func syncAll(t testing.TB, l *Log) {
	t.Helper()
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatalf("WaitDurable = %v", err)
	}
}

// readAll reads every batch from the log start and returns them split.
func readAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		b, err := l.Read(nil, off, 1<<20)
		if errors.Is(err, ErrOffsetOutOfRange) && off < l.StartOffset() {
			out, off = nil, l.StartOffset() // retention ran meanwhile: start over
			continue
		}
		if err != nil {
			t.Fatalf("Read(%d) = %v", off, err)
		}
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			n, err := batch.Split(b)
			if err != nil {
				t.Fatalf("Read(%d) returned a partial batch: %v", off, err)
			}
			h, err := batch.ValidateStored(b[:n])
			if err != nil {
				t.Fatalf("Read(%d) returned an invalid batch: %v", off, err)
			}
			out = append(out, b[:n])
			off = h.NextOffset()
			b = b[n:]
		}
	}
	return out
}

// keyValues decodes every record of the log into offset -> "key=value" ("key=<nil>" for tombstones).
func keyValues(t testing.TB, l *Log) map[int64]string {
	t.Helper()
	m := map[int64]string{}
	for _, b := range readAll(t, l) {
		h, _ := batch.ValidateStored(b)
		if err := eachRecord(&h, b, func(r *batch.Record, off int64) {
			v := string(r.Value)
			if r.Value == nil {
				v = "<nil>"
			}
			m[off] = string(r.Key) + "=" + v
		}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// quiet discards the logs' own log lines in tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
