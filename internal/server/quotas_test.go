package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// throttleCounter counts the throttle times brokers report to a franz-go client.
type throttleCounter struct{ n, total atomic.Int64 }

func (h *throttleCounter) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
		h.total.Add(int64(d))
	}
}

// TestClientQuotas: client quotas set with AlterClientQuotas are described back with Kafka's
// filters and enforced: a client id with producer_byte_rate and consumer_byte_rate of 200 KB/s
// is throttled (throttle_time_ms reported, its rate held near the quota once the first 10 s
// window's allowance is spent), a client id without a quota is not. Then Kafka's kafka-configs
// sets and describes quotas too.
func TestClientQuotas(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("quota", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	name := func(s string) *string { return &s }
	const quota = 200_000.0

	// Bad entries are refused one by one; the good one applies.
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("slow")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}, {Key: "consumer_byte_rate", Value: quota}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("x")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "no_such_quota", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("y")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: name("not-an-ip")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: nil}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 500}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if wantErr := i >= 1 && i <= 3; (r.Err != nil) != wantErr {
			t.Errorf("entry %d %v: error %v; want an error: %v", i, r.Entity, r.Err, wantErr)
		}
	}
	described := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range d {
			out = append(out, q.Entity.String()+" "+strings.Trim(strings.ReplaceAll(strings.Join(func() []string {
				var v []string
				for _, x := range q.Values {
					v = append(v, x.String())
				}
				return v
			}(), ","), "000000", ""), " "))
		}
		return out
	}
	if got := described(false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchName: name("slow"), MatchType: 0}); len(got) != 1 ||
		!strings.Contains(got[0], "consumer_byte_rate=200000.") || !strings.Contains(got[0], "producer_byte_rate=200000.") {
		t.Fatalf("describe client-id=slow: %v", got)
	}
	if got := described(false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}); len(got) != 1 || !strings.Contains(got[0], "request_percentage=500.") {
		t.Fatalf("describe the default user: %v", got)
	}
	if got := described(false); len(got) != 2 {
		t.Fatalf("describe everything: %v; want 2 entities", got)
	}
	if got := described(true, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 2}, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}); len(got) != 0 {
		t.Fatalf("strict user+client-id: %v; want none", got)
	}

	// Producing as client id "slow" as fast as it can: throttled to about the quota.
	produce := func(clientID string, d time.Duration, after time.Duration) (bytesAfter int64, throttles int64) {
		var h throttleCounter
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ClientID(clientID), kgo.WithHooks(&h), kgo.DefaultProduceTopic("quota"),
			kgo.ProducerLinger(0), kgo.MaxBufferedRecords(64), kgo.ProducerBatchMaxBytes(64<<10),
			kgo.ProducerBatchCompression(kgo.NoCompression())) // the quotas count bytes on the wire
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		value := make([]byte, 16<<10)
		var acked atomic.Int64
		start := time.Now()
		for time.Since(start) < d {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil && time.Since(start) >= after {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return acked.Load(), h.n.Load()
	}
	got, throttles := produce("slow", 9*time.Second, 4*time.Second)
	t.Logf("client id slow: %d bytes acknowledged in the last 5 s (quota %.0f B/s), %d throttled responses", got, quota, throttles)
	if throttles == 0 || float64(got) > 2.5*5*quota {
		t.Fatalf("client id slow: %d bytes in 5 s, %d throttled responses; want throttling to about %.0f B/s", got, throttles, quota)
	}
	if got, throttles := produce("fast", 2*time.Second, 0); throttles != 0 || got == 0 {
		t.Fatalf("client id fast (no quota): %d bytes, %d throttled responses; want no throttling", got, throttles)
	}

	// Consuming as "slow": held to about the quota once the window's allowance is spent.
	var h throttleCounter
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ClientID("slow"), kgo.WithHooks(&h), kgo.ConsumeTopics("quota"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(256<<10), kgo.FetchMaxPartitionBytes(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var read int64
	for start := time.Now(); time.Since(start) < 6*time.Second; {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { read += int64(len(r.Value)) })
		pcancel()
	}
	t.Logf("consumer slow: %d bytes in 6 s, %d throttled responses, %v throttled in all", read, h.n.Load(), time.Duration(h.total.Load()))
	if h.n.Load() == 0 || float64(read) > quota*(6+11) {
		t.Fatalf("consumer slow: %d bytes in 6 s, %d throttled responses; want throttling (at most the 11 s window's allowance plus 6 s at %.0f B/s)", read, h.n.Load(), quota)
	}

	// Removing the values removes the entity.
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: name("slow")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "consumer_byte_rate", Remove: true}}},
	}); err != nil {
		t.Fatal(err)
	}
	if got := described(false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}); len(got) != 0 {
		t.Fatalf("after removing client-id=slow's quotas: %v", got)
	}

	// Kafka's kafka-configs sets and describes quotas.
	configs := kafkaTool(t, "kafka.admin.ConfigCommand")
	kafkaConfigs := func(args ...string) string {
		return runClient(t, 120*time.Second, "", configs[0], append(configs[1:], append([]string{"--bootstrap-server", b.addr}, args...)...)...)
	}
	kafkaConfigs("--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048", "--entity-type", "users", "--entity-name", "alice",
		"--entity-type", "clients", "--entity-name", "app")
	if out := kafkaConfigs("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app"); !strings.Contains(out, "producer_byte_rate=1024") || !strings.Contains(out, "consumer_byte_rate=2048") {
		t.Fatalf("kafka-configs --describe user alice client app:\n%s", out)
	}
	if out := kafkaConfigs("--describe", "--entity-type", "users", "--entity-default"); !strings.Contains(out, "request_percentage=500") {
		t.Fatalf("kafka-configs --describe --entity-default users:\n%s", out)
	}
}

