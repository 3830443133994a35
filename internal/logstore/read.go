package logstore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// Slice is a byte range of a segment file that holds whole batches, for serving a fetch with
// sendfile. The file stays open until Release, even if retention or compaction removes the
// segment meanwhile. An empty Slice (Size 0) holds nothing and needs no Release, but allows it.
type Slice struct {
	File     vfs.File
	Position int64 // where the range starts in File
	Size     int   // bytes
	// Next is the offset after the slice's last batch (its records end below it): a fetch's
	// aborted transactions are those that begin below it.
	Next int64
	seg  *segment
}

// Release gives the slice's file reference back. The slice must not be used afterwards.
func (s *Slice) Release() {
	if s.seg != nil {
		s.seg.release()
		s.seg = nil
	}
}

// view is a consistent snapshot of one segment for a reader, taken under Log.mu.RLock. The index
// slices are append-only while shared (truncation copies), so reading them unlocked is safe.
type view struct {
	seg  *segment
	size int64
	next int64
	idx  segmentIndex
}

// viewFor returns a referenced view of the segment holding the first batch that contains an
// offset >= from, and from clamped to that segment, or ok=false at the log end. It checks the
// bounds of from against the log.
func (l *Log) viewFor(from int64) (view, int64, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return view{}, 0, false, ErrClosed
	}
	end := l.endOffsetLocked()
	if from < l.logStart || from > end {
		return view{}, 0, false, fmt.Errorf("%w: %d is outside [%d, %d]", ErrOffsetOutOfRange, from, l.logStart, end)
	}
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > from }) - 1
	for i = max(i, 0); i < len(l.segments); i++ {
		s := l.segments[i]
		if from < s.next { // compaction can leave gaps: skip segments that end before from
			s.acquire()
			return view{seg: s, size: s.size, next: s.next, idx: s.idx}, max(from, s.base), true, nil
		}
	}
	return view{}, 0, false, nil
}

// ReadSlice returns the range of whole batches starting with the batch that contains from (or
// the first batch after it, where compaction removed from), ending before maxBytes is exceeded
// but always holding at least one batch. Reads stay within one segment, as in Kafka. At the log
// end the slice is empty. The caller must Release the slice.
func (l *Log) ReadSlice(from int64, maxBytes int) (Slice, error) {
	return l.ReadSliceBelow(from, maxBytes, math.MaxInt64)
}

// ReadSliceBelow is ReadSlice limited to the batches below end, which must be a batch boundary
// (the high watermark): the slice is empty when from >= end.
func (l *Log) ReadSliceBelow(from int64, maxBytes int, end int64) (Slice, error) {
	for {
		v, start, ok, err := l.viewFor(from)
		if err != nil || !ok || from >= end {
			if ok {
				v.seg.release()
			}
			return Slice{}, err
		}
		if end < v.next { // cut the view at the batch that starts at end
			endPos, err := v.findBatch(end)
			if err != nil {
				v.seg.release()
				return Slice{}, err
			}
			v.size, v.next = endPos, end
		}
		pos, err := v.findBatch(start)
		if err == nil && pos < v.size {
			var end, next int64
			if end, next, err = v.rangeEnd(pos, maxBytes); err == nil {
				return Slice{File: v.seg.f, Position: pos, Size: int(end - pos), Next: next, seg: v.seg}, nil
			}
		}
		v.seg.release()
		if err != nil || v.next <= from {
			return Slice{}, err
		}
		from = v.next // compaction left nothing at or after from here: go on to the next segment
	}
}

