package objects

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// checkSection checks a section read from the store: n bytes of whole batches, each with a
// good CRC. Nothing corrupt reaches a consumer.
func checkSection(key string, data []byte, n uint32) error {
	if len(data) != int(n) {
		return fmt.Errorf("%w: %s: read %d bytes of a %d-byte section", objtopic.ErrBadFile, key, len(data), n)
	}
	for len(data) > 0 {
		size, err := batch.Split(data)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", objtopic.ErrBadFile, key, err)
		}
		if _, err := batch.ValidateStored(data[:size]); err != nil {
			return fmt.Errorf("%w: %s: %v", objtopic.ErrBadFile, key, err)
		}
		data = data[size:]
	}
	return nil
}

// errReadFull stops a Read at the batch that would not fit.
var errReadFull = errors.New("objects: read is full")

// Read returns the batches of partition p from offset on, with their offsets set, up to
// maxBytes (at least one batch if first). Batches that end below offset are skipped; the
// first batch returned may start below it, as Kafka's do.
func (c *Cache) Read(ctx context.Context, p *objtopic.Partition, offset int64, maxBytes int, first bool) ([]byte, error) {
	return c.ReadBelow(ctx, p, offset, p.Next, maxBytes, first)
}

// ReadBelow is Read of the batches that start below upto (a read_committed fetch: the last
// stable offset, which is always a batch boundary).
func (c *Cache) ReadBelow(ctx context.Context, p *objtopic.Partition, offset, upto int64, maxBytes int, first bool) ([]byte, error) {
	return c.readBelow(ctx, p, offset, upto, maxBytes, first, false)
}

// FetchBelow is ReadBelow for a fetch, which may answer with less than maxBytes: once it has a
// batch, it waits for further sections only until fetchReadBudget after the read began, and then
// answers with what it has; the GETs go on for the next fetch. A fetch then waits for little more
// than one GET (its first section's), where one that waited for every section up to maxBytes
// could, with GETs of seconds, outlast the client's request timeout, every retry starting over:
// the consumer got nothing at all (the fifteenth round's slow S3). Kafka bounds a tiered fetch's
// remote read the same way (remote.fetch.max.wait.ms, 500 ms).
func (c *Cache) FetchBelow(ctx context.Context, p *objtopic.Partition, offset, upto int64, maxBytes int, first bool) ([]byte, error) {
	return c.readBelow(ctx, p, offset, upto, maxBytes, first, true)
}

// fetchReadBudget bounds how long a fetch's read (FetchBelow) with batches in hand waits for
// more sections, from when it began.
const fetchReadBudget = 500 * time.Millisecond

