package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/speclog/sequencer"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/speclog"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestDeposedShardLeaderConfirmsOnlyWhatItSent (the cause of a
// TestTotalOrderNetFaults/unplug-shard-leader failure): a shard's leader is cut off from every
// cluster frame except the sequencer group's (its member keeps up with the sequencer, its
// metadata does not: it still believes it leads the partition in its old epoch). Another
// replica takes the shard over and commits new records. A subscription served by the deposed
// node must not confirm past records it never sent. It did: it read the shard from its own log
// up to the committed slots (caughtUpTo was max(HW, State.Slots)), where its log held its own
// no-op entry (the stale runner padded the cuts the new leader's reports committed), so the
// merger passed the shard's new records as no-op slots and confirmed past them: the subscriber
// got the other shard's records and confirmations, and none of the cut-off shard's records
// from the takeover on, and its client moved on from its confirmed position. The catch-up now
// stops at the leader's epoch start above its high watermark.
//
// In the real-network test the unplugged leader's TCP connections resume one by one after the
// heal (each at its own retransmission time): the client's stream to it (the next endpoint
// after the dialed node) can reach it after its sequencer member caught up and before its
// metadata did.
func TestDeposedShardLeaderConfirmsOnlyWhatItSent(t *testing.T) {
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(_ int32, cfg *server.Config) { cfg.SpecLogAddr = "127.0.0.1:0" }
	})
	c.waitNodes(3)
	cl, _ := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "hunt", -1, -1
	for i, replicas := range [][]int32{{1, 2, 3}, {2, 3, 1}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "runnel.ordering", kmsg.StringPtr("total")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}

	sl, err := speclog.Dial(ctx, c.servers[3].SpecLogAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	log := sl.Topic("hunt")
	var d *speclog.Description
	eventually(t, "the topic sequenced, shards led by 1 and 2", 60*time.Second, func() bool {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		d, err = log.Describe(dctx)
		return err == nil && d.SequencerLeader >= 0 && len(d.Shards) == 2 && d.Shards[0].Leader == 1 && d.Shards[1].Leader == 2
	})
	victim, shard := int32(1), int32(0) // a shard's leader that does not lead the sequencer
	if d.SequencerLeader == 1 {
		victim, shard = 2, 1
	}

	acked := map[uint64]string{}
	appendAll := func(tag string, n int) {
		for i := range n {
			for sh := range int32(2) {
				v := fmt.Sprintf("%s-s%d-%d", tag, sh, i)
				actx, acancel := context.WithTimeout(ctx, 20*time.Second)
				pos, err := log.Append(actx, sh, speclog.Record{Value: []byte(v)})
				acancel()
				if err != nil {
					t.Fatalf("append %s: %v", v, err)
				}
				acked[pos] = v
			}
		}
	}
	appendAll("before", 20)

	// Cut the victim off from every cluster frame but the sequencer group's (kinds 20-24).
	c.servers[victim].Node().Transport().SetFilter(func(_, _ int32, k transport.Kind) bool {
		return k != 0 && (k < sequencer.KindRaft || k > sequencer.KindTrim)
	})
	eventually(t, "another replica leads the victim's shard", 30*time.Second, func() bool {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		d, err = log.Describe(dctx) // also points the client's appends at the new leader
		return err == nil && d.Shards[shard].Leader >= 0 && d.Shards[shard].Leader != victim
	})
	appendAll("after", 20)
	var need uint64
	for p := range acked {
		need = max(need, p+1)
	}

	cc, err := grpc.NewClient(c.servers[victim].SpecLogAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := pb.NewSpecLogClient(cc)
	eventually(t, "the victim's sequencer member has the appends confirmed", 30*time.Second, func() bool {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		vd, err := api.Describe(dctx, &pb.DescribeRequest{Topic: "hunt"})
		return err == nil && vd.GetConfirmed() >= need
	})
	time.Sleep(300 * time.Millisecond) // the stale runner's tick pads the cuts it learned of

	tp, _ := c.servers[victim].Topics().Get("hunt")
	p := tp.Partitions[shard]
	epoch, ready, leading := p.Replica.Leading()
	t.Logf("victim node %d, shard %d: leading=%v ready=%v epoch %d in its own view; high watermark %d, log end %d; its Describe says the leader is node %d",
		victim, shard, leading, ready, epoch, p.Replica.HighWatermark(), p.Log.EndOffset(), d.Shards[shard].Leader)

	// Subscribe through the victim (raw stream: no re-routing) and check that no confirmation
	// passes an acknowledged record the stream has not given.
	for attempt := 1; attempt <= 20; attempt++ {
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := api.Subscribe(sctx, &pb.SubscribeRequest{Topic: "hunt", From: 0})
		if err != nil {
			scancel()
			t.Logf("attempt %d: %v", attempt, err)
			continue
		}
		got := map[uint64]string{}
		var upTo uint64
		for upTo < need {
			r, err := st.Recv()
			if err != nil {
				t.Logf("attempt %d: the stream ended: %v (records %d, confirmed %d)", attempt, err, len(got), upTo)
				break
			}
			for _, e := range r.GetEvents() {
				if rec := e.GetRecord(); rec != nil {
					got[rec.GetPosition()] = string(rec.GetRecord().GetValue())
				}
				if cf := e.GetConfirm(); cf != nil {
					upTo = max(upTo, cf.GetUpTo())
				}
			}
		}
		scancel()
		if upTo == 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var missing []uint64
		perShard := map[string]int{}
		for pos, v := range acked {
			if pos < upTo && got[pos] != v {
				missing = append(missing, pos)
				perShard[v[:len("after-s0")]]++
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			var vals []string
			for _, pos := range missing {
				vals = append(vals, fmt.Sprintf("%d:%s", pos, acked[pos]))
			}
			t.Fatalf("node %d (deposed leader of shard %d, unaware) confirmed up to %d without giving %d acknowledged records (by tag and shard %v): %v",
				victim, shard, upTo, len(missing), perShard, vals)
		}
		t.Logf("attempt %d: confirmed %d with every record below it", attempt, upTo)
		return
	}
	t.Fatalf("no subscription through node %d confirmed the appends (inconclusive)", victim)
}
