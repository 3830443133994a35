// Package objtopic holds object-storage topics' pieces (docs/object-topics.md). This file is the
// object file format: one file per flush of a node's buffer, holding the record batches of many
// partitions, each partition's batches contiguous, with an index at the front.
//
//	header (32 bytes)
//	  0   4  magic "RNOF"
//	  4   1  version 2
//	  5   1  flags (0)
//	  6   2  reserved (0)
//	  8   4  writer node id (i32)
//	  12  8  writer incarnation (u64)
//	  20  8  created, unix ms (i64)
//	  28  4  partition count n (u32)
//	index (n entries of 64 bytes, ascending by topic id, partition)
//	  0   16 topic id
//	  16  4  partition (i32)
//	  20  8  section offset in the file (u64)
//	  28  4  section length (u32)
//	  32  4  batch count (u32)
//	  36  4  record count (u32)
//	  40  8  min timestamp (i64, of the batches' base timestamps)
//	  48  8  max timestamp (i64, of the batches' max timestamps)
//	  56  4  flags (u32): bit 0 lazy (the section's batches were acknowledged once the file
//	         was written, before their commit; the slow path must commit it); others 0
//	  60  4  reserved (0)
//	crc32c (4 bytes, big-endian) of header and index
//	sections: each partition's Kafka v2 record batches, in the index's order, back to back
//
// All integers are big-endian. The batches are stored as producers sent them (base offset 0);
// the controller assigns offsets when the file is committed.
package objtopic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/runnel-dev/runnel/internal/batch"
)

const (
	fileMagic   = "RNOF"
	fileVersion = 2 // version 1 (56-byte entries without flags) was never released
	headerSize  = 32
	entrySize   = 64
	crcSize     = 4
	// MaxPartitionsPerFile bounds a file's index (a reader allocates for it).
	MaxPartitionsPerFile = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadFile is wrapped by every error of a malformed file.
var ErrBadFile = errors.New("objtopic: bad object file")

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadFile, fmt.Sprintf(format, args...))
}

// FileHeader is a file's header and index.
type FileHeader struct {
	Writer      int32
	Incarnation uint64
	CreatedMs   int64
	Index       []IndexEntry
}

// IndexEntry locates one partition's section.
type IndexEntry struct {
	TopicID      [16]byte
	Partition    int32
	Offset       uint64 // of the section, from the file's start
	Length       uint32
	Batches      uint32
	Records      uint32
	MinTimestamp int64
	MaxTimestamp int64
	Flags        uint32 // SectionLazy
}

// SectionLazy marks a section whose batches were acknowledged once the file was written, before
// the file's commit: it must be committed (by the writer, or else by the slow path).
const SectionLazy uint32 = 1

// Section is one partition's batches, for Build.
type Section struct {
	TopicID   [16]byte
	Partition int32
	Batches   [][]byte // whole v2 batches, each already validated
	Lazy      bool     // acknowledged at the file's write (SectionLazy)
}

func compareTP(aID [16]byte, aP int32, bID [16]byte, bP int32) int {
	if c := bytes.Compare(aID[:], bID[:]); c != 0 {
		return c
	}
	return int(aP) - int(bP)
}

