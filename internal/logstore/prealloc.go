package logstore

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Preallocation: a log that fsyncs before acking (write caching off) keeps zero-filled, synced
// space ahead of its appends in the active segment, so an append overwrites blocks the file
// already has. An fsync after such a write flushes data only; an fsync after a write that extends
// the file must also commit the new size and block allocation to the file system's journal. On
// ext4 on this project's test VM, 1 KiB write + fsync took 0.10-0.12 ms p50 in preallocated space
// against 0.16-0.21 ms when appending (docs/benchmarks.md#durability has the end-to-end effect).
// fallocate(2) is not enough: its unwritten extents need a journal commit when first written.
//
// The space costs a second write of every byte (the zeros), so it is only kept for logs written
// fast enough for sync latency to matter (preallocMinRate), sized to about half a second of the
// recent write rate. Sealed segments and a cleanly closed active segment are cut back to their
// last batch; after a crash the zero tail of the active segment is recognised and cut at Open
// (segment.scan).
const (
	preallocMinRate = 1 << 20         // bytes/s: slower logs are not preallocated
	preallocAhead   = time.Second / 2 // keep this much of the write rate zero-filled ahead
	preallocMin     = 256 << 10       // smallest fill
	preallocMax     = 8 << 20         // largest fill
	preallocGap     = 64 << 10        // a fill starts this far past the end when appends outran the last one
	rateWindow      = 100 * time.Millisecond
	fillRetryAfter  = 10 * time.Second // after a failed fill (a full disk), wait this long before the next
	zeroPiece       = 256 << 10        // zeros are written in pieces of this size
)

var zeroBuf [zeroPiece]byte

// zeroFill is a zero fill of [from, to) of a segment in progress. from moves up (under Log.mu)
// as pieces are done.
type zeroFill struct {
	seg      *segment
	from, to int64
	moved    chan struct{} // closed (under Log.mu) when from moves up or the fill ends; replaced while it runs
	stop     atomic.Bool   // the space is about to be cut (roll, Close, Truncate): stop early
}

// noteAppendLocked updates the write-rate estimate with n bytes appended at now and returns a
// fill to start, or nil. Callers hold appendMu and mu, and start the fill with runFill after
// unlocking mu.
func (l *Log) noteAppendLocked(act *segment, n int, cfg *Config, now time.Time) *zeroFill {
	if cfg.WriteCaching || !cfg.Preallocate {
		return nil // the rate is only for preallocation
	}
	l.appended += int64(n)
	if dt := now.Sub(l.rateAt); dt >= rateWindow {
		l.rate = float64(l.appended-l.rateBytes) / dt.Seconds()
		l.rateAt, l.rateBytes = now, l.appended
	}
	if l.fill != nil || l.rate < preallocMinRate || now.Before(l.fillRetry) {
		return nil
	}
	size := int64(l.rate*preallocAhead.Seconds()) &^ (4<<10 - 1)
	size = min(max(size, preallocMin), preallocMax)
	if act.alloc-act.size >= size/2 {
		return nil
	}
	from := max(act.alloc, act.size+preallocGap)
	to := min(from+size, cfg.SegmentBytes)
	if to-from < size/2 {
		return nil // the segment rolls soon: the roll would only cut the zeros again
	}
	f := &zeroFill{seg: act, from: from, to: to, moved: make(chan struct{})}
	l.fill = f
	act.padded = true
	return f
}

// runFill writes zeros over the fill's range, a piece at a time, each piece fsynced before the
// next, so that no fsync of the file ever has more than a piece of zeros to write out: an
// fsync of appended data that runs meanwhile must wait for the journal commit that carries the
// file's new size, and with it (ext4's ordered mode) for the zeros' data, so the pieces bound
// that wait to one piece's write-out.
//
// The zeros go through a file handle of the fill's own: Linux reports a writeback error to one
// fsync per open file, so a shared handle would let the fill's fsync take an error that the
// flusher's fsync of appended data must see. A failed write (a full disk) only pauses
// preallocation; appends then extend the file as they would without it. A failed sync poisons
// the log.
func (l *Log) runFill(f *zeroFill) {
	var werr, serr error
	pos := f.from
	h, werr := l.fs.OpenReadWrite(f.seg.f.Name())
	if werr == nil {
		for pos < f.to && !f.stop.Load() {
			n := min(zeroPiece, f.to-pos)
			if _, werr = h.WriteAt(zeroBuf[:n], pos); werr != nil {
				_ = h.Truncate(pos) // give back what the piece took; appends below it are untouched
				break
			}
			if serr = h.Sync(); serr != nil {
				break
			}
			pos += n
			l.mu.Lock()
			f.seg.alloc, f.from = max(f.seg.alloc, pos), pos // appends may use the piece now
			close(f.moved)
			f.moved = make(chan struct{})
			l.mu.Unlock()
			l.flusher.preallocBytes.Add(n)
		}
		_ = h.Close()
	}
	if serr != nil {
		_ = l.poison("sync of preallocated space", serr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if werr != nil {
		l.fillRetry = l.now().Add(fillRetryAfter)
		l.logger.Warn("logstore: preallocating segment space failed; appends extend the file meanwhile",
			"segment", f.seg.base, "err", werr)
	} else if serr == nil && pos == f.to {
		l.flusher.preallocFills.Add(1)
	}
	l.fill = nil
	close(f.moved)
}

// stopFill waits for the fill of seg, if any, telling it to stop early: the caller is about to
// cut the space (roll, Close, Truncate). Callers hold appendMu.
func (l *Log) stopFill(seg *segment) {
	l.mu.RLock()
	f := l.fill
	l.mu.RUnlock()
	if f != nil {
		f.stop.Store(true)
	}
	l.waitFill(seg, math.MaxInt64)
}

// waitFill waits until no zero fill of seg overlaps [.., end). Callers hold appendMu, so no new
// fill can start meanwhile.
func (l *Log) waitFill(seg *segment, end int64) {
	for {
		l.mu.RLock()
		f := l.fill
		clear := f == nil || f.seg != seg || end <= f.from
		var moved chan struct{}
		if !clear {
			moved = f.moved
		}
		l.mu.RUnlock()
		if clear {
			return
		}
		<-moved
	}
}

// trimPadding cuts a segment that may have preallocated space back to its last batch. Callers
// hold appendMu and have waited for fills of s (waitFill). The caller syncs.
func (l *Log) trimPadding(s *segment) error {
	if !s.padded {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("cut preallocated space of segment %d: %w", s.base, err)
	}
	l.mu.Lock()
	s.padded, s.alloc = false, s.size
	l.mu.Unlock()
	return nil
}