// TestControllerMutationQuota: controller_mutation_rate (KIP-599) holds a client id to its
// partitions created and deleted per second. A client with a rate of 2 has a burst of 22: a
// topic of 30 partitions is admitted and puts it 8 in debt (throttled 4 s); while in debt,
// CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are refused with
// THROTTLING_QUOTA_EXCEEDED (nothing changes), older versions are admitted and throttled, other
// client ids are not held; once the debt is paid the client goes on.
func TestControllerMutationQuota(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := func(clientID string, opts ...kgo.Opt) (*kadm.Client, *throttleCounter) {
		var h throttleCounter
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.ClientID(clientID), kgo.WithHooks(&h)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl), &h
	}
	adm, _ := client("admin")
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: new("mutator")}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 2}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("setting controller_mutation_rate: %v %v", err, res)
	}
	d, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(d) != 1 || len(d[0].Values) != 1 || d[0].Values[0].Key != "controller_mutation_rate" || d[0].Values[0].Value != 2 {
		t.Fatalf("described quotas: %+v %v; want client-id=mutator controller_mutation_rate=2", d, err)
	}
	create := func(adm *kadm.Client, topic string, partitions int32) error {
		r, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err != nil {
			return err
		}
		return r.Err
	}

	first, throttled := client("mutator")
	start := time.Now()
	if err := create(first, "m30", 30); err != nil {
		t.Fatalf("30 partitions from a full bucket of 22: %v; want created", err)
	}
	if got := time.Duration(throttled.total.Load()); got < 3500*time.Millisecond || got > 4100*time.Millisecond {
		t.Fatalf("throttle after 30 partitions at 2/s with a burst of 22: %v; want about 4 s (a debt of 8)", got)
	}
	// Other connections of the same client id (the first one is muted) are refused while in
	// debt, for every kind of mutation. Each is a new client: a refusal is throttled too, and
	// franz-go waits that out before its next request to the node.
	fresh := func() *kadm.Client { adm, _ := client("mutator"); return adm }
	if err := create(fresh(), "refused", 1); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Errorf("CreateTopics in debt: %v; want THROTTLING_QUOTA_EXCEEDED", err)
	}
	if r, err := fresh().CreatePartitions(ctx, 2, "m30"); err == nil && !errors.Is(r["m30"].Err, kerr.ThrottlingQuotaExceeded) {
		t.Errorf("CreatePartitions in debt: %v; want THROTTLING_QUOTA_EXCEEDED", r["m30"].Err)
	}
	if r, err := fresh().DeleteTopics(ctx, "m30"); err == nil && !errors.Is(r["m30"].Err, kerr.ThrottlingQuotaExceeded) {
		t.Errorf("DeleteTopics in debt: %v; want THROTTLING_QUOTA_EXCEEDED", r["m30"].Err)
	}
	if td, err := adm.ListTopics(ctx, "m30", "refused"); err != nil || td.Has("refused") || len(td["m30"].Partitions) != 30 {
		t.Fatalf("a refused mutation changed the topics: %v %v", td, err)
	}
	// CreateTopics v5 (Kafka 2.6) cannot be refused for the quota: admitted, and throttled.
	old, oldThrottled := client("mutator", kgo.MaxVersions(kversion.V2_6_0()))
	if err := create(old, "old", 1); err != nil {
		t.Fatalf("CreateTopics v5 in debt: %v; want created", err)
	}
	if oldThrottled.n.Load() == 0 {
		t.Error("CreateTopics v5 in debt: not throttled")
	}
	// Other client ids are not held.
	other, otherThrottled := client("other")
	if err := create(other, "other", 50); err != nil || otherThrottled.n.Load() != 0 {
		t.Fatalf("client id other (no quota): %v, %d throttled responses; want created, none", err, otherThrottled.n.Load())
	}
	// The debt (8, then 9 with "old") is paid at 2/s: 4.5 s after the first request.
	time.Sleep(time.Until(start.Add(5 * time.Second)))
	if r, err := fresh().DeleteTopics(ctx, "m30"); err != nil || r["m30"].Err != nil {
		t.Fatalf("DeleteTopics once the debt is paid: %v %v; want deleted", err, r["m30"].Err)
	}
}

