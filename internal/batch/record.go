package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record is one decoded record. Its slices alias the buffer it was read from.
type Record struct {
	Raw            []byte // the whole record, length prefix included
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil when the key is null
	Value          []byte // nil when the value is null (a tombstone)
	HeaderCount    int32
	Headers        []byte // the encoded headers

	nullHeaderKey int32 // 1 + the index of the first header with a null key; 0: none
}

var (
	errShort     = errors.New("record is cut off")
	errBadLength = errors.New("record has an impossible length")
	errTrailing  = errors.New("record length does not match its fields")
)

// RecordReader walks uncompressed records. Errors are sticky: after the first one Next returns
// false and Err reports it.
type RecordReader struct {
	b   []byte
	err error
}

// NewRecordReader reads the records in b (the part of a batch after its header, uncompressed).
func NewRecordReader(b []byte) *RecordReader { return &RecordReader{b: b} }

// Len is the number of bytes not yet read.
func (r *RecordReader) Len() int { return len(r.b) }

// Err is the first decoding error, if any.
func (r *RecordReader) Err() error { return r.err }

// Next decodes the next record into rec and reports whether there was one.
func (r *RecordReader) Next(rec *Record) bool {
	if r.err != nil || len(r.b) == 0 {
		return false
	}
	length, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return false
	}
	if length < 0 || length > int64(len(r.b)-n) {
		r.err = errBadLength
		return false
	}
	end := n + int(length)
	f := fieldReader{b: r.b[n:end]}
	rec.Raw = r.b[:end]
	rec.Attributes = int8(f.byte())
	rec.TimestampDelta = f.varint()
	rec.OffsetDelta = int32(f.varint())
	rec.Key = f.bytes()
	rec.Value = f.bytes()
	rec.HeaderCount = int32(f.varint())
	hstart := len(r.b[n:end]) - len(f.b)
	rec.nullHeaderKey = 0
	for i := int32(0); i < rec.HeaderCount && f.err == nil; i++ {
		if k := f.bytes(); k == nil && f.err == nil && rec.nullHeaderKey == 0 {
			rec.nullHeaderKey = i + 1
		}
		f.bytes() // header value
	}
	if f.err == nil && rec.HeaderCount < 0 {
		f.err = errBadLength
	}
	if f.err == nil && len(f.b) != 0 {
		f.err = errTrailing
	}
	if f.err != nil {
		r.err = f.err
		return false
	}
	rec.Headers = r.b[n+hstart : end]
	r.b = r.b[end:]
	return true
}

// checkHeaderKeys reports a header with a null key: a header key is a string, never null
// (Kafka's DefaultRecord refuses a negative header key size). Next found it while walking the
// headers.
func (rec *Record) checkHeaderKeys() error {
	if rec.nullHeaderKey != 0 {
		return fmt.Errorf("header %d has a null key", rec.nullHeaderKey-1)
	}
	return nil
}

// fieldReader decodes record fields with a sticky error: after a failure every read returns zero.
type fieldReader struct {
	b   []byte
	err error
}

func (f *fieldReader) byte() byte {
	if f.err != nil || len(f.b) == 0 {
		f.fail(errShort)
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *fieldReader) varint() int64 {
	if f.err != nil {
		return 0
	}
	v, n := binary.Varint(f.b)
	if n <= 0 {
		f.fail(errShort)
		return 0
	}
	f.b = f.b[n:]
	return v
}

// bytes reads a varint length and that many bytes; -1 is null.
func (f *fieldReader) bytes() []byte {
	l := f.varint()
	if f.err != nil || l == -1 {
		return nil
	}
	if l < -1 || l > int64(len(f.b)) {
		f.fail(errBadLength)
		return nil
	}
	v := f.b[:l:l]
	f.b = f.b[l:]
	return v
}

func (f *fieldReader) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// AppendRecord encodes a record with the given fields and appends it to dst. A nil key or value
// is encoded as null; headers are encoded key/value pairs (use AppendHeader) numbering
// headerCount.
func AppendRecord(dst []byte, timestampDelta int64, offsetDelta int32, key, value []byte, headerCount int32, headers []byte) []byte {
	n := 1 + varintLen(timestampDelta) + varintLen(int64(offsetDelta)) +
		bytesLen(key) + bytesLen(value) + varintLen(int64(headerCount)) + len(headers)
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, 0)
	dst = binary.AppendVarint(dst, timestampDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, value)
	dst = binary.AppendVarint(dst, int64(headerCount))
	return append(dst, headers...)
}

// AppendHeader encodes one record header and appends it to dst.
func AppendHeader(dst []byte, key string, value []byte) []byte {
	dst = binary.AppendVarint(dst, int64(len(key)))
	dst = append(dst, key...)
	return appendBytes(dst, value)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// AppendBatch encodes a batch around an already encoded (and, for a codec other than none,
// already compressed) records section and appends it to dst. h supplies every header field but
// Length, Magic and CRC, which are computed.
func AppendBatch(dst []byte, h Header, records []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	dst = append(dst, records...)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[lengthOffset:], uint32(len(b)-LengthFieldEnd))
	be.PutUint32(b[epochOffset:], uint32(h.LeaderEpoch))
	b[magicOffset] = 2
	be.PutUint16(b[attributesOffset:], uint16(h.Attributes))
	be.PutUint32(b[lastDeltaOffset:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[27:], uint64(h.BaseTimestamp))
	be.PutUint64(b[35:], uint64(h.MaxTimestamp))
	be.PutUint64(b[43:], uint64(h.ProducerID))
	be.PutUint16(b[51:], uint16(h.ProducerEpoch))
	be.PutUint32(b[53:], uint32(h.BaseSequence))
	be.PutUint32(b[recordCountOffset:], uint32(h.RecordCount))
	be.PutUint32(b[crcOffset:], crc32.Checksum(b[attributesOffset:], castagnoli))
	return dst
}

// EachRecord calls fn with every record of a stored batch b (decompressed if need be); rec is
// reused between calls. It returns the first decoding error.
func EachRecord(h *Header, b []byte, fn func(rec *Record)) error {
	recs, err := Records(h, b)
	if err != nil {
		return err
	}
	r := NewRecordReader(recs)
	var rec Record
	for r.Next(&rec) {
		fn(&rec)
	}
	return r.Err()
}

// EachHeader calls fn with every header of a record's encoded headers (count of them), and
// returns the first decoding error.
func EachHeader(headers []byte, count int32, fn func(key string, value []byte)) error {
	f := fieldReader{b: headers}
	for range count {
		k := f.bytes()
		v := f.bytes()
		if f.err != nil {
			return f.err
		}
		fn(string(k), v)
	}
	return nil
}
