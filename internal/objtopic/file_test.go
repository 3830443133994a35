package objtopic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/runnel-dev/runnel/internal/batch"
)

func testBatch(ts int64, values ...string) []byte {
	var body []byte
	for i, v := range values {
		body = batch.AppendRecord(body, int64(i), int32(i), nil, []byte(v), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{LastOffsetDelta: int32(len(values) - 1), BaseTimestamp: ts,
		MaxTimestamp: ts + int64(len(values)-1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(len(values))}, body)
}

func topicID(b byte) (id [16]byte) { id[15] = b; return }

func testFile(t testing.TB) ([]byte, []Section) {
	sections := []Section{ // out of order on purpose
		{TopicID: topicID(2), Partition: 0, Batches: [][]byte{testBatch(500, "x")}},
		{TopicID: topicID(1), Partition: 3, Batches: [][]byte{testBatch(100, "a", "b"), testBatch(90, "c")}},
		{TopicID: topicID(1), Partition: 1, Batches: [][]byte{testBatch(7, "d", "e", "f")}},
	}
	file, _, err := Build(4, 9, 1234, sections)
	if err != nil {
		t.Fatal(err)
	}
	return file, sections
}

func TestFileRoundTrip(t *testing.T) {
	file, sections := testFile(t)
	hl, err := HeaderLen(file[:headerSize])
	if err != nil || hl != headerSize+3*entrySize+crcSize {
		t.Fatalf("HeaderLen = %d, %v", hl, err)
	}
	h, err := ParseHeader(file[:hl], int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if h.Writer != 4 || h.Incarnation != 9 || h.CreatedMs != 1234 || len(h.Index) != 3 {
		t.Fatalf("header %+v", h)
	}
	want := []struct {
		id               byte
		p                int32
		batches, records uint32
		minT, maxT       int64
		first            string
	}{{1, 1, 1, 3, 7, 9, "d"}, {1, 3, 2, 3, 90, 101, "a"}, {2, 0, 1, 1, 500, 500, "x"}}
	for i, w := range want {
		e := h.Index[i]
		if e.TopicID != topicID(w.id) || e.Partition != w.p || e.Batches != w.batches || e.Records != w.records ||
			e.MinTimestamp != w.minT || e.MaxTimestamp != w.maxT {
			t.Errorf("entry %d = %+v; want %+v", i, e, w)
		}
		bs, err := SectionBatches(e, file[e.Offset:e.Offset+uint64(e.Length)])
		if err != nil {
			t.Fatalf("section %d: %v", i, err)
		}
		var src Section
		for _, s := range sections {
			if s.TopicID == e.TopicID && s.Partition == e.Partition {
				src = s
			}
		}
		for j := range bs {
			if !bytes.Equal(bs[j], src.Batches[j]) {
				t.Errorf("section %d batch %d differs from what was built", i, j)
			}
		}
	}
}

func TestFileRefusesDamage(t *testing.T) {
	file, _ := testFile(t)
	hl, _ := HeaderLen(file)
	damage := map[string]func([]byte) []byte{
		"magic":         func(b []byte) []byte { b[0] = 'X'; return b },
		"version":       func(b []byte) []byte { b[4] = 1; return b },
		"checksum":      func(b []byte) []byte { b[40]++; return b },
		"no partitions": func(b []byte) []byte { b[28], b[29], b[30], b[31] = 0, 0, 0, 0; return b },
		"truncated":     func(b []byte) []byte { return b[:hl-1] },
		"unknown flag": func(b []byte) []byte { // checksummed again: only the flag is wrong
			b[headerSize+56+3] = 2
			binary.BigEndian.PutUint32(b[hl-crcSize:], crc32.Checksum(b[:hl-crcSize], castagnoli))
			return b
		},
	}
	for name, f := range damage {
		b := f(bytes.Clone(file))
		if _, err := ParseHeader(b, int64(len(b))); !errors.Is(err, ErrBadFile) {
			t.Errorf("%s: ParseHeader = %v; want ErrBadFile", name, err)
		}
	}
	if _, err := ParseHeader(file, int64(len(file))+1); !errors.Is(err, ErrBadFile) {
		t.Errorf("a file longer than its sections: %v", err)
	}
	h, _ := ParseHeader(file, -1)
	e := h.Index[1]
	sec := bytes.Clone(file[e.Offset : e.Offset+uint64(e.Length)])
	sec[len(sec)-1]++ // a record byte: the batch CRC catches it
	if _, err := SectionBatches(e, sec); !errors.Is(err, ErrBadFile) {
		t.Errorf("a damaged section: %v", err)
	}
	if _, err := SectionBatches(e, sec[:len(sec)-1]); !errors.Is(err, ErrBadFile) {
		t.Errorf("a short section: %v", err)
	}
	if _, _, err := Build(1, 1, 1, []Section{{TopicID: topicID(1), Batches: [][]byte{testBatch(1, "a")}}, {TopicID: topicID(1), Batches: [][]byte{testBatch(1, "b")}}}); err == nil {
		t.Error("Build accepted a partition twice")
	}
	if _, _, err := Build(1, 1, 1, nil); err == nil {
		t.Error("Build accepted an empty file")
	}
}

func FuzzParseHeader(f *testing.F) {
	file, _ := testFile(f)
	f.Add(file)
	f.Add(file[:headerSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b, int64(len(b)))
		if err != nil {
			return
		}
		for _, e := range h.Index {
			end := e.Offset + uint64(e.Length)
			if end > uint64(len(b)) {
				t.Fatalf("entry %+v past the file's %d bytes", e, len(b))
			}
			bs, err := SectionBatches(e, b[e.Offset:end])
			if err != nil {
				continue // the header is checked; sections are checked when read
			}
			if uint32(len(bs)) != e.Batches {
				t.Fatalf("%d batches, index says %d", len(bs), e.Batches)
			}
		}
		// What parses, rebuilds to the same bytes.
		var sections []Section
		for _, e := range h.Index {
			bs, err := SectionBatches(e, b[e.Offset:e.Offset+uint64(e.Length)])
			if err != nil {
				return
			}
			sections = append(sections, Section{TopicID: e.TopicID, Partition: e.Partition, Batches: bs, Lazy: e.Flags&SectionLazy != 0})
		}
		again, _, err := Build(h.Writer, h.Incarnation, h.CreatedMs, sections)
		if err != nil {
			t.Fatalf("Build of a parsed file: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatal("a parsed file does not rebuild to the same bytes")
		}
	})
}
