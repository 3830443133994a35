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

// lanes hands each peer's replication frames to goroutines of that peer's own, in the order they
// came, so that the connection's reader goes on at once to the frames behind them. A peer's frames
// all come on one connection, read on one goroutine (transport.Handler), and replicating writes
// to the logs under the replicas' locks: a slow disk (on FUSE, a write waits out a whole fsync of
// the same file) held that goroutine, and with it the controller's Raft messages and the RPCs
// behind the frame, the nodes' heartbeats to the active controller among them. An active
// controller whose disk took 2 s per fsync heard healthy nodes' heartbeats too late and fenced
// them, again and again.
//
// A peer has two lanes, one per direction of replication: what it says as a follower (its
// Follows, to the replicas this node leads) and what it says as a leader (appends and answers to
// Follows, to the replicas this node follows). Order matters only within each. Acknowledgements
// take no lane: they are handled on the reader, which they never hold (a replica whose lock is
// busy queues them, and takes them before the follower's next Follow), so the commit path pays
// for one hand-over only, the follower's append, and a follower's write to a slow disk does not
// hold back the acknowledgements the same peer sends for partitions this node leads.
type lanes struct {
	handle  func(from int32, kind transport.Kind, body []byte)
	logger  *slog.Logger
	dropLog logevery.Limiter

	mu     sync.Mutex
	byKey  map[laneKey]*lane
	closed bool
	wg     sync.WaitGroup
}

type laneKey struct {
	peer     int32
	toLeader bool // the peer's frames as a follower: its Follows
}

// lane is one queue of frames; a goroutine runs while it has any.
type lane struct {
	frames  []laneFrame
	bytes   int
	running bool
}

type laneFrame struct {
	kind transport.Kind
	body []byte
}

func newLanes(handle func(from int32, kind transport.Kind, body []byte), logger *slog.Logger) *lanes {
	return &lanes{handle: handle, logger: logger, dropLog: logevery.Limiter{Every: 10 * time.Second}, byKey: map[laneKey]*lane{}}
}

// push queues a copy of a replication frame (body is only valid during the transport's call) for
// its lane's goroutine. It never waits: a frame that finds its lane full, or the lanes closed, is
// dropped.
func (l *lanes) push(from int32, kind transport.Kind, body []byte) {
	key := laneKey{peer: from, toLeader: kind == replica.KindFollow}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	q := l.byKey[key]
	if q == nil {
		q = &lane{}
		l.byKey[key] = q
	}
	if q.bytes > 0 && q.bytes+len(body) > maxLaneBytes {
		if held, ok := l.dropLog.Allow(time.Now()); ok {
			l.logger.Warn("cluster: a peer's replication frames come faster than this node's disk takes them; dropping some (the replicas send them again)",
				"node", from, "queued_bytes", q.bytes, "more_drops_not_logged", held)
		}
		return
	}
	q.frames = append(q.frames, laneFrame{kind: kind, body: bytes.Clone(body)})
	q.bytes += len(body)
	if !q.running {
		q.running = true
		l.wg.Add(1)
		go l.run(from, q)
	}
}

// run handles a lane's frames until it is empty (or the lanes close).
func (l *lanes) run(from int32, q *lane) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if len(q.frames) == 0 || l.closed {
			q.running, q.frames, q.bytes = false, nil, 0
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

// close drops the frames not handled yet and waits for the handlers under way.
func (l *lanes) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
}
