package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka rejects a heartbeat that reports a task the configured topology does not have
// (throwIfRequestContainsInvalidTasks, INVALID_REQUEST) before it updates anything: the
// exception discards the heartbeat's records, and the shutdown request
// (group.setShutdownRequestMemberId) is only taken after it. So a rejected heartbeat neither
// moves the group epoch (here: a new rack id) nor makes other members shut down. Runnel checked
// the tasks after taking the member's metadata and its shutdown request: the whole application
// was told to stop by a heartbeat answered INVALID_REQUEST.
func TestStreamsInvalidHeartbeatChangesNothing(t *testing.T) {
	h := newStreamsHarness(t)
	for _, it := range []string{"app-regroup-repartition", "app-totals-changelog"} {
		h.topics[it] = TopicMeta{ID: [16]byte{8, byte(len(h.topics))}, Partitions: 4}
	}
	r1 := h.shb("m1", "p1", 0, nil)
	r2 := h.shb("m2", "p2", 0, nil)
	r1 = h.shb("m1", "", r1.MemberEpoch, &streamsOwned{tasksOf(r1.ActiveTasks), streamsTasks{}})
	g, _ := h.c.Group("app")
	epoch := g.streams.epoch

	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = "app", "m2", r2.MemberEpoch, -1
	rack := "rack-b"
	req.RackID = &rack
	req.ShutdownApplication = true
	req.ActiveTasks = []kmsg.TaskIDs{{SubtopologyID: "9", Partitions: []int32{0}}} // no such subtopology
	req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	resp, out, _ := h.c.StreamsGroupHeartbeat(h.now, req, "c", "/h")
	h.apply(out)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a heartbeat with an unknown subtopology: %v, want INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode))
	}
	var errs []string
	if len(out.Records) > 0 {
		errs = append(errs, "the rejected heartbeat wrote the group's record")
	}
	if g.streams.epoch != epoch {
		errs = append(errs, "the rejected heartbeat moved the group epoch")
	}
	r1 = h.shb("m1", "", r1.MemberEpoch, nil)
	if slices.Contains(statusCodes(r1), streamsShutdownApplication) {
		errs = append(errs, "another member is told SHUTDOWN_APPLICATION after a rejected heartbeat")
	}
	for _, e := range errs {
		t.Error(e)
	}
}
