package logstore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sort"
)

// indexEntry maps a batch's base offset (relative to the segment base) to its byte position.
type indexEntry struct {
	relOffset uint32
	position  uint32
}

// timeEntry records that every batch up to relOffset has a max timestamp <= timestamp, and that
// the batch at relOffset is the first to reach it.
type timeEntry struct {
	timestamp int64
	relOffset uint32
}

// segmentIndex is a segment's sparse offset index and time index, in memory. Entries are
// ascending in offset, position and timestamp, so every lookup is a binary search.
type segmentIndex struct {
	offsets []indexEntry
	times   []timeEntry
}

// floorByOffset returns the position of the last indexed batch whose base offset is <= rel (0
// when there is none), and whether that batch starts exactly at rel.
func (x *segmentIndex) floorByOffset(rel uint32) (uint32, bool) {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].relOffset > rel })
	if i == 0 {
		return 0, false
	}
	return x.offsets[i-1].position, x.offsets[i-1].relOffset == rel
}

// floorByPosition returns the last indexed batch position that is <= pos, or 0.
func (x *segmentIndex) floorByPosition(pos uint32) uint32 {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].position > pos })
	if i == 0 {
		return 0
	}
	return x.offsets[i-1].position
}

// floorByTime returns the relative offset to start a timestamp search at: that of the last time
// entry whose timestamp is < ts (no batch before it reaches ts), or 0.
func (x *segmentIndex) floorByTime(ts int64) uint32 {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].timestamp >= ts })
	if i == 0 {
		return 0
	}
	return x.times[i-1].relOffset
}

// Index files. Both open with the same 56-byte header, then their entries:
//
//	offset size field
//	 0      4   magic: "RNIX" (offset index) or "RNTX" (time index)
//	 4      8   segment base offset
//	12      8   log file size the index describes; a different size means the index is stale
//	20      8   next offset: the offset just past the segment's offsets
//	28      8   max timestamp of the segment's batches (-1 when none)
//	36      8   cleanedAt: unix ms the segment was first compacted, 0 if never
//	44      4   entry count
//	48      4   reserved, zero
//	52      4   CRC-32C of bytes 0..51 and of all entries
//	56      -   entries: offset index 8 bytes each (relOffset uint32, position uint32);
//	            time index 12 bytes each (timestamp int64, relOffset uint32)
//
// Index files are written whole when a segment is sealed, and are never trusted without their
// CRC and a matching log size: recovery rebuilds any that fail either.
const (
	indexHeaderSize = 56
	offsetMagic     = "RNIX"
	timeMagic       = "RNTX"
)

var errBadIndex = errors.New("logstore: index file is invalid")

// indexMeta is the segment metadata carried in index headers.
type indexMeta struct {
	base         int64
	logSize      int64
	next         int64
	maxTimestamp int64
	cleanedAt    int64
}

func appendIndexHeader(dst []byte, magic string, m indexMeta, count int) []byte {
	var h [indexHeaderSize]byte
	copy(h[:4], magic)
	be := binary.BigEndian
	be.PutUint64(h[4:], uint64(m.base))
	be.PutUint64(h[12:], uint64(m.logSize))
	be.PutUint64(h[20:], uint64(m.next))
	be.PutUint64(h[28:], uint64(m.maxTimestamp))
	be.PutUint64(h[36:], uint64(m.cleanedAt))
	be.PutUint32(h[44:], uint32(count))
	return append(dst, h[:]...)
}

// sealCRC writes the CRC into an encoded index file.
func sealCRC(b []byte) []byte {
	crc := crc32.Update(crc32.Checksum(b[:52], castagnoli), castagnoli, b[indexHeaderSize:])
	binary.BigEndian.PutUint32(b[52:], crc)
	return b
}

func encodeOffsetIndex(m indexMeta, entries []indexEntry) []byte {
	b := appendIndexHeader(make([]byte, 0, indexHeaderSize+8*len(entries)), offsetMagic, m, len(entries))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, e.relOffset)
		b = binary.BigEndian.AppendUint32(b, e.position)
	}
	return sealCRC(b)
}

func encodeTimeIndex(m indexMeta, entries []timeEntry) []byte {
	b := appendIndexHeader(make([]byte, 0, indexHeaderSize+12*len(entries)), timeMagic, m, len(entries))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.timestamp))
		b = binary.BigEndian.AppendUint32(b, e.relOffset)
	}
	return sealCRC(b)
}

// decodeIndexHeader checks magic, size and CRC and returns the metadata and the entry bytes.
func decodeIndexHeader(b []byte, magic string, entrySize int) (indexMeta, []byte, error) {
	if len(b) < indexHeaderSize || string(b[:4]) != magic {
		return indexMeta{}, nil, errBadIndex
	}
	be := binary.BigEndian
	count := int(be.Uint32(b[44:]))
	if len(b) != indexHeaderSize+count*entrySize {
		return indexMeta{}, nil, errBadIndex
	}
	crc := crc32.Update(crc32.Checksum(b[:52], castagnoli), castagnoli, b[indexHeaderSize:])
	if crc != be.Uint32(b[52:]) {
		return indexMeta{}, nil, errBadIndex
	}
	m := indexMeta{
		base:         int64(be.Uint64(b[4:])),
		logSize:      int64(be.Uint64(b[12:])),
		next:         int64(be.Uint64(b[20:])),
		maxTimestamp: int64(be.Uint64(b[28:])),
		cleanedAt:    int64(be.Uint64(b[36:])),
	}
	return m, b[indexHeaderSize:], nil
}

func decodeOffsetIndex(b []byte) (indexMeta, []indexEntry, error) {
	m, raw, err := decodeIndexHeader(b, offsetMagic, 8)
	if err != nil {
		return m, nil, err
	}
	entries := make([]indexEntry, len(raw)/8)
	for i := range entries {
		entries[i] = indexEntry{binary.BigEndian.Uint32(raw[8*i:]), binary.BigEndian.Uint32(raw[8*i+4:])}
		if i > 0 && (entries[i].relOffset <= entries[i-1].relOffset || entries[i].position <= entries[i-1].position) {
			return m, nil, errBadIndex
		}
	}
	return m, entries, nil
}

func decodeTimeIndex(b []byte) (indexMeta, []timeEntry, error) {
	m, raw, err := decodeIndexHeader(b, timeMagic, 12)
	if err != nil {
		return m, nil, err
	}
	entries := make([]timeEntry, len(raw)/12)
	for i := range entries {
		entries[i] = timeEntry{int64(binary.BigEndian.Uint64(raw[12*i:])), binary.BigEndian.Uint32(raw[12*i+8:])}
		if i > 0 && (entries[i].timestamp <= entries[i-1].timestamp || entries[i].relOffset < entries[i-1].relOffset) {
			return m, nil, errBadIndex
		}
	}
	return m, entries, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
