package broker

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/runnel-dev/runnel/internal/logstore"
)

// Fetch responses send record data straight from segment files with sendfile(2) when the
// connection is plain TCP. The response is still encoded by kmsg: each zero-copy partition's
// RecordBatches is a unique 16-byte marker; the write loop finds each marker (in encoding order)
// behind its length prefix, writes the bytes before it and the real length prefix, and sends the
// file range in its place. Slices hold their segment files open until written.

const markerSize = 16

type fileRange struct {
	marker [markerSize]byte
	slice  logstore.Slice
}

// fileRanges collects a fetch response's zero-copy ranges. It is filled by the fetch's wait
// goroutine and consumed by the write loop after the wait returns.
type fileRanges struct {
	zeroCopy bool
	mu       sync.Mutex
	ranges   []*fileRange
}

// add takes ownership of s and returns the marker to encode in its place, if s can be sent with
// sendfile; otherwise the caller keeps s.
func (f *fileRanges) add(s logstore.Slice) ([]byte, bool) {
	if f == nil || !f.zeroCopy {
		return nil, false
	}
	if _, ok := s.File.(interface{ Fd() uintptr }); !ok {
		return nil, false
	}
	r := &fileRange{slice: s}
	rand.Read(r.marker[:])
	f.mu.Lock()
	f.ranges = append(f.ranges, r)
	f.mu.Unlock()
	return r.marker[:], true
}

// release gives every slice back and forgets them.
func (f *fileRanges) release() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.ranges {
		r.slice.Release()
	}
	f.ranges = nil
}

// splice is one piece of a frame: bytes, or a file range.
type splice struct {
	bytes []byte
	file  *fileRange
}

// spliceFrame turns an encoded frame whose record sets are markers into pieces, with the length
// prefixes and the frame size rewritten for the real record sizes. flexible says whether the
// record sets are compact bytes (uvarint length+1) or int32-prefixed bytes. The markers are
// found in one pass over the frame, in its order, whatever order the ranges were added in.
func spliceFrame(frame []byte, ranges []*fileRange, flexible bool) ([]splice, error) {
	byMarker := make(map[[markerSize]byte]*fileRange, len(ranges))
	for _, r := range ranges {
		byMarker[r.marker] = r
	}
	oldPrefix := binary.BigEndian.AppendUint32(nil, markerSize)
	if flexible {
		oldPrefix = []byte{markerSize + 1}
	}
	last := oldPrefix[len(oldPrefix)-1]
	var out []splice
	var grow int64
	cur := 0
	for i := len(oldPrefix); len(byMarker) > 0 && i+markerSize <= len(frame); {
		// The next place a marker can start: just after a byte that ends its length prefix.
		j := bytes.IndexByte(frame[i-1:len(frame)-markerSize], last)
		if j < 0 {
			break
		}
		i += j
		var m [markerSize]byte
		copy(m[:], frame[i:])
		r, ok := byMarker[m]
		if !ok || !bytes.Equal(frame[i-len(oldPrefix):i], oldPrefix) {
			i++
			continue
		}
		delete(byMarker, m)
		p := i - len(oldPrefix)
		if p < cur {
			return nil, fmt.Errorf("broker: fetch marker without its length prefix")
		}
		newPrefix := binary.BigEndian.AppendUint32(nil, uint32(r.slice.Size))
		if flexible {
			newPrefix = binary.AppendUvarint(nil, uint64(r.slice.Size)+1)
		}
		out = append(out, splice{bytes: append(frame[cur:p:p], newPrefix...)}, splice{file: r})
		grow += int64(len(newPrefix)-len(oldPrefix)) + int64(r.slice.Size) - markerSize
		cur = i + markerSize
		i = cur + len(oldPrefix)
	}
	if len(byMarker) > 0 {
		return nil, fmt.Errorf("broker: fetch marker not found in the encoded response")
	}
	out = append(out, splice{bytes: frame[cur:]})
	size := int64(binary.BigEndian.Uint32(frame)) + grow
	if size > 1<<31-1 {
		return nil, fmt.Errorf("broker: fetch response of %d bytes is too large", size)
	}
	binary.BigEndian.PutUint32(out[0].bytes, uint32(size)) // the first piece holds the frame size
	return out, nil
}

// writeSpliced writes pieces to the connection: bytes through bw, file ranges with sendfile
// after flushing bw, counting their progress in act.
func writeSpliced(nc net.Conn, bw *bufio.Writer, pieces []splice, act *activity) error {
	for _, p := range pieces {
		if p.file == nil {
			if _, err := bw.Write(p.bytes); err != nil {
				return err
			}
			continue
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := sendFile(nc, p.file.slice, act); err != nil {
			return err
		}
	}
	return nil
}

// sendFile sends a slice's file range to a TCP connection with sendfile(2), at explicit offsets
// (the file's own offset is shared by every reader and is not used).
func sendFile(nc net.Conn, s logstore.Slice, act *activity) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return fmt.Errorf("broker: %T is not a syscall.Conn", nc)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	in := int(s.File.(interface{ Fd() uintptr }).Fd())
	off, left := s.Position, s.Size
	var serr error
	err = raw.Write(func(out uintptr) bool {
		for left > 0 {
			n, err := syscall.Sendfile(int(out), in, &off, left)
			if n > 0 {
				left -= n
				act.progress(n)
			}
			switch {
			case err == syscall.EAGAIN:
				return false // wait until the socket is writable
			case err == syscall.EINTR:
				continue
			case err != nil:
				serr = err
				return true
			case n == 0:
				serr = fmt.Errorf("broker: sendfile stopped with %d bytes left (file shorter than its slice)", left)
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}
