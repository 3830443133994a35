package objects

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// DefaultCacheBytes bounds the read cache by default.
const DefaultCacheBytes = 256 << 20

// concurrentGets bounds the GETs the cache has in flight at once, and readAhead how many of a
// partition's sections a read asks for before it needs them. A consumer catching up over many
// small files (a Ripcord outage writes one per agent flush) would otherwise pay one GET's
// round trip per file, in a row, for every partition of its fetch.
const (
	concurrentGets = 16
	readAhead      = 16
)

// Cache is the bounded read cache of object ranges (a partition's section of a file), least
// recently used out first. Concurrent misses of one range share one GET. The writer adds the
// sections it writes, so a consumer reading the tail on the writing node costs no GET.
type Cache struct {
	store   objstore.Store
	max     int64
	metrics *metrics.Objects

	mu       sync.Mutex
	size     int64
	lru      *list.List // of *cacheEntry, most recent first
	entries  map[rangeKey]*list.Element
	inflight map[rangeKey]*fill

	gets chan struct{} // a slot per GET in flight

	peers     Peers               // nil: every miss reads the store
	peerBytes *semaphore.Weighted // bytes asked of peers and not yet answered
	peerFails map[int32]time.Time // when a read from each peer last failed (under mu)
}

// Peers routes a node's reads of object files to the node that serves each file to its zone
// (rack), as WarpStream's agents share one file cache per availability zone: a file consumers
// on many nodes read is read from the store about once per zone, not once per node
// (docs/object-topics.md §3).
type Peers interface {
	// Owner is the node that serves key to this node's zone, and how this node reads it.
	Owner(key string) (node int32, route Route)
	// Read asks node for n bytes of key at off, which it answers through its cache (Serve).
	Read(ctx context.Context, node int32, key string, off uint64, n uint32) ([]byte, error)
}

// peerTimeout bounds a read from a peer; a peer that does not answer by then, or answers
// nothing usable, is not asked again for peerBackoff (a stopped process is fenced, and so no
// owner, only once its session has lapsed). peerInFlight bounds the bytes a node has asked of
// peers and not received: the answers share each peer's connection (and its bounded queue,
// 64 MiB) with Raft and replication.
const (
	peerTimeout  = 3 * time.Second
	peerBackoff  = 10 * time.Second
	peerInFlight = MaxPeerRead
)

// peerHedge: a read from a peer that has not answered by then is read from the store as well
// (the peer's answer, if it comes, is dropped), so a paused owner costs a reader this long, not
// peerTimeout. It is well above a loopback or in-zone owner's answer, which includes its GET
// of a 4 MiB chunk.
const peerHedge = time.Second

var errPeerSlow = errors.New("objects: the owner did not answer in time")

// MaxPeerRead bounds a range read from a peer (and served to one): its answer is one frame on
// the cluster transport, which takes frames of up to 64 MiB. A larger section is read from the
// store.
const MaxPeerRead = 32 << 20

// ErrOwnerRefused is a Peers.Read error for an owner that answered that it could not serve the
// range (its own read failed, or its connection to this node is full): it is up, so other
// files may still be read through it.
var ErrOwnerRefused = errors.New("objects: the owner could not serve the range")

// SetPeers has misses read through their files' owners. Call it before the cache is used.
func (c *Cache) SetPeers(p Peers) {
	c.peers, c.peerBytes, c.peerFails = p, semaphore.NewWeighted(peerInFlight), map[int32]time.Time{}
}

type rangeKey struct {
	key   string
	off   uint64
	chunk bool // an owner's chunk of a file (Serve), not a section run
}

type cacheEntry struct {
	k    rangeKey
	data []byte
}

type fill struct {
	done chan struct{}
	data []byte
	err  error
}

// NewCache returns a cache of at most maxBytes over store.
func NewCache(store objstore.Store, maxBytes int64, m *metrics.Objects) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{store: store, max: maxBytes, metrics: m, lru: list.New(), entries: map[rangeKey]*list.Element{},
		inflight: map[rangeKey]*fill{}, gets: make(chan struct{}, concurrentGets)}
}

// Add keeps data as the range of key at off (its bytes must not change afterwards).
func (c *Cache) Add(key string, off uint64, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(rangeKey{key: key, off: off}, data)
}

func (c *Cache) addLocked(k rangeKey, data []byte) {
	if int64(len(data)) > c.max/4 { // one range must not flush the cache
		return
	}
	if el, ok := c.entries[k]; ok {
		c.lru.MoveToFront(el)
		return
	}
	c.entries[k] = c.lru.PushFront(&cacheEntry{k, data})
	c.size += int64(len(data))
	for c.size > c.max {
		c.removeLocked(c.lru.Back())
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.entries, e.k)
	c.size -= int64(len(e.data))
}

