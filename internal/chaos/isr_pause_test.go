package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPausedFollowerLeavesISR: a follower frozen with SIGSTOP keeps its TCP connections, and
// on an idle partition it has the leader's whole log, so its leader counts it in sync. Once the
// controller fences it, it must leave the ISR and stay out while fenced (Kafka's
// ineligibleReplicasForIsr), and acks=all on a partition with min.insync.replicas=3 must be
// refused with NOT_ENOUGH_REPLICAS at once, without appending, as Kafka does. Before command
// level 13 the leader's next report put it back: the ISR named a fenced node, and acks=all
// appended, then timed out. Resumed, it is unfenced and joins the ISR again.
func TestPausedFollowerLeavesISR(t *testing.T) {
	bin := runnelBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, bin, filepath.Join(t.TempDir(), "cluster"), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StopAll()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const topic = "paused"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2, 3}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("3")
	ct.Configs = append(ct.Configs, cfg)
	create.Topics, create.TimeoutMillis = append(create.Topics, ct), 30000
	resp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}

	// partition asks a node (never the paused one) for p0's leader and ISR.
	partitionAt := func(node int32) (int32, []int32, error) {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			return 0, nil, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, nil, fmt.Errorf("metadata: %+v", resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return 0, nil, err
		}
		isr := slices.Clone(p.ISR)
		slices.Sort(isr)
		return p.Leader, isr, nil
	}
	partition := func() (int32, []int32, error) { return partitionAt(1) }
	waitISR := func(want []int32, within time.Duration) int32 {
		t.Helper()
		var leader int32
		var isr []int32
		var err error
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if leader, isr, err = partition(); err == nil && leader > 0 && slices.Equal(isr, want) {
				return leader
			}
		}
		t.Fatalf("ISR %v (leader %d, err %v) after %v; want %v", isr, leader, err, within, want)
		return 0
	}
	// produce sends one record with acks=all to the leader and returns the partition's error.
	produce := func(leader int32) (error, time.Duration) {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, oneRecord()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return err, time.Since(start)
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode), time.Since(start)
	}
	endOffset := func(leader int32) int64 { // asked of the leader: a paused node never answers
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 0, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		raw, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return raw.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}

	leader := waitISR([]int32{1, 2, 3}, 30*time.Second)
	if err, _ := produce(leader); err != nil {
		t.Fatalf("acks=all with every replica in sync: %v", err)
	}
	// Pause a follower that is not node 1 (Metadata's node).
	paused := int32(3)
	if leader == 3 {
		paused = 2
	}
	want := []int32{1, 2, 3}
	want = slices.DeleteFunc(want, func(n int32) bool { return n == paused })
	c.Pause(paused)
	defer c.Resume(paused)
	leader = waitISR(want, 30*time.Second)
	// It stays out: several of the leader's reports (at least one a second while it counts the
	// follower in sync) would have put it back.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if l, isr, err := partition(); err == nil && (l != leader || !slices.Equal(isr, want)) {
			t.Fatalf("with node %d paused (fenced): leader %d ISR %v; want %d %v", paused, l, isr, leader, want)
		}
	}
	// The leader's own image has the fence too (it decides acks=all by it).
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l, isr, err := partitionAt(leader); err == nil && l == leader && slices.Equal(isr, want) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the leader %d never showed ISR %v", leader, want)
		}
	}
	before := endOffset(leader)
	err, took := produce(leader)
	if !errors.Is(err, kerr.NotEnoughReplicas) || took > 3*time.Second {
		t.Fatalf("acks=all with min.insync.replicas=3 and node %d paused: %v after %v; want NOT_ENOUGH_REPLICAS at once", paused, err, took)
	}
	if after := endOffset(leader); after != before {
		t.Fatalf("the refused acks=all produce was appended: end %d, was %d", after, before)
	}
	c.Resume(paused)
	waitISR([]int32{1, 2, 3}, 60*time.Second)
}

// oneRecord is a record batch of one record, as a plain (not idempotent) producer sends it.
func oneRecord() []byte {
	now := time.Now().UnixMilli()
	recs := batch.AppendRecord(nil, 0, 0, nil, []byte("v"), 0, nil)
	return batch.AppendBatch(nil, batch.Header{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1}, recs)
}
