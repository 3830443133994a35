package replica

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

type pumpFrame struct {
	from, to int32
	kind     transport.Kind
	body     []byte
}

type pumpNode struct {
	id      int32
	fs      *vfs.MemFS
	flusher *logstore.Flusher
	log     *logstore.Log
	m       *Manager
	r       *Replica
}

type pumpNet struct {
	t     *testing.T
	now   time.Time
	ref   controller.PartitionRef
	queue []pumpFrame
	nodes map[int32]*pumpNode
	wc    bool
}

func newPumpNet(t *testing.T, wc bool, ids ...int32) *pumpNet {
	h := &pumpNet{t: t, now: now0, ref: controller.PartitionRef{Topic: controller.TopicID{3}}, nodes: map[int32]*pumpNode{}, wc: wc}
	for _, id := range ids {
		h.start(id, vfs.NewMem())
	}
	t.Cleanup(func() {
		for _, n := range h.nodes {
			h.stop(n)
		}
	})
	return h
}

func (h *pumpNet) start(id int32, fs *vfs.MemFS) *pumpNode {
	n := &pumpNode{id: id, fs: fs, flusher: logstore.NewFlusher(2)}
	cfg := logstore.DefaultConfig()
	cfg.Preallocate = false
	cfg.WriteCaching = h.wc
	cfg.FlushInterval, cfg.FlushBytes = 0, 0
	l, err := logstore.Open(logstore.Options{FS: fs, Dir: "/p", Config: cfg, Flusher: n.flusher, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		h.t.Fatal(err)
	}
	n.log = l
	n.m = NewManager(Config{NodeID: id, TickInterval: -1, Now: func() time.Time { return h.now }, Logger: slog.New(slog.DiscardHandler),
		Send: func(to int32, kind transport.Kind, body []byte) {
			h.queue = append(h.queue, pumpFrame{id, to, kind, append([]byte(nil), body...)})
		}})
	if n.r, err = n.m.Add(h.ref, "t", l, fs, "/p"); err != nil {
		h.t.Fatal(err)
	}
	h.nodes[id] = n
	return n
}

func (h *pumpNet) stop(n *pumpNode) {
	if n.m == nil {
		return
	}
	n.m.Close()
	n.log.Close()
	n.flusher.Close()
	n.m = nil
}

// pump delivers queued frames (in order) until none is left or max deliveries were made; it
// returns how many it delivered.
func (h *pumpNet) pump(max int) int {
	i := 0
	for ; i < max && len(h.queue) > 0; i++ {
		f := h.queue[0]
		h.queue = h.queue[1:]
		if n := h.nodes[f.to]; n != nil && n.m != nil {
			n.m.Handle(f.from, f.kind, f.body)
		}
	}
	return i
}

func pumpBatch(nrec int, val string) []byte {
	var recs []byte
	for i := 0; i < nrec; i++ {
		recs = batch.AppendRecord(recs, 0, int32(i), nil, []byte(fmt.Sprintf("%s-%d", val, i)), 0, nil)
	}
	return batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: int32(nrec),
		LastOffsetDelta: int32(nrec - 1), BaseTimestamp: 1, MaxTimestamp: 1}, recs)
}

// TestFollowerCatchesUpFromMidBatchLogStart: DeleteRecords may move the leader's log start into
// the middle of a batch (Kafka allows any offset up to the high watermark). A follower that must
// restart its log at the leader's log start (a new replica, or one far behind) never caught up:
// the leader sends the batch containing the start, whose base offset is below the follower's
// log end, the follower answered mismatch, joined again, and the same repeated forever. It now
// restarts its empty log at the batch's base offset, as Kafka's follower does
// (UnexpectedAppendOffsetException), and takes the leader's log start from the next append.
func TestFollowerCatchesUpFromMidBatchLogStart(t *testing.T) {
	h := newPumpNet(t, true, 1, 2)
	n1, n2 := h.nodes[1], h.nodes[2]
	n1.m.Assign(h.ref, Assignment{Role: RoleLeader, Epoch: 1, Leader: 1, Sets: [][]int32{{1}}, ISR: []int32{1}, WriteCaching: true, MinISR: 1})
	for i := 0; i < 3; i++ { // offsets [0,10), [10,20), [20,30)
		if _, _, err := n1.r.Append(pumpBatch(10, fmt.Sprint("b", i))); err != nil {
			t.Fatal(err)
		}
	}
	if hw := n1.r.HighWatermark(); hw != 30 {
		t.Fatalf("leader HW %d, want 30", hw)
	}
	// DeleteRecords up to 15: inside the batch [10, 20).
	if err := n1.log.AdvanceStartOffset(15); err != nil {
		t.Fatal(err)
	}
	// Node 2 joins the replica set (e.g. a reassignment added it, or its disk was replaced).
	n1.m.Assign(h.ref, Assignment{Role: RoleLeader, Epoch: 1, Leader: 1, Sets: [][]int32{{1, 2}}, ISR: []int32{1}, WriteCaching: true, MinISR: 1})
	n2.m.Assign(h.ref, Assignment{Role: RoleFollower, Epoch: 1, Leader: 1, Sets: [][]int32{{1, 2}}, ISR: []int32{1}, WriteCaching: true, MinISR: 1})
	delivered := h.pump(2000)
	for i := 0; i < 20; i++ {
		h.now = h.now.Add(2 * time.Second)
		n1.m.Tick(h.now)
		n2.m.Tick(h.now)
		delivered += h.pump(2000)
	}
	if end := n2.log.EndOffset(); end != 30 {
		t.Fatalf("follower log end %d after %d frames (frames still queued: %d), want 30: the follower never catches up (leader log start %d, follower log start %d)",
			end, delivered, len(h.queue), n1.log.StartOffset(), n2.log.StartOffset())
	}
	for deadline := time.Now().Add(5 * time.Second); n2.log.StartOffset() != 15 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the follower moves its log start on its own goroutine
	}
	if start := n2.log.StartOffset(); start != 15 {
		t.Errorf("follower log start %d; want the leader's, 15", start)
	}
}
