package broker

import (
	"container/list"
	"sync"

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

type partKey struct {
	topic     string
	partition int32
}

type fetchSession struct {
	id    int32
	epoch int32 // the epoch the next request must carry
	mu    sync.Mutex
	parts map[partKey]*sessionPartition
	order []partKey // the client's partition order
	elem  *list.Element
}

// fetchSessions is a bounded LRU cache of sessions.
type fetchSessions struct {
	mu     sync.Mutex
	max    int
	nextID int32
	byID   map[int32]*fetchSession
	lru    *list.List // front: most recently used
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, nextID: 1, byID: map[int32]*fetchSession{}, lru: list.New()}
}

// create opens a new session, evicting the least recently used one past the bound.
func (c *fetchSessions) create() *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byID) >= c.max {
		old := c.lru.Back().Value.(*fetchSession)
		c.lru.Remove(old.elem)
		delete(c.byID, old.id)
	}
	id := c.nextID
	for c.byID[id] != nil || id <= 0 {
		id++
	}
	c.nextID = id + 1
	s := &fetchSession{id: id, epoch: 1, parts: map[partKey]*sessionPartition{}}
	s.elem = c.lru.PushFront(s)
	c.byID[id] = s
	return s
}

// get returns session id if epoch is the one it expects, or the Kafka error.
func (c *fetchSessions) get(id, epoch int32) (*fetchSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.byID[id]
	if !ok {
		return nil, kerr.FetchSessionIDNotFound
	}
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
