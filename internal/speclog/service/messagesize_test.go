package service_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runnel-dev/runnel/internal/speclog/speclogtest"
	"github.com/runnel-dev/runnel/speclog"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// headerHeavy appends n records of one shard whose data is all in a header (900 KB each: a
// batch within the default max.message.bytes) and waits until they are confirmed. It returns
// a raw gRPC client of the node with gRPC's default 4 MiB receive limit (as the Go client's).
func headerHeavy(t *testing.T, n int) (pb.SpecLogClient, context.Context, uint64, string) {
	t.Helper()
	node := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	log := node.Log(ctx, t, "hdr", 1)
	first, _ := appendConfirmed(ctx, t, log, n, func(i int) speclog.Record {
		return speclog.Record{Value: []byte(fmt.Sprint(i)), Headers: []speclog.Header{{Key: "blob", Value: filled(i, 900<<10)}}}
	})
	cc, err := grpc.NewClient(node.S.SpecLogAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewSpecLogClient(cc), ctx, first, node.S.SpecLogAddr()
}

// filled is size bytes that differ by i (so that nothing compresses them away).
func filled(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i + j)
	}
	return b
}

// appendConfirmed appends n records to shard 0 (rec makes the i-th), waits until they are
// confirmed, and returns the first and last positions.
func appendConfirmed(ctx context.Context, t *testing.T, log *speclog.Log, n int, rec func(i int) speclog.Record) (first, last uint64) {
	t.Helper()
	for i := range n {
		pos, err := log.Append(ctx, 0, rec(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if i == 0 {
			first = pos
		}
		last = pos
	}
	for {
		d, err := log.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Confirmed > last {
			return first, last
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSubscribeCountsHeaderBytes: Subscribe cuts its messages at about maxMessage (1 MiB),
// counting each record's encoded size. It counted len(key)+len(value)+64, without the headers:
// six records of 900 KB of headers each (each a batch well within the default
// max.message.bytes) went out in one message of about 5.4 MB, past the 4 MiB a gRPC client
// (the Go client among them) receives: the subscription broke at the first record, and every
// re-subscription broke the same way.
func TestSubscribeCountsHeaderBytes(t *testing.T) {
	api, ctx, _, _ := headerHeavy(t, 6)
	st, err := api.Subscribe(ctx, &pb.SubscribeRequest{Topic: "hdr", From: 0})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 6 {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d of 6 records: %v", got, err)
		}
		for _, e := range resp.GetEvents() {
			if e.GetRecord() != nil {
				got++
			}
		}
	}
}

// TestReadCountsHeaderBytes: Read bounds its answer at maxReadBytes (3 MiB) by the same
// count; without headers, Read from the first of the same six records answered about 5.4 MB,
// which the client cannot receive.
func TestReadCountsHeaderBytes(t *testing.T) {
	api, ctx, first, _ := headerHeavy(t, 6)
	resp, err := api.Read(ctx, &pb.ReadRequest{Topic: "hdr", From: first, MaxRecords: 10000})
	if err != nil {
		t.Fatalf("Read(%d, 10000): %v", first, err)
	}
	if len(resp.GetRecords()) == 0 {
		t.Fatalf("Read(%d, 10000) gave no record (next %d)", first, resp.GetNext())
	}
}

// TestGoClientGetsHeaderHeavyRecords: the Go client's subscriber retries ResourceExhausted by
// subscribing again from its last confirmation, which met the same oversized message: it never
// delivered the first record.
func TestGoClientGetsHeaderHeavyRecords(t *testing.T) {
	_, ctx, _, addr := headerHeavy(t, 6)
	c, err := speclog.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sub := c.Topic("hdr").Subscribe(sctx, 0, speclog.SubscribeOptions{})
	for {
		ev, err := sub.Next()
		if err != nil {
			t.Fatalf("no record in 5 s: %v", err)
		}
		if ev.Kind == speclog.EventRecord {
			return
		}
	}
}

// TestCatchUpIsBoundedByBytes: a subscription's catch-up from the logs of the shards led here
// lays out up to 4096 positions per batch (service.catchUp); it read all their records before
// sending any, so what one subscription held was bounded by a record count, not by bytes: 4096
// records of up to max.message.bytes (1 MB by default) is 4 GB. It now sends every
// catchUpChunk. Here 240 records of 900 KB on a one-shard topic (216 MB) and a subscriber from
// their start that has not read yet: the node's live heap grew by about all of them, although
// the stream it sends on can take a few MB.
func TestCatchUpIsBoundedByBytes(t *testing.T) {
	node := speclogtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	log := node.Log(ctx, t, "big", 1)
	const n, size = 240, 900 << 10
	first, _ := appendConfirmed(ctx, t, log, n, func(i int) speclog.Record { return speclog.Record{Value: filled(i, size)} })
	cc, err := grpc.NewClient(node.S.SpecLogAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	if _, err := pb.NewSpecLogClient(cc).Subscribe(sctx, &pb.SubscribeRequest{Topic: "big", From: first}); err != nil {
		t.Fatal(err)
	}
	var most uint64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			most = max(most, ms.HeapAlloc-base)
		}
	}
	if most > n*size/2 {
		t.Fatalf("a subscription that has received nothing holds %d MB (the records from its start are %d MB)", most>>20, n*size>>20)
	}
	t.Logf("live heap +%d MB", most>>20)
}