// TestConnectionCreationRate: connection_creation_rate for an ip entity (KIP-612). With 2/s for
// 127.0.0.1 (measured over 10 s), 20 connections opened one after another are served and the
// next ones are held (about 0.5 s) and closed unanswered; an ip quota takes no other key and
// describes back.
func TestConnectionCreationRate(t *testing.T) {
	b, adm := oneNodeAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: new("127.0.0.1")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 2}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 2}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: new("127.0.0.2")}, {Type: "client-id", Name: new("c")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 2}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: new("127.0.0.3")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 2.5}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if (r.Err != nil) != (i > 0) {
			t.Fatalf("entry %d %v: error %v; want an error only for the producer_byte_rate of an ip, an ip with a client id and a fractional rate", i, r.Entity, r.Err)
		}
	}
	d, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchName: new("127.0.0.1")}})
	if err != nil || len(d) != 1 || len(d[0].Values) != 1 || d[0].Values[0].Key != "connection_creation_rate" || d[0].Values[0].Value != 2 {
		t.Fatalf("described ip quotas: %+v %v; want ip=127.0.0.1 connection_creation_rate=2", d, err)
	}

	// One ApiVersions request per new connection: answered, or closed unanswered (held first).
	try := func() (answered bool, took time.Duration) {
		start := time.Now()
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		return answersApiVersions(t, nc), time.Since(start)
	}
	var served, refused int
	for range 25 {
		ok, took := try()
		switch {
		case ok:
			served++
		case took < 300*time.Millisecond:
			t.Fatalf("connection %d closed after %v; want it held about 0.5 s first", served+refused+1, took)
		default:
			refused++
		}
	}
	if served != 20 || refused != 5 {
		t.Fatalf("%d of 25 connections served, %d refused; want 20 (2/s over 10 s) and 5", served, refused)
	}
}

// TestMaxConnectionsPerIP: max.connections.per.ip.overrides (a dynamic broker config) caps the
// connections one client IP keeps open: with 127.0.0.2 at 2, connections from there beyond two
// are closed unanswered, one more is served once one of the two closes, and other IPs (the
// admin client on 127.0.0.1) are not held; malformed overrides are refused.
func TestMaxConnectionsPerIP(t *testing.T) {
	b, adm := oneNodeAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A bad broker config value is INVALID_REQUEST, as Kafka answers it (KAFKA-13609).
	if err := alterNodeConfig(ctx, adm, "max.connections.per.ip.overrides", "127.0.0.2:two"); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("a malformed max.connections.per.ip.overrides: %v; want INVALID_REQUEST", err)
	}
	if err := alterNodeConfig(ctx, adm, "max.connections.per.ip.overrides", "127.0.0.2:2, [::1]:5"); err != nil {
		t.Fatalf("setting max.connections.per.ip.overrides: %v", err)
	}

	// open dials from 127.0.0.2 and reports whether an ApiVersions request is answered.
	open := func() (net.Conn, bool) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		nc, err := d.DialContext(ctx, "tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		return nc, answersApiVersions(t, nc)
	}
	first, ok1 := open()
	second, ok2 := open()
	third, ok3 := open()
	third.Close()
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("three connections from 127.0.0.2 (limit 2): served %v %v %v; want the first two", ok1, ok2, ok3)
	}
	if _, err := adm.ListTopics(ctx); err != nil {
		t.Fatalf("a client on 127.0.0.1 while 127.0.0.2 is at its limit: %v", err)
	}
	first.Close()
	// The broker counts the connection as closed once its read loop sees the close.
	eventually(t, "a new connection from 127.0.0.2 served after one closed", 5*time.Second, func() bool {
		nc, ok := open()
		if !ok {
			nc.Close()
		}
		return ok
	})
	second.Close()
}

