package chaos

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestObjectReadsOnACutOffNode: any node answers reads of any object partition from its image
// of the controller's log. A node cut off from the controller quorum keeps an old image while
// the others commit more; asked directly (as a client whose metadata moved to it would), it
// must not answer an end offset older than the one already acknowledged (ListOffsets, or
// OffsetForLeaderEpoch, where a consumer checking its position would see a truncation), nor tell
// a consumer at an acknowledged offset that its offset is out of range (it would reset): it
// answers OFFSET_NOT_AVAILABLE, which clients retry, until it is back and current. Nor may it
// refuse DeleteRecords up to an acknowledged offset as out of range (it answers
// REQUEST_TIMED_OUT, retriable, until it is current).
func TestObjectReadsOnACutOffNode(t *testing.T) {
	needNetns(t)
	bin := runnelBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	net, err := NewNet()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.Close) // after the cluster's cleanup: the processes end first
	c := startObjectCluster(t, ctx, bin, net)
	kc, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("reads"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"runnel.storage": new("object")}, "reads"); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)})
		}
		if err := kc.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("producing %d..%d: %v", from, to, err)
		}
	}
	produce(0, 100)
	md, err := adm.Metadata(ctx, "reads")
	if err != nil {
		t.Fatal(err)
	}
	owner := md.Topics["reads"].Partitions[0].Leader
	// The cut-off node: one that does not take the produce, and not the active controller
	// when another node can be (the quorum then goes on without a leader election).
	var cut int32 = -1
	for _, n := range c.Nodes() {
		if n != owner && (cut < 0 || n != md.Controller) {
			cut = n
		}
	}
	others := slices.DeleteFunc(c.Nodes(), func(n int32) bool { return n == cut })
	t.Logf("partition 0 produced through node %d; node %d cut off; controller %d", owner, cut, md.Controller)

	// Asked directly: a client with only the cut-off node as its seed.
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[cut].kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	node := direct.SeedBrokers()[0]
	ask := func(req kmsg.Request) (kmsg.Response, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return node.Request(rctx, req)
	}
	listEnd := func() (int64, int16, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "reads"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := ask(req)
		if err != nil {
			return 0, 0, err
		}
		p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode, nil
	}
	fetchAt := func(offset int64) (int16, int, error) {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 0, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "reads", md.Topics["reads"].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, offset, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := ask(req)
		if err != nil {
			return 0, 0, err
		}
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		return p.ErrorCode, len(p.RecordBatches), nil
	}
	endForEpoch := func() (int64, int16, error) { // a consumer's position check (KIP-320)
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "reads"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, 0, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := ask(req)
		if err != nil {
			return 0, 0, err
		}
		p := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		return p.EndOffset, p.ErrorCode, nil
	}
	deleteTo := func(offset int64) (int64, int16, error) {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "reads"
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := ask(req)
		if err != nil {
			return 0, 0, err
		}
		p := resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
		return p.LowWatermark, p.ErrorCode, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for { // the node's image has the first 100
		end, code, err := listEnd()
		if err == nil && code == 0 && end == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d never answered the end 100: %d, %v, %v", cut, end, kerr.ErrorForCode(code), err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := net.Partition([]int32{cut}, others); err != nil {
		t.Fatal(err)
	}
	produce(100, 200) // acknowledged: the partition ends at 200
	end, code, err := listEnd()
	if err != nil {
		t.Fatal(err)
	}
	if code == 0 && end < 200 || code != 0 && code != kerr.OffsetNotAvailable.Code {
		t.Fatalf("cut-off node %d: ListOffsets latest = %d, %v; want OFFSET_NOT_AVAILABLE (200 is acknowledged)", cut, end, kerr.ErrorForCode(code))
	}
	end, code, err = endForEpoch()
	if err != nil {
		t.Fatal(err)
	}
	if code == 0 && end < 200 || code != 0 && code != kerr.OffsetNotAvailable.Code {
		t.Fatalf("cut-off node %d: OffsetForLeaderEpoch(0) ends at %d, %v; want OFFSET_NOT_AVAILABLE (a consumer at 150 would see a truncation)", cut, end, kerr.ErrorForCode(code))
	}
	code, _, err = fetchAt(150)
	if err != nil {
		t.Fatal(err)
	}
	if code != kerr.OffsetNotAvailable.Code {
		t.Fatalf("cut-off node %d: a fetch at the acknowledged offset 150 answered %v; want OFFSET_NOT_AVAILABLE, never OFFSET_OUT_OF_RANGE", cut, kerr.ErrorForCode(code))
	}
	// DeleteRecords up to an acknowledged offset: the node cannot check it against a current
	// end, so it answers a retriable error, never OFFSET_OUT_OF_RANGE (its image ends at 100).
	if low, code, err := deleteTo(150); err != nil || code != kerr.RequestTimedOut.Code {
		t.Fatalf("cut-off node %d: DeleteRecords to the acknowledged offset 150 answered %d, %v, %v; want REQUEST_TIMED_OUT", cut, low, kerr.ErrorForCode(code), err)
	}

	if err := net.Heal(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		end, code, err := listEnd()
		if err == nil && code == 0 && end == 200 {
			break
		}
		if err == nil && code == 0 && end < 200 {
			t.Fatalf("node %d answered the end %d after it was back; 200 is acknowledged", cut, end)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d did not answer the end 200 after it was back: %d, %v, %v", cut, end, kerr.ErrorForCode(code), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if end, code, err := endForEpoch(); err != nil || code != 0 || end != 200 {
		t.Fatalf("node %d back: OffsetForLeaderEpoch(0) = %d, %v, %v; want 200", cut, end, kerr.ErrorForCode(code), err)
	}
	code, batches, err := fetchAt(150)
	if err != nil || code != 0 || batches == 0 {
		t.Fatalf("node %d back: a fetch at 150 answered %v, %d bytes, %v; want records", cut, kerr.ErrorForCode(code), batches, err)
	}
	if low, code, err := deleteTo(150); err != nil || code != 0 || low != 150 {
		t.Fatalf("node %d back: DeleteRecords to 150 answered %d, %v, %v; want the low watermark 150", cut, low, kerr.ErrorForCode(code), err)
	}
}
