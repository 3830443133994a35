package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objects"
)

// TestObjectTopicNotPlacedOnReplicas: an object-storage topic has no replicas, so nothing of
// replica placement applies to it: with one live node of three (two restarting) it is created.
// CreateTopics used to place its replicas first (then thrown away), and the live-majority rule
// of placement refused it with INVALID_REPLICATION_FACTOR.
func TestObjectTopicNotPlacedOnReplicas(t *testing.T) {
	w := objects.NewWriter(objects.WriterConfig{})
	b, addr, _ := ctBroker(t, func(c *Config) { c.ObjectWriter = w })
	registerNodes(t, b, map[int32]string{2: "", 3: ""}, true)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 5, 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "objfenced", 1, -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = controller.StorageConfig, strp(controller.StorageObject)
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.CreateTopicsResponse)
	if code := resp.Topics[0].ErrorCode; code == kerr.InvalidReplicationFactor.Code {
		msg := ""
		if resp.Topics[0].ErrorMessage != nil {
			msg = *resp.Topics[0].ErrorMessage
		}
		t.Fatalf("object topic (no replicas) with the default RF on 1 live + 2 fenced nodes: %v (%s); an object topic replicates nothing",
			kerr.ErrorForCode(code), msg)
	}
}
