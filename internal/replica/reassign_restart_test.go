package replica

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// deliverAllOrdered delivers every queued frame, in a fixed order, without loss.
func (s *sim) deliverAllOrdered(skip func(from, to int32) bool) {
	for {
		s.mu.Lock()
		var keys [][2]int32
		for k, q := range s.links {
			if len(q) > 0 && !skip(k[0], k[1]) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			s.mu.Unlock()
			return
		}
		slices.SortFunc(keys, func(a, b [2]int32) int { return int(a[0]*10+a[1]) - int(b[0]*10+b[1]) })
		k := keys[0]
		f := s.links[k][0]
		s.links[k] = s.links[k][1:]
		dst := s.nodes[k[1]]
		s.mu.Unlock()
		if dst.up {
			dst.m.Handle(k[0], f.kind, f.body)
		}
	}
}

// TestCancelAndReassignAgainSeenAsOneByTheLeader: a move [1 2 3] -> [1 4 5] led by 1 is
// cancelled (4 and 5 delete their copies: a node that stops hosting a partition deletes it)
// and asked again (4 and 5 open new, empty logs). The leader's reconciler may see only the
// last image (its sets before and after are the same). It must not keep the progress 4 and 5
// made with their deleted copies (it reported the target set synced while they held nothing,
// the controller finished the move, and the leader's loss lost the acknowledged records): the
// replica sets' new ReplicasSince makes it forget that progress and the targets join again;
// then the move syncs for real.
func TestCancelAndReassignAgainSeenAsOneByTheLeader(t *testing.T) {
	s := newSim(t, 1, true)
	defer s.close()
	if s.leader != 1 {
		t.Fatalf("setup: leader %d", s.leader)
	}
	none := func(int32, int32) bool { return false }
	tick := func(nodes ...int32) {
		for range 5 { // every fifth tick checks the ISR
			s.now = s.now.Add(50 * time.Millisecond)
			for _, id := range nodes {
				s.nodes[id].m.Tick(s.now)
			}
		}
	}
	s.deliverAllOrdered(none)
	lead := s.nodes[1]
	for i := range 5 {
		recs := batch.AppendRecord(nil, 0, 0, nil, fmt.Appendf(nil, "v%d", i), 0, nil)
		b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
			BaseTimestamp: 1, MaxTimestamp: 1}, recs)
		res, epoch, err := lead.m.Get(s.ref).Append(b)
		if err != nil {
			t.Fatal(err)
		}
		s.pending = append(s.pending, pending{1, epoch, res.First, res.Last + 1, fmt.Sprintf("v%d", i)})
	}
	s.deliverAllOrdered(none)
	s.checkCommits()
	if len(s.committed) != 5 {
		t.Fatalf("setup: %d acknowledged", len(s.committed))
	}

	// The move to [1 4 5]: 4 and 5 catch up, the target set commits jointly.
	s.setSets([][]int32{{1, 2, 3}, {1, 4, 5}})
	s.deliverAllOrdered(none)
	tick(1, 2, 3, 4, 5)
	s.deliverAllOrdered(none)
	for _, id := range []int32{4, 5} {
		if e := s.nodes[id].log.EndOffset(); e != 5 {
			t.Fatalf("setup: node %d has %d records", id, e)
		}
	}

	// Cancelled (level 3: the ISR keeps the hosts), then asked again. Nodes 2-5 apply each
	// image; the leader only the last one.
	s.sets, s.synced = [][]int32{{1, 2, 3}}, false
	s.pepoch++
	s.since++
	s.isr = slices.DeleteFunc(slices.Clone(s.isr), func(n int32) bool { return n > 3 })
	for _, id := range []int32{2, 3} {
		s.assign(s.nodes[id])
	}
	for _, id := range []int32{4, 5} { // the copy is deleted: a new, empty log later
		n := s.nodes[id]
		n.m.Remove(s.ref)
		n.log.Close()
		n.fs = vfs.NewMem()
		cfg := logstore.DefaultConfig()
		cfg.WriteCaching, cfg.Preallocate, cfg.FlushInterval, cfg.FlushBytes = true, false, 0, 0
		l, err := logstore.Open(logstore.Options{FS: n.fs, Dir: simDir, Config: cfg, Flusher: n.flusher, Logger: s.logger})
		if err != nil {
			t.Fatal(err)
		}
		n.log = l
		if _, err := n.m.Add(s.ref, "t", l, n.fs, simDir); err != nil {
			t.Fatal(err)
		}
	}
	s.sets = [][]int32{{1, 2, 3}, {1, 4, 5}}
	s.pepoch++
	s.since++
	for _, n := range s.ordered() {
		s.assign(n) // the leader gets the same sets it had
	}
	// Before 4 and 5's Follow reaches it, the leader checks its ISR.
	tick(1)
	if s.synced && slices.Contains(s.isr, 4) && slices.Contains(s.isr, 5) {
		t.Errorf("the move was reported synced (ISR %v, partition epoch %d) while nodes 4 and 5 hold %d and %d of the 5 acknowledged records",
			s.isr, s.pepoch, s.nodes[4].log.EndOffset(), s.nodes[5].log.EndOffset())
		// The controller finishes it; the leader is lost before 4 and 5 rejoin.
		s.deliverAllOrdered(func(from, to int32) bool { return from == 4 || from == 5 })
		s.finish()
		s.crash(s.nodes[1])
		s.elect()
		if s.leader >= 0 {
			t.Errorf("then: replicas %v, leader %d (epoch %d) with a log ending at %d; acknowledged: offsets 0-4",
				s.sets, s.leader, s.epoch, s.nodes[s.leader].log.EndOffset())
		}
		return
	}
	// The targets join again and catch up; the move syncs.
	for range 10 {
		s.deliverAllOrdered(none)
		tick(1, 2, 3, 4, 5)
	}
	s.deliverAllOrdered(none)
	for _, id := range []int32{4, 5} {
		if e := s.nodes[id].log.EndOffset(); e != 5 {
			t.Errorf("node %d holds %d of the 5 records after joining again", id, e)
		}
	}
	if !s.synced {
		t.Errorf("the move is not reported synced once the targets caught up again (ISR %v)", s.isr)
	}
}
