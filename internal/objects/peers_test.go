package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// TestOwner: a file's owner for a zone is its writer while that is live and in the zone, else
// the zone's live node it hashes to, the same from every node of the zone.
func TestOwner(t *testing.T) {
	img := &controller.Image{Nodes: map[int32]*controller.Node{
		1: {ID: 1, Rack: "a", Run: "1-aa"},
		2: {ID: 2, Rack: "a", Run: "2-bb"},
		3: {ID: 3, Rack: "b", Run: "3-cc"},
		4: {ID: 4, Rack: "a", Run: "4-dd", Fenced: true},
		5: {ID: 5, Rack: "a", Run: "5-ee", Agent: true},
	}}
	type want struct {
		node  int32
		route Route
	}
	for _, tc := range []struct {
		self int32
		key  string
		want want
	}{
		{1, JournalKey("2-bb", 7), want{2, ReadPeer}},   // the writer, live, same zone
		{1, JournalKey("1-aa", 7), want{1, ReadChunks}}, // this node wrote it: it serves the zone
		{5, JournalKey("2-bb", 7), want{2, ReadPeer}},   // an agent reads through the writer too
		{3, JournalKey("3-cc", 1), want{3, ReadStore}},  // the only node of its zone
		{3, JournalKey("1-aa", 1), want{3, ReadStore}},  // the writer is in another zone
		{9, JournalKey("2-bb", 1), want{9, ReadStore}},  // not in the image
	} {
		if node, route := Owner(img, tc.self, tc.key); node != tc.want.node || route != tc.want.route {
			t.Errorf("Owner(self %d, %s) = %d, %v; want %d, %v", tc.self, tc.key, node, route, tc.want.node, tc.want.route)
		}
	}
	// Files without a live writer in the zone: every node of zone a picks the same live owner
	// (never fenced node 4, nor node 3 of zone b), and the files spread over the candidates.
	shares := map[int32]int{}
	for i := range 3000 {
		for _, key := range []string{JournalKey("4-dd", uint64(i+1)), fmt.Sprintf("merged/%d", i)} {
			owner, _ := Owner(img, 1, key)
			for _, self := range []int32{1, 2, 5} {
				want := ReadPeer
				if owner == self {
					want = ReadChunks
				}
				if o, route := Owner(img, self, key); o != owner || route != want {
					t.Fatalf("%s: node 1 says owner %d, node %d says %d (route %v)", key, owner, self, o, route)
				}
			}
			shares[owner]++
		}
	}
	if shares[3] != 0 || shares[4] != 0 {
		t.Errorf("owners %v: a fenced node or another zone's owns files", shares)
	}
	for _, n := range []int32{1, 2, 5} {
		if shares[n] < 6000/3*8/10 {
			t.Errorf("owners %v: node %d owns too few of 6000 files", shares, n)
		}
	}
}

// cachePeers is a Peers whose owner is a fixed node answered by a function.
type cachePeers struct {
	owner int32
	read  func(key string, off uint64, n uint32) ([]byte, error)
	calls atomic.Int64
}

func (p *cachePeers) Owner(string) (int32, Route) { return p.owner, ReadPeer }

// chunksPeers makes its cache the owner of every file.
type chunksPeers struct{}

func (chunksPeers) Owner(string) (int32, Route) { return 1, ReadChunks }
func (chunksPeers) Read(context.Context, int32, string, uint64, uint32) ([]byte, error) {
	return nil, errors.New("an owner asked a peer")
}
func (p *cachePeers) Read(_ context.Context, _ int32, key string, off uint64, n uint32) ([]byte, error) {
	p.calls.Add(1)
	return p.read(key, off, n)
}

