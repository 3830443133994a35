package speclog

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// serveOneRecord is a node's Subscribe that gives a record at 0 and then holds the stream open.
func serveOneRecord(req *pb.SubscribeRequest, st pb.SpecLog_SubscribeServer) error {
	if err := st.Send(&pb.SubscribeResponse{Events: []*pb.Event{{Kind: &pb.Event_Record{Record: &pb.Delivery{Position: 0, Speculative: true, Record: &pb.Record{Value: []byte("r")}}}}}}); err != nil {
		return err
	}
	<-st.Context().Done()
	return nil
}

// TestSubscriptionLeavesARefusingNode: the node a subscription goes through ends each stream at
// once with UNAVAILABLE (it cannot serve it: a shard's leader it cannot reach, a shard with no
// leader, a topic its sequencer member does not have yet). The subscription pauses before
// subscribing again, as when the stream cannot be opened, and goes through the next node the
// client knows of, which serves it.
func TestSubscriptionLeavesARefusingNode(t *testing.T) {
	good := startFakeNode(t, &fakeNode{subscribe: serveOneRecord})
	bad := &fakeNode{subscribe: func(*pb.SubscribeRequest, pb.SpecLog_SubscribeServer) error {
		return status.Error(codes.Unavailable, "shard 1: its leader cannot be reached from here")
	}}
	bad.describe = func() *pb.DescribeResponse {
		return &pb.DescribeResponse{Shards: []*pb.ShardInfo{{Shard: 0, LeaderAddr: good.addr}}, NodeAddrs: []string{bad.addr, good.addr}}
	}
	startFakeNode(t, bad)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := Dial(ctx, bad.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub := c.Topic("x").Subscribe(ctx, 0, SubscribeOptions{})
	ev, err := sub.Next()
	opened := bad.subscribes.Load()
	if opened > 20 {
		t.Errorf("%d subscriptions opened through the refusing node in 1 s: a busy loop (no pause between re-subscriptions)", opened)
	}
	if err != nil || ev.Kind != EventRecord {
		t.Errorf("Next: %+v, %v; the subscription never went through the other node the client knows (%d streams through it)", ev, err, good.subscribes.Load())
	}
}

// TestSubscriptionLeavesAFrozenNode: the node a subscription streams from stops sending (frozen,
// or cut off from the cluster while the client still reaches it) without closing the
// connection. Once the stream has given nothing for the client's silence limit, the
// subscription subscribes again through the next node it knows of.
func TestSubscriptionLeavesAFrozenNode(t *testing.T) {
	good := startFakeNode(t, &fakeNode{subscribe: serveOneRecord})
	frozen := &fakeNode{subscribe: func(_ *pb.SubscribeRequest, st pb.SpecLog_SubscribeServer) error {
		<-st.Context().Done() // never sends
		return nil
	}}
	frozen.describe = func() *pb.DescribeResponse {
		return &pb.DescribeResponse{Shards: []*pb.ShardInfo{{Shard: 0, LeaderAddr: good.addr}}, NodeAddrs: []string{frozen.addr, good.addr}}
	}
	startFakeNode(t, frozen)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := Dial(ctx, frozen.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetSubscribeSilenceTimeout(300 * time.Millisecond)
	ev, err := c.Topic("x").Subscribe(ctx, 0, SubscribeOptions{}).Next()
	if err != nil || ev.Kind != EventRecord {
		t.Fatalf("Next: %+v, %v on a node that sends nothing (streams through the other node: %d)", ev, err, good.subscribes.Load())
	}
}
