package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/topics"
)

// setClientQuota sets key=value for the client id the ct helpers send ("conn-test") and
// waits until the broker's image has it.
func setClientQuota(t *testing.T, b *Broker, addr, key string, value float64) {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Version = 1
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "client-id", new(ctClientID)
	e.Entity = append(e.Entity, ent)
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, value
	e.Ops = append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	resp := ctRoundTrip(t, addr, req).(*kmsg.AlterClientQuotasResponse)
	if c := resp.Entries[0].ErrorCode; c != 0 {
		t.Fatalf("AlterClientQuotas: %s", errName(c))
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.cl.Image().ClientQuotas) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("quota never reached the broker's image")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHW waits until partition p of topic has a high watermark of hw.
func waitHW(t *testing.T, reg *topics.Registry, topic string, p int32, hw int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tp, ok := reg.Get(topic)
		if ok && tp.Partitions[p].Replica.HighWatermark() >= hw {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%d: high watermark never reached %d", topic, p, hw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConsumerQuotaCapsTheFetch: Kafka's KafkaApis.handleFetchRequest caps a consumer's fetch at
// ClientQuotaManager.getMaxValueInQuotaWindow (quota × (samples-1) × window size: "trying to
// fetch more bytes would result in a guaranteed throttling potentially blocking consumer
// progress"). Runnel read up to the client's MaxBytes, so a backlog larger than quota × 10 s
// was throttled, emptied and unrecorded on every fetch: the consumer never got a record.
func TestConsumerQuotaCapsTheFetch(t *testing.T) {
	b, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "cq", 1, nil)
	for range 20 {
		ctRoundTrip(t, addr, ctProduce(9, 1, ctPart{"cq", 0, ctBatch(1, 1000)}))
	}
	waitHW(t, reg, "cq", 0, 20)
	// 1000 B/s: at most 1000 × 10 s = 10000 bytes in one fetch, not throttled when nothing
	// else was recorded.
	setClientQuota(t, b, addr, "consumer_byte_rate", 1000)
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	resp := ctExchange(t, nc, ctFetch(12, 0, 0, "cq", 0, 0), 1).(*kmsg.FetchResponse)
	nc.Close()
	got := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			got += len(p.RecordBatches)
		}
	}
	if got == 0 || got > 10000 || resp.ThrottleMillis != 0 {
		t.Errorf("a fetch under a 1000 B/s quota with 20 KB waiting: %d record bytes, throttle %d ms; want up to 10000 bytes, not throttled (Kafka caps the read at the quota's window)",
			got, resp.ThrottleMillis)
	}
}

// TestDescribeClientQuotasIPWithUser: Kafka's ClientQuotasImage.describe refuses a filter
// combining an ip component with a user or client-id one (INVALID_REQUEST: "IP filter
// component should not be used with user or clientId filter component"). Runnel answered it
// with no entries and no error (found by review, 2026-12-06).
func TestDescribeClientQuotasIPWithUser(t *testing.T) {
	_, addr, _ := ctBroker(t, nil)
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Version = 1
	for _, typ := range []string{"ip", "user"} {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType = typ, kmsg.QuotasMatchTypeAny
		req.Components = append(req.Components, c)
	}
	resp := ctRoundTrip(t, addr, req).(*kmsg.DescribeClientQuotasResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("ip + user filter: %s, %d entries; want INVALID_REQUEST", errName(resp.ErrorCode), len(resp.Entries))
	}
}
