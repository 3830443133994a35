package speclog_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/runnel-dev/runnel/internal/speclog/speclogtest"
	"github.com/runnel-dev/runnel/speclog"
)

// TestSubscriberSeesAnAddedShard: a subscription to every shard (no filter) that started
// before a partition was added must still see the new shard's records (Subscribe used to fix the
// merger's wanted shards to the partitions of the topic at subscribe time, so the new shard's
// positions were skipped as "not wanted" and confirmed past).
func TestSubscriberSeesAnAddedShard(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := n.Log(ctx, t, "grow", 2)
	if _, err := log.Append(ctx, 0, speclog.Record{Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	sub := log.Subscribe(ctx, 0, speclog.SubscribeOptions{})
	var mu sync.Mutex
	got := map[uint64]string{}
	var confirmed uint64
	go func() {
		for {
			ev, err := sub.Next()
			if err != nil {
				return
			}
			mu.Lock()
			switch ev.Kind {
			case speclog.EventRecord:
				got[ev.Position] = string(ev.Record.Value)
			case speclog.EventConfirm:
				confirmed = ev.UpTo
			}
			mu.Unlock()
		}
	}()
	time.Sleep(200 * time.Millisecond) // the subscription is live
	n.AddPartitions(t, "grow", 3)
	var p uint64
	for {
		pos, err := log.Append(ctx, 2, speclog.Record{Value: []byte("new")})
		if err == nil {
			p = pos
			break
		}
		if status.Code(err) == codes.InvalidArgument && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		t.Fatal(err)
	}
	q, err := log.Append(ctx, 0, speclog.Record{Value: []byte("after")})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		c, have := confirmed, got[p]
		mu.Unlock()
		if c > max(p, q) {
			if have != "new" {
				t.Fatalf("confirmed up to %d, the added shard's record at %d never given (got %q; records %v)", c, p, have, got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("confirmed only up to %d, want past %d", c, max(p, q))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
