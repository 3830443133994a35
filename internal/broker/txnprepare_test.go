package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestPrepareVerdict: a partition's leader vouches for a transaction's records there only if no
// record of it can have been lost to a change of leader or a restart of this one
// (docs/transactions.md §3.3).
func TestPrepareVerdict(t *testing.T) {
	const start = 1_000_000 // the transaction began at the coordinator (ms)
	req := func(added *leadership) txnPrepareReq {
		return txnPrepareReq{Topic: "t", ProducerID: 7, Epoch: 3, StartMs: start, Added: added}
	}
	at := func(epoch int32, inc uint64) *leadership { return &leadership{Epoch: epoch, Incarnation: inc} }
	// This node leads the partition in epoch 5, as incarnation 9, since 10 s before the start.
	now := prepareState{Epoch: 5, Incarnation: 9, LeadingSinceMs: start - 10_000}
	open := func(s prepareState, began int32, producerEpoch int16) prepareState {
		s.Open, s.BeganIn, s.ProducerEpoch = true, began, producerEpoch
		return s
	}
	since := func(s prepareState, ms int64) prepareState { s.LeadingSinceMs = ms; return s }
	cases := []struct {
		name string
		req  txnPrepareReq
		s    prepareState
		skew time.Duration
		want error // nil: vouched for
	}{
		{"open, begun in this epoch, added in it by this incarnation", req(at(5, 9)), open(now, 5, 3), 0, nil},
		{"open, begun in this epoch, coordinator does not know where it was added", req(nil), open(now, 5, 3), 0, nil},
		{"open under another producer epoch", req(at(5, 9)), open(now, 5, 2), 0, kerr.InvalidProducerEpoch},
		{"open, begun under an earlier leader", req(at(4, 9)), open(now, 4, 3), 0, kerr.NotLeaderForPartition},
		// The leader restarted without a new epoch: the records it had synced are back, the
		// others may be gone.
		{"open, added in this epoch by an earlier incarnation", req(at(5, 8)), open(now, 5, 3), 0, kerr.NotLeaderForPartition},
		{"none open, added in this epoch by this incarnation", req(at(5, 9)), now, 0, nil},
		{"none open, added under an earlier leader", req(at(4, 9)), now, 0, kerr.NotLeaderForPartition},
		{"none open, added in this epoch by an earlier incarnation", req(at(5, 8)), now, 0, kerr.NotLeaderForPartition},
		{"none open, unknown where added, leading since before the start", req(nil), now, 0, nil},
		{"none open, unknown where added, leading since after the start", req(nil), since(now, start+1), 0, kerr.NotLeaderForPartition},
		{"none open, unknown where added, leading since just before the start, same clock", req(nil), since(now, start-1), 0, nil},
		{"none open, unknown where added, leading since within the skew before the start", req(nil), since(now, start-100), leadershipSkew, kerr.NotLeaderForPartition},
		{"none open, unknown where added, leading since before the skew", req(nil), since(now, start-leadershipSkew.Milliseconds()-1), leadershipSkew, nil},
	}
	for _, c := range cases {
		err := prepareVerdict(c.req, c.s, c.skew)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v; want it vouched for", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
}
