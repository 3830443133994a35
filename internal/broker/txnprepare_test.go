package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/controller"
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
	kept := func(s prepareState) prepareState { s.NoReplicaRestarted = true; return s }
	sinceBegan := func(s prepareState) prepareState { s.NoRestartSinceBegan = true; return s }
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
		{"open, begun under an earlier leader", req(at(4, 9)), open(now, 4, 3), 0, errCannotVouch},
		// The leader restarted without a new epoch: the records it had synced are back, the
		// others may be gone.
		{"open, added in this epoch by an earlier incarnation", req(at(5, 8)), open(now, 5, 3), 0, errCannotVouch},
		{"none open, added in this epoch by this incarnation", req(at(5, 9)), now, 0, nil},
		{"none open, added under an earlier leader", req(at(4, 9)), now, 0, errCannotVouch},
		{"none open, added in this epoch by an earlier incarnation", req(at(5, 8)), now, 0, errCannotVouch},
		// Leaders changed, but every replica is the one the partition had at the add, none
		// restarted: the elected log holds whatever a quorum acknowledged.
		{"open, begun under an earlier leader, no replica restarted", req(at(4, 9)), kept(open(now, 4, 3)), 0, nil},
		{"none open, added under an earlier leader, no replica restarted", req(at(4, 7)), kept(now), 0, nil},
		{"open under another producer epoch, no replica restarted", req(at(4, 9)), kept(open(now, 4, 2)), 0, kerr.InvalidProducerEpoch},
		// No note (a coordinator that took over since), but no replica registered anew since
		// the epoch the transaction began in.
		{"open, begun under an earlier leader, no restart since that epoch, no note", req(nil), sinceBegan(open(now, 4, 3)), 0, nil},
		{"none open, no restart since the epoch, no note, leading since after the start", req(nil), sinceBegan(since(now, start+1)), 0, errCannotVouch},
		{"none open, unknown where added, leading since before the start", req(nil), now, 0, nil},
		{"none open, unknown where added, leading since after the start", req(nil), since(now, start+1), 0, errCannotVouch},
		{"none open, unknown where added, leading since just before the start, same clock", req(nil), since(now, start-1), 0, nil},
		{"none open, unknown where added, leading since within the skew before the start", req(nil), since(now, start-100), leadershipSkew, errCannotVouch},
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

// TestNoReplicaRestarted: a leader change keeps a transaction only while the partition's
// replicas are those noted when the transaction added it, each in the registration noted.
func TestNoReplicaRestarted(t *testing.T) {
	img := &controller.Image{Nodes: map[int32]*controller.Node{1: {ID: 1, Incarnation: 10}, 2: {ID: 2, Incarnation: 20}, 3: {ID: 3, Incarnation: 30}}}
	p := &controller.Partition{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ReplicasSince: 7}
	added := &leadership{Epoch: 4, Incarnation: 10, Replicas: replicaIncarnations(img, p), ReplicasSince: p.ReplicasSince}
	if !noReplicaRestarted(img, p, added) {
		t.Fatal("the same replicas in the same registrations: want kept")
	}
	moved := *p
	moved.Leader, moved.LeaderEpoch = 2, 6
	if !noReplicaRestarted(img, &moved, added) {
		t.Fatal("a new leader of the same replicas: want kept")
	}
	// An unclean election made the voters the replicas, and the move back restored the set:
	// the same replicas in the same registrations, but the leader may lack acknowledged records.
	back := moved
	back.ReplicasSince = 30
	if noReplicaRestarted(img, &back, added) {
		t.Fatal("the replicas changed and changed back since the note: want refused")
	}
	old := *p
	old.ReplicasSince = 0
	if replicaIncarnations(img, &old) != nil {
		t.Error("a partition without a record of its replicas' last change noted its replicas")
	}
	restarted := &controller.Image{Nodes: map[int32]*controller.Node{1: {ID: 1, Incarnation: 10}, 2: {ID: 2, Incarnation: 25}, 3: {ID: 3, Incarnation: 30}}}
	if noReplicaRestarted(restarted, &moved, added) {
		t.Fatal("a replica registered anew (it may have lost unsynced records): want refused")
	}
	// The same restart on the same machine boot, its run's writes kept (the boot mark): its
	// loss index stays the registration noted.
	kept := &controller.Image{Nodes: map[int32]*controller.Node{1: {ID: 1, Incarnation: 10}, 2: {ID: 2, Incarnation: 25, LossIndex: 20}, 3: {ID: 3, Incarnation: 30}}}
	if !noReplicaRestarted(kept, &moved, added) {
		t.Fatal("a replica restarted keeping its writes: want kept")
	}
	lost := &controller.Image{Nodes: map[int32]*controller.Node{1: {ID: 1, Incarnation: 10}, 2: {ID: 2, Incarnation: 25, LossIndex: 25}, 3: {ID: 3, Incarnation: 30}}}
	if noReplicaRestarted(lost, &moved, added) {
		t.Fatal("a replica restarted after a new boot (loss index moved): want refused")
	}
	for name, q := range map[string]controller.Partition{
		"fewer replicas":   {Replicas: []int32{2, 3}, Leader: 2, LeaderEpoch: 6, ReplicasSince: 7},
		"another replica":  {Replicas: []int32{2, 3, 4}, Leader: 2, LeaderEpoch: 6, ReplicasSince: 7},
		"being moved":      {Replicas: []int32{1, 2, 3}, Target: []int32{2, 3, 4}, Leader: 2, LeaderEpoch: 6, ReplicasSince: 7},
		"unclean election": {Replicas: []int32{1, 2, 3}, Unclean: true, Leader: -1, LeaderEpoch: 6, ReplicasSince: 7},
	} {
		img := &controller.Image{Nodes: map[int32]*controller.Node{1: {ID: 1, Incarnation: 10}, 2: {ID: 2, Incarnation: 20}, 3: {ID: 3, Incarnation: 30}, 4: {ID: 4, Incarnation: 40}}}
		if noReplicaRestarted(img, &q, added) {
			t.Errorf("%s: want refused", name)
		}
	}
	if noReplicaRestarted(img, p, &leadership{Epoch: 4, Incarnation: 10}) || noReplicaRestarted(img, p, nil) {
		t.Error("replicas not noted: want refused")
	}
	unclean := *p
	unclean.Unclean = true // asked for: no note while it is pending
	if replicaIncarnations(img, &unclean) != nil {
		t.Error("a partition asked for an unclean election noted its replicas")
	}
}