// Build lays out a file: the sections sorted by (topic id, partition), which must be distinct
// and non-empty. It returns the file and its index.
func Build(writer int32, incarnation uint64, createdMs int64, sections []Section) ([]byte, []IndexEntry, error) {
	if len(sections) == 0 || len(sections) > MaxPartitionsPerFile {
		return nil, nil, fmt.Errorf("objtopic: a file holds 1 to %d partitions, not %d", MaxPartitionsPerFile, len(sections))
	}
	sorted := slices.Clone(sections)
	slices.SortFunc(sorted, func(a, b Section) int { return compareTP(a.TopicID, a.Partition, b.TopicID, b.Partition) })
	index := make([]IndexEntry, len(sorted))
	off := uint64(headerSize + entrySize*len(sorted) + crcSize)
	for i, s := range sorted {
		if i > 0 && compareTP(sorted[i-1].TopicID, sorted[i-1].Partition, s.TopicID, s.Partition) == 0 {
			return nil, nil, fmt.Errorf("objtopic: partition %x/%d twice in a file", s.TopicID, s.Partition)
		}
		if len(s.Batches) == 0 {
			return nil, nil, fmt.Errorf("objtopic: partition %x/%d has no batches", s.TopicID, s.Partition)
		}
		e := IndexEntry{TopicID: s.TopicID, Partition: s.Partition, Offset: off, MinTimestamp: math.MaxInt64, MaxTimestamp: math.MinInt64}
		if s.Lazy {
			e.Flags = SectionLazy
		}
		var length uint64
		for _, b := range s.Batches {
			h, err := batch.ParseHeader(b)
			if err != nil {
				return nil, nil, fmt.Errorf("objtopic: partition %x/%d: %w", s.TopicID, s.Partition, err)
			}
			if h.Size() != len(b) {
				return nil, nil, fmt.Errorf("objtopic: partition %x/%d: a batch of %d bytes says %d", s.TopicID, s.Partition, len(b), h.Size())
			}
			length += uint64(len(b))
			e.Batches++
			e.Records += uint32(h.RecordCount)
			e.MinTimestamp, e.MaxTimestamp = min(e.MinTimestamp, h.FirstTimestamp()), max(e.MaxTimestamp, h.MaxTimestamp)
		}
		if length > math.MaxUint32 {
			return nil, nil, fmt.Errorf("objtopic: partition %x/%d: %d bytes in one file", s.TopicID, s.Partition, length)
		}
		e.Length = uint32(length)
		off += length
		index[i] = e
	}
	out := make([]byte, 0, off)
	out = appendHeader(out, writer, incarnation, createdMs, index)
	for _, s := range sorted {
		for _, b := range s.Batches {
			out = append(out, b...)
		}
	}
	return out, index, nil
}

