package logstore

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// File name suffixes. A segment is named by its base offset, zero-padded to 20 digits.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	cleanedSuffix   = ".log.cleaned" // compaction output not yet committed
	swapSuffix      = ".log.swap"    // compaction output committed, not yet in place
)

// maxSegmentBytes keeps positions within the uint32 of an index entry.
const maxSegmentBytes = math.MaxInt32

func segmentName(dir string, base int64, suffix string) string {
	return fmt.Sprintf("%s/%020d%s", dir, base, suffix)
}

// segment is one file of a log holding whole batches back to back, with its in-memory indexes.
//
// The fields after f are guarded by Log.mu while the segment is active (written under Lock, read
// under RLock); once sealed they never change, except by compaction replacing the whole segment.
type segment struct {
	base int64
	f    vfs.File
	refs atomic.Int32 // one for the log's list, one per reader slice; the file closes at zero

	size            int64 // bytes of complete batches
	next            int64 // offset just past the segment's last batch (>= base)
	maxTimestamp    int64 // -1 when the segment has no batch
	idx             segmentIndex
	bytesSinceIndex int
	maxTsRel        uint32 // relative offset of the first batch that reached maxTimestamp
	firstTs         int64  // the first batch's max timestamp (segment.ms counts from it); -1: none
	created         time.Time
	cleanedAt       int64  // unix ms of the first compaction, 0 if never compacted
	alloc           int64  // the file is zero-filled and synced up to here (prealloc.go)
	padded          bool   // a fill was started: the file may be longer than size
	jitterDraw      uint64 // drawn at random when the segment is made: its share of segment.jitter.ms (rollJitter)
}

// largestTimestamp is what retention and min.compaction.lag.ms age the segment by: its newest
// record timestamp, or, when none of its batches carries one (a producer sent NO_TIMESTAMP,
// -1), the file's modification time, as Kafka's LogSegment.largestTimestamp falls back to
// lastModified; such records were taken as older than any retention and deleted at the next
// check. math.MaxInt64 (never old) if the time cannot be read; -1 for an empty segment.
func (s *segment) largestTimestamp() int64 {
	if s.maxTimestamp >= 0 || s.size == 0 {
		return s.maxTimestamp
	}
	fi, err := s.f.Stat()
	if err != nil {
		return math.MaxInt64
	}
	return fi.ModTime().UnixMilli()
}

func newSegment(f vfs.File, base int64) *segment {
	s := &segment{base: base, f: f, next: base, maxTimestamp: -1, firstTs: -1, jitterDraw: rand.Uint64()}
	s.refs.Store(1)
	return s
}

// rollJitter is how much before cfg.SegmentMs the segment rolls: its random draw modulo
// min(segment.jitter.ms, segment.ms), in whole milliseconds, as Kafka's randomSegmentJitter.
func (s *segment) rollJitter(cfg *Config) time.Duration {
	bound := min(cfg.SegmentJitter, cfg.SegmentMs).Milliseconds()
	if bound <= 0 {
		return 0
	}
	return time.Duration(s.jitterDraw%uint64(bound)) * time.Millisecond
}

func (s *segment) meta() indexMeta {
	return indexMeta{base: s.base, logSize: s.size, next: s.next, maxTimestamp: s.maxTimestamp, cleanedAt: s.cleanedAt}
}

// acquire takes a reference for a reader; release drops one and closes the file at zero.
func (s *segment) acquire() { s.refs.Add(1) }

func (s *segment) release() {
	if n := s.refs.Add(-1); n == 0 {
		_ = s.f.Close()
	} else if n < 0 {
		panic(fmt.Sprintf("logstore: segment %d released %d times too often", s.base, -n))
	}
}

// waitedForRoll is how long the segment has been filling, as Kafka counts it for segment.ms:
// from its first batch's timestamp to that of the batch about to be appended (ts), when both
// have one, so that a restart does not start the count again; else since the segment was
// created in this process.
func (s *segment) waitedForRoll(ts int64, now time.Time) time.Duration {
	if s.firstTs >= 0 && ts >= 0 {
		return time.Duration(ts-s.firstTs) * time.Millisecond
	}
	return now.Sub(s.created)
}

