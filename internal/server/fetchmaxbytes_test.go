package server_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
)

// TestFetchMaxBytes: the node's fetch.max.bytes (--fetch-max-bytes) caps a fetch response
// whatever the client asks, beyond the first batch, which always goes (Kafka's KIP-74 rule),
// and DescribeConfigs reports it.
func TestFetchMaxBytes(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.FetchMaxBytes = 64 << 10 })
	b.createTopic("fmb", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.ProducerLinger(0))
	value := make([]byte, 40<<10) // random: no codec shrinks it
	rand.Read(value)
	for range 10 { // ten batches of one 40 KiB record
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fmb", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, "fmb")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(maxBytes int32) int {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes, req.ReplicaID = 11, 100, maxBytes, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "fmb", td["fmb"].ID // the client sends the version it likes: with topic ids
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 10<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch: %v %+v", err, resp)
		}
		return len(resp.Topics[0].Partitions[0].RecordBatches)
	}
	// 64 KiB allows the first 40 KiB batch and no second one (it would pass 64 KiB).
	if n := fetch(10 << 20); n < 40<<10 || n > 64<<10 {
		t.Errorf("a fetch asking 10 MiB from a node capped at 64 KiB got %d bytes; want one batch", n)
	}
	if n := fetch(1); n < 40<<10 {
		t.Errorf("a fetch of 1 byte got %d bytes; want the first batch whole", n)
	}
	rc, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(rc) != 1 {
		t.Fatalf("describing the node's configs: %v %v", rc, err)
	}
	got := ""
	for _, c := range rc[0].Configs {
		if c.Key == "fetch.max.bytes" {
			got = c.MaybeValue()
		}
	}
	if got != "65536" {
		t.Errorf("DescribeConfigs fetch.max.bytes: %q; want 65536", got)
	}
}
