package objects

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/metrics"
	"github.com/runnel-dev/runnel/internal/objstore"
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
}

type rangeKey struct {
	key string
	off uint64
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
	c.addLocked(rangeKey{key, off}, data)
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
		el := c.lru.Back()
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.entries, e.k)
		c.size -= int64(len(e.data))
	}
}

// Get returns n bytes of key at off, from the cache or with one ranged GET. The result must
// not be modified.
func (c *Cache) Get(ctx context.Context, key string, off uint64, n uint32) ([]byte, error) {
	k := rangeKey{key, off}
	c.mu.Lock()
	if el, ok := c.cachedLocked(k, n); ok {
		c.lru.MoveToFront(el)
		data := el.Value.(*cacheEntry).data[:n]
		c.mu.Unlock()
		c.metrics.Cache(true)
		return data, nil
	}
	c.metrics.Cache(false)
	f := c.startLocked(k, n)
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
		return c.Get(ctx, key, off, n) // a shorter range was being read: read this one
	}
	return f.data[:n], nil
}

// cachedLocked returns the entry of k if it holds at least n bytes.
func (c *Cache) cachedLocked(k rangeKey, n uint32) (*list.Element, bool) {
	el, ok := c.entries[k]
	return el, ok && len(el.Value.(*cacheEntry).data) >= int(n)
}

// startLocked returns the fill of k under way, or starts one.
func (c *Cache) startLocked(k rangeKey, n uint32) *fill {
	f, ok := c.inflight[k]
	if !ok {
		f = &fill{done: make(chan struct{})}
		c.inflight[k] = f
		go c.fillRun([]objRange{{k.key, k.off, n}}, []*fill{f})
	}
	return f
}

// prefetch starts reading the range of key at off, unless it is cached or being read.
func (c *Cache) prefetch(key string, off uint64, n uint32) {
	if key == "" { // an inline section (objtopic.Extent.Inline): nothing to read
		return
	}
	k := rangeKey{key, off}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cachedLocked(k, n); !ok {
		c.startLocked(k, n)
	}
}

// objRange is a range of an object that the cache reads and keeps as one entry.
type objRange struct {
	key string
	off uint64
	n   uint32
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
		k := rangeKey{s.key, s.off}
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
			c.startLocked(rangeKey{todo[i].key, todo[i].off}, todo[i].n)
		} else {
			run := slices.Clone(todo[i:j])
			fills := make([]*fill, len(run))
			for x, s := range run {
				fills[x] = &fill{done: make(chan struct{})}
				c.inflight[rangeKey{s.key, s.off}] = fills[x]
			}
			go c.fillRun(run, fills)
		}
		i = j
	}
}

// fillRun reads sections of one object, in offset order and apart, with one GET (not bound to
// one reader's context: others may wait for it).
func (c *Cache) fillRun(run []objRange, fills []*fill) {
	c.gets <- struct{}{}
	defer func() { <-c.gets }()
	key, from := run[0].key, run[0].off
	last := run[len(run)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	start := time.Now()
	data, err := c.store.GetRange(ctx, key, int64(from), int64(last.off+uint64(last.n)-from))
	cancel()
	took := time.Since(start)
	for x, s := range run {
		f := fills[x]
		switch lo, hi := s.off-from, s.off-from+uint64(s.n); {
		case err != nil:
			f.err = err
		case len(run) == 1:
			f.data = data
			f.err = checkSection(key, f.data, s.n)
		default: // its own copy: a cache entry must not hold the whole run
			f.data = bytes.Clone(data[min(lo, uint64(len(data))):min(hi, uint64(len(data)))])
			f.err = checkSection(key, f.data, s.n)
		}
	}
	for _, f := range fills { // a section that does not check out fails the GET, as counted
		if err != nil {
			break
		}
		err = f.err
	}
	c.metrics.Request("get", len(data), err)
	if err == nil {
		c.metrics.Stage("get", took)
	}
	c.mu.Lock()
	for x, s := range run {
		k := rangeKey{s.key, s.off}
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
