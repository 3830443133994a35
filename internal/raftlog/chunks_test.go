package raftlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// chunkPeer is a peer's end of a transport for a ChunkSender: Send queues a frame, and a
// reader takes frames off the queue at its own pace, into an assembler.
type chunkPeer struct {
	mu        sync.Mutex
	frames    [][]byte
	queued    int
	maxQueued int
	drop      func(index int) bool // frames dropped on the way (by their order of sending)
	sent      int
}

func (p *chunkPeer) send(to int32, frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent++
	if p.drop != nil && p.drop(p.sent-1) {
		return
	}
	p.frames = append(p.frames, append([]byte(nil), frame...))
	p.queued += len(frame)
	p.maxQueued = max(p.maxQueued, p.queued)
}

func (p *chunkPeer) queuedBytes(int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queued
}

// take removes the oldest frame, if any.
func (p *chunkPeer) take() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.frames) == 0 {
		return nil
	}
	f := p.frames[0]
	p.frames = p.frames[1:]
	p.queued -= len(f)
	return f
}

func randomMessage(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestChunkStream: a message streamed in chunks comes out of the assembler whole, once; the
// sender hands a chunk over only while at most two chunks' worth wait for the peer, so the
// transport's queue never holds the message; done reports success once.
func TestChunkStream(t *testing.T) {
	const size = 1000
	msg := randomMessage(25*size + 17)
	p := &chunkPeer{}
	s := &ChunkSender{Send: p.send, Queued: p.queuedBytes, Size: size}
	var a ChunkAssembler
	done := make(chan bool, 2)
	stop := make(chan struct{})
	if !s.Stream(stop, 2, msg, func(ok bool) { done <- ok }) {
		t.Fatal("the first stream to a peer was refused")
	}
	if s.Stream(stop, 2, msg, func(ok bool) { done <- ok }) {
		t.Fatal("a second stream to a peer with one under way was taken")
	}
	var got [][]byte
	deadline := time.Now().Add(10 * time.Second)
	for len(got) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the message did not come")
		}
		f := p.take()
		if f == nil {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		m, err := a.Add(1, f)
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			got = append(got, m)
		}
	}
	if ok := <-done; !ok {
		t.Fatal("done reported failure")
	}
	if !bytes.Equal(got[0], msg) {
		t.Fatalf("assembled %d bytes differ from the %d sent", len(got[0]), len(msg))
	}
	if p.sent != 26 {
		t.Fatalf("%d chunks sent; want 26", p.sent)
	}
	if limit := 3 * (size + chunkHeader); p.maxQueued > limit {
		t.Fatalf("up to %d bytes queued; want at most %d", p.maxQueued, limit)
	}
	// The stream ended: the next one to the peer is taken.
	if !s.Stream(stop, 2, msg[:10], func(ok bool) { done <- ok }) {
		t.Fatal("a stream after the first ended was refused")
	}
	<-done
}

