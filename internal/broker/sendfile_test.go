package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/logstore"
)

// TestSpliceFrameMatchesCopiedEncoding: a response spliced around file ranges is byte for byte
// the response kmsg encodes with the data copied in, for flexible and non-flexible versions.
func TestSpliceFrameMatchesCopiedEncoding(t *testing.T) {
	data := [][]byte{bytes.Repeat([]byte("a"), 300), []byte("bb"), bytes.Repeat([]byte("c"), 70000)}
	dir := t.TempDir()
	for _, version := range []int16{4, 11, 12, 13} {
		copied, marked := kmsg.NewPtrFetchResponse(), kmsg.NewPtrFetchResponse()
		copied.Version, marked.Version = version, version
		files := &fileRanges{zeroCopy: true}
		for i, d := range data {
			name := filepath.Join(dir, fmt.Sprintf("f%d-%d", version, i))
			if err := os.WriteFile(name, append([]byte("xyz"), d...), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			marker, ok := files.add(logstore.Slice{File: f, Position: 3, Size: len(d)})
			if !ok {
				t.Fatal("add refused an *os.File")
			}
			for _, r := range []*kmsg.FetchResponse{copied, marked} {
				ft := kmsg.NewFetchResponseTopic()
				ft.Topic = "t"
				fp := kmsg.NewFetchResponseTopicPartition()
				fp.Partition, fp.RecordBatches = int32(i), d
				if r == marked {
					fp.RecordBatches = marker
				}
				ft.Partitions = append(ft.Partitions, fp)
				r.Topics = append(r.Topics, ft)
			}
		}
		frame := func(r *kmsg.FetchResponse) []byte {
			b := r.AppendTo([]byte{0, 0, 0, 0})
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			return b
		}
		// The ranges in the order they were added, and reversed: the frame's order decides.
		reversed := slices.Clone(files.ranges)
		slices.Reverse(reversed)
		for _, ranges := range [][]*fileRange{files.ranges, reversed} {
			pieces, err := spliceFrame(frame(marked), ranges, marked.IsFlexible())
			if err != nil {
				t.Fatalf("v%d: spliceFrame = %v", version, err)
			}
			var got []byte
			for _, p := range pieces {
				if p.file == nil {
					got = append(got, p.bytes...)
					continue
				}
				b := make([]byte, p.file.slice.Size)
				p.file.slice.File.ReadAt(b, p.file.slice.Position)
				got = append(got, b...)
			}
			if want := frame(copied); !bytes.Equal(got, want) {
				t.Errorf("v%d: spliced frame (%d bytes) differs from the copied encoding (%d bytes)", version, len(got), len(want))
			}
		}
	}
}

// BenchmarkSpliceFrame: splicing a v12 fetch response of 1000 zero-copy partitions (the
// many-partitions workload's count), one pass over the frame.
func BenchmarkSpliceFrame(b *testing.B) {
	name := filepath.Join(b.TempDir(), "seg")
	if err := os.WriteFile(name, make([]byte, 100), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	files := &fileRanges{zeroCopy: true}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic = "many"
	for i := range 1000 {
		marker, _ := files.add(logstore.Slice{File: f, Size: 100})
		fp := kmsg.NewFetchResponseTopicPartition()
		fp.Partition, fp.RecordBatches = int32(i), marker
		ft.Partitions = append(ft.Partitions, fp)
	}
	resp.Topics = append(resp.Topics, ft)
	frame := resp.AppendTo([]byte{0, 0, 0, 0})
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	for b.Loop() {
		if _, err := spliceFrame(frame, files.ranges, true); err != nil {
			b.Fatal(err)
		}
	}
}
