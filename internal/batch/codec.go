package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
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

// MaxDecompressedBytes bounds what one batch's records may decompress to. The broker holds a
// decompressed batch in memory to check its records, so a small compressed batch that expands
// without bound (a decompression bomb) would otherwise let one produce request allocate up to
// franz-go's own limit of 2 GiB. Kafka streams records instead; a legitimate batch is bounded
// by max.message.bytes compressed and does not come near this.
const MaxDecompressedBytes = 128 << 20

// maxDecompressed is MaxDecompressedBytes; tests lower it.
var maxDecompressed = MaxDecompressedBytes

// zstdDecoder decodes zstd with the bound enforced by the decoder itself (it refuses a frame
// that declares or grows past it). DecodeAll is safe for concurrent use.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(MaxDecompressedBytes)))

// Records returns the batch's records section, decompressed. For an uncompressed batch it is a
// sub-slice of b; otherwise a new slice, owned by the caller. Records that would decompress to
// more than MaxDecompressedBytes are refused before they are.
func Records(h *Header, b []byte) ([]byte, error) {
	recs := b[HeaderSize:]
	if h.Codec() == CodecNone {
		return recs, nil
	}
	out, err := decompress(h.Codec(), recs, maxDecompressed)
	if err != nil {
		return nil, corrupt("compression", "%v records do not decompress: %v", h.Codec(), err)
	}
	return out, nil
}

var errTooLarge = errors.New("they would decompress to more than the broker's limit")

// decompress decompresses src with the libraries franz-go uses, bounded by max bytes of output:
// gzip and lz4 stream through a limit, zstd's decoder enforces it, and snappy's block headers
// declare their sizes, which are checked before franz-go decodes them (it handles xerial framing).
func decompress(codec Codec, src []byte, max int) ([]byte, error) {
	switch codec {
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return readBounded(r, max)
	case CodecLz4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)), max)
	case CodecZstd:
		if max == MaxDecompressedBytes {
			out, err := zstdDecoder.DecodeAll(src, nil)
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return nil, errTooLarge
			}
			return out, err
		}
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(max)))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		out, err := d.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, errTooLarge
		}
		return out, err
	case CodecSnappy:
		if err := checkSnappySize(src, max); err != nil {
			return nil, err
		}
		return decompressor.Decompress(src, kgo.CompressionCodecType(codec))
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

func readBounded(r io.Reader, max int) ([]byte, error) {
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(max) {
		return nil, errTooLarge
	}
	return out.Bytes(), nil
}

// xerialPrefix starts a snappy stream framed as the Java client frames it: a 16-byte header,
// then blocks of a big-endian length and a raw snappy block.
var xerialPrefix = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// checkSnappySize adds up the decoded sizes snappy's block headers declare.
func checkSnappySize(src []byte, max int) error {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialPrefix) {
		n, err := s2.DecodedLen(src)
		if err == nil && n > max {
			err = errTooLarge
		}
		return err
	}
	total := 0
	for pos := 16; pos < len(src); {
		if pos+4 > len(src) {
			return errors.New("xerial block length cut off")
		}
		size := int(binary.BigEndian.Uint32(src[pos:]))
		pos += 4
		if size > len(src)-pos {
			return errors.New("xerial block cut off")
		}
		n, err := s2.DecodedLen(src[pos : pos+size])
		if err != nil {
			return err
		}
		if total += n; total > max {
			return errTooLarge
		}
		pos += size
	}
	return nil
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

// CodecByName is the codec of a compression.type value ("uncompressed", "gzip", "snappy",
// "lz4", "zstd"); ok is false for "producer" and anything else.
func CodecByName(name string) (c Codec, ok bool) {
	switch name {
	case "uncompressed":
		return CodecNone, true
	case "gzip":
		return CodecGzip, true
	case "snappy":
		return CodecSnappy, true
	case "lz4":
		return CodecLz4, true
	case "zstd":
		return CodecZstd, true
	}
	return 0, false
}

// Recompress checks b as Validate does and returns it with its records compressed with codec
// instead, as a broker does for a topic whose compression.type is not "producer": every header
// field but the codec, the length and the CRC is kept. If b already uses codec, it is returned
// as it is, unchecked. The records are decompressed once, for the check and the rewrite.
func Recompress(b []byte, codec Codec) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil || h.Codec() == codec {
		return b, err
	}
	if h, err = check(b, true); err != nil {
		return nil, err
	}
	recs, err := Records(&h, b)
	if err != nil {
		return nil, err
	}
	if _, err := checkRecords(recs, h.RecordCount); err != nil {
		return nil, err
	}
	packed, err := Compress(codec, recs)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderSize, HeaderSize+len(packed))
	copy(out, b[:HeaderSize])
	out = append(out, packed...)
	be := binary.BigEndian
	be.PutUint32(out[lengthOffset:], uint32(len(out)-LengthFieldEnd))
	be.PutUint16(out[attributesOffset:], uint16(h.Attributes&^AttrCompressionMask|int16(codec)))
	be.PutUint32(out[crcOffset:], crc32.Checksum(out[attributesOffset:], castagnoli))
	return out, nil
}
