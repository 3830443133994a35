package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Snapshots in chunks (docs/cluster.md §3.3). etcd raft sends a snapshot as one message (MsgSnap,
// the whole image inside), and the cluster transport takes frames of at most 64 MiB and queues
// at most 64 MiB for a peer. A snapshot message larger than a chunk therefore travels as a
// stream of chunk frames, each handed to the transport only once the peer's queue has drained
// to a few chunks, and is put back together by the receiving node before it is stepped:
//
//	u64 stream | u32 index | u32 count | u64 total | piece
//
// stream names one sending of one message (a sender numbers its streams from a random start);
// index runs from 0 to count-1; total is the message's size; the pieces in index order are the
// message. The receiver keeps one partial message per sending node: a chunk of index 0 starts
// a new one (dropping any other), a chunk that is not the next of the current stream drops it
// (a frame was lost: the transport delivers in order and at most once; the stream's later
// chunks are dropped without a word), and the last chunk completes it. A lost stream is a lost
// MsgSnap: raft sends the snapshot again.

const chunkHeader = 8 + 4 + 4 + 8

// DefaultChunkBytes is a chunk's piece size when none is configured.
const DefaultChunkBytes = 1 << 20

// defaultMaxChunked bounds a message put back together from chunks when no bound is
// configured: protobuf's own limit on a message.
const defaultMaxChunked = 2<<30 - 1

// appendChunk appends a chunk frame to b.
func appendChunk(b []byte, stream uint64, index, count uint32, total uint64, piece []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, stream)
	b = binary.BigEndian.AppendUint32(b, index)
	b = binary.BigEndian.AppendUint32(b, count)
	b = binary.BigEndian.AppendUint64(b, total)
	return append(b, piece...)
}

// chunkFrame is a decoded chunk frame; Piece aliases the frame.
type chunkFrame struct {
	Stream       uint64
	Index, Count uint32
	Total        uint64
	Piece        []byte
}

// ErrBadChunk is returned for a chunk frame that cannot be one.
var ErrBadChunk = errors.New("raftlog: bad snapshot chunk")

// parseChunk decodes a chunk frame.
func parseChunk(b []byte) (chunkFrame, error) {
	if len(b) < chunkHeader {
		return chunkFrame{}, fmt.Errorf("%w: %d bytes, shorter than its header", ErrBadChunk, len(b))
	}
	c := chunkFrame{
		Stream: binary.BigEndian.Uint64(b),
		Index:  binary.BigEndian.Uint32(b[8:]),
		Count:  binary.BigEndian.Uint32(b[12:]),
		Total:  binary.BigEndian.Uint64(b[16:]),
		Piece:  b[chunkHeader:],
	}
	if c.Count == 0 || c.Index >= c.Count {
		return chunkFrame{}, fmt.Errorf("%w: index %d of %d", ErrBadChunk, c.Index, c.Count)
	}
	if uint64(len(c.Piece)) > c.Total {
		return chunkFrame{}, fmt.Errorf("%w: a piece of %d bytes in a message of %d", ErrBadChunk, len(c.Piece), c.Total)
	}
	return c, nil
}

// ChunkSender streams large messages to peers in chunks, one stream per peer at a time.
type ChunkSender struct {
	// Send hands a chunk frame to the transport for node to (which copies it).
	Send func(to int32, chunk []byte)
	// Queued is how many bytes wait to be written to node to.
	Queued func(to int32) int
	// Size is a chunk's piece size (default DefaultChunkBytes). The next chunk is handed over
	// once no more than two chunks' worth wait for the peer.
	Size int
	// Stall abandons a stream when the peer's queue has not drained for this long (default
	// 10 s: the transport breaks a connection whose write is stuck for 5 s).
	Stall time.Duration

	mu     sync.Mutex
	active map[int32]bool
	next   uint64
}

// Stream sends msg to node to in chunks, on a goroutine, and then calls done once: ok when
// every chunk was handed to the transport, not ok when the stream was abandoned (the peer's
// queue stalled, or stop closed). It returns false, and calls nothing, when a stream to node
// to is still under way: that stream's done stands for this message too.
func (s *ChunkSender) Stream(stop <-chan struct{}, to int32, msg []byte, done func(ok bool)) bool {
	size := s.Size
	if size <= 0 {
		size = DefaultChunkBytes
	}
	stall := s.Stall
	if stall <= 0 {
		stall = 10 * time.Second
	}
	s.mu.Lock()
	if s.active[to] {
		s.mu.Unlock()
		return false
	}
	if s.active == nil {
		s.active = map[int32]bool{}
		s.next = rand.Uint64()
	}
	s.active[to] = true
	s.next++
	stream := s.next
	s.mu.Unlock()
	go func() {
		ok := s.stream(stop, to, stream, msg, size, stall)
		s.mu.Lock()
		delete(s.active, to)
		s.mu.Unlock()
		done(ok)
	}()
	return true
}

