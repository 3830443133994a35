package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// build encodes n records "k<i>"/"v<i>" into a batch with codec.
func build(t testing.TB, n int, codec Codec) []byte {
	t.Helper()
	var recs []byte
	for i := 0; i < n; i++ {
		recs = AppendRecord(recs, int64(i), int32(i), []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("v%d", i)), 0, nil)
	}
	recs, err := Compress(codec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return AppendBatch(nil, Header{
		Attributes: int16(codec), LastOffsetDelta: int32(n - 1), BaseTimestamp: 1000,
		MaxTimestamp: 1000 + int64(n-1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		RecordCount: int32(n),
	}, recs)
}

// recrc recomputes the CRC after a test edits a field inside it.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[crcOffset:], crc32.Checksum(b[attributesOffset:], castagnoli))
	return b
}

func TestValidate(t *testing.T) {
	good := build(t, 3, CodecNone)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name  string
		b     []byte
		check string // "" = valid
	}{
		{"valid", good, ""},
		{"valid gzip", build(t, 5, CodecGzip), ""},
		{"valid zstd", build(t, 5, CodecZstd), ""},
		{"short", good[:40], "length"},
		{"cut off", good[:len(good)-1], "length"},
		{"trailing byte", append(bytes.Clone(good), 0), "length"},
		{"magic 1", edit(func(b []byte) []byte { b[magicOffset] = 1; return b }), "magic"},
		{"crc flipped bit", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "crc"},
		{"codec 6", edit(func(b []byte) []byte { b[attributesOffset+1] |= 6; return recrc(b) }), "compression"},
		{"zero records", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountOffset:], 0)
			return recrc(b)
		}), "record count"},
		{"count above records", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountOffset:], 4)
			binary.BigEndian.PutUint32(b[lastDeltaOffset:], 3)
			return recrc(b)
		}), "record count"},
		{"count below records", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountOffset:], 2)
			binary.BigEndian.PutUint32(b[lastDeltaOffset:], 1)
			return recrc(b)
		}), "record count"},
		{"last delta mismatch", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[lastDeltaOffset:], 7)
			return recrc(b)
		}), "last offset delta"},
		{"compressed records do not decompress", func() []byte {
			b := build(t, 3, CodecZstd)
			b[len(b)-2] ^= 0xff
			return recrc(b)
		}(), "compression"},
		{"compressed count above records", func() []byte {
			b := build(t, 3, CodecLz4)
			binary.BigEndian.PutUint32(b[recordCountOffset:], 4)
			binary.BigEndian.PutUint32(b[lastDeltaOffset:], 3)
			return recrc(b)
		}(), "record count"},
		{"base offset and epoch are outside the crc", edit(func(b []byte) []byte {
			SetBaseOffset(b, 99)
			SetLeaderEpoch(b, 7)
			return b
		}), ""},
	}
	for _, tt := range tests {
		_, err := Validate(tt.b)
		var ce *CorruptError
		switch {
		case tt.check == "" && err != nil:
			t.Errorf("%s: Validate = %v; want nil", tt.name, err)
		case tt.check != "" && (!errors.As(err, &ce) || ce.Check != tt.check):
			t.Errorf("%s: Validate = %v; want a %q check failure", tt.name, err, tt.check)
		case tt.check != "" && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: Validate = %v; want errors.Is(err, ErrCorrupt)", tt.name, err)
		}
	}
}

func TestValidateStoredAllowsCompactedBatches(t *testing.T) {
	b := build(t, 3, CodecNone)
	binary.BigEndian.PutUint32(b[recordCountOffset:], 1) // two records removed by compaction
	recrc(b)
	if _, err := ValidateStored(b); err != nil {
		t.Errorf("ValidateStored(compacted) = %v; want nil", err)
	}
	if _, err := Validate(b); err == nil {
		t.Errorf("Validate(compacted) = nil; want an error")
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd} {
		b := build(t, 10, codec)
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("%v: Validate = %v", codec, err)
		}
		recs, err := Records(&h, b)
		if err != nil {
			t.Fatalf("%v: Records = %v", codec, err)
		}
		r := NewRecordReader(recs)
		var rec Record
		i := 0
		for r.Next(&rec) {
			if want := fmt.Sprintf("k%d", i); string(rec.Key) != want || rec.OffsetDelta != int32(i) {
				t.Errorf("%v: record %d = key %q delta %d; want %q %d", codec, i, rec.Key, rec.OffsetDelta, want, i)
			}
			i++
		}
		if r.Err() != nil || i != 10 {
			t.Errorf("%v: read %d records, err %v; want 10, nil", codec, i, r.Err())
		}
	}
}

