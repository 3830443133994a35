package speclog

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// fakeNode is a fake SpecLog node. Its appends follow Kafka's idempotent-producer rule that
// matters here: a batch whose producer id and sequence range equal a stored one is a duplicate,
// answered with the stored positions and not stored again.
type fakeNode struct {
	pb.UnimplementedSpecLogServer
	addr string

	mu      sync.Mutex
	log     []string            // stored record values, by position
	batches map[[3]int64]uint64 // (producer id, first seq, last seq) → first position
	appends int
	// onAppend, if set, decides the fate of append n (1-based) after it is stored or not:
	// stored reports whether it was stored; a non-nil error is answered instead.
	onAppend func(ctx context.Context, n int, stored bool) error
	refuseN  map[int]codes.Code // append n is refused with this code before anything is stored

	subscribes atomic.Int64
	subscribe  func(req *pb.SubscribeRequest, st pb.SpecLog_SubscribeServer) error
	describe   func() *pb.DescribeResponse
}

func (n *fakeNode) InitProducer(context.Context, *pb.InitProducerRequest) (*pb.InitProducerResponse, error) {
	return &pb.InitProducerResponse{ProducerId: 7}, nil
}

func (n *fakeNode) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	n.mu.Lock()
	n.appends++
	k := n.appends
	if code, ok := n.refuseN[k]; ok {
		n.mu.Unlock()
		return nil, status.Error(code, "refused")
	}
	key := [3]int64{req.GetProducerId(), int64(req.GetBaseSequence()), int64(req.GetBaseSequence()) + int64(len(req.GetRecords())) - 1}
	first, dup := n.batches[key]
	if !dup {
		first = uint64(len(n.log))
		for _, r := range req.GetRecords() {
			n.log = append(n.log, string(r.GetValue()))
		}
		n.batches[key] = first
	}
	n.mu.Unlock()
	if n.onAppend != nil {
		if err := n.onAppend(ctx, k, !dup); err != nil {
			return nil, err
		}
	}
	out := &pb.AppendResponse{}
	for i := range req.GetRecords() {
		out.Positions = append(out.Positions, first+uint64(i))
	}
	return out, nil
}

func (n *fakeNode) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	if n.describe != nil {
		return n.describe(), nil
	}
	return &pb.DescribeResponse{Shards: []*pb.ShardInfo{{Shard: 0, LeaderAddr: n.addr}}, NodeAddrs: []string{n.addr}}, nil
}

func (n *fakeNode) Subscribe(req *pb.SubscribeRequest, st pb.SpecLog_SubscribeServer) error {
	n.subscribes.Add(1)
	if n.subscribe != nil {
		return n.subscribe(req, st)
	}
	return status.Error(codes.Unimplemented, "no")
}

func startFakeNode(t *testing.T, n *fakeNode) *fakeNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if n.batches == nil {
		n.batches = map[[3]int64]uint64{}
	}
	n.addr = lis.Addr().String()
	pb.RegisterSpecLogServer(srv, n)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return n
}
