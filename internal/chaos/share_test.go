package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupsAcrossKills: franz-go's share consumers (KIP-932) read and accept every record
// an idempotent producer writes to a local topic (three replicas) and an object-storage topic
// while each node in turn is killed (SIGKILL) and restarted: the leaders and share-state owners
// of partitions, and the group's coordinator, die with what they held in memory. Share groups
// deliver at least once: every acknowledged record must be delivered and accepted (one whose
// acceptance died with a node comes again); none may be lost, nor archived because the kills
// pushed its delivery count to the limit (5); and in the end every share-partition starts at its
// partition's end (every acceptance durable with the group's coordinator).
func TestShareGroupsAcrossKills(t *testing.T) {
	bin := runnelBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startObjectCluster(t, ctx, bin, nil)
	const group = "chaos-share"
	topics := []string{"share-local", "share-object"}
	ac, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	adm := kadm.NewClient(ac)
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, topics[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"runnel.storage": new("object")}, topics[1]); err != nil {
		t.Fatal(err)
	}
	// The group starts at the earliest offsets: what is written before its members join counts.
	// Acquisition locks last 15 s (Kafka's least; 30 by default): records whose acknowledgement
	// is lost on the way (a client sends a partition's pending acknowledgements to the node it
	// fetches it from, which moves with the kills) come back sooner.
	cfg := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for name, value := range map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"} {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = name, kmsg.StringPtr(value)
		rr.Configs = append(rr.Configs, rc)
	}
	cfg.Resources = append(cfg.Resources, rr)
	if resp, err := cfg.RequestWith(ctx, ac); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting the group's configs: %v %+v", err, resp)
	}

	var mu sync.Mutex
	acked := map[string]bool{}    // values acknowledged to the producer
	delivered := map[string]int{} // values delivered to a consumer, how often
	maxCount := int32(0)          // the highest delivery count seen

	// An idempotent acks=all producer (franz-go's default) writing both topics, about 200
	// records a second each, until stopped.
	pc, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	stopProducing := make(chan struct{})
	produced := make(chan int)
	go func() {
		n := 0
		for ; ; n++ {
			select {
			case <-stopProducing:
				produced <- n
				return
			case <-ctx.Done(): // the test failed before it stopped producing
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, topic := range topics {
				pc.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s/%d", topic, n)}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[string(r.Value)] = true
						mu.Unlock()
					}
				})
			}
		}
	}()

	// Two members of the share group, accepting every record they get.
	var consumers sync.WaitGroup
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	for range 2 {
		cc, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.MetadataMinAge(250*time.Millisecond),
			kgo.ShareGroup(group), kgo.ConsumeTopics(topics...))
		if err != nil {
			t.Fatal(err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			defer cc.Close()
			for consumeCtx.Err() == nil {
				fs := cc.PollFetches(consumeCtx)
				rs := fs.Records()
				mu.Lock()
				for _, r := range rs {
					delivered[string(r.Value)]++
					maxCount = max(maxCount, r.DeliveryCount())
				}
				mu.Unlock()
				// Each poll's records are worked on for a while before they are accepted, so
				// that a kill finds some of them in flight.
				time.Sleep(50 * time.Millisecond)
				for _, r := range rs {
					r.Ack(kgo.AckAccept)
				}
			}
		}()
	}

	// Each node in turn is killed and restarted.
	for round, victim := range c.Nodes() {
		time.Sleep(3 * time.Second)
		t.Logf("round %d: kill -9 node %d", round, victim)
		c.Kill(victim)
		time.Sleep(2 * time.Second)
		if err := c.Start(victim); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, victim, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	close(stopProducing)
	n := <-produced
	if err := pc.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// Every acknowledged record is delivered and accepted.
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for v := range acked {
			if delivered[v] == 0 {
				out = append(out, v)
			}
		}
		slices.Sort(out)
		return out
	}
	deadline := time.Now().Add(90 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	mu.Lock()
	again := 0
	for _, k := range delivered {
		again += k - 1
	}
	t.Logf("%d records produced per topic, %d acknowledged in all; %d delivered, %d of them more than once; highest delivery count %d",
		n, len(acked), len(delivered), again, maxCount)
	highest := maxCount
	mu.Unlock()
	if m := missing(); len(m) > 0 {
		t.Fatalf("%d acknowledged records never delivered to the share group (lost or archived), such as %v", len(m), m[:min(len(m), 10)])
	}
	if highest >= 5 { // share.delivery.count.limit: a fifth delivery not accepted would archive it
		t.Fatalf("a record was delivered %d times: three kills should not take one near the delivery limit (5)", highest)
	}

	// Every acceptance is durable: each share-partition starts at its partition's end.
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: group}
	for _, topic := range topics {
		rg.Topics = append(rg.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: topic, Partitions: []int32{0, 1, 2}})
	}
	req.Groups = append(req.Groups, rg)
	var behind []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		behind = behind[:0]
		ends, lerr := adm.ListEndOffsets(ctx, topics...) // a partition's leader may still be settling
		resp, err := req.RequestWith(ctx, ac)
		if lerr != nil {
			behind = append(behind, fmt.Sprintf("listing the partitions' ends: %v", lerr))
		} else if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			behind = append(behind, fmt.Sprintf("describing the group: %v %+v", err, resp))
		} else {
			for _, rt := range resp.Groups[0].Topics {
				for _, rp := range rt.Partitions {
					end, _ := ends.Lookup(rt.Topic, rp.Partition)
					if rp.ErrorCode != 0 || rp.StartOffset != end.Offset {
						behind = append(behind, fmt.Sprintf("%s/%d starts at %d (error %d), ends at %d", rt.Topic, rp.Partition, rp.StartOffset, rp.ErrorCode, end.Offset))
					}
				}
			}
		}
		if len(behind) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	stopConsuming()
	consumers.Wait()
	if len(behind) > 0 {
		t.Fatalf("share-partitions short of their ends once every record was delivered: %v", behind)
	}
}