func TestNullKeyValueAndHeaders(t *testing.T) {
	hdrs := AppendHeader(nil, "h", []byte("x"))
	hdrs = AppendHeader(hdrs, "n", nil)
	recs := AppendRecord(nil, 0, 0, nil, nil, 2, hdrs)
	var rec Record
	r := NewRecordReader(recs)
	if !r.Next(&rec) {
		t.Fatalf("Next = false, err %v", r.Err())
	}
	if rec.Key != nil || rec.Value != nil || rec.HeaderCount != 2 || !bytes.Equal(rec.Headers, hdrs) {
		t.Errorf("record = key %v value %v headers %d %q; want nil nil 2 %q", rec.Key, rec.Value, rec.HeaderCount, rec.Headers, hdrs)
	}
}

func TestSplit(t *testing.T) {
	a, b := build(t, 1, CodecNone), build(t, 2, CodecNone)
	both := append(bytes.Clone(a), b...)
	if n, err := Split(both); n != len(a) || err != nil {
		t.Errorf("Split = %d, %v; want %d, nil", n, err, len(a))
	}
	if _, err := Split(both[:len(a)-1]); err == nil {
		t.Errorf("Split(cut) = nil error; want one")
	}
}

// FuzzValidate: Validate never panics, and whatever it accepts re-validates identically and
// survives ValidateStored; its records can be walked.
func FuzzValidate(f *testing.F) {
	f.Add(build(f, 1, CodecNone))
	f.Add(build(f, 4, CodecNone))
	f.Add(build(f, 3, CodecZstd))
	f.Add(build(f, 2, CodecGzip))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.Clone(b) // Validate may correct the header in place
		h, err := Validate(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Validate error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if h2, err := ValidateStored(b); err != nil || h2 != h {
			t.Fatalf("ValidateStored after Validate = %+v, %v; want %+v", h2, err, h)
		}
		if _, err := Split(b); err != nil {
			t.Fatalf("Split(valid) = %v", err)
		}
		if recs, err := Records(&h, b); err == nil {
			r := NewRecordReader(recs)
			var rec Record
			for r.Next(&rec) {
			}
		}
	})
}

// TestDecompressionBomb: records that would decompress past the limit are refused for every
// codec, and records within it still decompress.
func TestDecompressionBomb(t *testing.T) {
	defer func(old int) { maxDecompressed = old }(maxDecompressed)
	maxDecompressed = 1 << 20
	var small, big []byte
	for i := 0; len(small) < 512<<10; i++ {
		small = AppendRecord(small, 0, int32(i), nil, make([]byte, 1000), 0, nil)
	}
	for i := 0; len(big) < 3<<20; i++ {
		big = AppendRecord(big, 0, int32(i), nil, make([]byte, 1000), 0, nil)
	}
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLz4, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			for _, tc := range []struct {
				records []byte
				ok      bool
			}{{small, true}, {big, false}} {
				compressed, err := Compress(codec, tc.records)
				if err != nil {
					t.Fatal(err)
				}
				b := AppendBatch(nil, Header{Attributes: int16(codec), RecordCount: 1}, compressed)
				h, err := ParseHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				out, err := Records(&h, b)
				switch {
				case tc.ok && (err != nil || !bytes.Equal(out, tc.records)):
					t.Errorf("%d bytes compressed to %d: Records = %d bytes, %v; want them back", len(tc.records), len(compressed), len(out), err)
				case !tc.ok && !errors.Is(err, ErrCorrupt):
					t.Errorf("%d bytes compressed to %d (limit %d): Records = %d bytes, %v; want a corrupt-batch error", len(tc.records), len(compressed), maxDecompressed, len(out), err)
				}
			}
		})
	}
}

