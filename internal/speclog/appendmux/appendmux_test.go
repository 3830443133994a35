package appendmux

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// node is a SpecLog server for the mux's behaviour: Append answers the shard as the position;
// AppendStream answers each request the same way after hold(req) returns, and ends the stream
// (with an error) when it returns false. noStream: a node without AppendStream.
type node struct {
	pb.UnimplementedSpecLogServer
	noStream bool
	hold     func(*pb.AppendRequest) bool // before the next request is read
	slow     func(*pb.AppendRequest)      // before this one is answered
	streams  atomic.Int32
	unary    atomic.Int32
}

func (n *node) Append(_ context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	n.unary.Add(1)
	return answer(req)
}

func answer(req *pb.AppendRequest) (*pb.AppendResponse, error) {
	if req.GetShard() < 0 {
		return nil, status.Error(codes.InvalidArgument, "no such shard")
	}
	return &pb.AppendResponse{Positions: []uint64{uint64(req.GetShard())}}, nil
}

func (n *node) AppendStream(st pb.SpecLog_AppendStreamServer) error {
	if n.noStream {
		return status.Error(codes.Unimplemented, "no AppendStream here")
	}
	n.streams.Add(1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for {
		req, err := st.Recv()
		if err == io.EOF {
			wg.Wait()
			return nil
		}
		if err != nil {
			return err
		}
		if n.hold != nil && !n.hold(req.GetAppend()) { // ends at once, with appends unanswered
			return status.Error(codes.Unavailable, "the stream ends here")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n.slow != nil {
				n.slow(req.GetAppend())
			}
			out := &pb.AppendStreamResponse{Id: req.GetId()}
			if resp, err := answer(req.GetAppend()); err != nil {
				s := status.Convert(err)
				out.Code, out.Message = int32(s.Code()), s.Message()
			} else {
				out.Append = resp
			}
			mu.Lock()
			st.Send(out)
			mu.Unlock()
		}()
	}
}

func serve(t *testing.T, n *node) pb.SpecLogClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterSpecLogServer(s, n)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewSpecLogClient(cc)
}

func appendTo(ctx context.Context, m *Mux, shard int32) (uint64, error) {
	resp, err := m.Append(ctx, &pb.AppendRequest{Topic: "t", Shard: shard, Records: []*pb.Record{{Value: []byte("x")}}})
	if err != nil {
		return 0, err
	}
	return resp.GetPositions()[0], nil
}

// Concurrent appends share one stream; each gets its own answer, and a refused one its own
// status code.
func TestAppendsShareOneStream(t *testing.T) {
	n := &node{}
	m := New(serve(t, n))
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range int32(200) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pos, err := appendTo(ctx, m, i)
			if err != nil || pos != uint64(i) {
				errs <- errors.Join(err, status.Errorf(codes.Internal, "append %d answered %d", i, pos))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := appendTo(ctx, m, -1); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a refused append answered %v; want InvalidArgument", err)
	}
	if s, u := n.streams.Load(), n.unary.Load(); s != 1 || u != 0 {
		t.Fatalf("%d streams and %d unary calls; want 1 and 0", s, u)
	}
}

// A node without AppendStream gets unary Appends, from the first append on.
func TestUnaryWhereNoStream(t *testing.T) {
	n := &node{noStream: true}
	m := New(serve(t, n))
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range int32(5) {
		if pos, err := appendTo(ctx, m, i); err != nil || pos != uint64(i) {
			t.Fatalf("append %d: %d, %v", i, pos, err)
		}
	}
	if u := n.unary.Load(); u != 5 {
		t.Fatalf("%d unary calls; want 5", u)
	}
}

// A stream that breaks fails the appends waiting on it with Unavailable (they may have been
// stored: the caller retries), and the next append opens a new stream.
func TestBrokenStreamFailsItsAppends(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	var waiting atomic.Int32
	n := &node{
		hold: func(req *pb.AppendRequest) bool { return req.GetShard() != 99 }, // 99 ends the stream
		slow: func(req *pb.AppendRequest) {
			if req.GetShard() < 3 {
				waiting.Add(1)
				<-block // unanswered until the stream has ended
			}
		},
	}
	m := New(serve(t, n))
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	for i := range int32(3) {
		go func() { _, err := appendTo(ctx, m, i); errs <- err }()
	}
	for waiting.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	if _, err := appendTo(ctx, m, 99); status.Code(err) != codes.Unavailable {
		t.Fatalf("the append that ended the stream answered %v; want Unavailable", err)
	}
	for range 3 {
		if err := <-errs; status.Code(err) != codes.Unavailable {
			t.Fatalf("an append waiting on a broken stream answered %v; want Unavailable", err)
		}
	}
	if pos, err := appendTo(ctx, m, 7); err != nil || pos != 7 {
		t.Fatalf("the append after the stream broke: %d, %v", pos, err)
	}
	if s := n.streams.Load(); s != 2 {
		t.Fatalf("%d streams opened; want a second one after the first broke", s)
	}
}

// An append whose context ends while its answer is awaited gives up alone: the stream and the
// other appends on it go on.
func TestTimeoutGivesUpOneAppend(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	n := &node{slow: func(req *pb.AppendRequest) {
		if req.GetShard() == 5 {
			<-block
		}
	}}
	m := New(serve(t, n))
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := appendTo(ctx, m, 1); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := appendTo(short, m, 5); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a timed-out append answered %v; want DeadlineExceeded", err)
	}
	if pos, err := appendTo(ctx, m, 2); err != nil || pos != 2 {
		t.Fatalf("after a timed-out append: %d, %v", pos, err)
	}
	if s := n.streams.Load(); s != 1 {
		t.Fatalf("%d streams; a timed-out append must not close the stream", s)
	}
}
