package cluster

import (
	"bytes"
	"log/slog"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/logevery"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/transport"
)

// maxLaneBytes bounds the frames waiting in one lane. A frame that finds its lane full is
// dropped, as the transport drops a frame for a peer whose send queue is full: replication
// recovers from lost frames (the leader resends what was not acknowledged, a follower that
// finds a gap joins again), and the reader must never wait (the Raft messages and RPCs behind
// the frame would wait with it).
const maxLaneBytes = 32 << 20

// lanes keeps each peer's replication frames in order while the transport's reading moves on
// past a slow one. A peer's frames all come on one connection, and replicating writes to the
// logs under the replicas' locks: a slow disk (on FUSE, a write waits out a whole fsync of the
// same file) held the connection's reader, and with it the controller's Raft messages and the
// RPCs behind the frame, the nodes' heartbeats to the active controller among them. An active
// controller whose disk took 2 s per fsync heard healthy nodes' heartbeats too late and fenced
// them, again and again. Now the transport hands the reading to a new goroutine once a handler
// has run 10-20 ms (transport.Handler); a frame whose lane is busy meanwhile is queued, and the
// goroutine in the lane's handler takes the queued frames when it is done. An idle lane's frame
// is handled at once, on the reader: the commit path pays no hand-over between goroutines (a
// lane per frame made a 3-node cluster's produce p50 15 % slower).
//
// A peer has two lanes, one per direction of replication: what it says as a follower (its
// Follows, to the replicas this node leads) and what it says as a leader (appends and answers to
// Follows, to the replicas this node follows). Order matters only within each. Acknowledgements
// take no lane: they never wait (a replica whose lock is busy queues them, and takes them before
// the follower's next Follow), so a follower's write to a slow disk does not hold back the
// acknowledgements the same peer sends for partitions this node leads.
type lanes struct {
	handle  func(from int32, kind transport.Kind, body []byte)
	logger  *slog.Logger
	dropLog logevery.Limiter

	mu     sync.Mutex
	byKey  map[laneKey]*lane
	closed bool
}

type laneKey struct {
	peer     int32
	toLeader bool // the peer's frames as a follower: its Follows
}

// lane is one direction's queue of frames, and whether a goroutine is in its handler.
type lane struct {
	frames []laneFrame
	bytes  int
	busy   bool
}

type laneFrame struct {
	kind transport.Kind
	body []byte
}

func newLanes(handle func(from int32, kind transport.Kind, body []byte), logger *slog.Logger) *lanes {
	return &lanes{handle: handle, logger: logger, dropLog: logevery.Limiter{Every: 10 * time.Second}, byKey: map[laneKey]*lane{}}
}

// push handles a replication frame (body is only valid during the transport's call): at once if
// its lane is idle, followed by whatever was queued behind it meanwhile; else it queues a copy
// for the goroutine in the lane's handler, or drops it if the lane is full or the lanes closed.
func (l *lanes) push(from int32, kind transport.Kind, body []byte) {
	key := laneKey{peer: from, toLeader: kind == replica.KindFollow}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	q := l.byKey[key]
	if q == nil {
		q = &lane{}
		l.byKey[key] = q
	}
	if q.busy {
		if q.bytes > 0 && q.bytes+len(body) > maxLaneBytes {
			held, ok := l.dropLog.Allow(time.Now())
			queued := q.bytes
			l.mu.Unlock()
			if ok {
				l.logger.Warn("cluster: a peer's replication frames come faster than this node's disk takes them; dropping some (the replicas send them again)",
					"node", from, "queued_bytes", queued, "more_drops_not_logged", held)
			}
			return
		}
		q.frames = append(q.frames, laneFrame{kind: kind, body: bytes.Clone(body)})
		q.bytes += len(body)
		l.mu.Unlock()
		return
	}
	q.busy = true
	l.mu.Unlock()
	l.handle(from, kind, body)
	for {
		l.mu.Lock()
		if len(q.frames) == 0 || l.closed {
			q.busy, q.frames, q.bytes = false, nil, 0
			l.mu.Unlock()
			return
		}
		f := q.frames[0]
		q.frames[0] = laneFrame{}
		q.frames = q.frames[1:]
		q.bytes -= len(f.body)
		l.mu.Unlock()
		l.handle(from, f.kind, f.body)
	}
}

// close drops the frames not handled yet; the handlers under way run on the transport's
// goroutines, which its Close waits for.
func (l *lanes) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
