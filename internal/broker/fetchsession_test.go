package broker

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sessionFetch(version int16, sid, sepoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = version, 0, 0, 50<<20
	req.SessionID, req.SessionEpoch = sid, sepoch
	return req
}

func addFetched(req *kmsg.FetchRequest, topic string, id [16]byte, part int32, offset int64, epoch int32, maxBytes int32) {
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = part, offset, maxBytes, epoch, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
}

func leaderEpochOf(t *testing.T, addr, topic string) int32 {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	req.Topics = append(req.Topics, mt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.MetadataResponse)
	return resp.Topics[0].Partitions[0].LeaderEpoch
}

// TestSessionLeaderEpochUpdate: an incremental fetch that changes a partition's
// CurrentLeaderEpoch is fenced by the new one (Kafka's CachedPartition.updateRequestParams
// takes it), not by the one the session was opened with.
func TestSessionLeaderEpochUpdate(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "ep", 1, nil)
	ep := leaderEpochOf(t, addr, "ep")
	t.Logf("leader epoch %d", ep)
	nc := ctDial(t, addr)
	req := sessionFetch(13, 0, 0)
	addFetched(req, "", tp.ID, 0, 0, ep+1, 1<<20) // a too-new epoch
	resp := ctExchange(t, nc, req, 1).(*kmsg.FetchResponse)
	t.Logf("full: session %d, %s", resp.SessionID, errName(resp.Topics[0].Partitions[0].ErrorCode))
	req = sessionFetch(13, resp.SessionID, 1)
	addFetched(req, "", tp.ID, 0, 0, ep, 1<<20) // the correct epoch now
	resp2 := ctExchange(t, nc, req, 2).(*kmsg.FetchResponse)
	if resp2.ErrorCode != 0 {
		t.Fatalf("top-level %s", errName(resp2.ErrorCode))
	}
	for _, rt := range resp2.Topics {
		for _, p := range rt.Partitions {
			t.Logf("incremental: %s", errName(p.ErrorCode))
			if p.ErrorCode != 0 {
				t.Errorf("after updating CurrentLeaderEpoch to %d, fetch = %s; want NONE", ep, errName(p.ErrorCode))
			}
		}
	}
}

// TestFetchErrorAnswersAtOnce: a fetch with one partition in error and one at its end is
// answered at once, as Kafka's (errorReadingData), not after its max wait.
func TestFetchErrorAnswersAtOnce(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "er", 2, nil)
	ctRoundTrip(t, addr, ctProduce(9, 1, ctPart{"er", 0, ctBatch(1, 10)}))
	req := ctFetch(12, 2000, 1, "er", 0, 1)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, req.Topics[0].Partitions[0])
	req.Topics[0].Partitions[1].Partition, req.Topics[0].Partitions[1].FetchOffset = 1, 99 // out of range
	start := time.Now()
	resp := ctRoundTrip(t, addr, req).(*kmsg.FetchResponse)
	el := time.Since(start)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 || resp.Topics[0].Partitions[1].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("response %+v; want partition 1 OFFSET_OUT_OF_RANGE", resp.Topics)
	}
	if el > time.Second {
		t.Errorf("fetch with an OFFSET_OUT_OF_RANGE partition answered after %v; want at once", el)
	}
}

// TestSessionTakesPartitionsInTurn: in an incremental session the partitions a response listed
// go to the end of the session (as Kafka's), so a response budget smaller than the backlog
// reaches every partition in turn, not always the first.
func TestSessionTakesPartitionsInTurn(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "st", 2, nil)
	for i := 0; i < 20; i++ { // acks=all: readable (durable) once answered
		ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"st", 0, ctBatch(1, 1000)}, ctPart{"st", 1, ctBatch(1, 1000)}))
	}
	nc := ctDial(t, addr)
	req := sessionFetch(12, 0, 0)
	req.MaxBytes = 1500
	addFetched(req, "st", [16]byte{}, 0, 0, -1, 1<<20)
	addFetched(req, "st", [16]byte{}, 1, 0, -1, 1<<20)
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, req.Topics[1].Partitions...)
	req.Topics = req.Topics[:1]
	resp := ctExchange(t, nc, req, 1).(*kmsg.FetchResponse)
	sid := resp.SessionID
	off0 := int64(0)
	got1 := 0
	for i := 0; i < 10; i++ {
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if len(p.RecordBatches) > 0 {
					if p.Partition == 0 {
						off0++
					} else {
						got1++
					}
				}
			}
		}
		req = sessionFetch(12, sid, int32(i+1))
		req.MaxBytes = 1500
		addFetched(req, "st", [16]byte{}, 0, off0, -1, 1<<20)
		resp = ctExchange(t, nc, req, int32(i+2)).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("top-level %s", errName(resp.ErrorCode))
		}
	}
	if got1 == 0 {
		t.Errorf("partition 1 got no data in 11 fetches while partition 0 advanced %d batches", off0)
	}
}

