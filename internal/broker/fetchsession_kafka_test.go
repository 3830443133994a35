package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
)

// TestSessionEvictionNeedsMorePartitions: Kafka's FetchSessionCacheShard.tryEvict lets a
// new session evict a non-stale one only if it "contains more partitions" (EvictableKey
// compare: a new key (size, id 0) below an existing (size, id>0) of the same size cannot
// evict). Runnel evicted an equally sized session, so with a full cache of equal consumers every
// newcomer evicted a live session, whose next incremental fetch failed
// FETCH_SESSION_ID_NOT_FOUND, whose new full fetch evicted another: endless churn.
func TestSessionEvictionNeedsMorePartitions(t *testing.T) {
	c := newFetchSessions(1)
	t0 := time.Unix(1000, 0)
	a := c.create(3, t0)
	for i := range 3 {
		a.put(&sessionPartition{topic: "t", partition: int32(i)})
	}
	// In use (not stale), older than the eviction time.
	if _, err := c.get(a.id, t0.Add(150*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := c.create(3, t0.Add(160*time.Second)); s != nil {
		t.Errorf("a 3-partition newcomer evicted a live 3-partition session; Kafka evicts only for strictly more partitions")
	}
	if _, err := c.get(a.id, t0.Add(161*time.Second)); err != nil {
		t.Errorf("the live session is gone: its consumer gets %v", err)
	}
}

// TestSessionTopicIDError: a session opened with fetch v12 (partitions by name) and then
// used with v13 (partitions by topic id) is FETCH_SESSION_TOPIC_ID_ERROR in Kafka
// (FetchManager.newContext: session.usesTopicIds vs reqVersion >= 13). The Java consumer
// changes version inside a session (v12 while some topic has no id, else v13). Runnel accepted
// it: the same partition was in the session twice, once by name at its old offset and once by
// id, and both were fetched: the consumer was sent the old records again.
func TestSessionTopicIDError(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	tp := ctCreate(t, reg, "mix", 1, nil)
	for range 3 {
		ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"mix", 0, ctBatch(1, 100)}))
	}
	waitHW(t, reg, "mix", 0, 3)
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := sessionFetch(12, 0, 0)
	addFetched(req, "mix", [16]byte{}, 0, 0, -1, 1<<20)
	resp := ctExchange(t, nc, req, 1).(*kmsg.FetchResponse)
	if resp.SessionID == 0 {
		t.Fatal("no session")
	}
	// The consumer has consumed to 3; it now fetches with v13, naming the topic by id.
	req = sessionFetch(13, resp.SessionID, 1)
	addFetched(req, "", tp.ID, 0, 3, -1, 1<<20)
	resp = ctExchange(t, nc, req, 2).(*kmsg.FetchResponse)
	n := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			n++
			t.Logf("topic id %x p%d: %s, %d record bytes", rt.TopicID[:4], p.Partition, errName(p.ErrorCode), len(p.RecordBatches))
		}
	}
	if resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Errorf("v13 incremental fetch in a v12 session: top-level %s with %d partitions listed; want FETCH_SESSION_TOPIC_ID_ERROR",
			errName(resp.ErrorCode), n)
	}
}

// TestUnknownTopicIDUnderACLs: Kafka's handleFetchRequest answers UNKNOWN_TOPIC_ID for a
// topic id it cannot resolve before authorizing by name (an id has no name to authorize). The
// consumer then refreshes its metadata (a topic deleted and created again gets a new id).
// Runnel authorized the empty name: with ACLs that do not allow everyone, the partition was
// TOPIC_AUTHORIZATION_FAILED, which the Java consumer raises to the application as fatal.
func TestUnknownTopicIDUnderACLs(t *testing.T) {
	b, addr, reg := ctBroker(t, func(c *Config) { c.Security.Authorizer = &security.Authorizer{} })
	kept := ctCreate(t, reg, "kept", 1, nil)
	_, aerr := b.propose(context.Background(), &controller.Command{Op: controller.OpCreateACLs, ACLs: &controller.ACLChange{ACLs: []security.ACL{{
		ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "kept", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: anonymous, Host: security.Wildcard, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}}}})
	if aerr != nil {
		t.Fatal(aerr.msg)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.cl.Image().ACLs) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("ACL never applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	req := sessionFetch(13, 0, -1)
	addFetched(req, "", kept.ID, 0, 0, -1, 1<<20)
	addFetched(req, "", [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 0, 0, -1, 1<<20) // a stale id
	resp := ctRoundTrip(t, addr, req).(*kmsg.FetchResponse)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			t.Logf("topic id %x: %s", rt.TopicID[:4], errName(p.ErrorCode))
			switch {
			case rt.TopicID == kept.ID && p.ErrorCode != 0:
				t.Errorf("the allowed topic: %s", errName(p.ErrorCode))
			case rt.TopicID != kept.ID && p.ErrorCode != kerr.UnknownTopicID.Code:
				t.Errorf("an unknown topic id: %s; want UNKNOWN_TOPIC_ID (Kafka resolves ids before authorizing)", errName(p.ErrorCode))
			}
		}
	}
}

