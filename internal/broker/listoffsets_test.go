package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsSpecialTimestamps: every special timestamp up to v11, each refused
// (UNSUPPORTED_VERSION) in a version before the one that brought it, as Kafka does; the
// tiered-storage ones answer "none" (no tiered storage), the earliest local one the log start;
// answers carry the leader epoch of the offset they name.
func TestListOffsetsSpecialTimestamps(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "lo", 1, nil)
	for range 3 {
		ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"lo", 0, ctBatch(2, 10)}))
		time.Sleep(2 * time.Millisecond) // each batch a later time
	}
	epoch := leaderEpochOf(t, addr, "lo")
	list := func(version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = version, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := ctRoundTrip(t, addr, req).(*kmsg.ListOffsetsResponse)
		return resp.Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		version  int16
		ts       int64
		code     int16
		offset   int64
		epoch    int32
		withTime bool
	}{
		{11, -1, 0, 6, epoch, false}, // latest: the high watermark
		{11, -2, 0, 0, epoch, false}, // earliest
		{11, -3, 0, 4, epoch, true},  // max timestamp: the last batch's (its records share one time)
		{11, -4, 0, 0, epoch, false}, // earliest local: every log is local
		{11, -5, 0, -1, -1, false},   // latest tiered: none
		{11, -6, 0, -1, -1, false},   // earliest pending upload: none
		{11, 0, 0, 0, epoch, true},   // the first record at or after time 0
		{6, -3, kerr.UnsupportedVersion.Code, -1, -1, false},
		{7, -4, kerr.UnsupportedVersion.Code, -1, -1, false},
		{8, -5, kerr.UnsupportedVersion.Code, -1, -1, false},
		{10, -6, kerr.UnsupportedVersion.Code, -1, -1, false},
		// A negative timestamp that is not special used to be INVALID_REQUEST; Kafka answers
		// UNSUPPORTED_VERSION at every version.
		{11, -7, kerr.UnsupportedVersion.Code, -1, -1, false},
		{10, -7, kerr.UnsupportedVersion.Code, -1, -1, false},
		{1, -100, kerr.UnsupportedVersion.Code, -1, -1, false},
	} {
		p := list(tc.version, tc.ts)
		if p.ErrorCode != tc.code || p.Offset != tc.offset || (tc.version >= 4 && p.LeaderEpoch != tc.epoch) || (p.Timestamp >= 0) != tc.withTime {
			t.Errorf("v%d timestamp %d: code %d offset %d epoch %d time %d; want code %d offset %d epoch %d (a time: %v)",
				tc.version, tc.ts, p.ErrorCode, p.Offset, p.LeaderEpoch, p.Timestamp, tc.code, tc.offset, tc.epoch, tc.withTime)
		}
	}
}
