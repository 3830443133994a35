package logstore

// Benchmarks of the partition log store on the operating system's file system (vfs.Default), in
// directories under b.TempDir() (so under $TMPDIR, /tmp by default: check with `df $TMPDIR` which
// file system and disk that is). Results and how to read them: docs/benchmarks.md.
//
//	go test -run '^$' -bench . -benchtime 3s -count 3 ./internal/logstore
//
// Every append benchmark appends the same producer batch over and over: 16 records of 1 KiB
// values, uncompressed (batch.CodecNone): 16,669 bytes with the keys and record framing. Append
// rewrites the base offset and leader epoch in place (both outside the CRC), so re-appending the
// same bytes is valid. b.SetBytes is the batch's exact size, so MB/s is the log's input rate.

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/vfs"
)

const (
	benchRecords     = 16      // records per batch
	benchRecordSize  = 1 << 10 // value bytes per record
	benchAppenders   = 8       // concurrent appenders in the group-commit benchmarks
	benchFillBytes   = 256 << 20
	benchReadMax     = 1 << 20 // maxBytes of each read
	benchRawChunk    = 16 << 10
	benchCachedBytes = 256 << 20 // the *Cached benchmarks sync this often, untimed
)

// benchBatch builds the 16 x 1 KiB producer batch.
func benchBatch(b *testing.B) []byte {
	b.Helper()
	return valueBatch(b, benchRecords, benchRecordSize, 1_700_000_000_000, 1)
}

// benchConfig is the default config (segment.bytes 1 GiB, index.interval.bytes 4096): rolls are
// rare, and each one costs an fsync of the sealed segment plus two index files.
func benchConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 1 << 30
	return c
}

// benchFlusher starts a flusher that stops when the benchmark ends (after the logs close: cleanups
// run last-registered first, so register it before opening logs).
func benchFlusher(b *testing.B) *Flusher {
	f := NewFlusher(0)
	b.Cleanup(f.Close)
	return f
}

