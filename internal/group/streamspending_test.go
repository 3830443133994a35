package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStreamsJoinReplacesPendingOnlyClassicGroup: a classic consumer's first JoinGroup (v4+,
// no member id) to a new group id is answered MEMBER_ID_REQUIRED, leaving a pending member id
// only: the classic group is Empty (Kafka's ClassicGroup stays EMPTY). A streams member joining
// within that session timeout replaces the empty classic group, as Kafka's
// getOrCreateStreamsGroup (maybeDeleteEmptyClassicGroup) does and ConsumerGroupHeartbeat does
// here (TestConsumerJoinReplacesPendingOnlyClassicGroup), and the pending id goes with it.
func TestStreamsJoinReplacesPendingOnlyClassicGroup(t *testing.T) {
	h := newStreamsHarness(t)
	h.next++
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Version, jreq.Group, jreq.ProtocolType = 9, "app", "consumer"
	jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = 10000, 30000
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("md")}}
	h.apply(h.c.JoinGroup(h.now, h.next, jreq, "client", "/127.0.0.1"))
	wantCode(t, "first JoinGroup", h.joined(h.next).ErrorCode, kerr.MemberIDRequired)
	if g := h.c.groups["app"]; g.State != Empty || len(g.members) != 0 {
		t.Fatalf("setup: state %v, %d members", g.State, len(g.members))
	}
	resp := h.shb("s1", "p1", 0, nil)
	wantCode(t, "StreamsGroupHeartbeat(join) of an Empty classic group with a pending member id", resp.ErrorCode, nil)
	if g := h.c.groups["app"]; g.streams == nil || len(g.pending) != 0 {
		t.Errorf("after the replacement: type %s, pending ids %v; want a streams group, none of the classic group left", g.Type(), g.pending)
	}
}
