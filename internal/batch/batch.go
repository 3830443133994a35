// Package batch reads, checks and builds Kafka record batches in message format v2 ("magic 2"),
// in the byte layout clients send and the log stores: nothing is re-encoded on the append path.
//
// A batch, big endian:
//
//	offset size field
//	 0      8   baseOffset            assigned by the log; outside the CRC
//	 8      4   batchLength           bytes after this field (total size - 12)
//	12      4   partitionLeaderEpoch  set by the leader; outside the CRC
//	16      1   magic                 2
//	17      4   crc                   CRC-32C (Castagnoli) of bytes 21..end
//	21      2   attributes            bits 0-2 compression, 3 timestamp type,
//	                                  4 transactional, 5 control, 6 delete horizon
//	23      4   lastOffsetDelta
//	27      8   baseTimestamp
//	35      8   maxTimestamp
//	43      8   producerId
//	51      2   producerEpoch
//	53      4   baseSequence
//	57      4   recordCount
//	61      -   records (compressed as a whole when the codec is not none)
//
// A record, with zigzag varints (v) as in protobuf:
//
//	length v, attributes int8, timestampDelta v64, offsetDelta v, keyLength v, key,
//	valueLength v, value, headerCount v, headers (keyLength v, key, valueLength v, value)...
//
// A length of -1 means null.
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// HeaderSize is the size of the fixed batch header; records start here.
const HeaderSize = 61

// lengthOffset etc. are byte positions of header fields.
const (
	lengthOffset      = 8
	epochOffset       = 12
	magicOffset       = 16
	crcOffset         = 17
	attributesOffset  = 21
	lastDeltaOffset   = 23
	recordCountOffset = 57
	// LengthFieldEnd is the size of baseOffset plus batchLength: a batch is
	// LengthFieldEnd+batchLength bytes long.
	LengthFieldEnd = 12
)

// Attribute bits.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	AttrDeleteHorizon   = 0x40
)

// Codec is the compression of a batch's records.
type Codec int8

// Codecs as numbered by Kafka.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLz4
	CodecZstd
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLz4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every *CorruptError: errors.Is(err, batch.ErrCorrupt).
var ErrCorrupt = errors.New("batch: corrupt")

// CorruptError names the check a batch failed.
type CorruptError struct {
	Check  string // "length", "magic", "crc", "compression", "record count", "last offset delta", "records"
	Detail string
}

func (e *CorruptError) Error() string { return "batch: corrupt: " + e.Check + ": " + e.Detail }

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(check, format string, args ...any) error {
	return &CorruptError{Check: check, Detail: fmt.Sprintf(format, args...)}
}

// Header is the decoded fixed part of a batch.
type Header struct {
	BaseOffset      int64
	Length          int32 // batchLength: bytes after the length field
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the batch's total size in bytes.
func (h *Header) Size() int { return LengthFieldEnd + int(h.Length) }

// LastOffset is the offset of the batch's last record (its last offset delta, even if
// compaction removed that record).
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset just past the batch.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the batch's compression codec.
func (h *Header) Codec() Codec { return Codec(h.Attributes & AttrCompressionMask) }

// IsTransactional reports whether the batch belongs to a transaction.
func (h *Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// FirstIsTransactional reports whether data starts with a v2 batch marked transactional, read
// from its header's bytes alone (nothing is checked: a request is scanned before its batches
// are, as Kafka's ProduceRequest finds its transactional records).
func FirstIsTransactional(data []byte) bool {
	return len(data) >= attributesOffset+2 && data[magicOffset] == 2 &&
		binary.BigEndian.Uint16(data[attributesOffset:])&AttrTransactional != 0
}

// IsControl reports whether the batch is a control batch (transaction marker).
func (h *Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// ParseHeader decodes the fixed header at the start of b. It checks only that b is long enough
// for the header; it does not check the length field, the magic or the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, corrupt("length", "%d bytes is shorter than the %d-byte batch header", len(b), HeaderSize)
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:      int64(be.Uint64(b[0:])),
		Length:          int32(be.Uint32(b[lengthOffset:])),
		LeaderEpoch:     int32(be.Uint32(b[epochOffset:])),
		Magic:           int8(b[magicOffset]),
		CRC:             be.Uint32(b[crcOffset:]),
		Attributes:      int16(be.Uint16(b[attributesOffset:])),
		LastOffsetDelta: int32(be.Uint32(b[lastDeltaOffset:])),
		BaseTimestamp:   int64(be.Uint64(b[27:])),
		MaxTimestamp:    int64(be.Uint64(b[35:])),
		ProducerID:      int64(be.Uint64(b[43:])),
		ProducerEpoch:   int16(be.Uint16(b[51:])),
		BaseSequence:    int32(be.Uint32(b[53:])),
		RecordCount:     int32(be.Uint32(b[recordCountOffset:])),
	}, nil
}

// Validate checks b as a batch sent by a producer: b must hold exactly one batch, with magic 2,
// a consistent length, a correct CRC, a known codec, at least one record, and
// lastOffsetDelta == recordCount-1. The records are walked (decompressed first, as Kafka does):
// their count, offset deltas 0..n-1 and lengths must match the header exactly. The error names
// the failed check. A CreateTime batch whose header's maxTimestamp is not its records' latest
// timestamp (a client's error) is corrected in b, its CRC written again, as Kafka's
// LogValidator sets it: the time index, retention by time and ListOffsets read it.
func Validate(b []byte) (Header, error) {
	h, err := check(b, true)
	if err != nil {
		return h, err
	}
	recs, err := Records(&h, b)
	if err != nil {
		return h, err
	}
	maxDelta, err := checkRecords(recs, h.RecordCount)
	if err != nil {
		return h, err
	}
	if h.Attributes&AttrLogAppendTime == 0 && h.BaseTimestamp+maxDelta != h.MaxTimestamp {
		h.MaxTimestamp = h.BaseTimestamp + maxDelta
		h.CRC = setMaxTimestamp(b, h.MaxTimestamp)
	}
	return h, nil
}

// Check is Validate without walking the records: the header, the length and the CRC.
func Check(b []byte) (Header, error) { return check(b, true) }

// ValidateStored checks b as a batch read back from a log: the same as Validate, except that
// compaction may have removed records, so recordCount may be below lastOffsetDelta+1 (and 0),
// and the records are not walked.
func ValidateStored(b []byte) (Header, error) { return check(b, false) }

func check(b []byte, strict bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, corrupt("magic", "magic byte is %d; only 2 is supported", h.Magic)
	}
	if h.Length < HeaderSize-LengthFieldEnd || h.Size() != len(b) {
		return h, corrupt("length", "batch length field says %d bytes, the batch has %d", h.Length, len(b)-LengthFieldEnd)
	}
	if got := crc32.Checksum(b[attributesOffset:], castagnoli); got != h.CRC {
		return h, corrupt("crc", "CRC-32C is %#08x; the header says %#08x", got, h.CRC)
	}
	if h.Codec() > CodecZstd {
		return h, corrupt("compression", "unknown compression codec %d", h.Codec())
	}
	if h.RecordCount < 0 || (strict && h.RecordCount == 0) {
		return h, corrupt("record count", "record count %d", h.RecordCount)
	}
	if h.LastOffsetDelta < 0 && !(h.LastOffsetDelta == -1 && h.RecordCount == 0) {
		return h, corrupt("last offset delta", "last offset delta %d is negative", h.LastOffsetDelta)
	}
	if strict && h.LastOffsetDelta != h.RecordCount-1 {
		return h, corrupt("last offset delta", "last offset delta %d with %d records; want %d", h.LastOffsetDelta, h.RecordCount, h.RecordCount-1)
	}
	if !strict && h.LastOffsetDelta < h.RecordCount-1 {
		return h, corrupt("last offset delta", "last offset delta %d is below record count %d - 1", h.LastOffsetDelta, h.RecordCount)
	}
	return h, nil
}