// Read appends to dst the batches ReadSlice(from, maxBytes) describes and returns the result.
// The bytes are a copy the caller owns.
func (l *Log) Read(dst []byte, from int64, maxBytes int) ([]byte, error) {
	s, err := l.ReadSlice(from, maxBytes)
	if err != nil || s.Size == 0 {
		return dst, err
	}
	defer s.Release()
	n := len(dst)
	dst = slices.Grow(dst, s.Size)[:n+s.Size] // no zeroing: the read overwrites it all
	if _, err := readFull(s.File, dst[n:], s.Position, s.Position+int64(s.Size)); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// walkBufferSize is the read size of a header walk: a few headers of small batches, and not much
// more than one header's worth of waste for large ones.
const walkBufferSize = 512

var walkBuffers = sync.Pool{New: func() any { return new([walkBufferSize]byte) }}

// headerPrefix is how much of a batch header the offset walks need: base offset, length,
// and lastOffsetDelta (bytes 23..26).
const headerPrefix = 27

// walk reads batch header prefixes from pos up to v.size, calling fn with each batch's position,
// size, base offset and last offset until fn returns false.
func (v *view) walk(pos int64, fn func(pos int64, size int, base, last int64) bool) error {
	bp := walkBuffers.Get().(*[walkBufferSize]byte)
	defer walkBuffers.Put(bp)
	buf := bp[:]
	var bufPos, bufLen int64
	for pos < v.size {
		if pos+headerPrefix > bufPos+bufLen {
			n, err := readFull(v.seg.f, buf, pos, v.size)
			if err != nil {
				return err
			}
			bufPos, bufLen = pos, n
		}
		h := buf[pos-bufPos:]
		size := batch.LengthFieldEnd + int(int32(binary.BigEndian.Uint32(h[8:])))
		if size < batch.HeaderSize || pos+int64(size) > v.size {
			return fmt.Errorf("logstore: segment %d: bad batch at position %d", v.seg.base, pos)
		}
		base := int64(binary.BigEndian.Uint64(h))
		last := base + int64(int32(binary.BigEndian.Uint32(h[23:])))
		if !fn(pos, size, base, last) {
			return nil
		}
		pos += int64(size)
	}
	return nil
}

// findBatch returns the position of the first batch whose last offset is >= from, or v.size.
func (v *view) findBatch(from int64) (int64, error) {
	floor, exact := v.idx.floorByOffset(uint32(from - v.seg.base))
	if exact { // sequential consumers ask for batch starts, and most batches are indexed
		return int64(floor), nil
	}
	found := v.size
	err := v.walk(int64(floor), func(pos int64, _ int, _, last int64) bool {
		if last >= from {
			found = pos
			return false
		}
		return true
	})
	return found, err
}

// rangeEnd returns the end of the longest run of whole batches from start within maxBytes, or
// of the first batch if even it is larger.
func (v *view) rangeEnd(start int64, maxBytes int) (end, next int64, err error) {
	if maxBytes < 0 || int64(maxBytes) >= v.size-start {
		return v.size, v.next, nil
	}
	limit := start + int64(maxBytes)
	end = -1
	err = v.walk(max(start, int64(v.idx.floorByPosition(uint32(limit)))), func(pos int64, size int, base, last int64) bool {
		if pos+int64(size) > limit {
			if end < 0 {
				end, next = pos+int64(size), last+1 // the first batch, whatever its size
				if pos > start {
					end, next = pos, base // the batches before it, which start below it
				}
			}
			return false
		}
		end, next = pos+int64(size), last+1
		return true
	})
	if end == v.size {
		next = v.next // past compaction's gaps at the segment's end
	}
	return end, next, err
}

// OffsetForTimestamp returns the offset and timestamp of the first record whose timestamp is
// >= ts (Kafka's ListOffsets by timestamp), or ok=false if there is none.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	for from := int64(0); ; {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return 0, 0, false, ErrClosed
		}
		var v view
		logStart := l.logStart
		for _, s := range l.segments { // the first segment past from that may hold ts
			if s.next > max(from, logStart) && s.maxTimestamp >= ts {
				s.acquire()
				v = view{seg: s, size: s.size, next: s.next, idx: s.idx}
				break
			}
		}
		l.mu.RUnlock()
		if v.seg == nil {
			return 0, 0, false, nil
		}
		offset, timestamp, ok, err = v.firstAtOrAfter(ts, max(from, logStart))
		v.seg.release()
		if ok || err != nil {
			return offset, timestamp, ok, err
		}
		from = v.next // the segment's max timestamp is below logStart or stale: look further
	}
}

// firstAtOrAfter searches the view for the first record at or after offset min with a
// timestamp >= ts.
func (v *view) firstAtOrAfter(ts, minOffset int64) (offset, timestamp int64, ok bool, err error) {
	start, err := v.findBatch(max(minOffset, v.seg.base+int64(v.idx.floorByTime(ts))))
	if err != nil {
		return 0, 0, false, err
	}
	var buf []byte
	err = v.walk(start, func(pos int64, size int, _, _ int64) bool {
		buf = append(buf[:0], make([]byte, size)...)
		if _, err = readFull(v.seg.f, buf, pos, pos+int64(size)); err != nil {
			return false
		}
		offset, timestamp, ok, err = firstInBatch(buf, ts, minOffset)
		return err == nil && !ok
	})
	return offset, timestamp, ok, err
}

// firstInBatch finds the first record of batch b at or after offset min with a timestamp >= ts
// (none in a no-op entry: no Kafka client sees one).
func firstInBatch(b []byte, ts, min int64) (int64, int64, bool, error) {
	h, err := batch.ValidateStored(b)
	if err != nil || h.MaxTimestamp < ts || isNoOp(&h) {
		return 0, 0, false, err
	}
	if h.Attributes&batch.AttrLogAppendTime != 0 {
		return max(h.BaseOffset, min), h.MaxTimestamp, h.LastOffset() >= min, nil
	}
	recs, err := batch.Records(&h, b)
	if err != nil {
		return 0, 0, false, err
	}
	r := batch.NewRecordReader(recs)
	var rec batch.Record
	for r.Next(&rec) {
		off, t := h.BaseOffset+int64(rec.OffsetDelta), h.BaseTimestamp+rec.TimestampDelta
		if t >= ts && off >= min {
			return off, t, true, nil
		}
	}
	return 0, 0, false, r.Err()
}

