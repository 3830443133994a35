package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestFetchLeaderHintFromV16: a Fetch sent to a node that does not lead the partition is
// NOT_LEADER_OR_FOLLOWER; from v16 (KIP-951) it names the current leader and its endpoint, and
// before it carries no leader (-1), as Kafka's KafkaApis.handleFetchRequest fills it only for
// versionId >= 16. It was filled from v12.
func TestFetchLeaderHintFromV16(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	cl, _ := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r := createTopicWith(ctx, t, cl, "hint", -1, -1, [][]int32{{1}}, nil); r.ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.waitTopicEverywhere(ctx, cl, "hint")
	id := topicIDOf(t, ctx, cl, "hint")
	for _, v := range []int16{12, 15, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = v, -1, 0, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "hint", id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(req.Key(), v) // the client sends the highest version both sides know
		vcl, _ := c.client(kgo.MaxVersions(vs))
		raw, err := vcl.Broker(2).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := raw.(*kmsg.FetchResponse)
		if resp.Version != v {
			t.Fatalf("sent v%d as v%d", v, resp.Version)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d from a node without the partition: %v; want NOT_LEADER_OR_FOLLOWER", v, kerr.ErrorForCode(p.ErrorCode))
		}
		switch {
		case v < 16 && (p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1):
			t.Errorf("v%d: current leader %+v; want none (-1) before v16", v, p.CurrentLeader)
		case v >= 16 && (p.CurrentLeader.LeaderID != 1 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1):
			t.Errorf("v%d: current leader %+v, endpoints %+v; want node 1 and its endpoint", v, p.CurrentLeader, resp.Brokers)
		}
	}
}
