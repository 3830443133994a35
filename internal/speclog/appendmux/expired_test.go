package appendmux

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestExpiredContextFailsAlone: an append whose context has already ended when it is called
// (speclog.AppendBatch makes one when the caller's deadline passes between tries) fails alone,
// with its context's error: nothing was sent for it, so the stream the other appends to the
// node wait on stays open and they are answered.
func TestExpiredContextFailsAlone(t *testing.T) {
	release := make(chan struct{})
	n := &node{slow: func(req *pb.AppendRequest) {
		if req.GetShard() == 1 {
			<-release // a commit that takes a while
		}
	}}
	m := New(serve(t, n))
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := appendTo(ctx, m, 1)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // the first append is in flight on the stream
	expired, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := appendTo(expired, m, 2); status.Code(err) != codes.Canceled {
		t.Errorf("the expired append: %v, want Canceled", err)
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("an append in flight failed because another caller's context had ended: %v", err)
	}
	if got := n.streams.Load(); got != 1 {
		t.Fatalf("%d append streams opened, want the one", got)
	}
}