// TestMinBytesAboveMaxBytes: Kafka caps a fetch's min bytes at its max bytes
// (KafkaApis.handleFetchRequest: fetchMinBytes = min(request.minBytes, fetchMaxBytes)), so a
// fetch whose min bytes exceed what one response may carry is answered as soon as the data is
// there. Runnel compared the bytes it read (at most MaxBytes) with the uncapped MinBytes, so
// such a fetch always waited out MaxWaitMillis though records were ready.
func TestMinBytesAboveMaxBytes(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "mb", 1, nil)
	for range 10 {
		ctRoundTrip(t, addr, ctProduce(9, -1, ctPart{"mb", 0, ctBatch(1, 100)}))
	}
	waitHW(t, reg, "mb", 0, 10)
	req := ctFetch(12, 3000, 1000, "mb", 0, 0) // MinBytes 1000
	req.MaxBytes = 500                         // but at most 500 in the response
	start := time.Now()
	resp := ctRoundTrip(t, addr, req).(*kmsg.FetchResponse)
	el := time.Since(start)
	got := len(resp.Topics[0].Partitions[0].RecordBatches)
	t.Logf("%d record bytes after %v", got, el)
	if el > time.Second {
		t.Errorf("fetch with MinBytes 1000 > MaxBytes 500 and 10 batches ready: answered after %v; want at once (Kafka caps min bytes at max bytes)", el)
	}
}

// TestSessionLeftEmptyIsClosed: an incremental fetch that forgets a session's last partition
// closes the session and is answered sessionless (session id 0), as Kafka's
// FetchManager.newContext does (session.isEmpty: cache.remove, SessionlessFetchContext); the
// session's next fetch is FETCH_SESSION_ID_NOT_FOUND. Runnel kept the empty session in the cache
// and answered with its id.
func TestSessionLeftEmptyIsClosed(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "emptied", 2, nil)
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := sessionFetch(12, 0, 0)
	addFetched(req, "emptied", [16]byte{}, 0, 0, -1, 1<<20)
	addFetched(req, "emptied", [16]byte{}, 1, 0, -1, 1<<20)
	resp := ctExchange(t, nc, req, 1).(*kmsg.FetchResponse)
	sid := resp.SessionID
	if sid == 0 {
		t.Fatal("no session")
	}
	forget := func(epoch, partition int32) *kmsg.FetchRequest {
		req := sessionFetch(12, sid, epoch)
		req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "emptied", Partitions: []int32{partition}}}
		return req
	}
	if resp = ctExchange(t, nc, forget(1, 0), 2).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != sid {
		t.Fatalf("forgetting one of two partitions: %s, session %d; want the session kept", errName(resp.ErrorCode), resp.SessionID)
	}
	if resp = ctExchange(t, nc, forget(2, 1), 3).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Errorf("forgetting the last partition: %s, session %d; want no error and session id 0 (closed)", errName(resp.ErrorCode), resp.SessionID)
	}
	if resp = ctExchange(t, nc, sessionFetch(12, sid, 3), 4).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("the closed session's next fetch: %s; want FETCH_SESSION_ID_NOT_FOUND", errName(resp.ErrorCode))
	}
}
