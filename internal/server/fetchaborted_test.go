package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchAbortedTransactionsBounded: a read_committed fetch, of a local or an object-storage
// topic, lists the aborted transactions that begin below the end of the batches it returns, as
// Kafka's (up to the fetch's upper bound), not every one up to the last stable offset: a
// consumer far behind a partition with many aborted transactions would otherwise get them all
// with every fetch.
func TestFetchAbortedTransactionsBounded(t *testing.T) {
	for _, object := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "object"}[object], func(t *testing.T) { fetchAbortedTransactionsBounded(t, object) })
	}
}

func fetchAbortedTransactionsBounded(t *testing.T, object bool) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	addr := b.addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("bounded"), kgo.DefaultProduceTopic("aborts"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if object {
		createObjectTopic(t, addr, "aborts", 1, nil)
	} else {
		b.createTopic("aborts", 1)
	}
	for i := range 10 { // ten aborted transactions of one batch (2 offsets each, with the marker)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte{'x'}, 1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("abort %d: %v", i, err)
		}
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, "aborts")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(maxBytes int32) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = 13, -1, 0, maxBytes, 1, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = md.Topics["aborts"].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, maxBytes, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	// The last abort's marker is written after its answer: wait until the last stable offset
	// has passed it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p := fetch(1 << 20)
		if p.ErrorCode == 0 && p.LastStableOffset == 20 {
			if len(p.AbortedTransactions) != 10 {
				t.Errorf("fetch of 1 MiB: %d aborted; want all 10", len(p.AbortedTransactions))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last stable offset %d, %v; want 20", p.LastStableOffset, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	// One batch fits in 1,200 bytes: its transaction only (the marker after it is not read).
	if p := fetch(1200); p.ErrorCode != 0 || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].FirstOffset != 0 {
		t.Errorf("fetch of 1,200 bytes: %v, aborted %+v; want the first transaction's only", kerr.ErrorForCode(p.ErrorCode), p.AbortedTransactions)
	}
}
