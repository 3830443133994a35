package server_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runnel-dev/runnel/internal/server"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestCatchUpAcrossNodesIsBounded: a subscription served by a node that leads some of the
// wanted shards and not others first reads the shards led here from their logs
// (service.catchUp). It read them synchronously, before it took any event of the other shards'
// streams (SubscribeShard from their leaders); the merger cannot emit past the first position
// of a remote shard, so every record the catch-up read went into its pending map: the whole
// local backlog from the subscription's start was held in memory, however slow the subscriber
// (found by review, 2026-12-06). The catch-up now takes the other streams' events when the
// merger waits for them, and pauses while it holds more than catchUpHold.
//
// Shard 0 (led by node 1) holds ~96 MB; shard 1 (led by node 2) only its no-op padding. A
// subscriber through node 1 from position 0 that does not read yet: node 1's live heap grows by
// about the whole backlog. (Subscribing to shard 0 alone, all local, the same subscriber costs
// one catch-up batch and the stream's flow-control window: logged for comparison.)
func TestCatchUpAcrossNodesIsBounded(t *testing.T) {
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(_ int32, cfg *server.Config) { cfg.SpecLogAddr = "127.0.0.1:0" }
	})
	c.waitNodes(3)
	cl, _ := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "backlog", -1, -1
	for i, replicas := range [][]int32{{1}, {2}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for _, kv := range [][2]string{{"runnel.ordering", "total"}, {"write.caching", "true"}} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = kv[0], kmsg.StringPtr(kv[1])
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}

	cc, err := grpc.NewClient(c.servers[1].SpecLogAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := pb.NewSpecLogClient(cc)
	eventually(t, "the topic sequenced, shards led by 1 and 2", 60*time.Second, func() bool {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		defer dcancel()
		d, err := api.Describe(dctx, &pb.DescribeRequest{Topic: "backlog"})
		return err == nil && len(d.GetShards()) == 2 && d.GetShards()[0].GetLeader() == 1 && d.GetShards()[1].GetLeader() == 2
	})

	// ~96 MB on shard 0: 120 appends of 200 records of 4 KB.
	const appends, perAppend, size = 120, 200, 4 << 10
	var last uint64
	for i := range appends {
		recs := make([]*pb.Record, perAppend)
		for j := range recs {
			v := make([]byte, size)
			for k := range v {
				v[k] = byte(i*perAppend + j + k)
			}
			recs[j] = &pb.Record{Value: v}
		}
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		r, err := api.Append(actx, &pb.AppendRequest{Topic: "backlog", Shard: 0, Records: recs})
		acancel()
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		last = r.GetPositions()[len(r.GetPositions())-1]
	}
	eventually(t, "the backlog confirmed", 30*time.Second, func() bool {
		d, err := api.Describe(ctx, &pb.DescribeRequest{Topic: "backlog"})
		return err == nil && d.GetConfirmed() > last
	})

	// The growth of the process's live heap while a subscriber that does not read yet holds
	// a subscription from 0 for 3 s (the most seen).
	growth := func(shards []int32) uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		if _, err := api.Subscribe(sctx, &pb.SubscribeRequest{Topic: "backlog", From: 0, Shards: shards}); err != nil {
			t.Fatal(err)
		}
		var most uint64
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > base {
				most = max(most, ms.HeapAlloc-base)
			}
		}
		scancel()
		time.Sleep(300 * time.Millisecond) // the node ends the subscription and lets it go
		return most
	}
	local := growth([]int32{0})
	t.Logf("subscription of shard 0 alone (led here): live heap +%d MB", local>>20)
	both := growth(nil)
	t.Logf("subscription of both shards (shard 1 led by node 2): live heap +%d MB", both>>20)
	const backlog = appends * perAppend * size
	if both > backlog/2 {
		t.Fatalf("one subscription that has received nothing holds %d MB on node 1 (shard 0's backlog is %d MB): catch-up buffers it all in the merger",
			both>>20, backlog>>20)
	}

	// A subscriber that reads gets every record once, in order, and the confirmation past them
	// (the catch-up paused and took shard 1's stream in between).
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	st, err := api.Subscribe(sctx, &pb.SubscribeRequest{Topic: "backlog", From: 0})
	if err != nil {
		t.Fatal(err)
	}
	var records int
	var prev int64 = -1
	for confirmed := uint64(0); confirmed <= last; {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d records (confirmed %d of %d): %v", records, confirmed, last+1, err)
		}
		for _, e := range r.GetEvents() {
			switch {
			case e.GetRecord() != nil:
				p := int64(e.GetRecord().GetPosition())
				if p <= prev {
					t.Fatalf("record at %d after %d", p, prev)
				}
				prev = p
				records++
			case e.GetConfirm() != nil:
				confirmed = max(confirmed, e.GetConfirm().GetUpTo())
			case e.GetFail() != nil:
				t.Fatalf("a fail notice with no fault: %v", e.GetFail())
			}
		}
	}
	if records != appends*perAppend {
		t.Fatalf("a subscriber from 0 got %d records; want %d", records, appends*perAppend)
	}
}
