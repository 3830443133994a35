package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// serveOn opens a Server on fsys and serves it on a fresh loopback port.
func serveOn(t *testing.T, fsys vfs.FS) (s *server.Server, addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err = server.Open(server.Config{
		FS: fsys, DataDir: "/data", KafkaAddr: ln.Addr().String(), AdminAddr: "127.0.0.1:0", Console: &bytes.Buffer{},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		ln.Close()
		t.Fatalf("Open = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-served
			s.Close() // after a power cut the old server's errors are of no interest
		})
	}
	t.Cleanup(stop)
	return s, ln.Addr().String(), stop
}

// TestPowerLossThroughKafka is the durability proof end to end: franz-go producers send acks=all
// records over loopback to a server whose data dir is on the crashable file system, into one
// topic with write.caching=false and one with write.caching=true (flush.ms 50). The power goes
// out at a random moment under load (only synced bytes and directory entries survive, with torn
// unsynced tails), a new server recovers the data dir, and a consumer reads everything back.
//
// Every record acknowledged in the fsync topic must be there, at the offset it was acknowledged
// with and with its contents. In the write-caching topic, records may be lost only if they were
// acknowledged within the last flush window before the cut. In both, nothing may be invented.
func TestPowerLossThroughKafka(t *testing.T) {
	const flushMs = 50
	// Room for the flusher's 5 ms tick, the fsync and scheduling on a loaded 2-core machine under
	// -race; still far below the run's length.
	const window = flushMs*time.Millisecond + 400*time.Millisecond
	const partitions = 4
	mem := vfs.NewMem()
	_, addr, stop := serveOn(t, mem)
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	topics := map[string]map[string]*string{
		"fsync":  {"write.caching": ptr("false")},
		"cached": {"write.caching": ptr("true"), "flush.ms": ptr(fmt.Sprint(flushMs)), "flush.bytes": ptr("1073741824")},
	}
	for name, configs := range topics {
		if _, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, configs, name); err != nil {
			t.Fatal(err)
		}
	}
	adm.Close()

	type ack struct {
		value string
		at    time.Time
	}
	type key struct {
		topic     string
		partition int32
		offset    int64
	}
	var mu sync.Mutex
	acked := map[key]ack{}
	cut := false
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordRetries(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produceCtx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for topic := range topics {
		wg.Add(1)
		go func() { // ~8k records/s per topic, paced: a produce load, not a CPU soak
			defer wg.Done()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for seq := 0; ; {
				select {
				case <-produceCtx.Done():
					return
				case <-tick.C:
				}
				for range 8 {
					value := fmt.Sprintf("%s-%08d-%s", topic, seq, bytes.Repeat([]byte{'x'}, 200))
					seq++
					producer.Produce(produceCtx, &kgo.Record{Topic: topic, Value: []byte(value)}, func(r *kgo.Record, err error) {
						if err != nil {
							return
						}
						mu.Lock()
						defer mu.Unlock()
						if !cut {
							acked[key{r.Topic, r.Partition, r.Offset}] = ack{string(r.Value), time.Now()}
						}
					})
				}
			}
		}()
	}
	// A consumer reads both topics while they are written. Without write caching it may see only
	// durable records, so nothing it reads may be missing after the cut.
	consumed := map[key]string{}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("fsync", "cached"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for produceCtx.Err() == nil {
			fetches := consumer.PollFetches(produceCtx)
			mu.Lock()
			if !cut {
				fetches.EachRecord(func(r *kgo.Record) { consumed[key{r.Topic, r.Partition, r.Offset}] = string(r.Value) })
			}
			mu.Unlock()
		}
	}()
	time.Sleep(time.Duration(1500+rand.IntN(1000)) * time.Millisecond)
	mu.Lock() // no acknowledgement or consumed record is recorded after the cut
	cutAt := time.Now()
	crashed := mem.Crash(vfs.CrashOptions{Tear: true, Garbage: true})
	cut = true
	ackedCount := map[string]int{}
	for k := range acked {
		ackedCount[k.topic]++
	}
	mu.Unlock()
	stopProducing()
	wg.Wait()
	stop()
	for topic := range topics {
		if ackedCount[topic] < 1000 {
			t.Fatalf("only %d records acknowledged in %s before the cut; the load did not run", ackedCount[topic], topic)
		}
	}

	// A new server recovers what the power cut left.
	_, addr2, _ := serveOn(t, crashed)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr2), kgo.ConsumeTopics("fsync", "cached"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "fsync", "cached")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	have := map[key]string{}
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(have) < total {
		fetches := cl.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			t.Fatalf("read %d of %d recovered records", len(have), total)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			k := key{r.Topic, r.Partition, r.Offset}
			if _, dup := have[k]; dup {
				t.Errorf("%s[%d] offset %d read twice", r.Topic, r.Partition, r.Offset)
			}
			have[k] = string(r.Value)
		})
	}

	lost := map[string]int{}
	var oldestLost time.Duration
	for k, a := range acked {
		v, ok := have[k]
		switch {
		case ok && v != a.value:
			t.Errorf("%s[%d] offset %d holds %.20q; it was acknowledged with %.20q", k.topic, k.partition, k.offset, v, a.value)
		case !ok:
			lost[k.topic]++
			oldestLost = max(oldestLost, cutAt.Sub(a.at))
		}
	}
	t.Logf("acknowledged before the cut: fsync %d, cached %d; lost: fsync %d, cached %d (oldest lost acknowledged %v before the cut)",
		ackedCount["fsync"], ackedCount["cached"], lost["fsync"], lost["cached"], oldestLost)
	if lost["fsync"] > 0 {
		t.Errorf("%d records acknowledged with write.caching=false lost; want none", lost["fsync"])
	}
	if lost["cached"] > 0 && oldestLost > window {
		t.Errorf("a write-cached record acknowledged %v before the cut was lost; want loss only within the last %v (flush.ms %d)",
			oldestLost, window, flushMs)
	}
	phantom := map[string]int{}
	for k, v := range consumed {
		if have[k] != v {
			phantom[k.topic]++
		}
	}
	t.Logf("consumed before the cut: %d records; of those gone after it: fsync %d, cached %d (allowed with write caching)",
		len(consumed), phantom["fsync"], phantom["cached"])
	if len(consumed) == 0 {
		t.Errorf("the consumer read nothing before the cut")
	}
	if phantom["fsync"] > 0 {
		t.Errorf("%d records a consumer read from the write.caching=false topic are gone after the power cut; want none", phantom["fsync"])
	}
	// Nothing invented: every recovered record is one that was produced (acknowledged or not).
	for k, v := range have {
		if len(v) < len(k.topic)+10 || v[:len(k.topic)+1] != k.topic+"-" {
			t.Errorf("%s[%d] offset %d holds %.30q, which nobody produced", k.topic, k.partition, k.offset, v)
		}
	}
}

func ptr(s string) *string { return &s }