// TestSessionForgetsADeletedTopic: a session of fetch v13+ keys partitions by topic id.
// Forgetting a deleted topic by its id removes it, and the topic created again under its name
// is a partition of its own, served.
func TestSessionForgetsADeletedTopic(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	old := ctCreate(t, reg, "gone", 1, nil)
	keep := ctCreate(t, reg, "keep", 1, nil)
	nc := ctDial(t, addr)
	req := sessionFetch(13, 0, 0)
	addFetched(req, "", old.ID, 0, 0, -1, 1<<20)
	addFetched(req, "", keep.ID, 0, 0, -1, 1<<20)
	resp := ctExchange(t, nc, req, 1).(*kmsg.FetchResponse)
	sid := resp.SessionID
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.Version, dreq.TimeoutMillis = 6, 5000
	dreq.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: old.ID}}
	ctRoundTrip(t, addr, dreq)
	newT := ctCreate(t, reg, "gone", 1, nil)
	// The client replaces gone(old id) by gone(new id): adds the new, forgets the old.
	req = sessionFetch(13, sid, 1)
	addFetched(req, "", newT.ID, 0, 0, -1, 1<<20)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Partitions = old.ID, []int32{0}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	resp = ctExchange(t, nc, req, 2).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level %s", errName(resp.ErrorCode))
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			t.Logf("topic id %x p%d: %s", rt.TopicID[:4], p.Partition, errName(p.ErrorCode))
			if rt.TopicID == old.ID {
				t.Errorf("the forgotten (deleted) topic id is still in the session")
			}
			if rt.TopicID == newT.ID && p.ErrorCode != 0 {
				t.Errorf("the recreated topic's partition: %s; want NONE", errName(p.ErrorCode))
			}
		}
	}
}

// TestSessionCacheEviction: a full cache evicts a stale session (unused for sessionEviction),
// else the smallest one old enough that holds no more partitions than the new one; otherwise
// it opens none, and the client fetches sessionless.
func TestSessionCacheEviction(t *testing.T) {
	c := newFetchSessions(2)
	t0 := time.Unix(1000, 0)
	sized := func(n int, now time.Time) *fetchSession {
		s := c.create(n, now)
		if s == nil {
			return nil
		}
		for i := range n {
			s.put(&sessionPartition{topic: "t", partition: int32(i)})
		}
		return s
	}
	small, big := sized(1, t0), sized(5, t0)
	if small == nil || big == nil || small.id == big.id || small.id <= 0 || big.id <= 0 {
		t.Fatalf("sessions %+v %+v", small, big)
	}
	if s := sized(3, t0.Add(time.Minute)); s != nil {
		t.Fatalf("a full cache of young, used sessions gave a new one its place")
	}
	// Both old enough; the small one holds fewer partitions than the newcomer: it goes.
	s3 := sized(3, t0.Add(3*time.Minute))
	if s3 == nil {
		t.Fatal("no session for 3 partitions in place of a 1-partition one past its eviction time")
	}
	if _, err := c.get(small.id, t0.Add(3*time.Minute)); err == nil {
		t.Fatal("the smallest session was kept")
	}
	// Both in use now (big used last): a 1-partition newcomer is worth less than either.
	c.get(s3.id, t0.Add(4*time.Minute))
	c.get(big.id, t0.Add(4*time.Minute))
	if s := sized(1, t0.Add(4*time.Minute)); s != nil {
		t.Fatal("a 1-partition session took the place of larger, used ones")
	}
	// Unused for longer than sessionEviction: the least recently used goes, whatever its size.
	if s := sized(1, t0.Add(7*time.Minute)); s == nil {
		t.Fatal("a stale session kept its place")
	}
	if _, err := c.get(s3.id, t0.Add(7*time.Minute)); err == nil {
		t.Fatal("the least recently used session was kept")
	}
	if nextEpoch(math.MaxInt32) != 1 || nextEpoch(7) != 8 {
		t.Fatal("session epochs wrap from MaxInt32 to 1")
	}
}

// TestOutOfRangeAfterTheBudget: a partition whose offset is out of range is told so in the
// response even when the partitions before it used up the response's bytes.
func TestOutOfRangeAfterTheBudget(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "ob", 2, nil)
	ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"ob", 0, ctBatch(1, 1000)}))
	req := ctFetch(12, 0, 0, "ob", 0, 0)
	req.MaxBytes = 100 // the first partition's batch alone is over it
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, req.Topics[0].Partitions[0])
	req.Topics[0].Partitions[1].Partition, req.Topics[0].Partitions[1].FetchOffset = 1, 99
	resp := ctRoundTrip(t, addr, req).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || len(ps[0].RecordBatches) == 0 || ps[1].ErrorCode != kerr.OffsetOutOfRange.Code {
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%d: %v, %d bytes", p.Partition, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches)))
		}
		t.Fatalf("partitions %v; want partition 0's batch and partition 1 OFFSET_OUT_OF_RANGE", got)
	}
}