// Get returns n bytes of key at off, from the cache or with one ranged GET. The result must
// not be modified.
func (c *Cache) Get(ctx context.Context, key string, off uint64, n uint32) ([]byte, error) {
	return c.get(ctx, key, off, n, false)
}

// get is Get; local: the range is read from the store itself, never through its owner.
func (c *Cache) get(ctx context.Context, key string, off uint64, n uint32, local bool) ([]byte, error) {
	k := rangeKey{key: key, off: off}
	c.mu.Lock()
	if data, ok := c.hitLocked(k, n); ok {
		c.mu.Unlock()
		c.metrics.Cache(true)
		return data, nil
	}
	c.metrics.Cache(false)
	f := c.startLocked(k, n, local)
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	if len(f.data) < int(n) {
		return c.get(ctx, key, off, n, local) // a shorter range was being read: read this one
	}
	return f.data[:n], nil
}

// cached returns n bytes of key at off if the cache holds them, without reading anything.
func (c *Cache) cached(key string, off uint64, n uint32) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.hitLocked(rangeKey{key: key, off: off}, n)
	if ok {
		c.metrics.Cache(true)
	}
	return data, ok
}

// hitLocked returns the first n bytes of k's entry, if it holds them, as the most recently used.
func (c *Cache) hitLocked(k rangeKey, n uint32) ([]byte, bool) {
	el, ok := c.cachedLocked(k, n)
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).data[:n], true
}

// keepsChunks reports whether the cache is large enough to keep an owner's chunks (one range
// must not take more than a quarter of it); a smaller one reads and serves plain ranges.
func (c *Cache) keepsChunks() bool { return chunkSize <= c.max/4 }

// cachedLocked returns the entry of k if it holds at least n bytes.
func (c *Cache) cachedLocked(k rangeKey, n uint32) (*list.Element, bool) {
	el, ok := c.entries[k]
	return el, ok && len(el.Value.(*cacheEntry).data) >= int(n)
}

// startLocked returns the fill of k under way, or starts one (from the store itself if local,
// else through the file's owner).
func (c *Cache) startLocked(k rangeKey, n uint32, local bool) *fill {
	f, ok := c.inflight[k]
	if !ok {
		f = &fill{done: make(chan struct{})}
		c.inflight[k] = f
		go c.fillRun([]objRange{{k.key, k.off, n, k.chunk}}, []*fill{f}, local)
	}
	return f
}

// Serve returns n bytes of key at off for a peer that takes this node for the file's owner:
// from the cache, or from consecutive cached sections (the writer's, which a peer asks for in
// one range), or from the file's chunks of chunkSize bytes, each read with one GET of the store
// and kept (so the zone's nodes reading different sections of one file cost one GET), never
// through another peer. The answer is checked as a GET's is.
func (c *Cache) Serve(ctx context.Context, key string, off uint64, n uint32) ([]byte, error) {
	if n == 0 || n > MaxPeerRead {
		return nil, fmt.Errorf("objects: a peer asked for %d bytes of %s (1 to %d)", n, key, MaxPeerRead)
	}
	c.mu.Lock()
	data, ok := c.hitLocked(rangeKey{key: key, off: off}, n)
	if !ok {
		data, ok = c.joinedLocked(key, off, n)
	}
	c.mu.Unlock()
	if ok {
		c.metrics.Cache(true)
		return data, nil
	}
	if !c.keepsChunks() { // read just the range
		return c.get(ctx, key, off, n, true)
	}
	c.metrics.Cache(false)
	return c.fromChunks(ctx, key, off, n)
}