func (s *ChunkSender) stream(stop <-chan struct{}, to int32, stream uint64, msg []byte, size int, stall time.Duration) bool {
	count := max(1, (len(msg)+size-1)/size)
	frame := make([]byte, 0, chunkHeader+size)
	for i := range count {
		if !s.drained(stop, to, 2*size, stall) {
			return false
		}
		piece := msg[i*size : min(len(msg), (i+1)*size)]
		frame = appendChunk(frame[:0], stream, uint32(i), uint32(count), uint64(len(msg)), piece)
		s.Send(to, frame)
	}
	return true
}

// drained waits until at most limit bytes wait for node to. It reports false when stop closes
// or the queue does not shrink at all for stall (it may grow and shrink above limit with
// other traffic to the peer, which is not a stall).
func (s *ChunkSender) drained(stop <-chan struct{}, to int32, limit int, stall time.Duration) bool {
	last, since := s.Queued(to), time.Now()
	wait := 100 * time.Microsecond
	for last > limit {
		select {
		case <-stop:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Millisecond)
		q := s.Queued(to)
		switch {
		case q < last: // some of it was written (other traffic to the peer counts too)
			since = time.Now()
		case time.Since(since) > stall:
			return false
		}
		last = q
	}
	return true
}

// ChunkAssembler puts messages sent in chunks back together, one partial message per sender.
// It is safe for concurrent use.
type ChunkAssembler struct {
	// Max bounds a message's total size (default defaultMaxChunked); a stream announcing more
	// is refused at its first chunk.
	Max uint64

	mu      sync.Mutex
	partial map[int32]*partialMsg
}

type partialMsg struct {
	stream uint64
	next   uint32
	count  uint32
	total  uint64
	buf    []byte
	last   time.Time // when its last chunk came
	lost   bool      // a chunk of the stream was missed: the rest is dropped silently
}

// ErrChunkLost: a chunk that is not the next one of its sender's current stream; the partial
// message is dropped.
var ErrChunkLost = errors.New("raftlog: a snapshot chunk is missing")

// Add takes a chunk frame from node from. It returns the whole message when the chunk was its
// last. The returned message is the caller's.
func (a *ChunkAssembler) Add(from int32, frame []byte) ([]byte, error) {
	c, err := parseChunk(frame)
	if err != nil {
		return nil, err
	}
	limit := a.Max
	if limit == 0 {
		limit = defaultMaxChunked
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.partial == nil {
		a.partial = map[int32]*partialMsg{}
	}
	p := a.partial[from]
	if c.Index == 0 {
		delete(a.partial, from)
		if c.Total > limit {
			return nil, fmt.Errorf("%w: a message of %d bytes (limit %d)", ErrBadChunk, c.Total, limit)
		}
		// Grown as pieces arrive, not sized by what the first chunk announces.
		p = &partialMsg{stream: c.Stream, count: c.Count, total: c.Total}
		a.partial[from] = p
	} else if p != nil && p.lost && p.stream == c.Stream {
		p.last = time.Now()
		return nil, nil // the rest of a stream already reported lost
	} else if p == nil || p.lost || p.stream != c.Stream || p.next != c.Index || p.count != c.Count || p.total != c.Total {
		want := "none"
		if p != nil && !p.lost {
			want = fmt.Sprintf("chunk %d of stream %d", p.next, p.stream)
		}
		// Kept as lost (without its pieces) so that the stream's later chunks go unreported.
		a.partial[from] = &partialMsg{stream: c.Stream, lost: true, last: time.Now()}
		return nil, fmt.Errorf("%w: chunk %d of stream %d came, expected %s", ErrChunkLost, c.Index, c.Stream, want)
	}
	if uint64(len(p.buf))+uint64(len(c.Piece)) > p.total {
		delete(a.partial, from)
		return nil, fmt.Errorf("%w: pieces beyond the message's %d bytes", ErrBadChunk, p.total)
	}
	p.buf = append(p.buf, c.Piece...)
	p.next++
	p.last = time.Now()
	if p.next < p.count {
		return nil, nil
	}
	delete(a.partial, from)
	if uint64(len(p.buf)) != p.total {
		return nil, fmt.Errorf("%w: %d bytes of a message of %d", ErrBadChunk, len(p.buf), p.total)
	}
	return p.buf, nil
}

// Expire drops the partial messages that received no chunk for idle: their senders stopped
// (a sender abandons a stream whose queue stalls for 10 s), and would hold their memory until
// the next stream.
func (a *ChunkAssembler) Expire(idle time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for from, p := range a.partial {
		if time.Since(p.last) > idle {
			delete(a.partial, from)
		}
	}
}
