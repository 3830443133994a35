package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/controller"
)

// TestISRKeptOverFailover: when a partition's leader stops, the new leader's ISR is the two
// replicas left from the moment it is elected, as Kafka keeps the ISR over an election:
// Metadata never shows the partition under-replicated to one. Before command level 12 the
// ISR was the new leader alone until its first report, for up to half a second.
func TestISRKeptOverFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.waitNodes(3)
	c.waitLevel(20 * time.Second)
	cl, adm := c.client()
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, "kept"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	md, err := adm.Metadata(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	id := controller.TopicID(md.Topics["kept"].ID)
	var old int32
	eventually(t, "the ISR of all three replicas", 10*time.Second, func() bool {
		_, p, ok := c.servers[1].Node().Image().Partition(id, 0)
		old = p.Leader
		return ok && p.Leader >= 0 && len(p.ISR) == 3
	})
	var watcher int32 = 1
	if old == 1 {
		watcher = 2
	}
	// Watch the ISR in a remaining node's image while the leader stops (the server taken
	// before: stop changes c.servers).
	ws := c.servers[watcher]
	stopped := make(chan struct{})
	seen := make(chan []string, 1)
	go func() {
		var bad []string
		defer func() { seen <- bad }()
		for {
			select {
			case <-stopped:
				return
			default:
			}
			if _, p, ok := ws.Node().Image().Partition(id, 0); ok && p.Leader >= 0 && p.Leader != old {
				if len(p.ISR) < 2 {
					bad = append(bad, fmt.Sprintf("leader %d ISR %v", p.Leader, p.ISR))
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	c.stop(old)
	eventually(t, "a new leader", 20*time.Second, func() bool {
		_, p, ok := c.servers[watcher].Node().Image().Partition(id, 0)
		return ok && p.Leader >= 0 && p.Leader != old
	})
	time.Sleep(1500 * time.Millisecond) // past the new leader's first reports
	close(stopped)
	if bad := <-seen; len(bad) > 0 {
		t.Fatalf("after node %d stopped, the new leader's ISR lacked the other live replica: %v", old, slices.Compact(bad))
	}
	_, p, _ := c.servers[watcher].Node().Image().Partition(id, 0)
	if len(p.ISR) != 2 || slices.Contains(p.ISR, old) {
		t.Fatalf("ISR %v after node %d stopped; want the two others", p.ISR, old)
	}
}