// TestChunkStreamAbandoned: a peer whose queue does not drain makes the stream end, reported
// as failed (and a new stream to it is taken); so does stop.
func TestChunkStreamAbandoned(t *testing.T) {
	p := &chunkPeer{}
	s := &ChunkSender{Send: p.send, Queued: p.queuedBytes, Size: 100, Stall: 50 * time.Millisecond}
	done := make(chan bool, 1)
	msg := randomMessage(1000)
	s.Stream(nil, 2, msg, func(ok bool) { done <- ok })
	select {
	case ok := <-done:
		if ok {
			t.Fatal("a stream to a peer that never drained reported success")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stream to a peer that never drained did not end")
	}
	if p.sent != 2 { // a chunk is handed over while at most two pieces' worth wait
		t.Fatalf("%d chunks handed over to a stalled peer; want 2", p.sent)
	}
	stop := make(chan struct{})
	s.Stall = time.Hour
	if !s.Stream(stop, 2, msg, func(ok bool) { done <- ok }) {
		t.Fatal("a stream after an abandoned one was refused")
	}
	close(stop)
	if ok := <-done; ok {
		t.Fatal("a stopped stream reported success")
	}
}

// TestChunkStreamBesideOtherTraffic: a peer's queue kept above the limit by other traffic that
// drains and refills is no stall: the stream waits, and goes on once the queue is low. It used
// to count only a new lowest queue as progress, and abandoned such a stream after Stall.
func TestChunkStreamBesideOtherTraffic(t *testing.T) {
	p := &chunkPeer{}
	start := time.Now()
	var calls atomic.Int64
	queued := func(to int32) int {
		n := calls.Add(1)
		if time.Since(start) < 300*time.Millisecond { // others' frames: 500, 400, 500, 400 ...
			return 400 + 100*int(n%2)
		}
		return 0
	}
	s := &ChunkSender{Send: p.send, Queued: queued, Size: 100, Stall: 50 * time.Millisecond}
	done := make(chan bool, 1)
	s.Stream(nil, 2, randomMessage(1000), func(ok bool) { done <- ok })
	select {
	case ok := <-done:
		if !ok {
			t.Fatalf("abandoned after %v beside other traffic", time.Since(start).Round(time.Millisecond))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
	if p.sent != 10 {
		t.Fatalf("%d chunks sent; want 10", p.sent)
	}
}

// TestChunkAssembler: a lost chunk drops the partial message, and the rest of its stream goes
// without an error (one per lost stream, not one per chunk); a new stream starts afresh at its
// first chunk; senders are kept apart; frames that cannot be
// chunks and streams above the limit are refused.
func TestChunkAssembler(t *testing.T) {
	msg := randomMessage(10)
	chunks := func(stream uint64, n int) [][]byte {
		var out [][]byte
		for i := range n {
			lo, hi := i*len(msg)/n, (i+1)*len(msg)/n
			out = append(out, appendChunk(nil, stream, uint32(i), uint32(n), uint64(len(msg)), msg[lo:hi]))
		}
		return out
	}
	a := ChunkAssembler{Max: 100}
	add := func(from int32, f []byte) ([]byte, error) {
		t.Helper()
		return a.Add(from, f)
	}
	s1 := chunks(1, 3)
	if m, err := add(1, s1[0]); m != nil || err != nil {
		t.Fatalf("first chunk: %v, %v", m, err)
	}
	if _, err := add(1, s1[2]); !errors.Is(err, ErrChunkLost) {
		t.Fatalf("chunk 2 after chunk 0: %v; want ErrChunkLost", err)
	}
	if m, err := add(1, s1[1]); m != nil || err != nil {
		t.Fatalf("the rest of a stream reported lost: %v, %v; want it dropped without an error", m, err)
	}
	// Interleaved senders, and a stream that starts while another is partial.
	s2, s3 := chunks(2, 2), chunks(3, 4)
	add(1, s1[0])
	add(2, s3[0])
	add(2, s3[1])
	if m, err := add(1, s2[0]); m != nil || err != nil { // stream 2 replaces stream 1
		t.Fatalf("a new stream's first chunk: %v, %v", m, err)
	}
	if m, err := add(1, s2[1]); err != nil || !bytes.Equal(m, msg) {
		t.Fatalf("stream 2 assembled %v, %v", m, err)
	}
	add(2, s3[2])
	if m, err := add(2, s3[3]); err != nil || !bytes.Equal(m, msg) {
		t.Fatalf("sender 2's stream assembled %v, %v", m, err)
	}
	// One chunk alone is a whole message.
	if m, err := add(1, chunks(4, 1)[0]); err != nil || !bytes.Equal(m, msg) {
		t.Fatalf("a one-chunk stream: %v, %v", m, err)
	}
	for _, c := range []struct {
		what  string
		frame []byte
	}{
		{"a short frame", make([]byte, chunkHeader-1)},
		{"count 0", appendChunk(nil, 5, 0, 0, 10, nil)},
		{"index past count", appendChunk(nil, 5, 2, 2, 10, nil)},
		{"a piece larger than the message", appendChunk(nil, 5, 0, 2, 3, msg)},
		{"a message above the limit", appendChunk(nil, 5, 0, 2, 101, msg)},
		{"a last chunk short of the total", appendChunk(nil, 5, 0, 1, 11, msg)},
	} {
		if m, err := add(3, c.frame); m != nil || !errors.Is(err, ErrBadChunk) {
			t.Errorf("%s: %v, %v; want ErrBadChunk", c.what, m, err)
		}
	}
	// Pieces that would go past the announced total.
	add(3, appendChunk(nil, 6, 0, 3, 10, msg[:6]))
	if _, err := add(3, appendChunk(nil, 6, 1, 3, 10, msg[:6])); !errors.Is(err, ErrBadChunk) {
		t.Errorf("pieces past the total: %v; want ErrBadChunk", err)
	}
	// A partial message no chunk came for expires.
	add(3, appendChunk(nil, 7, 0, 2, 10, msg[:5]))
	a.Expire(time.Hour)
	if len(a.partial) != 1 {
		t.Fatalf("%d partial messages after a long expiry; want 1", len(a.partial))
	}
	time.Sleep(2 * time.Millisecond)
	a.Expire(time.Millisecond)
	if len(a.partial) != 0 {
		t.Fatalf("%d partial messages after expiry; want 0", len(a.partial))
	}
	if _, err := add(3, appendChunk(nil, 7, 1, 2, 10, msg[5:])); !errors.Is(err, ErrChunkLost) {
		t.Fatalf("the rest of an expired stream: %v; want ErrChunkLost", err)
	}
}

// TestChunkAssemblerGrowsWithPieces: a partial message holds what its pieces brought, not what
// its first chunk announces. A 25-byte first chunk announcing 2 GiB used to allocate 64 MiB at
// once, kept for a minute per sending node id: four such frames pinned 256 MiB.
func TestChunkAssemblerGrowsWithPieces(t *testing.T) {
	var a ChunkAssembler // as the controller's: no Max
	frame := appendChunk(nil, 1, 0, 1<<31, defaultMaxChunked-1, []byte{0})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const senders = 4
	for from := int32(0); from < senders; from++ {
		if m, err := a.Add(from, frame); err != nil || m != nil {
			t.Fatalf("a first chunk: %v, %v", m, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(a.partial) != senders {
		t.Fatalf("%d partial messages; want %d", len(a.partial), senders)
	}
	runtime.KeepAlive(&a)
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 1<<20 {
		t.Fatalf("%d first chunks of %d bytes hold %d KiB of heap", senders, len(frame), held>>10)
	}
}

// FuzzChunkAssembler: any frames, from two senders, are taken or refused without a panic, and a
// message comes out only at its announced size, never above the limit.
func FuzzChunkAssembler(f *testing.F) {
	msg := randomMessage(40)
	var seed []byte
	for i := range 4 {
		frame := appendChunk(nil, 9, uint32(i), 4, 40, msg[i*10:(i+1)*10])
		seed = append(seed, byte(len(frame)))
		seed = append(seed, frame...)
	}
	f.Add(seed)
	f.Add([]byte{24, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		a := ChunkAssembler{Max: 1 << 10}
		for i := 0; len(data) > 0; i++ {
			n := min(int(data[0]), len(data)-1)
			frame := data[1 : 1+n]
			data = data[1+n:]
			var total uint64
			if c, err := parseChunk(frame); err == nil {
				total = c.Total
			}
			m, err := a.Add(int32(i%2), frame)
			if err != nil && m != nil {
				t.Fatal("a message with an error")
			}
			if m != nil && (uint64(len(m)) != total || len(m) > 1<<10) {
				t.Fatalf("a message of %d bytes; its last chunk announced %d", len(m), total)
			}
		}
	})
}
