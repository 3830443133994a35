package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNoKnownControllerNamesALiveNode: a node that knows no controller (the quorum lost, here
// cut off from the other two) names a live node as the controller in Metadata and
// DescribeCluster, as Kafka's brokers always name a live broker: the Java admin client sends
// ListPartitionReassignments, which kafka-topics --describe calls, to the node named, and
// with controller -1 every describe timed out while the quorum was lost. The node answers it
// from its last metadata.
func TestNoKnownControllerNamesALiveNode(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut := int32(3)
	c.servers[cut].Node().Transport().Isolate(1, 2)
	defer c.servers[cut].Node().Transport().Heal()
	eventually(t, "the cut-off node to know no controller", 20*time.Second, func() bool {
		return c.servers[cut].Node().ControllerID() < 0
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs[cut]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	on := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(cut)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if md := on(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); md.ControllerID != cut {
		t.Errorf("Metadata names controller %d; want %d, the node itself", md.ControllerID, cut)
	}
	if dc := on(kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse); dc.ControllerID != cut {
		t.Errorf("DescribeCluster names controller %d; want %d", dc.ControllerID, cut)
	}
	start := time.Now()
	if lr := on(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse); lr.ErrorCode != 0 {
		t.Errorf("ListPartitionReassignments on the cut-off node: error %d after %v", lr.ErrorCode, time.Since(start))
	}
}
