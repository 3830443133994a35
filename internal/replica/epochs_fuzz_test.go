package replica

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// FuzzDecodeEpochs: a leader-epoch file either fails to decode with an error or holds
// strictly ascending epochs at ascending starts, and encodes back to the same bytes. The
// fuzzer writes the body; the checksum is computed so that the entries' checks are reached.
func FuzzDecodeEpochs(f *testing.F) {
	body := func(entries []EpochEntry) []byte { b := encodeEpochs(entries); return b[:len(b)-4] }
	f.Add(body(nil))
	f.Add(body([]EpochEntry{{0, 0}, {3, 10}, {4, 10}}))
	f.Add(body([]EpochEntry{{5, 10}, {4, 20}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		file := binary.BigEndian.AppendUint32(slices.Clone(b), crc32.Checksum(b, castagnoli))
		entries, err := decodeEpochs(file)
		if err != nil {
			return
		}
		for i := 1; i < len(entries); i++ {
			if entries[i].Epoch <= entries[i-1].Epoch || entries[i].Start < entries[i-1].Start {
				t.Fatalf("entries %d and %d do not ascend: %v", i-1, i, entries)
			}
		}
		if got := encodeEpochs(entries); string(got) != string(file) {
			t.Fatalf("entries %v encode to %x, not the %x they came from", entries, got, file)
		}
	})
}
