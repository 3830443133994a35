package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// trailingNode waits for a controller leader in a cluster of three and returns it, a node that
// is not it (to be cut off and trail), and the two nodes other than that one.
func trailingNode(t *testing.T, c *testCluster) (leader, trailing int32, others []int32) {
	t.Helper()
	eventually(t, "a controller leader", 10*time.Second, func() bool {
		leader = c.servers[1].Node().ControllerID()
		return leader > 0
	})
	for trailing = 1; trailing == leader; trailing++ {
	}
	for id := int32(1); id <= 3; id++ {
		if id != trailing {
			others = append(others, id)
		}
	}
	return leader, trailing, others
}

// TestAdminChangesOnATrailingNode: Kafka forwards admin changes to the active controller, so
// any broker takes them for a topic just created elsewhere, and an incremental config change
// starts from the configs the controller has. A node whose image trails the controller's (cut
// off while the topic was created and configured, back just now) must answer the same:
// CreatePartitions of the new topic succeeds, and IncrementalAlterConfigs keeps the config set
// meanwhile.
func TestAdminChangesOnATrailingNode(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, trailing, others := trailingNode(t, c)
	_, adm := c.client(kgo.SeedBrokers(c.addrs[leader]))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs[leader]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	on := func(node int32, req kmsg.Request) kmsg.Response { // sent to that node, not routed
		t.Helper()
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	onTrailing := func(req kmsg.Request) kmsg.Response { t.Helper(); return on(trailing, req) }
	incremental := func(key, value string) *kmsg.IncrementalAlterConfigsRequest {
		return incrementalOp(key, value, kmsg.IncrementalAlterConfigOpSet)
	}

	c.servers[trailing].Node().Transport().Isolate(others...)
	if r, err := adm.CreateTopic(ctx, 2, 1, nil, "fresh"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	// Sent to the controller's node itself: kadm may pick any broker, the cut-off one too.
	if resp := on(leader, incremental("retention.ms", "3600000")).(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter configs: %+v", resp.Resources)
	}
	c.servers[trailing].Node().Transport().Heal()

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 10000
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "fresh", 3
	cp.Topics = append(cp.Topics, cpt)
	if got := onTrailing(cp).(*kmsg.CreatePartitionsResponse); len(got.Topics) != 1 || got.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions on the trailing node: %+v", got.Topics)
	}

	if got := onTrailing(incremental("segment.ms", "600000")).(*kmsg.IncrementalAlterConfigsResponse); len(got.Resources) != 1 || got.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs on the trailing node: %+v", got.Resources)
	}
	// The change was applied on the trailing node before it answered: its image has the result.
	set := c.servers[trailing].Node().Image().Topics["fresh"].Configs
	if set["retention.ms"] != "3600000" || set["segment.ms"] != "600000" {
		t.Fatalf("topic configs after the trailing node's incremental change: %v", set)
	}

	// Two nodes append to one list config at once, each its own items: every item stays (each
	// change is computed from the configs the controller still has, or computed again).
	const items = 15
	var wg sync.WaitGroup
	errs := make(chan string, 2*items)
	for _, node := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range items {
				req := incrementalOp("leader.replication.throttled.replicas", fmt.Sprintf("%d:%d", i, node), kmsg.IncrementalAlterConfigOpAppend)
				resp, err := cl.Broker(int(node)).Request(ctx, req)
				if err != nil {
					errs <- err.Error()
				} else if r := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
					errs <- fmt.Sprintf("node %d: %v %v", node, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var got []string // the controller applies the last change a moment after its proposer
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2*items && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = strings.Split(c.servers[leader].Node().Image().Topics["fresh"].Configs["leader.replication.throttled.replicas"], ",")
	}
	slices.Sort(got)
	if len(got) != 2*items || len(slices.Compact(slices.Clone(got))) != 2*items {
		t.Fatalf("after %d appends from each of two nodes: %d items %v", items, len(got), got)
	}
}

// incrementalOp is an IncrementalAlterConfigs request of one operation on topic fresh's config.
func incrementalOp(key, value string, op kmsg.IncrementalAlterConfigOp) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "fresh"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = key, op, &value
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	return req
}