// checkRecords walks uncompressed records: exactly count records that fill b, with offset
// deltas 0, 1, ..., count-1. It returns the largest timestamp delta.
func checkRecords(b []byte, count int32) (int64, error) {
	r := RecordReader{b: b}
	var rec Record
	maxDelta := int64(math.MinInt64)
	for i := int32(0); i < count; i++ {
		if !r.Next(&rec) {
			if r.Err() != nil {
				return 0, corrupt("records", "record %d: %v", i, r.Err())
			}
			return 0, corrupt("record count", "header says %d records, found %d", count, i)
		}
		if rec.OffsetDelta != i {
			return 0, corrupt("records", "record %d has offset delta %d", i, rec.OffsetDelta)
		}
		if err := rec.checkHeaderKeys(); err != nil {
			return 0, corrupt("records", "record %d: %v", i, err)
		}
		maxDelta = max(maxDelta, rec.TimestampDelta)
	}
	if r.Len() != 0 {
		return 0, corrupt("record count", "%d bytes follow the %d records the header counts", r.Len(), count)
	}
	return maxDelta, nil
}

// SetBaseOffset writes the base offset into a batch. The field is outside the CRC.
func SetBaseOffset(b []byte, offset int64) { binary.BigEndian.PutUint64(b, uint64(offset)) }

// SetLeaderEpoch writes partitionLeaderEpoch into a batch. The field is outside the CRC.
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[epochOffset:], uint32(epoch))
}

// Split returns the size of the first batch in b, reading only its length field, or an error if
// b is too short to hold the header, the length is impossible, or the batch is cut off.
func Split(b []byte) (int, error) {
	if len(b) < HeaderSize {
		return 0, corrupt("length", "%d bytes left; a batch needs at least %d", len(b), HeaderSize)
	}
	n := int(int32(binary.BigEndian.Uint32(b[lengthOffset:])))
	if n < HeaderSize-LengthFieldEnd {
		return 0, corrupt("length", "batch length field %d is below the minimum %d", n, HeaderSize-LengthFieldEnd)
	}
	if LengthFieldEnd+n > len(b) {
		return 0, corrupt("length", "batch of %d bytes is cut off at %d", LengthFieldEnd+n, len(b))
	}
	return LengthFieldEnd + n, nil
}

// SetLogAppendTime stamps a batch with the broker's append time (message.timestamp.type
// LogAppendTime): it sets the timestamp-type attribute and maxTimestamp, and rewrites the CRC,
// which covers both.
func SetLogAppendTime(b []byte, ms int64) {
	be := binary.BigEndian
	be.PutUint16(b[attributesOffset:], be.Uint16(b[attributesOffset:])|AttrLogAppendTime)
	setMaxTimestamp(b, ms)
}

// setMaxTimestamp writes a batch's maxTimestamp and then its CRC, which covers it; it returns
// the CRC.
func setMaxTimestamp(b []byte, ms int64) uint32 {
	binary.BigEndian.PutUint64(b[35:], uint64(ms))
	crc := crc32.Checksum(b[attributesOffset:], castagnoli)
	binary.BigEndian.PutUint32(b[crcOffset:], crc)
	return crc
}
