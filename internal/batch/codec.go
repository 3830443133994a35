package batch

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The codecs are franz-go's: the same ones Kafka clients use, including snappy's xerial framing.
var (
	decompressor = kgo.DefaultDecompressor()
	compressors  = map[Codec]kgo.Compressor{}
)

func init() {
	for codec, cc := range map[Codec]kgo.CompressionCodec{
		CodecGzip:   kgo.GzipCompression(),
		CodecSnappy: kgo.SnappyCompression(),
		CodecLz4:    kgo.Lz4Compression(),
		CodecZstd:   kgo.ZstdCompression(),
	} {
		c, err := kgo.DefaultCompressor(cc)
		if err != nil {
			panic(fmt.Sprintf("batch: compressor for %v: %v", codec, err))
		}
		compressors[codec] = c
	}
}

// Records returns the batch's records section, decompressed. For an uncompressed batch it is a
// sub-slice of b; otherwise a new slice, owned by the caller.
func Records(h *Header, b []byte) ([]byte, error) {
	recs := b[HeaderSize:]
	if h.Codec() == CodecNone {
		return recs, nil
	}
	out, err := decompressor.Decompress(recs, kgo.CompressionCodecType(h.Codec()))
	if err != nil {
		return nil, corrupt("compression", "%v records do not decompress: %v", h.Codec(), err)
	}
	return out, nil
}

// Compress compresses an encoded records section with codec. The result is a new slice, owned by
// the caller; for CodecNone it is records itself.
func Compress(codec Codec, records []byte) ([]byte, error) {
	if codec == CodecNone {
		return records, nil
	}
	c, ok := compressors[codec]
	if !ok {
		return nil, fmt.Errorf("batch: no compressor for %v", codec)
	}
	var buf bytes.Buffer
	out, used := c.Compress(&buf, records)
	if Codec(used) != codec {
		return nil, fmt.Errorf("batch: %v compressor used codec %d", codec, used)
	}
	return bytes.Clone(out), nil
}