// track records a batch just placed at pos: offsets, timestamps and sparse index entries.
func (s *segment) track(h *batch.Header, pos int64, indexInterval int) {
	rel := uint32(h.BaseOffset - s.base)
	if s.size == 0 && s.created.IsZero() {
		s.created = time.Now()
	}
	if pos == 0 {
		s.firstTs = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp = h.MaxTimestamp
		s.maxTsRel = rel
	}
	if s.bytesSinceIndex >= indexInterval {
		s.idx.offsets = append(s.idx.offsets, indexEntry{relOffset: rel, position: uint32(pos)})
		s.bytesSinceIndex = 0
		if n := len(s.idx.times); s.maxTimestamp >= 0 && (n == 0 || s.maxTimestamp > s.idx.times[n-1].timestamp) {
			s.idx.times = append(s.idx.times, timeEntry{timestamp: s.maxTimestamp, relOffset: s.maxTsRel})
		}
	}
	s.bytesSinceIndex += h.Size()
	s.size = pos + int64(h.Size())
	s.next = h.NextOffset()
}

// fits reports whether a batch with these offsets can go into the segment: relative offsets must
// fit an index entry's uint32.
func (s *segment) fits(lastOffset int64) bool { return lastOffset-s.base <= math.MaxUint32 }

// scanResult is what a scan of a segment file found.
type scanResult struct {
	end    int64 // position just past the last valid batch
	reason error // why the scan stopped before the file's end; nil if it reached it
	// fileSize is the file's size. It is past end with a nil reason when the rest of the file is
	// zeros and the scan allowed that: preallocated space (prealloc.go) a crash left behind.
	fileSize int64
}

// scan reads the segment file from the start, validating every batch (CRC included) and its
// offsets (ascending, within [base, limit)), and rebuilds the indexes from it. It stops at the
// first bad batch; the caller decides what to do with the bytes after end. With zeroTail (the
// active segment, the only one that can hold preallocated space) a rest of the file that is all
// zeros is not a bad batch: the scan ends there with a nil reason.
func (s *segment) scan(limit int64, indexInterval int, zeroTail bool) (scanResult, error) {
	info, err := s.f.Stat()
	if err != nil {
		return scanResult{}, err
	}
	s.size, s.next, s.maxTimestamp, s.idx, s.bytesSinceIndex = 0, s.base, -1, segmentIndex{}, 0
	it := batchIter{f: s.f, end: info.Size()}
	for {
		pos, b, ok := it.next()
		if !ok {
			if it.err != nil {
				return scanResult{}, it.err
			}
			res := scanResult{end: pos, reason: it.bad, fileSize: info.Size()}
			if res.reason != nil && zeroTail {
				zero, err := zeroFrom(s.f, pos, info.Size())
				if err != nil {
					return scanResult{}, err
				}
				if zero {
					res.reason = nil
				}
			}
			return res, nil
		}
		h, err := batch.ValidateStored(b)
		if err == nil && (h.BaseOffset < s.next || h.NextOffset() > limit || !s.fits(h.LastOffset())) {
			err = fmt.Errorf("batch offsets [%d, %d] outside [%d, %d)", h.BaseOffset, h.LastOffset(), s.next, limit)
		}
		if err != nil {
			return scanResult{end: pos, reason: fmt.Errorf("at position %d: %w", pos, err), fileSize: info.Size()}, nil
		}
		s.track(&h, pos, indexInterval)
	}
}