// benchOpen opens a log on the OS file system in dir with the real clock, closed at cleanup.
func benchOpen(b *testing.B, f *Flusher, dir string) *Log {
	b.Helper()
	l, err := Open(Options{FS: vfs.Default, Dir: dir, Config: benchConfig(), Flusher: f})
	if err != nil {
		b.Fatalf("Open = %v", err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkAppendNoSync is the unsynced append path: validation (CRC-32C of the batch and a walk
// of its records), the locks, and a pwrite into the page cache. Everything is timed, so this is
// the sustained rate: past a few GiB of dirty page cache (vm.dirty_background_ratio and
// vm.dirty_ratio) the kernel throttles the writer to the disk's speed, and every roll at 1 GiB
// fsyncs the sealed segment, up to 1 GiB of dirty pages. Besides MB/s (rolls included) it reports
// "segments", "roll-s" (seconds spent in the appends that rolled) and "MB/s-excl-roll".
func BenchmarkAppendNoSync(b *testing.B) { benchAppendNoSync(b, 0) }

// BenchmarkAppendNoSyncCached is BenchmarkAppendNoSync with the timer stopped every 256 MiB to
// make the log durable, so dirty data never builds up past 256 MiB: the kernel neither throttles
// the writer nor writes back behind it, and rolls find little to fsync. It measures the append
// path into the page cache itself, which is what an unsynced append costs while the disk keeps up.
func BenchmarkAppendNoSyncCached(b *testing.B) { benchAppendNoSync(b, benchCachedBytes) }

func benchAppendNoSync(b *testing.B, syncEvery int) {
	f := benchFlusher(b)
	l := benchOpen(b, f, filepath.Join(b.TempDir(), "p0"))
	bt := benchBatch(b)
	segBytes := l.Config().SegmentBytes
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	var rollTime time.Duration
	var n, sinceSync int64
	for b.Loop() {
		// Only this goroutine appends, so reading the active segment's size unlocked is safe.
		act := l.segments[len(l.segments)-1]
		var t0 time.Time
		rolls := act.size > 0 && act.size+int64(len(bt)) > segBytes
		if rolls {
			t0 = time.Now()
		}
		_, last, err := l.Append(bt, 1)
		if err != nil {
			b.Fatalf("Append = %v", err)
		}
		if rolls {
			rollTime += time.Since(t0)
		}
		n++
		if sinceSync += int64(len(bt)); syncEvery > 0 && sinceSync >= int64(syncEvery) {
			b.StopTimer()
			if err := l.WaitDurable(context.Background(), last+1); err != nil {
				b.Fatalf("WaitDurable = %v", err)
			}
			sinceSync = 0
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(len(l.segments)), "segments")
	b.ReportMetric(rollTime.Seconds(), "roll-s")
	if rest := b.Elapsed() - rollTime; rest > 0 {
		b.ReportMetric(float64(n*int64(len(bt)))/1e6/rest.Seconds(), "MB/s-excl-roll")
	}
}

// BenchmarkAppendGroupCommit is 8 appenders on one log, each looping Append then
// WaitDurable(last+1): every batch is durable before its appender sends the next one, and the
// flusher shares each fsync among the waiters of its round.
func BenchmarkAppendGroupCommit(b *testing.B) {
	f := benchFlusher(b)
	l := benchOpen(b, f, filepath.Join(b.TempDir(), "p0"))
	logs := make([]*Log, benchAppenders)
	for i := range logs {
		logs[i] = l
	}
	benchGroupCommit(b, f, logs)
}

// BenchmarkAppendGroupCommitPartitions is 8 appenders, each on its own log (partition), all
// sharing one Flusher: a round fsyncs up to 8 files concurrently.
func BenchmarkAppendGroupCommitPartitions(b *testing.B) {
	f := benchFlusher(b)
	dir := b.TempDir()
	logs := make([]*Log, benchAppenders)
	for i := range logs {
		logs[i] = benchOpen(b, f, filepath.Join(dir, "p"+strconv.Itoa(i)))
	}
	benchGroupCommit(b, f, logs)
}

// benchGroupCommit runs one appender per entry of logs until b.N batches are durable. It reports
// fsyncs/op (file fsyncs by the flusher per batch), batches/fsync (its inverse: multiply by the
// batch size for the bytes each fsync made durable) and rounds/op (flusher rounds per batch).
func benchGroupCommit(b *testing.B, f *Flusher, logs []*Log) {
	proto := benchBatch(b)
	b.SetBytes(int64(len(proto)))
	b.ReportAllocs()
	ctx := context.Background()
	var (
		next    atomic.Int64 // ops claimed so far
		wg      sync.WaitGroup
		errOnce sync.Once
		failure error
	)
	syncs0, rounds0 := f.Syncs.Load(), f.Rounds.Load()
	b.ResetTimer()
	for _, l := range logs {
		bt := append([]byte(nil), proto...) // Append writes the base offset into its batch
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				_, last, err := l.Append(bt, 1)
				if err == nil {
					err = l.WaitDurable(ctx, last+1)
				}
				if err != nil {
					errOnce.Do(func() { failure = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	syncs, rounds := f.Syncs.Load()-syncs0, f.Rounds.Load()-rounds0
	b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
	if syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "batches/fsync")
	}
}

// BenchmarkRawWriteFsync is the disk's sequential write+fsync bandwidth through a plain *os.File
// in the same directory tree: 16 KiB appends with File.Write, File.Sync every 16 KiB ... 4 MiB.
// "sync-never" and "sync-never-cached" are the page-cache write rates to compare
// BenchmarkAppendNoSync and BenchmarkAppendNoSyncCached with (the latter syncs every 256 MiB with
// the timer stopped). One op is one 16 KiB write, so MB/s compares directly with the append
// benchmarks at the same bytes-per-fsync.
func BenchmarkRawWriteFsync(b *testing.B) {
	type mode struct {
		name         string
		every        int  // bytes between fsyncs; 0: never
		untimedSyncs bool // fsync outside the timer
		chunk        int  // bytes per write; 0: benchRawChunk
	}
	var modes []mode
	for _, every := range []int{16 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20, 4 << 20} {
		modes = append(modes, mode{"sync-every-" + sizeName(every), every, false, 0})
	}
	modes = append(modes, mode{"sync-never", 0, false, 0}, mode{"sync-never-cached", benchCachedBytes, true, 0})
	// The same page-cache writes at the append benchmarks' batch size, which is not a multiple of
	// the 4 KiB block: ext4 zeroes the rest of each partly written block, as it does for the log.
	batchSize := len(benchBatch(b))
	modes = append(modes, mode{"sync-never-batchsize", 0, false, batchSize},
		mode{"sync-never-cached-batchsize", benchCachedBytes, true, batchSize})
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			file, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer file.Close()
			chunk := make([]byte, cmp.Or(m.chunk, benchRawChunk))
			for i := range chunk {
				chunk[i] = byte(i * 7)
			}
			perSync := m.every / len(chunk)
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			n, syncs := 0, 0
			for b.Loop() {
				if _, err := file.Write(chunk); err != nil {
					b.Fatal(err)
				}
				if n++; perSync > 0 && n%perSync == 0 {
					if m.untimedSyncs {
						b.StopTimer()
					}
					if err := file.Sync(); err != nil {
						b.Fatal(err)
					}
					if m.untimedSyncs {
						b.StartTimer()
					} else {
						syncs++
					}
				}
			}
			b.ReportMetric(float64(syncs)/float64(n), "fsyncs/op")
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

// benchFilledLog returns a synced log of ~256 MiB of the benchmark batch (one segment), and the
// batch size. The bytes stay in the page cache (the machine has far more RAM), so the read
// benchmarks measure the hot-consumer path, not the disk.
func benchFilledLog(b *testing.B) (*Log, int) {
	b.Helper()
	f := benchFlusher(b)
	l := benchOpen(b, f, filepath.Join(b.TempDir(), "p0"))
	bt := benchBatch(b)
	for n := 0; n < benchFillBytes; n += len(bt) {
		if _, _, err := l.Append(bt, 1); err != nil {
			b.Fatalf("Append = %v", err)
		}
	}
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		b.Fatalf("WaitDurable = %v", err)
	}
	return l, len(bt)
}

// BenchmarkRead reads sequentially through the log in 1 MiB (maxBytes) steps with a reused
// buffer, wrapping around at the end. MB/s counts the bytes returned.
func BenchmarkRead(b *testing.B) {
	l, size := benchFilledLog(b)
	end := l.EndOffset()
	var dst []byte
	var off, total int64
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = l.Read(dst[:0], off, benchReadMax); err != nil || len(dst) == 0 {
			b.Fatalf("Read(%d) = %d bytes, %v", off, len(dst), err)
		}
		total += int64(len(dst))
		// Every batch is the same: len(dst)/size batches of benchRecords offsets each.
		if off += int64(len(dst) / size * benchRecords); off >= end {
			off = 0
		}
	}
	// b.SetBytes wants a per-op constant; reads return a whole number of batches (62 of them
	// here, except at the wrap), so report the measured average instead of a guess.
	b.SetBytes(total / int64(b.N))
}

// BenchmarkReadSlice resolves the same reads as BenchmarkRead to file ranges (ReadSlice then
// Release) without copying: the cost of the segment and index lookups and the header walks.
func BenchmarkReadSlice(b *testing.B) {
	l, size := benchFilledLog(b)
	end := l.EndOffset()
	var off int64
	b.ReportAllocs()
	for b.Loop() {
		s, err := l.ReadSlice(off, benchReadMax)
		if err != nil || s.Size == 0 {
			b.Fatalf("ReadSlice(%d) = %d bytes, %v", off, s.Size, err)
		}
		s.Release()
		if off += int64(s.Size / size * benchRecords); off >= end {
			off = 0
		}
	}
}