// MaxTimestamp returns the largest record timestamp in the log and the offset of the first
// record that has it (Kafka's ListOffsets MAX_TIMESTAMP), or ok=false for an empty log.
//
// The segment holding the log start (after DeleteRecords, or retention of part of it) counts
// only its records from there: its max timestamp may be a deleted record's, which no search
// from the log start finds.
func (l *Log) MaxTimestamp() (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	maxTs := int64(-1)
	var first view
	logStart := l.logStart
	for _, s := range l.segments {
		switch {
		case s.next <= logStart:
		case s.base < logStart && first.seg == nil:
			s.acquire()
			first = view{seg: s, size: s.size, next: s.next, idx: s.idx}
		default:
			maxTs = max(maxTs, s.maxTimestamp)
		}
	}
	l.mu.RUnlock()
	if first.seg != nil {
		ts, err := first.maxAtOrAfter(logStart, false)
		first.seg.release()
		if err != nil {
			return 0, 0, false, err
		}
		maxTs = max(maxTs, ts)
	}
	if maxTs < 0 {
		return 0, 0, false, nil
	}
	if offset, timestamp, ok, err = l.OffsetForTimestamp(maxTs); ok || err != nil {
		return offset, timestamp, ok, err
	}
	// The largest timestamp is a no-op entry's (a total-order shard's, which Kafka clients
	// never see, and OffsetForTimestamp skips): the largest of the records', by their batches,
	// newest segment first, until no older segment can hold a larger one.
	return l.maxRecordTimestamp()
}

// maxRecordTimestamp is MaxTimestamp over the log's record batches only (no no-op entries).
func (l *Log) maxRecordTimestamp() (offset, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	logStart := l.logStart
	var views []view
	var maxes []int64 // each view's segment's max timestamp (written under l.mu by appends)
	for _, s := range l.segments {
		if s.next > logStart && s.maxTimestamp >= 0 {
			s.acquire()
			views = append(views, view{seg: s, size: s.size, next: s.next, idx: s.idx})
			maxes = append(maxes, s.maxTimestamp)
		}
	}
	l.mu.RUnlock()
	defer func() {
		for _, v := range views {
			v.seg.release()
		}
	}()
	best := int64(-1)
	for i := len(views) - 1; i >= 0; i-- {
		v := views[i]
		if maxes[i] <= best { // an upper bound of what it holds
			continue
		}
		ts, err := v.maxAtOrAfter(max(logStart, v.seg.base), true)
		if err != nil {
			return 0, 0, false, err
		}
		best = max(best, ts)
	}
	if best < 0 {
		return 0, 0, false, nil
	}
	return l.OffsetForTimestamp(best)
}

// maxAtOrAfter is the largest timestamp of the view's records at or after offset min (-1: none);
// with records, of its record batches only (no no-op entries).
func (v *view) maxAtOrAfter(minOffset int64, records bool) (int64, error) {
	start, err := v.findBatch(minOffset)
	if err != nil {
		return -1, err
	}
	maxTs := int64(-1)
	var buf []byte
	var ferr error // the callback's: walk's own nil would hide it
	werr := v.walk(start, func(pos int64, size int, base, _ int64) bool {
		if base >= minOffset { // wholly kept: its header's max timestamp (checked at the append)
			buf = append(buf[:0], make([]byte, batch.HeaderSize)...)
			if _, ferr = readFull(v.seg.f, buf, pos, pos+batch.HeaderSize); ferr != nil {
				return false
			}
			var h batch.Header
			if h, ferr = batch.ParseHeader(buf); ferr != nil {
				return false
			}
			if !records || !isNoOp(&h) {
				maxTs = max(maxTs, h.MaxTimestamp)
			}
			return true
		}
		buf = append(buf[:0], make([]byte, size)...)
		if _, ferr = readFull(v.seg.f, buf, pos, pos+int64(size)); ferr != nil {
			return false
		}
		var h batch.Header
		if h, ferr = batch.ValidateStored(buf); ferr != nil {
			return false
		}
		if records && isNoOp(&h) {
			return true
		}
		if h.Attributes&batch.AttrLogAppendTime != 0 {
			maxTs = max(maxTs, h.MaxTimestamp)
			return true
		}
		var recs []byte
		if recs, ferr = batch.Records(&h, buf); ferr != nil {
			return false
		}
		r := batch.NewRecordReader(recs)
		var rec batch.Record
		for r.Next(&rec) {
			if h.BaseOffset+int64(rec.OffsetDelta) >= minOffset {
				maxTs = max(maxTs, h.BaseTimestamp+rec.TimestampDelta)
			}
		}
		ferr = r.Err()
		return ferr == nil
	})
	return maxTs, cmp.Or(ferr, werr)
}

// isNoOp reports whether a batch is a no-op entry of a total-order shard: a control batch
// outside any transaction (Kafka's own control batches are transaction markers).
func isNoOp(h *batch.Header) bool { return h.IsControl() && !h.IsTransactional() }
