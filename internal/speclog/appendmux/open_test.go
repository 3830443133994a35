package appendmux

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// TestOpeningKeepsTheDeadline: opening the append stream to a node that accepts connections and
// says nothing (frozen) is bounded by the append's context, not by gRPC's 20 s connect timeout;
// a second append waiting for that opening gives up at its own deadline; and Close is not held
// by the opening.
func TestOpeningKeepsTheDeadline(t *testing.T) {
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
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	m := New(pb.NewSpecLogClient(cc))
	start := time.Now()
	var wg sync.WaitGroup
	for _, d := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			_, err := appendTo(ctx, m, 1)
			if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took > d+time.Second {
				t.Errorf("an append with a %v deadline: %v after %v", d, err, took.Round(time.Millisecond))
			}
		}()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		appendTo(ctx, m, 1)
	}()
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	m.Close()
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Close took %v: held by an append opening the stream", took.Round(time.Millisecond))
	}
	<-done
}
