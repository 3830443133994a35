package server_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReassignUnderSteadyLoad: a replica added while a producer (acks=1, so nothing waits for
// the followers) keeps the leader appending joins the ISR and the move finishes, without a
// failed produce. The new replica learns while the old ones commit, and counts as caught up as
// of any send that took it to the leader's log end (as Kafka's lastCaughtUpTime), so appends
// arriving before its acknowledgement do not keep it out.
func TestReassignUnderSteadyLoad(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := c.client(kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	const topic = "steady"
	placeTopic(ctx, t, adm, topic, 1, 2)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acked, failed atomic.Int64
	value := []byte(strings.Repeat("v", 512))
	wg.Add(1)
	go func() { // as fast as the cluster takes them, with many batches in flight
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				} else {
					acked.Add(1)
				}
			})
		}
	}()
	time.Sleep(2 * time.Second) // the load is steady before the move starts
	start := time.Now()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{1, 2, 3})
	if r, err := adm.AlterPartitionAssignments(ctx, req); err != nil || r.Error() != nil {
		t.Fatalf("add node 3: %v %v", err, r.Error())
	}
	before := acked.Load()
	eventually(t, "the move to 1, 2, 3 under load", 60*time.Second, func() bool {
		md, err := adm.Metadata(ctx, topic)
		return err == nil && slices.Equal(md.Topics[topic].Partitions[0].Replicas, []int32{1, 2, 3}) && len(md.Topics[topic].Partitions[0].ISR) == 3
	})
	took := time.Since(start)
	during := acked.Load() - before
	close(stop)
	wg.Wait()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the move finished in %v with %d records acknowledged meanwhile (%.0f/s)", took, during, float64(during)/took.Seconds())
	if failed.Load() > 0 {
		t.Errorf("%d produces failed", failed.Load())
	}
	if during == 0 {
		t.Error("nothing was produced during the move")
	}
}