// zeroFrom reports whether the file holds only zero bytes from pos to size.
func zeroFrom(f vfs.File, pos, size int64) (bool, error) {
	buf := make([]byte, min(size-pos, 1<<20))
	for pos < size {
		n, err := readFull(f, buf, pos, size)
		if err != nil {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		pos += n
		if n == 0 {
			return false, nil
		}
	}
	return true, nil
}

// batchIter reads whole batches of a segment file in order, through a buffer.
type batchIter struct {
	f      vfs.File
	pos    int64 // position of the next batch
	end    int64 // stop here
	onRead func(n int)

	buf            []byte
	bufPos, bufLen int64 // buf[:bufLen] holds the file from bufPos
	err            error // an I/O error
	bad            error // why iteration stopped before end: a cut-off or impossible batch
}

// next returns the next batch and its position; the slice is valid until the following call.
// At the end, or on a bad batch (it.bad) or error (it.err), it returns ok=false and the position
// where it stopped.
func (it *batchIter) next() (int64, []byte, bool) {
	pos := it.pos
	if pos >= it.end || it.err != nil || it.bad != nil {
		return pos, nil, false
	}
	if it.buf == nil {
		it.buf = make([]byte, 1<<20)
	}
	if pos+batch.LengthFieldEnd > it.bufPos+it.bufLen && !it.fill(pos, len(it.buf)) {
		return pos, nil, false
	}
	n, ok := peekSize(it.buf[pos-it.bufPos : it.bufLen])
	if !ok || pos+int64(n) > it.end {
		it.bad = fmt.Errorf("at position %d: batch is cut off or has an impossible length", pos)
		return pos, nil, false
	}
	if pos+int64(n) > it.bufPos+it.bufLen && !it.fill(pos, n) {
		return pos, nil, false
	}
	it.pos = pos + int64(n)
	return pos, it.buf[pos-it.bufPos : pos-it.bufPos+int64(n)], true
}

// fill reads the file from pos into the buffer, growing it to at least need bytes.
func (it *batchIter) fill(pos int64, need int) bool {
	if need > len(it.buf) {
		it.buf = make([]byte, need)
	}
	n, err := readFull(it.f, it.buf, pos, it.end)
	if err != nil {
		it.err = err
		return false
	}
	if it.onRead != nil {
		it.onRead(int(n))
	}
	it.bufPos, it.bufLen = pos, n
	if pos+batch.LengthFieldEnd > pos+n {
		it.bad = fmt.Errorf("at position %d: %d bytes are too few for a batch", pos, n)
		return false
	}
	return true
}

// peekSize reads a batch's total size from its length field, if b holds the field.
func peekSize(b []byte) (int, bool) {
	if len(b) < batch.LengthFieldEnd {
		return 0, false
	}
	n := int(int32(uint32(b[8])<<24 | uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])))
	if n < batch.HeaderSize-batch.LengthFieldEnd {
		return 0, false
	}
	return batch.LengthFieldEnd + n, true
}

// readFull reads from f at off into buf, stopping at fileSize, and returns the bytes read.
func readFull(f vfs.File, buf []byte, off, fileSize int64) (int64, error) {
	want := min(int64(len(buf)), fileSize-off)
	n, err := f.ReadAt(buf[:want], off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == want) {
		return int64(n), err
	}
	return int64(n), nil
}

// loadIndexes reads the segment's index files. They are used only if both are intact and
// describe the log file at its current size.
func (s *segment) loadIndexes(fs vfs.FS, dir string) bool {
	info, err := s.f.Stat()
	if err != nil {
		return false
	}
	ob, err1 := vfs.ReadFile(fs, segmentName(dir, s.base, indexSuffix))
	tb, err2 := vfs.ReadFile(fs, segmentName(dir, s.base, timeIndexSuffix))
	if err1 != nil || err2 != nil {
		return false
	}
	om, offsets, err1 := decodeOffsetIndex(ob)
	tm, times, err2 := decodeTimeIndex(tb)
	if err1 != nil || err2 != nil || om != tm || om.base != s.base || om.logSize != info.Size() || om.next < s.base {
		return false
	}
	s.size, s.next, s.maxTimestamp, s.cleanedAt = om.logSize, om.next, om.maxTimestamp, om.cleanedAt
	s.idx = segmentIndex{offsets: offsets, times: times}
	return true
}

// writeIndexes writes and syncs both index files for the segment as it is now.
func (s *segment) writeIndexes(fs vfs.FS, dir string) error {
	m := s.meta()
	if err := vfs.WriteFileSync(fs, segmentName(dir, s.base, indexSuffix), encodeOffsetIndex(m, s.idx.offsets)); err != nil {
		return err
	}
	return vfs.WriteFileSync(fs, segmentName(dir, s.base, timeIndexSuffix), encodeTimeIndex(m, s.idx.times))
}

// removeSegmentFiles unlinks a segment's log and index files; missing files are fine.
func removeSegmentFiles(fs vfs.FS, dir string, base int64) error {
	var errs []error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := fs.Remove(segmentName(dir, base, suffix)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