func TestControl(t *testing.T) {
	for _, c := range []Control{{ControlCommit, 7}, {ControlAbort, -1}} {
		b := AppendControl(nil, 42, 3, c, 1000)
		h, err := ValidateStored(b)
		if err != nil {
			t.Fatalf("ValidateStored(marker) = %v", err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != -1 {
			t.Fatalf("marker header = %+v", h)
		}
		got, err := ParseControl(&h, b)
		if err != nil || got != c {
			t.Fatalf("ParseControl = %+v, %v; want %+v", got, err, c)
		}
	}
	h, _ := ValidateStored(AppendControl(nil, 1, 0, Control{Type: 5}, 0))
	if _, err := ParseControl(&h, AppendControl(nil, 1, 0, Control{Type: 5}, 0)); err == nil {
		t.Errorf("ParseControl of an unknown type = nil error")
	}
}

// FuzzParseControl: no input panics ParseControl, and what it accepts is a marker of a known
// type, which AppendControl encodes back to a batch ParseControl reads the same.
func FuzzParseControl(f *testing.F) {
	f.Add(AppendControl(nil, 1, 2, Control{ControlCommit, 3}, 4))
	f.Add(AppendControl(nil, 1, 2, Control{ControlAbort, 0}, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateStored(b)
		if err != nil || !h.IsControl() {
			return
		}
		c, err := ParseControl(&h, b)
		if err != nil {
			return
		}
		if c.Type != ControlAbort && c.Type != ControlCommit {
			t.Fatalf("ParseControl accepted type %d", c.Type)
		}
		again := AppendControl(nil, h.ProducerID, h.ProducerEpoch, c, h.BaseTimestamp)
		h2, err := ValidateStored(again)
		if err != nil {
			t.Fatalf("re-encoded marker invalid: %v", err)
		}
		if c2, err := ParseControl(&h2, again); err != nil || c2 != c {
			t.Fatalf("re-encoded marker parses to %+v, %v; want %+v", c2, err, c)
		}
	})
}

func TestNoOp(t *testing.T) {
	b := AppendNoOp(nil, NoOp{Slots: 37, View: 4}, 1234)
	h, err := ValidateStored(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsControl() || h.IsTransactional() || h.ProducerID != -1 || h.RecordCount != 1 {
		t.Fatalf("no-op header %+v: want a non-transactional control batch of one record, producer id -1", h)
	}
	if n, err := ParseNoOp(&h, b); err != nil || n != (NoOp{Slots: 37, View: 4}) {
		t.Fatalf("ParseNoOp = %+v, %v", n, err)
	}
	marker := AppendControl(nil, 1, 0, Control{Type: ControlCommit}, 0)
	mh, _ := ValidateStored(marker)
	if _, err := ParseNoOp(&mh, marker); err == nil {
		t.Fatalf("ParseNoOp accepted a transaction marker")
	}
	if _, err := ParseControl(&h, b); err == nil {
		t.Fatalf("ParseControl accepted a no-op entry as a transaction marker")
	}
}

// FuzzParseNoOp: no input panics ParseNoOp, and what it accepts re-encodes to an entry that
// parses the same.
func FuzzParseNoOp(f *testing.F) {
	f.Add(AppendNoOp(nil, NoOp{Slots: 5, View: 1}, 9))
	f.Add(AppendControl(nil, 1, 2, Control{ControlCommit, 3}, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateStored(b)
		if err != nil {
			return
		}
		n, err := ParseNoOp(&h, b)
		if err != nil {
			return
		}
		if n.Slots <= 0 {
			t.Fatalf("ParseNoOp accepted %d slots", n.Slots)
		}
		again := AppendNoOp(nil, n, h.BaseTimestamp)
		h2, err := ValidateStored(again)
		if err != nil {
			t.Fatalf("re-encoded no-op invalid: %v", err)
		}
		if n2, err := ParseNoOp(&h2, again); err != nil || n2 != n {
			t.Fatalf("re-encoded no-op parses to %+v, %v; want %+v", n2, err, n)
		}
	})
}

func TestEachHeader(t *testing.T) {
	h := AppendHeader(nil, "a", []byte("1"))
	h = AppendHeader(h, "b", nil)
	var got []string
	if err := EachHeader(h, 2, func(k string, v []byte) { got = append(got, fmt.Sprintf("%s=%q/%v", k, v, v == nil)) }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != `[a="1"/false b=""/true]` {
		t.Fatalf("headers %v", got)
	}
	if err := EachHeader(h[:3], 2, func(string, []byte) {}); err == nil {
		t.Fatal("a cut header decoded")
	}
}

// TestRecompress: every codec to every other keeps the records and every header field but the
// codec, the length and the CRC, and gives a valid batch.
func TestRecompress(t *testing.T) {
	codecs := []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd}
	for _, from := range codecs {
		b := build(t, 20, from)
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Records(&h, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range codecs {
			out, err := Recompress(b, to)
			if err != nil {
				t.Fatalf("%v → %v: %v", from, to, err)
			}
			oh, err := Validate(out)
			if err != nil {
				t.Fatalf("%v → %v: the new batch is invalid: %v", from, to, err)
			}
			got, err := Records(&oh, out)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v → %v: records differ (%v)", from, to, err)
			}
			if oh.Codec() != to {
				t.Fatalf("%v → %v: codec %v", from, to, oh.Codec())
			}
			oh.Attributes, oh.Length, oh.CRC = h.Attributes, h.Length, h.CRC
			if oh != h {
				t.Fatalf("%v → %v: header %+v; want %+v apart from codec, length and CRC", from, to, oh, h)
			}
		}
	}
	if c, ok := CodecByName("producer"); ok {
		t.Fatalf("CodecByName(producer) = %v; want none", c)
	}
}

// TestFilterDeleteHorizon: Filter keeps the records keep accepts at their offsets and
// timestamps, sets the delete horizon (KIP-534) on a batch keeping a tombstone, re-encoding the
// timestamp deltas from it, and leaves a batch alone when nothing changes.
func TestFilterDeleteHorizon(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecLz4} {
		var body []byte
		for i, v := range []string{"a", "", "c", "d"} {
			val := []byte(v)
			if v == "" {
				val = nil
			}
			body = AppendRecord(body, int64(10*i), int32(i), []byte{byte('k' + i%2)}, val, 1, AppendHeader(nil, "h", []byte{byte(i)}))
		}
		recs, err := Compress(codec, body)
		if err != nil {
			t.Fatal(err)
		}
		b := AppendBatch(nil, Header{BaseOffset: 100, Attributes: int16(codec), LastOffsetDelta: 3, BaseTimestamp: 5000, MaxTimestamp: 5030,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 4}, recs)
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		all := func(*Record, int64) bool { return true }
		if out, n, err := Filter(&h, b, all, false, 0); err != nil || n != 0 || &out[0] != &b[0] {
			t.Fatalf("keeping everything without a horizon: %d removed, %v; want b itself", n, err)
		}
		out, n, err := Filter(&h, b, func(_ *Record, off int64) bool { return off != 100 && off != 103 }, false, 9000)
		if err != nil || n != 2 {
			t.Fatalf("filter: %d removed, %v", n, err)
		}
		oh, err := ValidateStored(out)
		if err != nil {
			t.Fatal(err)
		}
		if hz, ok := oh.DeleteHorizon(); !ok || hz != 9000 || oh.BaseOffset != 100 || oh.LastOffsetDelta != 3 || oh.RecordCount != 2 || oh.MaxTimestamp != 5020 || oh.Codec() != codec || oh.FirstTimestamp() != 5020 {
			t.Fatalf("filtered header %+v; want base 100, last delta 3, 2 records, max timestamp 5020, horizon 9000, codec %v", oh, codec)
		}
		var got []string
		EachRecord(&oh, out, func(r *Record) {
			got = append(got, fmt.Sprintf("%d@%d:%s=%q", oh.BaseOffset+int64(r.OffsetDelta), oh.BaseTimestamp+r.TimestampDelta, r.Key, r.Value))
		})
		if fmt.Sprint(got) != `[101@5010:l="" 102@5020:k="c"]` {
			t.Fatalf("records %v", got)
		}
		// A batch with a horizon keeps it, and is left alone when nothing goes.
		if again, n, _ := Filter(&oh, out, all, false, 20000); n != 0 || &again[0] != &out[0] {
			t.Fatal("a batch with a horizon was rewritten with nothing removed")
		}
		if none, n, _ := Filter(&oh, out, func(*Record, int64) bool { return false }, false, 0); none != nil || n != 2 {
			t.Fatalf("removing every record: %d bytes, %d removed; want nil, 2", len(none), n)
		}
	}
}

// TestValidateSetsMaxTimestamp: a CreateTime batch whose header's maxTimestamp is not its
// records' latest (record i is at 1000+i) is corrected in place with its CRC, as Kafka's
// LogValidator sets it; a correct one and a LogAppendTime one are left as they are.
func TestValidateSetsMaxTimestamp(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		for _, claimed := range []int64{0, 1000, 1002, 99999} {
			b := recrc(func(b []byte) []byte { binary.BigEndian.PutUint64(b[35:], uint64(claimed)); return b }(build(t, 3, codec)))
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("codec %d, claimed %d: %v", codec, claimed, err)
			}
			if h.MaxTimestamp != 1002 {
				t.Errorf("codec %d, claimed %d: max timestamp %d; want 1002", codec, claimed, h.MaxTimestamp)
			}
			if stored, err := ParseHeader(b); err != nil || stored.MaxTimestamp != 1002 || stored.CRC != h.CRC {
				t.Errorf("codec %d, claimed %d: the batch holds max timestamp %d, CRC %#x (returned %#x), %v", codec, claimed, stored.MaxTimestamp, stored.CRC, h.CRC, err)
			}
			if _, err := Check(b); err != nil {
				t.Errorf("codec %d, claimed %d: the corrected batch fails its check: %v", codec, claimed, err)
			}
		}
	}
	b := build(t, 3, CodecNone)
	SetLogAppendTime(b, 5000)
	if h, err := Validate(b); err != nil || h.MaxTimestamp != 5000 {
		t.Errorf("LogAppendTime batch: max timestamp %d, %v; want the broker's 5000 kept", h.MaxTimestamp, err)
	}
}

