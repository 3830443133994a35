package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/topics"
)

// testBroker serves a fresh registry on a loopback port and returns its address.
func testBroker(t *testing.T) (string, *topics.Registry) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	flusher := logstore.NewFlusher(0)
	reg, err := topics.Open(topics.Options{DataDir: t.TempDir(), Flusher: flusher, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	b := New(Config{NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(addr.Port), ClusterID: "test",
		AutoCreateTopics: true, Logger: quiet}, reg)
	go b.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Shutdown(ctx)
		reg.Close()
		flusher.Close()
	})
	return addr.String(), reg
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