// fromChunks returns n bytes of key at off out of the file's chunks (read at once, each with
// one GET), checked. Chunks that end too soon or do not check out are dropped, to be read
// again next time.
func (c *Cache) fromChunks(ctx context.Context, key string, off uint64, n uint32) ([]byte, error) {
	end := off + uint64(n)
	first := off / chunkSize * chunkSize
	var fills []*fill
	var datas [][]byte
	c.mu.Lock()
	for at := first; at < end; at += chunkSize {
		k := rangeKey{key, at, true}
		if el, ok := c.entries[k]; ok {
			c.lru.MoveToFront(el)
			fills, datas = append(fills, nil), append(datas, el.Value.(*cacheEntry).data)
		} else {
			fills, datas = append(fills, c.startLocked(k, chunkSize, true)), append(datas, nil)
		}
	}
	c.mu.Unlock()
	out := make([]byte, 0, n)
	var err error
	for i, f := range fills {
		if f != nil {
			select {
			case <-f.done:
				datas[i], err = f.data, f.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if err != nil {
				return nil, err
			}
		}
		at := first + uint64(i)*chunkSize
		lo, hi := max(off, at)-at, min(end, at+chunkSize)-at
		if hi > uint64(len(datas[i])) {
			err = fmt.Errorf("%w: %s ends at %d, before %d", objtopic.ErrBadFile, key, at+uint64(len(datas[i])), end)
			break
		}
		out = append(out, datas[i][lo:hi]...)
	}
	if err == nil {
		err = checkSection(key, out, n)
	}
	if err != nil {
		c.mu.Lock()
		for at := first; at < end; at += chunkSize {
			if el, ok := c.entries[rangeKey{key, at, true}]; ok {
				c.removeLocked(el)
			}
		}
		c.mu.Unlock()
		return nil, err
	}
	return out, nil
}

// chunkSize is the unit in which an owner reads and keeps the files it serves to peers.
const chunkSize = 4 << 20

// joinedLocked copies n bytes of key at off out of cached ranges that follow one another
// from off, if they cover it.
func (c *Cache) joinedLocked(key string, off uint64, n uint32) ([]byte, bool) {
	var els []*list.Element
	for at, end := off, off+uint64(n); at < end; {
		el, ok := c.entries[rangeKey{key: key, off: at}]
		if !ok || len(el.Value.(*cacheEntry).data) == 0 {
			return nil, false
		}
		els = append(els, el)
		at += uint64(len(el.Value.(*cacheEntry).data))
	}
	out := make([]byte, 0, n)
	for _, el := range els {
		c.lru.MoveToFront(el)
		out = append(out, el.Value.(*cacheEntry).data...)
	}
	return out[:n], true
}

// prefetch starts reading the range of key at off, unless it is cached or being read.
func (c *Cache) prefetch(key string, off uint64, n uint32) {
	if key == "" { // an inline section (objtopic.Extent.Inline): nothing to read
		return
	}
	k := rangeKey{key: key, off: off}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cachedLocked(k, n); !ok {
		c.startLocked(k, n, false)
	}
}

// objRange is a range of an object that the cache reads and keeps as one entry.
type objRange struct {
	key   string
	off   uint64
	n     uint32
	chunk bool // an owner's chunk: not whole batches, so not checked until served
}

// coalesceGap and coalesceSpan bound the sections of one object read with one GET: no more
// than coalesceGap bytes between two of them (read and dropped), and coalesceSpan in all.
const (
	coalesceGap  = 256 << 10
	coalesceSpan = 8 << 20
)

// prefetchSections starts reading the sections that are neither cached nor being read. Sections
// of one object close to each other are read with one GET: a file holds its partitions'
// sections side by side, so a fetch of many partitions written together costs one GET per
// file rather than one per partition and file.
func (c *Cache) prefetchSections(secs []objRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var todo []objRange
	for _, s := range secs {
		k := rangeKey{s.key, s.off, s.chunk}
		if _, cached := c.cachedLocked(k, s.n); !cached {
			if _, reading := c.inflight[k]; !reading {
				todo = append(todo, s)
			}
		}
	}
	slices.SortFunc(todo, func(a, b objRange) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.off, b.off), cmp.Compare(b.n, a.n))
	})
	todo = slices.CompactFunc(todo, func(a, b objRange) bool { return a.key == b.key && a.off == b.off })
	for i := 0; i < len(todo); {
		end := todo[i].off + uint64(todo[i].n)
		j := i + 1
		for ; j < len(todo) && todo[j].key == todo[i].key && todo[j].off >= end && todo[j].off-end <= coalesceGap &&
			todo[j].off+uint64(todo[j].n)-todo[i].off <= coalesceSpan; j++ {
			end = todo[j].off + uint64(todo[j].n)
		}
		if j == i+1 {
			c.startLocked(rangeKey{key: todo[i].key, off: todo[i].off}, todo[i].n, false)
		} else {
			run := slices.Clone(todo[i:j])
			fills := make([]*fill, len(run))
			for x, s := range run {
				fills[x] = &fill{done: make(chan struct{})}
				c.inflight[rangeKey{key: s.key, off: s.off}] = fills[x]
			}
			go c.fillRun(run, fills, false)
		}
		i = j
	}
}

