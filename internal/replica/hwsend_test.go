package replica

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestIdleFollowerLearnsTheHighWatermark: after the last append of a burst the followers'
// acknowledgements move the leader's high watermark, and the followers learn it within a tick
// or two, as Kafka's follower learns it from its next fetch. Before, the high watermark went
// out only with the next batch: a follower kept the one before the burst's last commit until
// the next produce, so a consumer reading from it (KIP-392) did not see the last records, and
// the follower's retention stopped short of them.
func TestIdleFollowerLearnsTheHighWatermark(t *testing.T) {
	for _, wc := range []bool{false, true} {
		t.Run(fmt.Sprintf("writecaching=%v", wc), func(t *testing.T) {
			s := newSim(t, 1, wc)
			defer s.close()
			s.settle()
			lead := s.nodes[s.leader]
			recs := batch.AppendRecord(nil, 0, 0, nil, []byte("x"), 0, nil)
			b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
				BaseTimestamp: 1, MaxTimestamp: 1}, recs)
			if _, _, err := lead.m.Get(s.ref).Append(b); err != nil {
				t.Fatal(err)
			}
			if !wc {
				lead.log.SyncSoon()
			}
			s.settle()
			for range 20 { // a second of ticks, every frame delivered
				s.deliverAll()
				s.tick()
				time.Sleep(time.Millisecond) // let the flushers run
			}
			hw := lead.m.Get(s.ref).HighWatermark()
			if end := lead.log.EndOffset(); hw != end {
				t.Fatalf("leader's high watermark %d; want its log end %d", hw, end)
			}
			for _, n := range s.ordered() {
				if n.id == s.leader || !slices.Contains(s.hosts(), n.id) {
					continue
				}
				if got := n.m.Get(s.ref).HighWatermark(); got != hw {
					t.Errorf("follower %d: high watermark %d; want the leader's, %d", n.id, got, hw)
				}
			}
		})
	}
}

// deliverAll delivers every frame in flight, none lost (the simulation's deliverOne drops some:
// the transport loses frames only with the connection, which makes the follower join again).
func (s *sim) deliverAll() {
	for {
		s.mu.Lock()
		var k [2]int32
		var f simFrame
		found := false
		for _, key := range slices.SortedFunc(maps.Keys(s.links), func(a, b [2]int32) int { return int(a[0]*10+a[1]) - int(b[0]*10+b[1]) }) {
			if q := s.links[key]; len(q) > 0 {
				k, f, found = key, q[0], true
				s.links[key] = q[1:]
				break
			}
		}
		s.mu.Unlock()
		if !found {
			return
		}
		if dst := s.nodes[k[1]]; dst.up && !dst.isolated && s.nodes[k[0]].gen == f.gen {
			dst.m.Handle(k[0], f.kind, f.body)
		}
	}
}
