package broker

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Incremental fetch sessions (KIP-227). A client opens a session with a full fetch (session id
// 0, epoch 0); later fetches name the session and the next epoch and list only the partitions
// that changed, and the response lists only partitions with news (data, an error, or a moved high
// watermark, last stable offset or log start offset).

// sessionPartition is what a session remembers of one partition.
type sessionPartition struct {
	topic       string
	topicID     [16]byte
	byID        bool // resolve by topicID (fetch v13+)
	partition   int32
	leaderEpoch int32 // the client's current leader epoch (-1: unknown)
	offset      int64 // the fetch offset the client last asked for
	maxBytes    int32

	// What the last response told the client, to decide what is news.
	sentHW, sentLSO, sentStart int64
}

// partKey names a session's partition: by topic id in a session of fetch v13+ (a topic deleted
// and created again under its name is another topic; unknown ids stay apart), else by name.
type partKey struct {
	topic     string
	id        [16]byte
	partition int32
}

func (p *sessionPartition) key() partKey {
	if p.byID {
		return partKey{id: p.topicID, partition: p.partition}
	}
	return partKey{topic: p.topic, partition: p.partition}
}

type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next request must carry
	created  time.Time
	mu       sync.Mutex
	byID     bool // opened by a request keyed by topic id (v13+): incremental ones must be too
	parts    map[partKey]*sessionPartition
	order    []partKey // the order partitions are read in: the client's, then each sent one moved last
	elem     *list.Element
	lastUsed time.Time // under fetchSessions.mu
}

// nextEpoch is the epoch after e: wrapping from MaxInt32 to 1 (0 opens a session), as Kafka's.
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// sessionEviction is how long a session must be unused before a new one may take its place in
// a full cache, or have lived before a larger new one may (Kafka's
// min.incremental.fetch.session.eviction.ms default).
const sessionEviction = 2 * time.Minute

// fetchSessions is a bounded cache of sessions.
type fetchSessions struct {
	mu   sync.Mutex
	max  int
	byID map[int32]*fetchSession
	lru  *list.List // front: most recently used
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, byID: map[int32]*fetchSession{}, lru: list.New()}
}

// create opens a new session for size partitions, or returns nil when the cache is full of
// sessions worth more, as Kafka's FetchSessionCache decides: the least recently used session
// goes if it is stale (unused for sessionEviction); otherwise the smallest session older than
// sessionEviction goes if it holds fewer partitions than the new one would (Kafka's tryEvict:
// an equal one does not, or similar clients would evict each other's live sessions in turn). Without a
// session the client is answered sessionless (session id 0) and fetches in full.
func (c *fetchSessions) create(size int, now time.Time) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.max {
		var victim *fetchSession
		if old := c.lru.Back(); old != nil && now.Sub(old.Value.(*fetchSession).lastUsed) > sessionEviction {
			victim = old.Value.(*fetchSession)
		} else {
			for e := c.lru.Front(); e != nil; e = e.Next() {
				s := e.Value.(*fetchSession)
				if now.Sub(s.created) > sessionEviction && len(s.parts) < size && (victim == nil || len(s.parts) < len(victim.parts)) {
					victim = s
				}
			}
		}
		if victim == nil {
			return nil
		}
		c.lru.Remove(victim.elem)
		delete(c.byID, victim.id)
	}
	// Random ids, as Kafka's: a client naming the session it had before this node restarted
	// (to close it) must not close another client's, nor may one guess another's session.
	id := rand.Int32N(math.MaxInt32) + 1
	for c.byID[id] != nil {
		id = rand.Int32N(math.MaxInt32) + 1
	}
	s := &fetchSession{id: id, epoch: 1, created: now, lastUsed: now, parts: map[partKey]*sessionPartition{}}
	s.elem = c.lru.PushFront(s)
	c.byID[id] = s
	return s
}

// get returns session id, or FETCH_SESSION_ID_NOT_FOUND.
func (c *fetchSessions) get(id int32, now time.Time) (*fetchSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.byID[id]
	if !ok {
		return nil, kerr.FetchSessionIDNotFound
	}
	s.lastUsed = now
	c.lru.MoveToFront(s.elem)
	return s, nil
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.byID[id]; ok {
		c.lru.Remove(s.elem)
		delete(c.byID, id)
	}
}
