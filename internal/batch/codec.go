package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

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

// Compress compresses an encoded records section with codec, at the codec's default level in
// franz-go. The result is a new slice, owned by the caller; for CodecNone it is records itself.
func Compress(codec Codec, records []byte) ([]byte, error) {
	if codec == CodecNone {
		return records, nil
	}
	c, ok := compressors[codec]
	if !ok {
		return nil, fmt.Errorf("batch: no compressor for %v", codec)
	}
	return compressWith(c, codec, records)
}

// DefaultLevel is Kafka's default compression level of codec (compression.gzip.level -1,
// compression.lz4.level 9, compression.zstd.level 3); 0 for the codecs without levels.
func DefaultLevel(codec Codec) int {
	switch codec {
	case CodecGzip:
		return -1
	case CodecLz4:
		return 9
	case CodecZstd:
		return 3
	}
	return 0
}

// leveledCompressors caches a compressor per codec and Kafka level: a level is a topic config, so
// the cache holds at most a few entries per codec.
var leveledCompressors sync.Map // codecLevel → kgo.Compressor

type codecLevel struct {
	codec Codec
	level int
}

// CompressLevel is Compress at a Kafka compression level (KIP-390's compression.gzip.level,
// compression.lz4.level, compression.zstd.level; ignored for snappy), mapped onto the Go codecs:
// gzip takes Kafka's levels as they are (-1, 1 to 9); lz4 level 1 is the fast compressor and 2 to
// 17 high compression, whose search depth lz4 doubles per level up to 256 candidates at level 9,
// so 2 to 9 are pierrec/lz4's shallowest high-compression level (256) and each level above doubles
// it, to its deepest (65536) at 17; zstd levels map to klauspost/compress's four speeds
// (zstd.EncoderLevelFromZstd: below 3 fastest, 3 to 5 default, ...).
func CompressLevel(codec Codec, level int, records []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return records, nil
	case CodecSnappy:
		return Compress(codec, records)
	}
	key := codecLevel{codec, level}
	c, ok := leveledCompressors.Load(key)
	if !ok {
		var cc kgo.CompressionCodec
		switch codec {
		case CodecGzip:
			cc = kgo.GzipCompression().WithLevel(level)
		case CodecLz4:
			cc = kgo.Lz4Compression().WithLevel(lz4Level(level))
		case CodecZstd:
			cc = kgo.ZstdCompression().WithLevel(int(zstd.EncoderLevelFromZstd(level)))
		default:
			return nil, fmt.Errorf("batch: no compressor for %v", codec)
		}
		nc, err := kgo.DefaultCompressor(cc)
		if err != nil {
			return nil, fmt.Errorf("batch: compressor for %v level %d: %w", codec, level, err)
		}
		c, _ = leveledCompressors.LoadOrStore(key, nc)
	}
	return compressWith(c.(kgo.Compressor), codec, records)
}

// lz4Level is pierrec/lz4's level for a Kafka (lz4-java) lz4 level (CompressLevel).
func lz4Level(level int) int {
	if level <= 1 {
		return int(lz4.Fast)
	}
	return int(lz4.Level1) << min(max(level-9, 0), 8)
}

func compressWith(c kgo.Compressor, codec Codec, records []byte) ([]byte, error) {
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
	return recompress(b, codec, func(recs []byte) ([]byte, error) { return Compress(codec, recs) })
}

// RecompressLevel is Recompress at a Kafka compression level (CompressLevel), as Kafka's broker
// recompresses for compression.type with the topic's compression.<codec>.level. As in Kafka, a
// batch that already uses codec is kept whatever level it was compressed at.
func RecompressLevel(b []byte, codec Codec, level int) ([]byte, error) {
	return recompress(b, codec, func(recs []byte) ([]byte, error) { return CompressLevel(codec, level, recs) })
}

func recompress(b []byte, codec Codec, compress func([]byte) ([]byte, error)) ([]byte, error) {
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
	packed, err := compress(recs)
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