// TestRecompressLevel: RecompressLevel compresses at Kafka's levels (KIP-390) for gzip, lz4 and
// zstd, every level giving back the records, the lowest and highest levels different bytes; a
// batch already in the codec is kept as it is, whatever its level, as in Kafka.
func TestRecompressLevel(t *testing.T) {
	var recs []byte
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	for i := 0; i < 2000; i++ {
		v := fmt.Sprintf("%s-%s-%d-%s", words[i*7%8], words[i*3%8], i*i%9973, words[(i/5)%8])
		recs = AppendRecord(recs, int64(i), int32(i), []byte(fmt.Sprintf("k%d", i%97)), []byte(v), 0, nil)
	}
	plain := AppendBatch(nil, Header{LastOffsetDelta: 1999, BaseTimestamp: 1000, MaxTimestamp: 2999,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 2000}, recs)
	for _, tt := range []struct {
		codec    Codec
		min, max int
	}{{CodecGzip, 1, 9}, {CodecLz4, 1, 17}, {CodecZstd, -131072, 22}} {
		outs := map[int][]byte{}
		for _, level := range []int{tt.min, DefaultLevel(tt.codec), tt.max} {
			out, err := RecompressLevel(plain, tt.codec, level)
			if err != nil {
				t.Fatalf("RecompressLevel(%v, %d) = %v", tt.codec, level, err)
			}
			h, err := Validate(out)
			if err != nil || h.Codec() != tt.codec {
				t.Fatalf("RecompressLevel(%v, %d): codec %v, %v; want a valid %v batch", tt.codec, level, h.Codec(), err, tt.codec)
			}
			if got, err := Records(&h, out); err != nil || !bytes.Equal(got, recs) {
				t.Fatalf("RecompressLevel(%v, %d): records differ (%v)", tt.codec, level, err)
			}
			outs[level] = out
		}
		if bytes.Equal(outs[tt.min], outs[tt.max]) {
			t.Errorf("%v: levels %d and %d gave the same %d bytes; want the level to matter", tt.codec, tt.min, tt.max, len(outs[tt.min]))
		}
		if again, err := RecompressLevel(outs[tt.min], tt.codec, tt.max); err != nil || !bytes.Equal(again, outs[tt.min]) {
			t.Errorf("%v: a batch already in the codec was rewritten for another level (%v)", tt.codec, err)
		}
	}
}