// fillRun reads sections of one object, in offset order and apart, with one read of the range
// they span (not bound to one reader's context: others may wait for it): from the file's
// owner unless local, and from the store if that fails or the owner is this node.
func (c *Cache) fillRun(run []objRange, fills []*fill, local bool) {
	ok := !local && c.peers != nil && c.fillThroughOwner(run, fills)
	if !ok {
		c.fillFromStore(run, fills)
	}
	c.mu.Lock()
	for x, s := range run {
		k := rangeKey{s.key, s.off, s.chunk}
		delete(c.inflight, k)
		if fills[x].err == nil {
			c.addLocked(k, fills[x].data)
		}
	}
	c.mu.Unlock()
	for _, f := range fills {
		close(f.done)
	}
}

// fillThroughOwner reads the run through its file's owner: another node, or this one's chunks
// of the file when it is the owner (so its own reads and its peers' share one GET per chunk).
// It reports whether every section came and checked out.
func (c *Cache) fillThroughOwner(run []objRange, fills []*fill) bool {
	key, from, size := spanOf(run)
	if size > MaxPeerRead {
		return false
	}
	node, route := c.peers.Owner(key)
	switch {
	case route == ReadStore || route == ReadChunks && !c.keepsChunks():
		return false
	case route == ReadChunks:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		data, err := c.fromChunks(ctx, key, from, size)
		return err == nil && splitRun(run, fills, data) == nil
	}
	if c.peerSkipped(node) {
		return false
	}
	wait, cancelWait := context.WithTimeout(context.Background(), peerTimeout)
	err := c.peerBytes.Acquire(wait, int64(size))
	cancelWait()
	if err != nil { // this node has too much asked already: no fault of the owner's
		return false
	}
	type answer struct {
		data []byte
		err  error
	}
	answered := make(chan answer, 1)
	start := time.Now()
	go func() { // runs to its end even when the fill has gone to the store meanwhile
		defer c.peerBytes.Release(int64(size))
		ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
		defer cancel()
		data, err := c.peers.Read(ctx, node, key, from, size)
		if err != nil && !errors.Is(err, ErrOwnerRefused) {
			// An owner that answered that it could not read the range (its store failed, or
			// it is busy) is up: only a missing answer keeps the others off it.
			c.peerFailed(node)
		}
		answered <- answer{data, err}
	}()
	var a answer
	select {
	case a = <-answered:
	case <-time.After(peerHedge): // a paused or slow owner: the store now, the answer is dropped
		c.metrics.PeerRead(0, errPeerSlow)
		return false
	}
	err = a.err
	if err == nil {
		if err = splitRun(run, fills, a.data); err != nil {
			c.peerFailed(node) // an answer that does not check out: not an owner to ask for now
		}
	}
	c.metrics.PeerRead(len(a.data), err)
	if err != nil {
		return false
	}
	c.metrics.Stage("peer", time.Since(start))
	return true
}

// peerFailed keeps reads off node for peerBackoff.
func (c *Cache) peerFailed(node int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peerFails[node] = time.Now()
}

// peerSkipped reports whether node failed within peerBackoff.
func (c *Cache) peerSkipped(node int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	failed, ok := c.peerFails[node]
	return ok && time.Since(failed) < peerBackoff
}

// fillFromStore reads the run with one ranged GET.
func (c *Cache) fillFromStore(run []objRange, fills []*fill) {
	c.gets <- struct{}{}
	defer func() { <-c.gets }()
	key, from, size := spanOf(run)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	start := time.Now()
	data, err := c.store.GetRange(ctx, key, int64(from), int64(size))
	cancel()
	took := time.Since(start)
	if err != nil {
		for _, f := range fills {
			f.data, f.err = nil, err
		}
	} else {
		err = splitRun(run, fills, data) // a section that does not check out fails the GET, as counted
	}
	c.metrics.Request("get", len(data), err)
	if err == nil {
		c.metrics.Stage("get", took)
	}
}

// spanOf is the object and range a run of sections spans.
func spanOf(run []objRange) (key string, from uint64, size uint32) {
	last := run[len(run)-1]
	return run[0].key, run[0].off, uint32(last.off + uint64(last.n) - run[0].off)
}

// splitRun hands each fill its section of data (the run's span), checked, and returns the
// first section's error.
func splitRun(run []objRange, fills []*fill, data []byte) error {
	from := run[0].off
	var first error
	for x, s := range run {
		f := fills[x]
		lo, hi := s.off-from, s.off-from+uint64(s.n)
		if len(run) == 1 {
			f.data = data
		} else { // its own copy: a cache entry must not hold the whole run
			f.data = bytes.Clone(data[min(lo, uint64(len(data))):min(hi, uint64(len(data)))])
		}
		if s.chunk { // checked when served
			continue
		}
		if f.err = checkSection(run[0].key, f.data, s.n); f.err != nil && first == nil {
			first = f.err
		}
	}
	return first
}
