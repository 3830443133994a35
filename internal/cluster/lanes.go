package cluster

import (
	"bytes"
	"sync"

	"github.com/runnel-dev/runnel/internal/transport"
)

// maxLaneBytes bounds the frames waiting in one peer's lane; a frame that finds it full waits
// for room, holding back its connection's reader as a busy handler did before there were lanes
// (a follower that cannot keep up slows its leader's sends, not the node's memory).
const maxLaneBytes = 64 << 20

// lanes hands each peer's replication frames to a goroutine of that peer's own, in the order they
// came, so that the connection's reader goes on at once to the frames behind them. A peer's frames
// all come on one connection, read on one goroutine (transport.Handler), and replicating writes
// to the logs under the replicas' locks: a slow disk (on FUSE, a write waits out a whole fsync of
// the same file) held that goroutine, and with it the controller's Raft messages and the RPCs
// behind the frame, the nodes' heartbeats to the active controller among them. An active
// controller whose disk took 2 s per fsync heard healthy nodes' heartbeats too late and fenced
// them, again and again.
type lanes struct {
	handle func(from int32, kind transport.Kind, body []byte)

	mu     sync.Mutex
	byPeer map[int32]*lane
	closed bool
	wg     sync.WaitGroup
}

// lane is one peer's queue of frames; a goroutine runs while it has any.
type lane struct {
	frames  []laneFrame
	bytes   int
	running bool
	room    *sync.Cond // on lanes.mu: frames were taken, or the lanes closed
}

type laneFrame struct {
	kind transport.Kind
	body []byte
}

func newLanes(handle func(from int32, kind transport.Kind, body []byte)) *lanes {
	return &lanes{handle: handle, byPeer: map[int32]*lane{}}
}

// push queues a copy of a frame (body is only valid during the transport's call) for the peer's
// goroutine, waiting while the lane is full. Frames pushed after close are dropped.
func (l *lanes) push(from int32, kind transport.Kind, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.byPeer[from]
	if q == nil {
		q = &lane{room: sync.NewCond(&l.mu)}
		l.byPeer[from] = q
	}
	for !l.closed && q.bytes > 0 && q.bytes+len(body) > maxLaneBytes {
		q.room.Wait()
	}
	if l.closed {
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
		q.room.Broadcast()
		l.mu.Unlock()
		l.handle(from, f.kind, f.body)
	}
}

// close drops the frames not handled yet, frees the readers waiting for room, and waits for the
// handlers under way.
func (l *lanes) close() {
	l.mu.Lock()
	l.closed = true
	for _, q := range l.byPeer {
		q.room.Broadcast()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