// TestCacheReadsThroughPeers: a miss reads the file's owner, which answers from its cache
// (joining the writer's sections into one range) or with its own GET, never through a peer;
// a failed, short or corrupt answer falls back to the store, and the failed peer is left
// alone for a while.
func TestCacheReadsThroughPeers(t *testing.T) {
	dir := testDir(t)
	store := &gaugedStore{Store: dir}
	ctx := context.Background()
	// Two files of two partitions' sections each.
	parts := []*objtopic.Partition{{}, {}}
	bodies := map[string][]byte{}
	for i, key := range []string{JournalKey("1-aa", 1), JournalKey("1-aa", 2)} {
		var body []byte
		for _, p := range parts {
			b := testBatch(-1, 0, fmt.Sprintf("v%d", i))
			p.Extents = append(p.Extents, objtopic.Extent{File: key, Offset: uint64(len(body)), Length: uint32(len(b)), Base: int64(i), Last: int64(i)})
			body = append(body, b...)
		}
		if err := dir.Put(ctx, key, body); err != nil {
			t.Fatal(err)
		}
		bodies[key] = body
	}
	for _, p := range parts {
		p.Next = 2
	}
	values := func(c *Cache, p *objtopic.Partition) []string {
		t.Helper()
		data, err := c.Read(ctx, p, 0, 1<<20, true)
		var got []string
		if err == nil {
			err = eachRecordValue(data, func(v string) { got = append(got, v) })
		}
		if err != nil || fmt.Sprint(got) != "[v0 v1]" {
			t.Fatalf("read %v, %v; want [v0 v1]", got, err)
		}
		return got
	}

	// An owner serving a peer never asks a peer itself.
	noPeers := &cachePeers{owner: 3, read: func(string, uint64, uint32) ([]byte, error) {
		t.Error("the owner serving a peer asked a peer")
		return nil, errors.New("no")
	}}
	// The writer's cache has what it wrote; the owner serves from it.
	writer := NewCache(store, 0, nil)
	writer.SetPeers(noPeers)
	for _, p := range parts {
		for _, e := range p.Extents {
			writer.Add(e.File, e.Offset, bodies[e.File][e.Offset:e.Offset+uint64(e.Length)])
		}
	}
	peers := &cachePeers{owner: 1, read: func(key string, off uint64, n uint32) ([]byte, error) {
		return writer.Serve(ctx, key, off, n)
	}}
	reader := NewCache(store, 0, nil)
	reader.SetPeers(peers)
	reader.Prefetch([]PrefetchRead{{parts[0], 0, 1}, {parts[1], 0, 1}}) // each file's two sections in one range
	values(reader, parts[0])
	values(reader, parts[1])
	if g := store.gets.Load(); g != 0 || peers.calls.Load() == 0 {
		t.Fatalf("%d GETs and %d peer reads; want the writer's cache to serve every read", g, peers.calls.Load())
	}

	// An owner without the file GETs it once for the zone.
	owner := NewCache(store, 0, nil)
	owner.SetPeers(noPeers)
	peers.read = func(key string, off uint64, n uint32) ([]byte, error) { return owner.Serve(ctx, key, off, n) }
	for range 2 {
		values(NewCache(store, 0, nil), parts[0]) // a node without peers: one GET per file
	}
	before := store.gets.Load()
	for range 3 {
		r := NewCache(store, 0, nil)
		r.SetPeers(peers)
		values(r, parts[0])
	}
	if g := store.gets.Load() - before; g != 2 {
		t.Fatalf("three nodes reading two files through their owner: %d GETs, want 2", g)
	}
	// Nodes reading different sections of the same files through a fresh owner: it reads each
	// file once (a chunk holds the whole file), not once per section.
	owner = NewCache(store, 0, nil)
	owner.SetPeers(noPeers)
	before = store.gets.Load()
	for _, p := range parts {
		r := NewCache(store, 0, nil)
		r.SetPeers(peers)
		values(r, p)
	}
	if g := store.gets.Load() - before; g != 2 {
		t.Fatalf("two nodes reading two partitions' sections of two files through their owner: %d GETs, want 2", g)
	}

	// An owner's own reads go through its chunks too, so its read of one partition and a
	// peer's of the other share one GET per file.
	owner = NewCache(store, 0, nil)
	owner.SetPeers(chunksPeers{})
	before = store.gets.Load()
	values(owner, parts[0])
	r := NewCache(store, 0, nil)
	r.SetPeers(peers)
	values(r, parts[1])
	if g := store.gets.Load() - before; g != 2 {
		t.Fatalf("an owner and a peer reading two partitions' sections of two files: %d GETs, want 2", g)
	}

	// Failed, short and corrupt answers: the store serves the read.
	for name, answer := range map[string]func(key string, off uint64, n uint32) ([]byte, error){
		"failed": func(string, uint64, uint32) ([]byte, error) { return nil, errors.New("connection refused") },
		"short": func(key string, off uint64, n uint32) ([]byte, error) {
			return bodies[key][off : off+uint64(n)-1], nil
		},
		"corrupt": func(key string, off uint64, n uint32) ([]byte, error) {
			b := bytes.Clone(bodies[key][off : off+uint64(n)])
			b[len(b)-1] ^= 1
			return b, nil
		},
	} {
		bad := &cachePeers{owner: 2, read: answer}
		r := NewCache(store, 0, nil)
		r.SetPeers(bad)
		before := store.gets.Load()
		values(r, parts[1]) // its two files' reads may ask the peer at once
		calls := bad.calls.Load()
		if g := store.gets.Load() - before; g != 2 || calls == 0 || calls > 2 {
			t.Errorf("%s answer: %d GETs after %d peer reads; want each file read from the store", name, g, calls)
		}
		values(r, parts[0])
		if bad.calls.Load() != calls {
			t.Errorf("%s answer: the peer was asked again right after it failed", name)
		}
	}
	// An owner that answers that it cannot serve a range (its own GET failed) is still asked
	// for the next one.
	refusing := &cachePeers{owner: 2, read: func(string, uint64, uint32) ([]byte, error) {
		return nil, fmt.Errorf("%w: its store failed", ErrOwnerRefused)
	}}
	r = NewCache(store, 0, nil)
	r.SetPeers(refusing)
	values(r, parts[1])
	calls := refusing.calls.Load()
	values(r, parts[0])
	if refusing.calls.Load() == calls {
		t.Error("an owner that refused a range was not asked for the next one")
	}
}

