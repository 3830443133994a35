package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/broker"
)

// idempotentProducer is a franz-go producer with idempotence on (its default; franz-go then
// keeps one produce request in flight per broker), unlimited retries, and records placed by
// their Partition field.
func idempotentProducer(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// exactlyOnce reads the topic back and checks that partition p holds the values "seq" for
// seq = p, p+partitions, ... < n, in that order, each once: no duplicate, no gap.
func exactlyOnce(t *testing.T, addr, topic string, partitions, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	if total != n {
		t.Errorf("the topic holds %d records; %d were produced (a duplicate or a loss)", total, n)
	}
	next := make([]int, partitions)
	for p := range next {
		next[p] = p
	}
	for got := 0; got < total; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, total)
		}
		var bad error
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			if want := fmt.Sprint(next[r.Partition]); bad == nil && string(r.Value) != want {
				bad = fmt.Errorf("partition %d offset %d holds %s; want %s (duplicated, lost or reordered)", r.Partition, r.Offset, r.Value, want)
			}
			next[r.Partition] += partitions
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}
}

// produceSeq produces the values "seq" for seq in [from, to) to partition seq % partitions,
// waiting for every 20 (so the stream takes many produce requests), and returns the first error
// any of them got.
func produceSeq(p *kgo.Client, topic string, partitions, from, to int) error {
	var mu sync.Mutex
	var first error
	for seq := from; seq < to; seq++ {
		if seq%20 == 0 {
			if err := p.Flush(context.Background()); err != nil {
				return err
			}
		}
		r := &kgo.Record{Topic: topic, Partition: int32(seq % partitions), Value: []byte(fmt.Sprint(seq))}
		p.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("producing %s: %w", r.Value, err)
			}
		})
	}
	if err := p.Flush(context.Background()); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return first
}

// TestIdempotentProducerLostResponses: the broker appends every produce but loses every fifth
// response (the connection drops instead). The producer retries the batches it heard nothing
// about; the partitions end up with every record exactly once, in
// order, and the producer sees no error.
func TestIdempotentProducerLostResponses(t *testing.T) {
	var produces, dropped atomic.Int64
	hooks := broker.Hooks{DropResponse: func(key int16, resp kmsg.Response) bool {
		if key != kmsg.Produce.Int16() || produces.Add(1)%5 != 0 {
			return false
		}
		dropped.Add(1)
		return true
	}}
	b := startBrokerHooks(t, t.TempDir(), "127.0.0.1:0", hooks)
	const topic, partitions, n = "idem", 4, 20000
	b.createTopic(topic, partitions)
	p := idempotentProducer(t, b.addr)
	if err := produceSeq(p, topic, partitions, 0, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d produce requests, %d responses lost", produces.Load(), dropped.Load())
	if dropped.Load() == 0 {
		t.Fatal("no response was dropped; the test tested nothing")
	}
	exactlyOnce(t, b.addr, topic, partitions, n)

	// DescribeProducers (KIP-664) shows the one producer on each partition, at its last sequence.
	described, err := kadm.NewClient(p).DescribeProducers(context.Background(), kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}, 3: {}}})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	described.EachProducer(func(d kadm.DescribedProducer) {
		seen++
		if d.ProducerID < 0 || d.ProducerEpoch != 0 || d.LastSequence != n/partitions-1 || d.LastTimestamp <= 0 {
			t.Errorf("DescribeProducers %s[%d] = %+v; want producer epoch 0 at sequence %d", d.Topic, d.Partition, d, n/partitions-1)
		}
	})
	if seen != partitions {
		t.Errorf("DescribeProducers listed %d producers; want one per partition (%d)", seen, partitions)
	}
}

// TestIdempotentProducerAcrossRestart: the broker restarts in the middle of an idempotent
// stream. Batches in flight at the stop are retried against the restarted broker, whose
// producer state came back from disk: no duplicate, no gap, and no OUT_OF_ORDER_SEQUENCE_NUMBER
// (or any other error) at the producer.
func TestIdempotentProducerAcrossRestart(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	const topic, partitions, n = "idem", 4, 30000
	b.createTopic(topic, partitions)
	p := idempotentProducer(t, b.addr)
	produced := make(chan error, 1)
	go func() { produced <- produceSeq(p, topic, partitions, 0, n) }()
	deadline := time.Now().Add(30 * time.Second)
	for b.s.Topics() != nil && endOffsets(b) < n/3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	mid := endOffsets(b)
	b = b.restart()
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted with %d of %d records in", mid, n)
	if mid == 0 || mid >= n {
		t.Fatalf("the restart came at %d of %d records, not in the middle of the stream", mid, n)
	}
	exactlyOnce(t, b.addr, topic, partitions, n)
}

// endOffsets sums the log end offsets of the broker's partitions.
func endOffsets(b *testBroker) int {
	n := 0
	for _, p := range b.s.Partitions() {
		n += int(p.EndOffset)
	}
	return n
}

// TestProducerIDsNeverReused: InitProducerId hands out distinct ids at epoch 0, and a restarted
// broker never hands out an id it handed out before, to idempotent and transactional producers
// alike.
func TestProducerIDsNeverReused(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	initPID := func(txnID *string) *kmsg.InitProducerIDResponse {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60000
		// Straight to the broker: kgo routes InitProducerId through FindCoordinator otherwise.
		resp, err := cl.Broker(0).Request(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.InitProducerIDResponse)
	}
	seen := map[int64]bool{}
	for restart := range 3 {
		for range 3 {
			resp := initPID(nil)
			if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
				t.Fatalf("after %d restarts InitProducerId = id %d epoch %d error %d; want a new id at epoch 0", restart, resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode)
			}
			seen[resp.ProducerID] = true
		}
		b = b.restart()
	}
	txn := "my-txn"
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{txn} // creates __transaction_state
	if _, err := cl.Broker(0).Request(context.Background(), fc); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := initPID(&txn)
		if resp.ErrorCode == 0 {
			if resp.ProducerEpoch != 0 || seen[resp.ProducerID] {
				t.Errorf("InitProducerId(transactional id) = id %d epoch %d; want a new id at epoch 0", resp.ProducerID, resp.ProducerEpoch)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InitProducerId(transactional id) still fails with error %d", resp.ErrorCode)
		}
		time.Sleep(50 * time.Millisecond) // the coordinator's partition is being created and loaded
	}
}