func (c *Cache) readBelow(ctx context.Context, p *objtopic.Partition, offset, upto int64, maxBytes int, first, short bool) ([]byte, error) {
	began := time.Now()
	var out []byte
	exts := p.Find(offset)
	if i := sort.Search(len(exts), func(i int) bool { return exts[i].Base >= upto }); i < len(exts) {
		exts = exts[:i]
	}
	need := readAheadOf(exts, maxBytes, first)
	c.prefetchSections(rangesOf(exts[:min(need, readAhead)]))
	for i, e := range exts {
		if len(out) >= maxBytes && (len(out) > 0 || !first) {
			return out, nil // no batch of e would fit: do not read it
		}
		if j := i + readAhead; j < need { // keep readAhead sections coming
			c.prefetch(exts[j].File, exts[j].Offset, exts[j].Length)
		}
		var data []byte
		var err error
		if short && len(out) > 0 && e.File != "" { // FetchBelow with batches in hand
			var ok bool
			if data, ok = c.cached(e.File, e.Offset, e.Length); !ok {
				wait := fetchReadBudget - time.Since(began)
				if wait <= 0 {
					c.prefetch(e.File, e.Offset, e.Length)
					return out, nil
				}
				wctx, cancel := context.WithTimeout(ctx, wait)
				data, err = c.section(wctx, e) // the GET goes on if the wait ends first
				cancel()
				if err != nil {
					return out, nil // what is in hand; the next fetch meets the error, if it lasts
				}
			}
		} else if data, err = c.section(ctx, e); err != nil {
			return nil, err
		}
		err = objtopic.EachBatch(e, data, func(b []byte, h batch.Header, base int64) error {
			if end := base + int64(h.LastOffsetDelta) + 1; end <= offset || end <= p.Start {
				return nil
			}
			if base >= upto {
				return errReadFull
			}
			if len(out)+len(b) > maxBytes && (len(out) > 0 || !first) {
				return errReadFull
			}
			at := len(out)
			out = append(out, b...)
			batch.SetBaseOffset(out[at:], base)
			batch.SetLeaderEpoch(out[at:], 0)
			return nil
		})
		if err == errReadFull {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// section returns an extent's section: kept inline in the image (a transaction marker), or
// read from the store through the cache.
func (c *Cache) section(ctx context.Context, e objtopic.Extent) ([]byte, error) {
	if e.File == "" {
		return e.Inline, nil
	}
	return c.Get(ctx, e.File, e.Offset, e.Length)
}

// PrefetchRead is a Read that Prefetch starts.
type PrefetchRead struct {
	Partition *objtopic.Partition
	Offset    int64
	MaxBytes  int
}

// Prefetch starts reading the first sections each Read (first: at least one batch) would need,
// without waiting: a fetch of many partitions reads them one after another, and their GETs
// then overlap; the partitions' sections in one file are read with one GET.
func (c *Cache) Prefetch(reads []PrefetchRead) {
	var secs []objRange
	for _, r := range reads {
		exts := r.Partition.Find(r.Offset)
		secs = append(secs, rangesOf(exts[:min(readAheadOf(exts, r.MaxBytes, true), readAhead)])...)
	}
	c.prefetchSections(secs)
}

// readAheadOf returns how many of exts a read of maxBytes may need: sections up to maxBytes in
// all, and the first one anyway if first.
func readAheadOf(exts []objtopic.Extent, maxBytes int, first bool) int {
	n, planned := 0, 0
	for _, e := range exts {
		if planned >= maxBytes && (n > 0 || !first) {
			break
		}
		planned += int(e.Length)
		n++
	}
	return n
}

// rangesOf returns the object ranges of exts' sections (inline sections have none).
func rangesOf(exts []objtopic.Extent) []objRange {
	out := make([]objRange, 0, len(exts))
	for _, e := range exts {
		if e.File != "" {
			out = append(out, objRange{key: e.File, off: e.Offset, n: e.Length})
		}
	}
	return out
}

// OffsetForTime returns the offset of the first record of p whose timestamp is at or after ts
// (-1 if none), and that record's timestamp.
func (c *Cache) OffsetForTime(ctx context.Context, p *objtopic.Partition, ts int64) (int64, int64, error) {
	for _, e := range p.Find(p.Start) {
		if e.MaxTimestamp < ts {
			continue
		}
		data, err := c.readExtent(ctx, p, e)
		if err != nil {
			return -1, -1, err
		}
		found, foundTs := int64(-1), int64(-1)
		err = eachRecord(data, func(off, t int64) bool {
			if off >= p.Start && t >= ts {
				found, foundTs = off, t
				return false
			}
			return true
		})
		if err != nil || found >= 0 {
			return found, foundTs, err
		}
	}
	return -1, -1, nil
}

// MaxTimestamp returns the offset and timestamp of p's record with the largest timestamp (the
// first of equals), or -1, -1 for an empty partition. Only records at or after the log start
// count: the extent with the largest MaxTimestamp may owe it to a record below the log start
// (the first extent may straddle it), so extents are read from the largest MaxTimestamp down
// until none left can hold a larger timestamp (or an equal one at a lower offset).
func (c *Cache) MaxTimestamp(ctx context.Context, p *objtopic.Partition) (int64, int64, error) {
	exts := slices.Clone(p.Find(p.Start))
	if len(exts) == 0 {
		return -1, -1, nil
	}
	slices.SortStableFunc(exts, func(a, b objtopic.Extent) int { return cmp.Compare(b.MaxTimestamp, a.MaxTimestamp) })
	found, foundTs := int64(-1), int64(-1)
	for _, e := range exts {
		if e.MaxTimestamp < foundTs || e.MaxTimestamp == foundTs && (found < 0 || e.Base > found) {
			break
		}
		data, err := c.readExtent(ctx, p, e)
		if err != nil {
			return -1, -1, err
		}
		err = eachRecord(data, func(off, t int64) bool {
			if off >= p.Start && (t > foundTs || t == foundTs && off < found) {
				found, foundTs = off, t
			}
			return true
		})
		if err != nil {
			return -1, -1, err
		}
	}
	return found, foundTs, nil
}

// readExtent reads the batches of one of p's extents (from the log start, if it lies inside).
func (c *Cache) readExtent(ctx context.Context, p *objtopic.Partition, e objtopic.Extent) ([]byte, error) {
	return c.Read(ctx, &objtopic.Partition{Start: p.Start, Next: p.Next, Extents: []objtopic.Extent{e}}, max(e.Base, p.Start), int(e.Length), true)
}

// eachRecord calls fn with each record's offset and timestamp until it returns false. A batch
// of a LogAppendTime topic keeps its records' create times; the broker's time, its max
// timestamp, is every record's.
func eachRecord(data []byte, fn func(offset, ts int64) bool) error {
	for len(data) > 0 {
		size, err := batch.Split(data)
		if err != nil {
			return err
		}
		h, err := batch.ParseHeader(data[:size])
		if err != nil {
			return err
		}
		appendTime := h.Attributes&batch.AttrLogAppendTime != 0
		stop := false
		err = batch.EachRecord(&h, data[:size], func(r *batch.Record) {
			ts := h.BaseTimestamp + r.TimestampDelta
			if appendTime {
				ts = h.MaxTimestamp
			}
			if !stop && !fn(h.BaseOffset+int64(r.OffsetDelta), ts) {
				stop = true
			}
		})
		if err != nil || stop {
			return err
		}
		data = data[size:]
	}
	return nil
}