// TestServeDropsABadChunk: an owner whose kept chunk of a file does not check out (corrupted
// in memory, or read corrupt) answers with an error, drops the chunk, and reads it again for
// the next request.
func TestServeDropsABadChunk(t *testing.T) {
	ctx := context.Background()
	key := JournalKey("1-aa", 1)
	body := append(bytes.Repeat([]byte{0}, 100), testBatch(-1, 0, "v")...) // a section at 100
	store := &gaugedStore{Store: storeWith(t, key, body)}
	owner := NewCache(store, 0, nil)
	bad := bytes.Clone(body)
	bad[len(bad)-1] ^= 1
	owner.mu.Lock()
	owner.addLocked(rangeKey{key, 0, true}, bad)
	owner.mu.Unlock()
	n := uint32(len(body) - 100)
	if _, err := owner.Serve(ctx, key, 100, n); err == nil {
		t.Fatal("Serve answered from a corrupt chunk")
	}
	got, err := owner.Serve(ctx, key, 100, n)
	if err != nil || !bytes.Equal(got, body[100:]) || store.gets.Load() != 1 {
		t.Fatalf("Serve after dropping the bad chunk: %v, %d GETs; want the section read again", err, store.gets.Load())
	}
}

// TestSmallCacheReadsRanges: a cache too small to keep a 4 MiB chunk (under 16 MiB) neither
// reads its own files in chunks nor serves peers from chunks: it reads just the ranges asked.
func TestSmallCacheReadsRanges(t *testing.T) {
	ctx := context.Background()
	key := JournalKey("1-aa", 1)
	b := testBatch(-1, 0, "v")
	body := append(bytes.Repeat([]byte{0}, 100), b...)
	body = append(body, make([]byte, 5<<20)...) // the rest of a large file
	store := &gaugedStore{Store: storeWith(t, key, body)}
	c := NewCache(store, 8<<20, nil)
	c.SetPeers(chunksPeers{})
	got, err := c.Serve(ctx, key, 100, uint32(len(b)))
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Serve = %v; want the section", err)
	}
	p := &objtopic.Partition{Next: 1, Extents: []objtopic.Extent{{File: key, Offset: 100, Length: uint32(len(b)), Base: 0, Last: 0}}}
	if _, err := c.Read(ctx, p, 0, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	if n := store.bytes.Load(); n > 1<<20 {
		t.Errorf("a cache of 8 MiB read %d bytes for a %d-byte section, twice", n, len(b))
	}
}

// TestSlowOwnerHedged: a read whose owner has not answered within peerHedge (a paused process)
// is read from the store; the owner, which did answer in the end, is asked again next time,
// and one that never answers within peerTimeout is left alone.
func TestSlowOwnerHedged(t *testing.T) {
	ctx := context.Background()
	key := JournalKey("1-aa", 1)
	b := testBatch(-1, 0, "v")
	dir := storeWith(t, key, b)
	p := &objtopic.Partition{Next: 1, Extents: []objtopic.Extent{{File: key, Offset: 0, Length: uint32(len(b))}}}
	for _, tc := range []struct {
		delay    time.Duration
		askAgain bool
	}{{peerHedge + 500*time.Millisecond, true}, {peerTimeout + time.Second, false}} {
		slow := slowPeer{delay: tc.delay, data: b}
		c := NewCache(&gaugedStore{Store: dir}, 0, nil)
		c.SetPeers(slow)
		start := time.Now()
		if data, err := c.Read(ctx, p, 0, 1<<20, true); err != nil || !bytes.Equal(data[12:], b[12:]) {
			t.Fatalf("read through an owner answering after %v: %v", tc.delay, err)
		}
		if took := time.Since(start); took > peerHedge+400*time.Millisecond {
			t.Errorf("a read through an owner answering after %v took %v; want about %v", tc.delay, took, peerHedge)
		}
		time.Sleep(tc.delay - time.Since(start) + 200*time.Millisecond) // its answer (or timeout) is in
		c.mu.Lock()
		_, skipped := c.peerFails[2]
		delete(c.entries, rangeKey{key: key})
		c.mu.Unlock()
		if skipped == tc.askAgain {
			t.Errorf("owner answering after %v: left alone %v; want %v", tc.delay, skipped, !tc.askAgain)
		}
	}
}

// slowPeer answers data after delay, or its context's error if that ends first.
type slowPeer struct {
	delay time.Duration
	data  []byte
}

func (slowPeer) Owner(string) (int32, Route) { return 2, ReadPeer }
func (p slowPeer) Read(ctx context.Context, _ int32, _ string, _ uint64, _ uint32) ([]byte, error) {
	select {
	case <-time.After(p.delay):
		return p.data, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// storeWith opens a directory store holding key with body.
func storeWith(t *testing.T, key string, body []byte) *objstore.Dir {
	t.Helper()
	dir := testDir(t)
	if err := dir.Put(context.Background(), key, body); err != nil {
		t.Fatal(err)
	}
	return dir
}