// oneNodeAdmin starts a one-node broker and an admin client of it.
func oneNodeAdmin(t *testing.T) (*testBroker, *kadm.Client) {
	t.Helper()
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, kadm.NewClient(cl)
}

// answersApiVersions sends an ApiVersions request on a new connection and reports whether the
// whole answer comes back (false: the connection was closed first).
func answersApiVersions(t *testing.T, nc net.Conn) bool {
	t.Helper()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
	req.SetVersion(0)
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("conn-limits")).AppendRequest(nil, req, 1)); err != nil {
		return false
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return false
	}
	_, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(size[:])))
	return err == nil
}

// TestMaxConnections: the node-wide limits. With max.connections at 2, a third connection is
// not served until one of the first two closes; with max.connection.creation.rate at 2 (over
// 10 s), 25 connections opened one after another are all served, the last ones only after the
// listener waited (seconds in all, against milliseconds without the limit).
func TestMaxConnections(t *testing.T) {
	b, adm := oneNodeAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set := func(name, value string) {
		t.Helper()
		if err := alterNodeConfig(ctx, adm, name, value); err != nil {
			t.Fatalf("setting %s=%s: %v", name, value, err)
		}
	}
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}

	set("max.connections", "2")
	adm.Close() // its connections close: the two below fit
	first, second := dial(), dial()
	if !answersApiVersions(t, first) || !answersApiVersions(t, second) {
		t.Fatal("the first two connections under max.connections=2 were not served")
	}
	third := dial() // the kernel completes the handshake; the node does not accept it yet
	defer third.Close()
	answered := make(chan bool, 1)
	go func() { answered <- answersApiVersions(t, third) }()
	select {
	case <-answered:
		t.Fatal("a third connection was served under max.connections=2")
	case <-time.After(time.Second):
	}
	first.Close()
	if !<-answered {
		t.Fatal("the third connection was not served once the first closed")
	}
	second.Close()
	third.Close()

	// A new admin client sets the rate and lifts the count.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	set("max.connections", "2147483647")
	set("max.connection.creation.rate", "2")
	start := time.Now()
	for i := range 25 {
		nc := dial()
		if !answersApiVersions(t, nc) {
			t.Fatalf("connection %d under max.connection.creation.rate=2 not served", i+1)
		}
		nc.Close()
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("25 connections at 2/s (20 allowed at once) took %v; want the listener to wait seconds", took)
	}
}

// alterNodeConfig sets a dynamic broker config of a one-node cluster's node.
func alterNodeConfig(ctx context.Context, adm *kadm.Client, name, value string) error {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(md.Brokers) != 1 {
		return fmt.Errorf("%d brokers; want one", len(md.Brokers))
	}
	r, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: name, Value: &value}}, md.Brokers[0].NodeID)
	if err != nil {
		return err
	}
	return r[0].Err
}

// TestControllerMutationQuotaIsTheClusters: controller_mutation_rate is counted once for the
// cluster, by the active controller's node, as Kafka's controller counts it: a client that
// spent its bucket creating a topic through one node is refused (THROTTLING_QUOTA_EXCEEDED)
// when it asks another node for more, where each node's own count admitted it.
func TestControllerMutationQuotaIsTheClusters(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, adm := c.client()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: new("mutator")}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 2}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("setting controller_mutation_rate: %v %v", err, res)
	}
	create := func(node int32, topic string, partitions int32) int16 {
		t.Helper()
		cl, _ := c.client(kgo.ClientID("mutator"))
		if err := cl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	eventually(t, "the quota on every node", 10*time.Second, func() bool {
		for id := int32(1); id <= 3; id++ {
			if len(c.servers[id].Node().Image().ClientQuotas) == 0 {
				return false
			}
		}
		return true
	})
	if code := create(1, "spent", 30); code != 0 {
		t.Fatalf("30 partitions through node 1: %v; want created", kerr.ErrorForCode(code))
	}
	for _, node := range []int32{2, 3} {
		if code := create(node, fmt.Sprint("more-", node), 1); code != kerr.ThrottlingQuotaExceeded.Code {
			t.Fatalf("one more partition through node %d: %v; want THROTTLING_QUOTA_EXCEEDED (the bucket is the cluster's)", node, kerr.ErrorForCode(code))
		}
	}
}
