package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

// testBroker serves a fresh registry on a loopback port (node 1 of a one-node cluster) and
// returns its address.
func testBroker(t *testing.T) (string, *topics.Registry) {
	t.Helper()
	_, addr, reg := ctBroker(t, nil)
	return addr, reg
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.AllowAutoTopicCreation(),
		kgo.DefaultProduceTopic("rt"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 1000
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Key, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("rt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := 0
	for seen < n {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("poll after %d records: %v", seen, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%d", seen); string(r.Value) != want || r.Offset != int64(seen) {
				t.Fatalf("record %d = %q at %d; want %q", seen, r.Value, r.Offset, want)
			}
			seen++
		})
	}
}

// TestHighWatermarkFollowsDurability: without write caching, consumers see only durable records
// (the high watermark is the durable offset), so a power failure can never take back a record
// someone read; with write caching they see everything appended, as in Redpanda.
func TestHighWatermarkFollowsDurability(t *testing.T) {
	addr, reg := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noFlush := map[string]string{"flush.ms": "1000000", "flush.bytes": "1000000000"}
	fsyncTopic, err := ctCreate(t, reg, "durable", 1, noFlush), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	cached := map[string]string{"write.caching": "true"}
	for k, v := range noFlush {
		cached[k] = v
	}
	cachedTopic, err := ctCreate(t, reg, "cached", 1, cached), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []*topics.Topic{fsyncTopic, cachedTopic} { // appended, not synced
		if _, _, err := tp.Partitions[0].Replica.Append(ctBatch(3, 10)); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	latest := func(topic string) int64 {
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset
	}
	ids := map[string][16]byte{"durable": fsyncTopic.ID, "cached": cachedTopic.ID}
	fetch := func(topic string) (hw int64, records int) {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, ids[topic]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch %s: error %d", topic, p.ErrorCode)
		}
		recs, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic}, &p, kgo.DefaultDecompressor(), nil)
		return p.HighWatermark, len(recs.Records)
	}
	// byTime looks up the first offset at or after timestamp 0, and the offset of the largest
	// timestamp (KIP-734), as a consumer (replica id -1): neither may name an offset at or above
	// the high watermark (Kafka answers -1, "none").
	byTime := func(topic string) (first, maxTs int64) {
		list := func(ts int64) int64 { // one request each: a partition named twice is INVALID_REQUEST
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 {
				t.Fatalf("ListOffsets %s at %d: error %d", topic, ts, p.ErrorCode)
			}
			return p.Offset
		}
		return list(0), list(-3)
	}
	if hw, n := fetch("durable"); hw != 0 || n != 0 || latest("durable") != 0 {
		t.Errorf("fsync topic before the sync: high watermark %d, %d records, latest %d; want 0, 0, 0", hw, n, latest("durable"))
	}
	if first, maxTs := byTime("durable"); first != -1 || maxTs != -1 {
		t.Errorf("fsync topic before the sync: offset for timestamp 0 is %d, for the max timestamp %d; want -1, -1", first, maxTs)
	}
	if hw, n := fetch("cached"); hw != 3 || n != 3 || latest("cached") != 3 {
		t.Errorf("write-caching topic: high watermark %d, %d records, latest %d; want 3, 3, 3", hw, n, latest("cached"))
	}
	if first, maxTs := byTime("cached"); first != 0 || maxTs < 0 {
		t.Errorf("write-caching topic: offset for timestamp 0 is %d, for the max timestamp %d; want 0, >= 0", first, maxTs)
	}
	if err := fsyncTopic.Partitions[0].Log.WaitDurable(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if hw, n := fetch("durable"); hw != 3 || n != 3 || latest("durable") != 3 {
		t.Errorf("fsync topic after the sync: high watermark %d, %d records, latest %d; want 3, 3, 3", hw, n, latest("durable"))
	}
	if first, maxTs := byTime("durable"); first != 0 || maxTs < 0 {
		t.Errorf("fsync topic after the sync: offset for timestamp 0 is %d, for the max timestamp %d; want 0, >= 0", first, maxTs)
	}
}
