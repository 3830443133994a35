package speclog

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestRefusedRetryKeepsTheLaneInSequence: an append's first try is stored but answered past
// the append attempt, so it is tried again with the same producer id and sequence, and that try
// is refused (PermissionDenied: an ACL changed; NotFound, Unauthenticated and InvalidArgument
// take the same path). The first try may have been stored, so the lane must not give its
// sequence to the next append: that one would be taken for a duplicate of the first, answered
// with the first record's position and never stored. The next append is stored, at a position
// of its own.
func TestRefusedRetryKeepsTheLaneInSequence(t *testing.T) {
	n := startFakeNode(t, &fakeNode{
		refuseN: map[int]codes.Code{2: codes.PermissionDenied},
		onAppend: func(ctx context.Context, k int, stored bool) error {
			if k == 1 { // stored, then the commit takes longer than the client's attempt
				<-ctx.Done()
				return status.FromContextError(ctx.Err()).Err()
			}
			return nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetAppendAttemptTimeout(200 * time.Millisecond)
	log := c.Topic("x")
	if _, err := log.Append(ctx, 0, Record{Value: []byte("first")}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("first append: %v, want the retry's PermissionDenied", err)
	}
	pos, err := log.Append(ctx, 0, Record{Value: []byte("second")})
	if err != nil {
		t.Fatalf("second append: %v", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if pos >= uint64(len(n.log)) || n.log[pos] != "second" {
		t.Fatalf("the second append was answered with position %d, which holds %q; the node's log is %q (the second record was taken for a duplicate and never stored)",
			pos, n.log[min(int(pos), len(n.log)-1)], n.log)
	}
}

// TestAppendKeepsItsDeadlineOpeningAStream: a Log's appends share their producer lanes across
// shards, so an append to a shard whose leader froze (it accepts connections and says nothing)
// goes straight to opening that node's append stream. The opening is bounded by the append's
// context (its attempt, then the caller's deadline), not by gRPC's 20 s connect timeout: the
// append fails soon after its deadline.
func TestAppendKeepsItsDeadlineOpeningAStream(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			cn, err := lis.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, cn) // frozen: reads nothing, answers nothing
			hmu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		hmu.Lock()
		for _, cn := range held {
			cn.Close()
		}
		hmu.Unlock()
	})
	a := &fakeNode{}
	a.describe = func() *pb.DescribeResponse {
		return &pb.DescribeResponse{Shards: []*pb.ShardInfo{{Shard: 0, LeaderAddr: a.addr}, {Shard: 1, LeaderAddr: lis.Addr().String()}}}
	}
	startFakeNode(t, a)
	bg, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Dial(bg, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetAppendAttemptTimeout(200 * time.Millisecond)
	log := c.Topic("x")
	if _, err := log.Describe(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(bg, 0, Record{Value: []byte("to shard 0")}); err != nil { // a lane now exists
		t.Fatal(err)
	}
	ctx, cancel1 := context.WithTimeout(bg, time.Second)
	defer cancel1()
	start := time.Now()
	_, err = log.Append(ctx, 1, Record{Value: []byte("to shard 1")})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("an append with a 1 s deadline returned after %v (%v)", took.Round(time.Millisecond), err)
	}
	if err == nil {
		t.Fatal("an append to a frozen node succeeded")
	}
}
