package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeTopicPartitions: KIP-966's paged topic description, as Kafka answers it. Pages of
// at most ResponsePartitionLimit partitions in topic name order, each ending with the cursor of
// the first partition left out, read every partition of every topic once; named topics that do
// not exist, have invalid names, or a cursor naming a topic not asked for get Kafka's errors.
// Kafka's own kafka-topics --describe (which uses this API when the broker offers it) pages
// through a topic two partitions at a time.
func TestDescribeTopicPartitions(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sizes := map[string]int32{"dtp-a": 3, "dtp-b": 2, "dtp-c": 5}
	for name, n := range sizes {
		if r, err := adm.CreateTopic(ctx, n, 2, nil, name); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, r.Err)
		}
	}
	describe := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, names ...string) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		for _, n := range names {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		resp, err := cl.Broker(1).Request(ctx, req) // one node's view throughout
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DescribeTopicPartitionsResponse)
	}
	eventually(t, "node 1 to know the topics", 10*time.Second, func() bool {
		for _, rt := range describe(100, nil, "dtp-a", "dtp-b", "dtp-c").Topics {
			if rt.ErrorCode != 0 {
				return false
			}
		}
		return true
	})

	// Node 1's Metadata: the view DescribeTopicPartitions answers from.
	mreq := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"dtp-a", "dtp-b", "dtp-c"} {
		mreq.Topics = append(mreq.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)})
	}
	mresp, err := cl.Broker(1).Request(ctx, mreq)
	if err != nil {
		t.Fatal(err)
	}
	type mdTopic struct {
		ID      [16]byte
		Leaders map[int32]int32 // partition → leader
	}
	md := map[string]mdTopic{}
	for _, mt := range mresp.(*kmsg.MetadataResponse).Topics {
		leaders := map[int32]int32{}
		for _, p := range mt.Partitions {
			leaders[p.Partition] = p.Leader
		}
		md[*mt.Topic] = mdTopic{ID: mt.TopicID, Leaders: leaders}
	}
	// Page through the three topics, named, 4 partitions at a time: a0-a2 b0 | b1 c0-c2 | c3-c4.
	var pages []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	seen := map[string]int{}
	for range 10 {
		resp := describe(4, cursor, "dtp-c", "dtp-a", "dtp-b")
		var page []string
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 || rt.Topic == nil {
				t.Fatalf("topic %v: error %d", rt.Topic, rt.ErrorCode)
			}
			want := md[*rt.Topic]
			if rt.TopicID != want.ID || rt.IsInternal {
				t.Errorf("%s: id %x internal %v, want %x", *rt.Topic, rt.TopicID, rt.IsInternal, want.ID)
			}
			for _, p := range rt.Partitions {
				page = append(page, fmt.Sprintf("%s%d", strings.TrimPrefix(*rt.Topic, "dtp-"), p.Partition))
				seen[fmt.Sprintf("%s/%d", *rt.Topic, p.Partition)]++
				leader := want.Leaders[p.Partition]
				if p.ErrorCode != 0 || p.LeaderID != leader || len(p.Replicas) != 2 || len(p.ISR) == 0 ||
					p.EligibleLeaderReplicas == nil || p.LastKnownELR == nil { // nil: null on the wire
					t.Errorf("%s/%d: %+v, metadata says leader %d", *rt.Topic, p.Partition, p, leader)
				}
			}
		}
		pages = append(pages, strings.Join(page, " "))
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if got, want := strings.Join(pages, " | "), "a0 a1 a2 b0 | b1 c0 c1 c2 | c3 c4"; got != want {
		t.Errorf("pages %q, want %q", got, want)
	}
	if len(seen) != 10 {
		t.Errorf("described %d partitions of 10: %v", len(seen), seen)
	}

	// A page that ends with a topic points at the next topic's partition 0.
	resp := describe(3, nil, "dtp-a", "dtp-b")
	if nc := resp.NextCursor; len(resp.Topics) != 1 || nc == nil || nc.Topic != "dtp-b" || nc.Partition != 0 {
		t.Errorf("limit 3 over dtp-a (3) and dtp-b: %d topics, next cursor %+v", len(resp.Topics), nc)
	}
	// No topics named: every topic, internal ones too once they exist, from the cursor on.
	resp = describe(100, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-b", Partition: 1})
	var names []string
	for _, rt := range resp.Topics {
		names = append(names, fmt.Sprintf("%s:%d", *rt.Topic, len(rt.Partitions)))
	}
	if got := strings.Join(names, " "); !strings.HasPrefix(got, "dtp-b:1 dtp-c:5") || resp.NextCursor != nil {
		t.Errorf("all topics from dtp-b/1: %s, next cursor %+v", got, resp.NextCursor)
	}
	// Errors.
	resp = describe(100, nil, "dtp-a", "no-such-topic", "bad/name")
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[*rt.Topic] = rt.ErrorCode
	}
	if codes["dtp-a"] != 0 || codes["no-such-topic"] != kerr.UnknownTopicOrPartition.Code || codes["bad/name"] != kerr.InvalidTopicException.Code {
		t.Errorf("error codes %v", codes)
	}
	resp = describe(100, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-c"}, "dtp-a")
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a cursor naming a topic not asked for: %+v", resp.Topics)
	}

	// kafka-topics --describe pages with the API: every partition is listed.
	topics := kafkaTool(t, "org.apache.kafka.tools.TopicCommand")
	sent := func() (n float64) { // by every node: the admin client picks one
		for _, s := range c.servers {
			n += sumSeries(scrape(t, s.AdminAddr()), "runnel_kafka_requests_total", `api="DescribeTopicPartitions"`)
		}
		return n
	}
	before := sent()
	out := runClient(t, 120*time.Second, "", topics[0], append(topics[1:], "--bootstrap-server", c.addrs[1],
		"--describe", "--topic", "dtp-c", "--partition-size-limit-per-response", "2")...)
	for p := range 5 {
		if !strings.Contains(out, fmt.Sprintf("Partition: %d\t", p)) {
			t.Errorf("kafka-topics --describe lacks partition %d:\n%s", p, out)
		}
	}
	after := sent()
	if after-before < 3 {
		t.Errorf("kafka-topics sent %v DescribeTopicPartitions requests for 5 partitions at 2 per page, want 3 or more", after-before)
	}
}
