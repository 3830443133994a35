package speclog_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/speclog/speclogtest"
)

// TestAddPartitionsToTxnRefusesTotalOrder: a total-order topic takes no transactions
// (docs/speclog.md §0): AddPartitionsToTxn refuses its partitions (it accepted them, and the
// transaction's EndTxn then wrote a marker into the shard: a slot of the total order that is
// neither a record nor a no-op entry), and no marker is written.
func TestAddPartitionsToTxnRefusesTotalOrder(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.Log(ctx, t, "txtotal", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const id = "txn-on-total"
	var pid int64
	var epoch int16
	for {
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID = kmsg.StringPtr(id)
		ip.TransactionTimeoutMillis = 60000
		r, err := ip.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
		if err == nil {
			pid, epoch = r.ProducerID, r.ProducerEpoch
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("InitProducerID: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "txtotal", []int32{0}
	add.Topics = append(add.Topics, at)
	ar, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	code := ar.Topics[0].Partitions[0].ErrorCode
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, false
	if er, err := end.RequestWith(ctx, cl); err != nil || er.ErrorCode != 0 {
		t.Logf("EndTxn: %v %+v", err, er)
	}
	// Look for a transaction marker in the shard's log.
	tp, _ := n.S.Topics().Get("txtotal")
	p := tp.Partitions[0]
	found := int64(-1)
	for deadline := time.Now().Add(1500 * time.Millisecond); found < 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, err := p.Log.Read(nil, p.Log.StartOffset(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsControl() && h.IsTransactional() {
				found = h.BaseOffset
				break
			}
			data = data[h.Size():]
		}
	}
	if code == 0 || found >= 0 {
		t.Errorf("AddPartitionsToTxn of a total-order partition: error code %d (want a refusal); a transaction marker in the shard at offset %d (-1: none)", code, found)
	}
}

// TestMaxTimestampSkipsNoOps: ListOffsets MAX_TIMESTAMP (KIP-734) names the record with the
// largest timestamp. On a total-order partition the no-op entries the shard appends (about
// 20/s on an idle topic, stamped with the append time) carry the newest timestamps; the answer
// must still be the record (it was a no-op control batch's offset, which no consumer sees).
func TestMaxTimestampSkipsNoOps(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.Log(ctx, t, "mxtotal", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka), kgo.DefaultProduceTopic("mxtotal"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("only"), Timestamp: time.Now()})
	r, err := res.First()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few idle no-op entries after it
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "mxtotal"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	lr, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := lr.Topics[0].Partitions[0]
	if got.Offset != r.Offset {
		t.Errorf("MAX_TIMESTAMP: offset %d at %d (code %d); the partition's only record is at offset %d (timestamp %d)",
			got.Offset, got.Timestamp, got.ErrorCode, r.Offset, r.Timestamp.UnixMilli())
	}
}

// TestFetchInsideNoOp: a franz-go consumer starting at an offset in the
// middle of a no-op entry, and ListOffsets by a timestamp that only no-op entries reach.
func TestFetchInsideNoOp(t *testing.T) {
	n := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n.Log(ctx, t, "midtotal", 1)
	tp, _ := n.S.Topics().Get("midtotal")
	p := tp.Partitions[0]
	// Wait for a no-op entry spanning several offsets.
	mid := int64(-1)
	for deadline := time.Now().Add(20 * time.Second); mid < 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Skip("no multi-slot no-op entry seen")
		}
		data, err := p.Log.Read(nil, p.Log.StartOffset(), 1<<20)
		if err != nil {
			continue
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				break
			}
			if h.IsControl() && h.LastOffsetDelta >= 2 && h.NextOffset() <= p.Replica.HighWatermark() {
				mid = h.BaseOffset + 1
				break
			}
			data = data[h.Size():]
		}
	}
	pc, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka), kgo.DefaultProduceTopic("midtotal"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	r, err := pc.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).First()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"midtotal": {0: kgo.NewOffset().At(mid)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	for {
		fs := cc.PollFetches(fctx)
		if fctx.Err() != nil {
			t.Fatalf("no record from offset %d (inside a no-op entry); produced at %d", mid, r.Offset)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch from %d: %v", mid, errs)
		}
		recs := fs.Records()
		if len(recs) > 0 {
			if recs[0].Offset != r.Offset || string(recs[0].Value) != "after" {
				t.Fatalf("first record %d %q; want %d", recs[0].Offset, recs[0].Value, r.Offset)
			}
			return
		}
	}
}
