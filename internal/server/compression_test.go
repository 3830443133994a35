package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/batch"
)

// TestTopicCompressionType: a topic whose compression.type is a codec stores every batch with
// it, whatever the producer used (Kafka's broker-side recompression), on a local and on an
// object topic; consumers read the same records; altering the type applies to later batches.
func TestTopicCompressionType(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"compression.type": kadm.StringPtr("zstd")}, "zstd-local")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	createObjectTopic(t, b.addr, "zstd-object", 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")})
	if resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"compression.type": kadm.StringPtr("brotli")}, "bad"); err == nil && resp.Err == nil {
		t.Fatal("compression.type=brotli was accepted")
	}

	produce := func(topic string, from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "value %d of %s, long enough to be worth compressing", i, topic)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// codecs reads the topic's stored batches (a raw Fetch) and returns their codecs in order,
	// and the values they hold.
	codecs := func(topic string) ([]batch.Codec, []string) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes, req.ReplicaID = 12, 100, 10<<20, -1
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, td[topic].ID // the client sends the version it likes: with topic ids
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 10<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		fr, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch %s: %+v", topic, fr)
		}
		data := fr.Topics[0].Partitions[0].RecordBatches
		var out []batch.Codec
		var values []string
		for len(data) > 0 {
			n, err := batch.Split(data)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.Validate(data[:n])
			if err != nil {
				t.Fatalf("a stored batch is invalid: %v", err)
			}
			out = append(out, h.Codec())
			recs, err := batch.Records(&h, data[:n])
			if err != nil {
				t.Fatal(err)
			}
			rd := batch.NewRecordReader(recs)
			var rec batch.Record
			for rd.Next(&rec) {
				values = append(values, string(rec.Value))
			}
			data = data[n:]
		}
		return out, values
	}
	for _, topic := range []string{"zstd-local", "zstd-object"} {
		produce(topic, 0, 50)
		got, values := codecs(topic)
		if len(got) == 0 || len(values) != 50 || values[49] != fmt.Sprintf("value 49 of %s, long enough to be worth compressing", topic) {
			t.Fatalf("%s: %d batches, %d values", topic, len(got), len(values))
		}
		for _, c := range got {
			if c != batch.CodecZstd {
				t.Fatalf("%s: a batch produced with snappy is stored with %v; want zstd", topic, c)
			}
		}
	}
	// A change of compression.type applies to the batches appended after it.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "compression.type", Value: kadm.StringPtr("uncompressed")}}, "zstd-local"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for next := 50; ; next += 10 { // the change reaches the partition's config shortly
		produce("zstd-local", next, 10)
		got, values := codecs("zstd-local")
		if got[len(got)-1] == batch.CodecNone {
			if want := fmt.Sprintf("value %d of zstd-local, long enough to be worth compressing", next+9); len(values) != next+10 || values[next+9] != want {
				t.Fatalf("after the change: %d values, the last %q; want %d, %q", len(values), values[len(values)-1], next+10, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compression.type=uncompressed not applied: codecs %v", got)
		}
	}
	// Consumers read every record once.
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics("zstd-object"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	n := 0
	for n < 50 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprintf("value %d of zstd-object, long enough to be worth compressing", n) {
				t.Fatalf("record %d: %q", n, r.Value)
			}
			n++
		})
	}
}
