package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
)

// A snapshot is a partition's producer state as of an offset: every batch below the offset is
// in it, none at or above. All integers are big-endian.
//
//	magic      [4]byte  "RNPS"
//	version    uint8    2 (1 is read: it lacks the three transaction fields)
//	offset     int64    the state covers the log below this offset
//	count      uint32   producers that follow
//	count times, by ascending id:
//	  id               int64
//	  epoch            int16
//	  lastTimestamp    int64
//	  txnFirstOffset   int64   (v2) first offset of the open transaction, -1: none
//	  txnLeaderEpoch   int32   (v2)
//	  txnEpoch         int16   (v2) the producer epoch of the open transaction's records
//	  coordinatorEpoch int32   (v2) of the last marker, -1: none
//	  batches          uint8   at most MaxBatches, oldest first:
//	    firstSeq int32 | lastSeq int32 | firstOffset int64 | lastOffset int64 | maxTimestamp int64
//	crc        uint32   CRC-32C of everything before it

const (
	snapshotMagic   = "RNPS"
	snapshotVersion = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot is returned for a snapshot that is cut off, corrupt or of an unknown version.
var ErrBadSnapshot = errors.New("txn: bad producer state snapshot")

// AppendSnapshot appends the snapshot of s as of offset to dst and returns the result.
func (s *Partition) AppendSnapshot(dst []byte, offset int64) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic...)
	dst = append(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	producers := s.Producers()
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(producers)))
	for _, p := range producers {
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.ID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(p.Epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.LastTimestamp))
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.TxnFirstOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.TxnLeaderEpoch))
		dst = binary.BigEndian.AppendUint16(dst, uint16(p.TxnEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.CoordinatorEpoch))
		dst = append(dst, byte(len(p.Batches)))
		for _, m := range p.Batches {
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.FirstSeq))
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.LastSeq))
			dst = binary.BigEndian.AppendUint64(dst, uint64(m.FirstOffset))
			dst = binary.BigEndian.AppendUint64(dst, uint64(m.LastOffset))
			dst = binary.BigEndian.AppendUint64(dst, uint64(m.MaxTimestamp))
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// ParseSnapshot decodes a snapshot. The state it returns does not alias b.
func ParseSnapshot(b []byte) (offset int64, s *Partition, err error) {
	if len(b) < len(snapshotMagic)+1+8+4+4 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, nil, fmt.Errorf("%w: crc mismatch", ErrBadSnapshot)
	}
	r := kbin.Reader{Src: body}
	magic, version := string(r.Span(len(snapshotMagic))), r.Int8()
	if magic != snapshotMagic || version < 1 || version > snapshotVersion {
		return 0, nil, fmt.Errorf("%w: magic %q version %d", ErrBadSnapshot, magic, version)
	}
	offset = r.Int64()
	count := r.Uint32()
	minSize := uint64(19) // each producer takes at least this many bytes
	if version >= 2 {
		minSize += 18
	}
	if uint64(count) > uint64(len(r.Src))/minSize {
		return 0, nil, fmt.Errorf("%w: %d producers in %d bytes", ErrBadSnapshot, count, len(r.Src))
	}
	s = NewPartition()
	prev := int64(-1)
	for range count {
		p := newProducer(r.Int64(), r.Int16())
		p.LastTimestamp = r.Int64()
		if version >= 2 {
			p.TxnFirstOffset, p.TxnLeaderEpoch, p.TxnEpoch, p.CoordinatorEpoch = r.Int64(), r.Int32(), r.Int16(), r.Int32()
			if p.TxnFirstOffset < -1 {
				return 0, nil, fmt.Errorf("%w: producer %d has transaction offset %d", ErrBadSnapshot, p.ID, p.TxnFirstOffset)
			}
		}
		n := int(uint8(r.Int8()))
		if n > MaxBatches {
			return 0, nil, fmt.Errorf("%w: producer %d has %d batches", ErrBadSnapshot, p.ID, n)
		}
		for range n {
			p.Batches = append(p.Batches, BatchMeta{FirstSeq: r.Int32(), LastSeq: r.Int32(),
				FirstOffset: r.Int64(), LastOffset: r.Int64(), MaxTimestamp: r.Int64()})
		}
		if p.ID <= prev { // ascending, as written: one encoding per state
			return 0, nil, fmt.Errorf("%w: producer id %d after %d", ErrBadSnapshot, p.ID, prev)
		}
		prev = p.ID
		s.producers[p.ID] = p
		if p.TxnFirstOffset >= 0 {
			s.open[p.ID] = p.TxnFirstOffset
		}
	}
	if err := r.Complete(); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if len(r.Src) != 0 {
		return 0, nil, fmt.Errorf("%w: %d bytes after the last producer", ErrBadSnapshot, len(r.Src))
	}
	if offset < 0 {
		return 0, nil, fmt.Errorf("%w: offset %d", ErrBadSnapshot, offset)
	}
	return offset, s, nil
}
