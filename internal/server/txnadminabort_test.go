package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStaleOperatorAbortIsRefused: an operator's abort (KIP-664's WriteTxnMarkers, what
// Admin.abortTransaction and kafka-transactions abort send) at a producer epoch older than the
// producer's is refused INVALID_PRODUCER_EPOCH, as Kafka's checkProducerEpoch refuses it, even
// with coordinator epoch -1 (what the tools send when DescribeProducers showed none). Runnel
// took coordinator epoch -1 for the partition's own abort and aborted the producer's live
// transaction, whose commit the producer was then told succeeded: read_committed never saw it.
// An object partition took the abort for its own and wrote nothing, but answered success.
func TestStaleOperatorAbortIsRefused(t *testing.T) {
	for _, storage := range []string{"local", "object"} {
		t.Run(storage, func(t *testing.T) { testStaleOperatorAbort(t, storage) })
	}
}

func testStaleOperatorAbort(t *testing.T, storage string) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	if storage == "object" {
		createObjectTopic(t, b.addr, "stale-abort", 1, nil)
	} else {
		b.createTopic("stale-abort", 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := b.client(kgo.TransactionalID("stale-abort-txn"), kgo.DefaultProduceTopic("stale-abort"))
	for i, v := range []string{"first", "live"} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(b.client())
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"stale-abort": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var pid int64 = -1
	var epoch int16
	ds.EachProducer(func(ps kadm.DescribedProducer) { pid, epoch = ps.ProducerID, ps.ProducerEpoch })
	if pid < 0 || epoch < 1 {
		t.Fatalf("described producer %d epoch %d; want one past epoch 0", pid, epoch)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch-1, false, -1
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "stale-abort", []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, b.client())
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("an operator's abort at epoch %d (the producer's is %d), coordinator epoch -1: %v; want INVALID_PRODUCER_EPOCH, as Kafka",
			epoch-1, epoch, kerr.ErrorForCode(code))
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readTopic(t, ctx, b.addr, "stale-abort", kgo.ReadCommitted(), 2, 5*time.Second); !slices.Contains(got, "live") {
		t.Errorf("read_committed after the commit: %v; want the live transaction's record", got)
	}
}