func appendHeader(dst []byte, writer int32, incarnation uint64, createdMs int64, index []IndexEntry) []byte {
	start := len(dst)
	be := binary.BigEndian
	dst = append(dst, fileMagic...)
	dst = append(dst, fileVersion, 0, 0, 0)
	dst = be.AppendUint32(dst, uint32(writer))
	dst = be.AppendUint64(dst, incarnation)
	dst = be.AppendUint64(dst, uint64(createdMs))
	dst = be.AppendUint32(dst, uint32(len(index)))
	for _, e := range index {
		dst = append(dst, e.TopicID[:]...)
		dst = be.AppendUint32(dst, uint32(e.Partition))
		dst = be.AppendUint64(dst, e.Offset)
		dst = be.AppendUint32(dst, e.Length)
		dst = be.AppendUint32(dst, e.Batches)
		dst = be.AppendUint32(dst, e.Records)
		dst = be.AppendUint64(dst, uint64(e.MinTimestamp))
		dst = be.AppendUint64(dst, uint64(e.MaxTimestamp))
		dst = be.AppendUint32(dst, e.Flags)
		dst = be.AppendUint32(dst, 0)
	}
	return be.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// HeaderLen returns the length of the header, index and checksum of a file whose first 32 bytes
// are b: what a reader fetches to read the index.
func HeaderLen(b []byte) (int, error) {
	if len(b) < headerSize {
		return 0, bad("%d bytes; the header has %d", len(b), headerSize)
	}
	if string(b[:4]) != fileMagic {
		return 0, bad("magic %q", b[:4])
	}
	if b[4] != fileVersion {
		return 0, bad("version %d", b[4])
	}
	n := binary.BigEndian.Uint32(b[28:])
	if n == 0 || n > MaxPartitionsPerFile {
		return 0, bad("%d partitions", n)
	}
	return headerSize + entrySize*int(n) + crcSize, nil
}

// ParseHeader reads a file's header and index from its first bytes (at least HeaderLen of them;
// fileSize, if known (>= 0), bounds the sections).
func ParseHeader(b []byte, fileSize int64) (FileHeader, error) {
	hl, err := HeaderLen(b)
	if err != nil {
		return FileHeader{}, err
	}
	if len(b) < hl {
		return FileHeader{}, bad("%d bytes; the header and index have %d", len(b), hl)
	}
	be := binary.BigEndian
	if got, want := crc32.Checksum(b[:hl-crcSize], castagnoli), be.Uint32(b[hl-crcSize:]); got != want {
		return FileHeader{}, bad("header checksum %08x, stored %08x", got, want)
	}
	if b[5] != 0 || be.Uint16(b[6:]) != 0 {
		return FileHeader{}, bad("flags %d, reserved %d", b[5], be.Uint16(b[6:]))
	}
	h := FileHeader{Writer: int32(be.Uint32(b[8:])), Incarnation: be.Uint64(b[12:]), CreatedMs: int64(be.Uint64(b[20:]))}
	n := int(be.Uint32(b[28:]))
	h.Index = make([]IndexEntry, n)
	next := uint64(hl)
	for i := range n {
		p := b[headerSize+entrySize*i:]
		e := &h.Index[i]
		copy(e.TopicID[:], p)
		e.Partition = int32(be.Uint32(p[16:]))
		e.Offset, e.Length = be.Uint64(p[20:]), be.Uint32(p[28:])
		e.Batches, e.Records = be.Uint32(p[32:]), be.Uint32(p[36:])
		e.MinTimestamp, e.MaxTimestamp = int64(be.Uint64(p[40:])), int64(be.Uint64(p[48:]))
		e.Flags = be.Uint32(p[56:])
		switch {
		case e.Flags&^SectionLazy != 0 || be.Uint32(p[60:]) != 0:
			return FileHeader{}, bad("section %d: flags %#x, reserved %#x", i, e.Flags, be.Uint32(p[60:]))
		case i > 0 && compareTP(h.Index[i-1].TopicID, h.Index[i-1].Partition, e.TopicID, e.Partition) >= 0:
			return FileHeader{}, bad("index entry %d is not after entry %d", i, i-1)
		case e.Offset != next:
			return FileHeader{}, bad("section %d at %d; want %d (back to back)", i, e.Offset, next)
		case e.Length < batch.HeaderSize || e.Batches == 0:
			return FileHeader{}, bad("section %d: %d bytes, %d batches", i, e.Length, e.Batches)
		case e.MinTimestamp > e.MaxTimestamp:
			return FileHeader{}, bad("section %d: timestamps %d > %d", i, e.MinTimestamp, e.MaxTimestamp)
		}
		next += uint64(e.Length)
	}
	if fileSize >= 0 && next != uint64(fileSize) {
		return FileHeader{}, bad("sections end at %d, the file at %d", next, fileSize)
	}
	return h, nil
}

// SectionBatches splits a section's bytes (read with a ranged GET of the entry's range) into its
// batches, checking each (CRC included) and the counts and timestamps the index gives.
func SectionBatches(e IndexEntry, section []byte) ([][]byte, error) {
	if uint64(len(section)) != uint64(e.Length) {
		return nil, bad("section of %x/%d: %d bytes, the index says %d", e.TopicID, e.Partition, len(section), e.Length)
	}
	var out [][]byte
	var records uint32
	minTs, maxTs := int64(math.MaxInt64), int64(math.MinInt64)
	for len(section) > 0 {
		n, err := batch.Split(section)
		if err != nil {
			return nil, fmt.Errorf("%w: section of %x/%d: %v", ErrBadFile, e.TopicID, e.Partition, err)
		}
		h, err := batch.ValidateStored(section[:n])
		if err != nil {
			return nil, fmt.Errorf("%w: section of %x/%d: %v", ErrBadFile, e.TopicID, e.Partition, err)
		}
		records += uint32(h.RecordCount)
		minTs, maxTs = min(minTs, h.FirstTimestamp()), max(maxTs, h.MaxTimestamp)
		out = append(out, section[:n])
		section = section[n:]
	}
	if uint32(len(out)) != e.Batches || records != e.Records || minTs != e.MinTimestamp || maxTs != e.MaxTimestamp {
		return nil, bad("section of %x/%d: %d batches, %d records, timestamps %d-%d; the index says %d, %d, %d-%d", e.TopicID, e.Partition,
			len(out), records, minTs, maxTs, e.Batches, e.Records, e.MinTimestamp, e.MaxTimestamp)
	}
	return out, nil
}
