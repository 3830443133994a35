package logstore

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// sealed makes the fuzzer's bytes a file whose checksum holds (over everything but the
// checksum's own 4 bytes at 52), so that the decoders' checks past it are reached.
func sealed(b []byte) []byte {
	if len(b) < indexHeaderSize {
		return b
	}
	return sealCRC(slices.Clone(b))
}

// FuzzDecodeIndexes: an offset or time index file either fails to decode or holds ascending
// entries that survive an encoding round trip (the header's 4 reserved bytes are not read); a
// checkpoint file either fails to decode or encodes back to its bytes.
func FuzzDecodeIndexes(f *testing.F) {
	m := indexMeta{base: 100, logSize: 4096, next: 140, maxTimestamp: 7, cleanedAt: -1}
	f.Add(encodeOffsetIndex(m, []indexEntry{{1, 0}, {5, 512}, {9, 1024}}))
	f.Add(encodeTimeIndex(m, []timeEntry{{5, 1}, {7, 9}}))
	f.Add(encodeOffsetIndex(indexMeta{}, nil))
	f.Add(checkpoint{logStart: 3, firstDirty: 9}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		file := sealed(b)
		if meta, entries, err := decodeOffsetIndex(file); err == nil {
			for i := 1; i < len(entries); i++ {
				if entries[i].relOffset <= entries[i-1].relOffset || entries[i].position <= entries[i-1].position {
					t.Fatalf("offset index entries %d and %d do not ascend", i-1, i)
				}
			}
			m2, e2, err := decodeOffsetIndex(encodeOffsetIndex(meta, entries))
			if err != nil || m2 != meta || !slices.Equal(e2, entries) {
				t.Fatalf("offset index does not survive an encoding round trip: %v", err)
			}
		}
		if meta, entries, err := decodeTimeIndex(file); err == nil {
			for i := 1; i < len(entries); i++ {
				if entries[i].timestamp <= entries[i-1].timestamp || entries[i].relOffset < entries[i-1].relOffset {
					t.Fatalf("time index entries %d and %d do not ascend", i-1, i)
				}
			}
			m2, e2, err := decodeTimeIndex(encodeTimeIndex(meta, entries))
			if err != nil || m2 != meta || !slices.Equal(e2, entries) {
				t.Fatalf("time index does not survive an encoding round trip: %v", err)
			}
		}
		cp := b
		if len(cp) == checkpointSize {
			cp = binary.BigEndian.AppendUint32(slices.Clone(b[:20]), crc32.Checksum(b[:20], castagnoli))
		}
		if c, err := decodeCheckpoint(cp); err == nil && string(c.encode()) != string(cp) {
			t.Fatalf("checkpoint does not encode back to its bytes")
		}
	})
}
