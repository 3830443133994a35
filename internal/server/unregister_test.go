package server_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnregisterBroker: UnregisterBroker (runnel controller unregister, kafka-cluster
// unregister) forgets a node taken out of service. It refuses an unknown id, a live node, a
// controller voter and a node that still holds a replica, each with the reason; once the
// node's partitions are moved and it is stopped it is forgotten on every node, its Raft
// learner is removed, and its id can be used again by a node on an empty data dir (which the
// cluster refuses while it knows the id).
func TestUnregisterBroker(t *testing.T) {
	c := startCluster(t, 4) // voters 1-3, broker 4
	c.waitNodes(4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := c.client()
	placeTopic(ctx, t, adm, "moved", 1, 4) // led by 1: the move needs a leader to copy from
	refusals := []struct {
		id   int32
		code *kerr.Error
		msg  string
	}{
		{99, kerr.BrokerIDNotRegistered, "not registered"},
		{4, kerr.InvalidRequest, "heartbeating"},
		{2, kerr.InvalidRequest, "controller voter"},
	}
	for _, r := range refusals {
		_, err := runCommand("controller", c.brokers()[0], "unregister", strconv.Itoa(int(r.id)))
		if !errors.Is(err, r.code) || !strings.Contains(err.Error(), r.msg) {
			t.Fatalf("unregister %d: %v; want %v (%q)", r.id, err, r.code, r.msg)
		}
	}

	c.stop(4)
	eventually(t, "node 4 fenced", 30*time.Second, func() bool {
		n := c.servers[1].Node().Image().Nodes[4]
		return n != nil && n.Fenced
	})
	if _, err := runCommand("controller", c.brokers()[0], "unregister", "4"); !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), "moved-0") {
		t.Fatalf("unregister 4 holding a replica of moved-0: %v; want INVALID_REQUEST naming it", err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moved", 0, []int32{1, 2})
	if r, err := adm.AlterPartitionAssignments(ctx, req); err != nil || r.Error() != nil {
		t.Fatalf("move off node 4: %v %v", err, r.Error())
	}
	eventually(t, "moved on 1, 2", 60*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "moved")
		return err == nil && slices.Equal(md.Topics["moved"].Partitions[0].Replicas, []int32{1, 2})
	})
	out, err := runCommand("controller", c.addrs[3], "unregister", "4")
	if err != nil || !strings.Contains(out, "node 4 unregistered") {
		t.Fatalf("unregister 4: %q, %v", out, err)
	}
	if c.servers[3].Node().Image().Nodes[4] != nil {
		t.Fatal("the answering node's image still has node 4")
	}
	eventually(t, "node 4 gone from every node's image", 10*time.Second, func() bool {
		for _, s := range c.servers {
			if s.Node().Image().Nodes[4] != nil {
				return false
			}
		}
		return true
	})
	eventually(t, "node 4 no longer an observer of the controller quorum", 30*time.Second, func() bool {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return false
		}
		return !slices.ContainsFunc(resp.Topics[0].Partitions[0].Observers, func(o kmsg.DescribeQuorumResponseTopicPartitionReplicaState) bool {
			return o.ReplicaID == 4
		})
	})
	if _, err := runCommand("controller", c.brokers()[0], "unregister", "4"); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unregister 4 again: %v; want BROKER_ID_NOT_REGISTERED", err)
	}

	// The id is free again: a node on an empty data dir takes it.
	if err := os.RemoveAll(c.dirs[4]); err != nil {
		t.Fatal(err)
	}
	c.start(4)
	c.waitNodes(4)
	placeTopic(ctx, t, adm, "again", 4, 2)
}
