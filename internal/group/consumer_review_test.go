package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawHB builds a ConsumerGroupHeartbeat (v1, group "g") that the test completes.
func rawHB(member string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", member, epoch
	return req
}

func (h *harness) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp, out := h.c.ConsumerGroupHeartbeat(h.now, req, "client", "/127.0.0.1")
	h.apply(out)
	return resp
}

func ownedTopics(owned map[string][]int32) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for t, ps := range owned {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: testTopics[t].ID, Partitions: ps})
	}
	return out
}

// Kafka (maybeUpdateRegularExpressions, isNotEmpty): an empty SubscribedTopicRegex is no regex;
// sending it again changes nothing and never bumps the group epoch.
func TestEmptyRegexKeepsGroupEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	req := rawHB("m1", 0)
	req.SubscribedTopicNames, req.SubscribedTopicRegex = []string{"t"}, kmsg.StringPtr("")
	req.Topics, req.RebalanceTimeoutMillis = ownedTopics(nil), 30000
	r := h.send(req)
	if r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	owned := assigned(r)
	for i := range 3 {
		req = rawHB("m1", r.MemberEpoch)
		req.SubscribedTopicNames, req.SubscribedTopicRegex = []string{"t"}, kmsg.StringPtr("")
		req.Topics, req.RebalanceTimeoutMillis = ownedTopics(owned), 30000
		r = h.send(req)
		if ge := h.c.groups["g"].consumer.epoch; r.ErrorCode != 0 || r.MemberEpoch != 1 || ge != 1 {
			t.Fatalf("heartbeat %d with the same subscription (regex \"\"): %v member epoch %d group epoch %d; want 1 and 1",
				i+1, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, ge)
		}
	}
}

// Kafka's getOrMaybeCreateConsumerGroup(createIfNotExists=false): a heartbeat that is not a
// join (epoch != 0) to a group that is not a consumer group gets GROUP_ID_NOT_FOUND and changes
// nothing; in particular an empty classic group holding offsets stays classic.
func TestNonJoinHeartbeatLeavesClassicGroup(t *testing.T) {
	h := newConsumerHarness(t)
	commitAt(t, h, "", -1, "t") // a simple classic group: offsets only
	if g, _ := h.c.Group("g"); g.Type() != TypeClassic {
		t.Fatalf("setup: type %s", g.Type())
	}
	n := len(h.records)
	r := h.hb("ghost", 5, nil, map[string][]int32{}, "")
	wantCode(t, "heartbeat at epoch 5 to a classic group", r.ErrorCode, kerr.GroupIDNotFound)
	if g, _ := h.c.Group("g"); g.Type() != TypeClassic || len(h.records) != n {
		t.Errorf("a refused heartbeat changed the group: type %s, %d records written; want classic, none", g.Type(), len(h.records)-n)
	}
}

func TestHeartbeatToUnknownGroup(t *testing.T) {
	h := newConsumerHarness(t)
	wantCode(t, "heartbeat at epoch 3 to no group", h.hb("ghost", 3, nil, map[string][]int32{}, "").ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "leave from no group", h.hb("ghost", -1, nil, nil, "").ErrorCode, kerr.GroupIDNotFound)
}