// TestNoRestartSinceEpoch: without a coordinator's note, a transaction that began in an earlier
// leader epoch is vouched for only if no replica registered anew, and the replicas did not
// change, since that epoch began.
func TestNoRestartSinceEpoch(t *testing.T) {
	nodes := func(incs ...uint64) *controller.Image {
		img := &controller.Image{Nodes: map[int32]*controller.Node{}}
		for i, inc := range incs {
			img.Nodes[int32(i+1)] = &controller.Node{ID: int32(i + 1), Incarnation: inc}
		}
		return img
	}
	p := &controller.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 6, ReplicasSince: 5,
		EpochStarts: []controller.EpochStart{{Epoch: 0, Index: 5}, {Epoch: 4, Index: 40}, {Epoch: 6, Index: 60}}}
	if !noRestartSinceEpoch(nodes(1, 2, 3), p, 4) {
		t.Fatal("replicas registered before epoch 4 began, unchanged since: want vouched")
	}
	if noRestartSinceEpoch(nodes(1, 50, 3), p, 4) {
		t.Fatal("replica 2 registered anew after epoch 4 began: want refused")
	}
	if !noRestartSinceEpoch(nodes(1, 50, 3), p, 6) {
		t.Fatal("replica 2 registered anew before epoch 6 began: want vouched")
	}
	kept := nodes(1, 50, 3)
	kept.Nodes[2].LossIndex = 2
	if !noRestartSinceEpoch(kept, p, 4) {
		t.Fatal("replica 2 registered anew after epoch 4 began, keeping its writes: want vouched")
	}
	kept.Nodes[2].LossIndex = 45
	if noRestartSinceEpoch(kept, p, 4) {
		t.Fatal("replica 2 registered anew after epoch 4 began, after a new boot: want refused")
	}
	if noRestartSinceEpoch(nodes(1, 2, 3), p, 5) {
		t.Fatal("epoch 5's start not recorded: want refused")
	}
	moved := *p
	moved.ReplicasSince = 45
	if noRestartSinceEpoch(nodes(1, 2, 3), &moved, 4) {
		t.Fatal("replicas changed after epoch 4 began: want refused")
	}
	for name, q := range map[string]controller.Partition{
		"being moved":      {Replicas: p.Replicas, Target: []int32{2, 3, 4}, ReplicasSince: 5, EpochStarts: p.EpochStarts},
		"unclean election": {Replicas: p.Replicas, Unclean: true, ReplicasSince: 5, EpochStarts: p.EpochStarts},
		"not recorded":     {Replicas: p.Replicas, EpochStarts: p.EpochStarts},
	} {
		if noRestartSinceEpoch(nodes(1, 2, 3), &q, 4) {
			t.Errorf("%s: want refused", name)
		}
	}
}

// TestTxnCodeRespSaysItOnce: an error carried between nodes keeps its Kafka error for
// errors.Is and names its description once.
func TestTxnCodeRespSaysItOnce(t *testing.T) {
	sent := fmt.Errorf("%w: the transaction began in leader epoch 4", errCannotVouch)
	got := codeOf(sent).err()
	if !errors.Is(got, kerr.TransactionAbortable) {
		t.Fatalf("%v is not TRANSACTION_ABORTABLE", got)
	}
	if got.Error() != sent.Error() {
		t.Fatalf("carried as %q; want %q", got, sent)
	}
	if got := codeOf(kerr.InvalidProducerEpoch).err(); got != kerr.InvalidProducerEpoch {
		t.Fatalf("a bare Kafka error carried as %q", got)
	}
	if got := codeOf(errors.New("plain")).err(); got == nil || got.Error() == "" {
		t.Fatal("a plain error lost")
	}
}
