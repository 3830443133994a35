package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/share"
	"github.com/runnel-dev/runnel/internal/testclients"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// javaProcess is a Java test client (a share consumer, a Kafka Streams application) running
// until its stop file exists; lines collects what it prints, as it prints it.
type javaProcess struct {
	t      *testing.T
	stopAt string
	done   chan struct{}
	cancel context.CancelFunc // kills it (SIGKILL)
	killed atomic.Bool        // by the test (kill, or its cleanup): an exit status is no error
	proc   *os.Process
	mu     sync.Mutex
	lines  []string
}

func startJavaShareMember(t *testing.T, java []string, addr, topic, group string) *javaProcess {
	t.Helper()
	return startJavaProcess(t, func(stop string) []string {
		return append(slices.Clone(java), "share-member", addr, topic, group, stop)
	})
}

// startJavaProcess starts a Java test client whose command line argv returns for its stop
// file.
func startJavaProcess(t *testing.T, argv func(stop string) []string) *javaProcess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	m := &javaProcess{t: t, stopAt: filepath.Join(t.TempDir(), "stop"), done: make(chan struct{}), cancel: cancel}
	args := argv(m.stopAt)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	m.proc = cmd.Process
	go func() {
		defer close(m.done)
		defer cancel()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m.mu.Lock()
			m.lines = append(m.lines, sc.Text())
			m.mu.Unlock()
		}
		if err := cmd.Wait(); err != nil && !m.killed.Load() {
			var errs []string
			for _, l := range m.output() {
				if strings.HasPrefix(l, "error ") {
					errs = append(errs, l)
				}
			}
			t.Errorf("java %s: %v\n%s\n%s", args[3], err, strings.Join(errs, "\n"), tail(stderr.String(), 1500))
		}
	}()
	// A test that fails before stopping its members ends them, not their 3-minute timeout.
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			m.killed.Store(true)
			cancel()
			<-m.done
		}
	})
	return m
}

// kill ends the process with SIGKILL, as a crash would, and waits for it to exit.
func (m *javaProcess) kill() {
	m.killed.Store(true)
	m.cancel()
	<-m.done
}

// pause stops the process (SIGSTOP) where it is; resume lets it go on (SIGCONT).
func (m *javaProcess) pause()  { m.signal(syscall.SIGSTOP) }
func (m *javaProcess) resume() { m.signal(syscall.SIGCONT) }

func (m *javaProcess) signal(sig syscall.Signal) {
	m.t.Helper()
	if err := m.proc.Signal(sig); err != nil {
		m.t.Fatalf("signal %v: %v", sig, err)
	}
}

func (m *javaProcess) output() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

func (m *javaProcess) stop() []string {
	if err := os.WriteFile(m.stopAt, nil, 0o644); err != nil {
		m.t.Fatal(err)
	}
	<-m.done
	return m.output()
}

// shareDelivery is a record a share member printed: PARTITION OFFSET VALUE DELIVERY_COUNT.
type shareDelivery struct {
	partition int32
	offset    int64
	value     string
	count     int
}

func parseShareDeliveries(t *testing.T, lines []string) []shareDelivery {
	t.Helper()
	var out []shareDelivery
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "error" {
			t.Errorf("share member: %s", line)
			continue
		}
		if len(f) != 4 {
			t.Fatalf("share member printed %q", line)
		}
		p, _ := strconv.Atoi(f[0])
		off, _ := strconv.ParseInt(f[1], 10, 64)
		count, _ := strconv.Atoi(f[3])
		out = append(out, shareDelivery{int32(p), off, f[2], count})
	}
	return out
}

// TestJavaShareGroup: two Java share consumers (KIP-932, explicit acknowledgement) read one
// topic together: each record goes to one of them and is accepted once, except the poison
// records, which they release every time: each comes back until its fifth delivery (delivery
// counts 1 to 5), then is archived. The group is described as Kafka would.
func TestJavaShareGroup(t *testing.T) {
	java := testclients.Java(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("queue", 3)
	javaShareGroup(t, java, b.addr, "queue", 3)
}

// TestJavaShareGroupInAZone is TestJavaShareGroup on an object topic of three nodes, with
// share consumers that name their zone in their client.id as WarpStream's clients do:
// Metadata sends them to their zone's two nodes, which forward the share-partitions the third
// node keeps (docs/share-groups.md §9).
func TestJavaShareGroupInAZone(t *testing.T) {
	java := testclients.Java(t)
	racks := map[int32]string{1: "zone-a", 2: "zone-b", 3: "zone-b"}
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore, c.batchTimeout = "file://"+t.TempDir(), 5*time.Millisecond
		c.tune = func(id int32, cfg *server.Config) { cfg.Rack = racks[id] }
	})
	c.waitNodes(3)
	// Six partitions, of which node 1 keeps the share state of some (rendezvous hashing of
	// the topic id over the three nodes: a topic is made again until it does), which the
	// zone-b consumers reach only through nodes 2 and 3.
	cl, _ := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var topic string
	for i := 0; topic == ""; i++ {
		if i == 10 {
			t.Fatal("node 1 keeps no share-partition of ten topics")
		}
		name := fmt.Sprintf("zoned-queue-%d", i)
		createObjectTopic(t, c.addrs[1], name, 6, nil)
		c.waitTopicEverywhere(ctx, cl, name)
		for p := range int32(6) {
			if leaderOf(t, c.brokers(), name, p) == 1 {
				topic = name
			}
		}
	}
	config := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(config, []byte("client.id=app,warpstream_az=zone-b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RUNNEL_CLIENT_CONFIG", config)
	javaShareGroup(t, java, c.addrs[2], topic, 6)
}

// javaShareGroup runs two Java share members of one group on topic, both bootstrapped from
// addr, and produces to it: every record is accepted once, each poison record delivered five
// times, then archived.
func javaShareGroup(t *testing.T, java []string, addr, topic string, partitions int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m1 := startJavaShareMember(t, java, addr, topic, "jshare")
	m2 := startJavaShareMember(t, java, addr, topic, "jshare")
	// A new share group starts at the end of each partition (share.auto.offset.reset=latest):
	// warm-up records go in until every partition delivered one and each member delivered one
	// (its assignment has reached it: a member that joins later shares a partition with the
	// other until the other's next heartbeat moves it, and may get nothing meanwhile), then the
	// records checked.
	for i := 0; ; i++ {
		started := map[int32]bool{}
		d1, d2 := parseShareDeliveries(t, m1.output()), parseShareDeliveries(t, m2.output())
		for _, d := range append(d1, d2...) {
			started[d.partition] = true
		}
		if len(started) == partitions && len(d1) > 0 && len(d2) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("partitions delivering warm-up records: %v, by the members %d and %d; want all %d, by both", started, len(d1), len(d2), partitions)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "w/%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	const n = 600
	poison := 0
	for i := range n {
		v := fmt.Sprint("v/", i)
		if i%100 == 50 {
			v = fmt.Sprint("poison/", i)
			poison++
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"jshare"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].GroupState != "Stable" || len(resp.Groups[0].Members) != 2 {
		t.Fatalf("ShareGroupDescribe: %v %+v; want a Stable group of 2 members", err, resp)
	}
	// Until every record was accepted and every poison record delivered five times.
	want := n - poison + 5*poison
	count := func() int {
		k := 0
		for _, d := range parseShareDeliveries(t, append(m1.output(), m2.output()...)) {
			if !strings.HasPrefix(d.value, "w/") {
				k++
			}
		}
		return k
	}
	for count() < want && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // a delivery too many would show now
	d1, d2 := parseShareDeliveries(t, m1.stop()), parseShareDeliveries(t, m2.stop())
	if len(d1) == 0 || len(d2) == 0 {
		t.Fatalf("records per member %d, %d; want both to share the work", len(d1), len(d2))
	}
	byValue := map[string][]int{}
	for _, d := range append(d1, d2...) {
		if !strings.HasPrefix(d.value, "w/") {
			byValue[d.value] = append(byValue[d.value], d.count)
		}
	}
	for i := range n {
		v := fmt.Sprint("v/", i)
		if i%100 == 50 {
			v = fmt.Sprint("poison/", i)
			counts := byValue[v]
			if slices.Sort(counts); !slices.Equal(counts, []int{1, 2, 3, 4, 5}) {
				t.Errorf("poison record %s delivered with counts %v; want 1 to 5 (released each time, archived at the limit)", v, counts)
			}
			continue
		}
		if counts := byValue[v]; !slices.Equal(counts, []int{1}) {
			t.Errorf("record %s delivered with counts %v; want once", v, counts)
		}
	}
	t.Logf("%d records accepted once, %d poison records archived after 5 deliveries; members read %d and %d", n-poison, poison, len(d1), len(d2))
}

// shareClient speaks the share group protocol with raw requests, as one member.
type shareClient struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	member string
	topic  [16]byte
	epoch  int32 // the share session's next epoch
	// leader, if set, is the node the fetches and acknowledgements go to (the partition's
	// leader); else any.
	leader int32
}

// send sends a request to the partition's leader, if set.
func (c *shareClient) send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if c.leader > 0 {
		return c.cl.Broker(int(c.leader)).Request(ctx, req)
	}
	return c.cl.Request(ctx, req)
}

// heartbeat sends a ShareGroupHeartbeat to the group's coordinator, looked up again while it
// moves or loads.
func (c *shareClient) heartbeat(ctx context.Context, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	c.t.Helper()
	for {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorKeys = c.group, []string{c.group}
		found, err := fc.RequestWith(ctx, c.cl)
		if err != nil {
			c.t.Fatal(err)
		}
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = c.group, c.member, epoch, topics
		var resp *kmsg.ShareGroupHeartbeatResponse
		if len(found.Coordinators) == 1 && found.Coordinators[0].ErrorCode == 0 {
			raw, err := c.cl.Broker(int(found.Coordinators[0].NodeID)).Request(ctx, req)
			if err == nil {
				resp = raw.(*kmsg.ShareGroupHeartbeatResponse)
			}
		}
		if resp != nil && resp.ErrorCode != kerr.NotCoordinator.Code && resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code &&
			resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			return resp
		}
		if ctx.Err() != nil {
			c.t.Fatalf("no coordinator answered the heartbeat of %s: %+v", c.member, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fetch sends a ShareFetch of partition 0 at the session's epoch with acks (first, last, type).
func (c *shareClient) fetch(ctx context.Context, wait time.Duration, acks ...[3]int64) *kmsg.ShareFetchResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &c.group, &c.member, c.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait.Milliseconds()), 1, 1<<20, 500, 500
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range acks {
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a[0], LastOffset: a[1], AcknowledgeTypes: []int8{int8(a[2])}})
	}
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: c.topic, Partitions: []kmsg.ShareFetchRequestTopicPartition{rp}}}
	raw, err := c.send(ctx, req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 && c.epoch >= 0 {
		c.epoch++
	}
	return resp
}

func (c *shareClient) ack(ctx context.Context, epoch int32, acks ...[3]int64) *kmsg.ShareAcknowledgeResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &c.group, &c.member, epoch
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, a := range acks {
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: a[0], LastOffset: a[1], AcknowledgeTypes: []int8{int8(a[2])}})
	}
	req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: c.topic, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{rp}}}
	raw, err := c.send(ctx, req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode == 0 && epoch > 0 {
		c.epoch++
	}
	return resp
}

// acquired lists a ShareFetch's acquired runs as "first-last/count".
// fetchParts is a ShareFetch (MaxWait 200 ms, at most 100 records) of the session's partitions
// 0..n-1 of its topic: what it acquired, by partition.
func (c *shareClient) fetchParts(ctx context.Context, n int32) map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	c.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &c.group, &c.member, c.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 200, 1, 1<<20, 100, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = c.topic
	for p := range n {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ShareFetchRequestTopic{rt}
	raw, err := c.send(ctx, req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 {
		c.t.Fatalf("fetch: %+v", resp)
	}
	c.epoch++
	got := map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got[p.Partition] = append(got[p.Partition], p.AcquiredRecords...)
		}
	}
	return got
}

func acquired(resp *kmsg.ShareFetchResponse) string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				out = append(out, fmt.Sprintf("%d-%d/%d", a.FirstOffset, a.LastOffset, a.DeliveryCount))
			}
		}
	}
	return strings.Join(out, " ")
}

func shareCodes(resp *kmsg.ShareFetchResponse) (code, ack int16) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p.ErrorCode, p.AcknowledgeErrorCode
		}
	}
	return 0, 0
}

// TestShareFetchProtocol drives share groups with raw requests: sessions and their errors,
// acquisition and acknowledgement (accept, release, a record another member holds), lock expiry,
// a session closed (its records given back without counting the delivery), and a restart that
// keeps what was accepted.
func TestShareFetchProtocol(t *testing.T) {
	dir := t.TempDir()
	b := startBrokerConfig(t, dir, "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.ShareGroups = share.Config{LockDuration: time.Second}
	})
	b.createTopic("q", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("q"))
	topicID := topicIDOf(t, ctx, cl, "q")
	a := &shareClient{t: t, cl: cl, group: "sq", member: "member-a", topic: topicID}
	bm := &shareClient{t: t, cl: cl, group: "sq", member: "member-b", topic: topicID}
	if r := a.heartbeat(ctx, 0, []string{"q"}); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %+v", r)
	}
	if r := bm.heartbeat(ctx, 0, []string{"q"}); r.ErrorCode != 0 {
		t.Fatalf("join b: %+v", r)
	}
	// Session errors.
	if r := a.fetch(ctx, 0, [3]int64{0, 0, 1}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acknowledgements at epoch 0: error %d; want INVALID_REQUEST", r.ErrorCode)
	}
	if r := a.ack(ctx, 0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge at epoch 0: error %d; want INVALID_SHARE_SESSION_EPOCH", r.ErrorCode)
	}
	c := &shareClient{t: t, cl: cl, group: "sq", member: "nobody", topic: topicID, epoch: 3}
	if r := c.fetch(ctx, 0); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("a fetch in no session: error %d; want SHARE_SESSION_NOT_FOUND", r.ErrorCode)
	}
	// A opens its session (the share-partition starts at the end: empty), then records come.
	if r := a.fetch(ctx, 0); r.ErrorCode != 0 || acquired(r) != "" {
		t.Fatalf("first fetch: %+v", r)
	}
	a.epoch = 7
	if r := a.fetch(ctx, 0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("a fetch at the wrong epoch: error %d; want INVALID_SHARE_SESSION_EPOCH", r.ErrorCode)
	}
	a.epoch = 1
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r := a.fetch(ctx, time.Second)
	if got := acquired(r); got != "0-9/1" || len(r.Topics[0].Partitions[0].Records) == 0 {
		t.Fatalf("A's fetch acquired %q (%d bytes); want 0-9/1", got, len(r.Topics[0].Partitions[0].Records))
	}
	// B holds nothing: its acknowledgement of A's records is refused, and it gets nothing.
	if r := bm.fetch(ctx, 0); acquired(r) != "" {
		t.Fatalf("B's first fetch acquired %q; want nothing (A holds 0-9)", acquired(r))
	}
	if r := bm.ack(ctx, bm.epoch, [3]int64{0, 4, 1}); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("B acknowledging A's records: %+v; want INVALID_RECORD_STATE", r.Topics[0].Partitions[0])
	}
	// A accepts 0-4 and releases 5-9: B gets 5-9, second delivery.
	if r := a.ack(ctx, a.epoch, [3]int64{0, 4, 1}, [3]int64{5, 9, 2}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("A's acknowledgements: %+v", r)
	}
	if r := bm.fetch(ctx, time.Second); acquired(r) != "5-9/2" {
		t.Fatalf("B's fetch after the release acquired %q; want 5-9/2", acquired(r))
	}
	// B's lock expires (1 s): A gets them again, third delivery.
	if r := a.fetch(ctx, 3*time.Second); acquired(r) != "5-9/3" {
		t.Fatalf("A's fetch after B's lock expired acquired %q; want 5-9/3", acquired(r))
	}
	// A closes its session: its records come back, the delivery counted (Kafka's rule since KAFKA-19972, with
	// throttled delivery: the fourth delivery of 5 takes up to half a fetch).
	if r := a.ack(ctx, -1); r.ErrorCode != 0 {
		t.Fatalf("closing A's session: error %d", r.ErrorCode)
	}
	if r := bm.fetch(ctx, time.Second); acquired(r) != "5-9/4" {
		t.Fatalf("B's fetch after A left acquired %q; want 5-9/4", acquired(r))
	}
	// B accepts 5-6 through a piggybacked acknowledgement; a restart keeps what was accepted.
	if r := bm.fetch(ctx, 0, [3]int64{5, 6, 1}); func() int16 { _, ack := shareCodes(r); return ack }() != 0 {
		t.Fatalf("B's piggybacked acknowledgement: %+v", r)
	}
	// A request naming the partition twice is one acknowledgement: here overlapping, so refused,
	// and answered once.
	dup := kmsg.NewPtrShareAcknowledgeRequest()
	dup.GroupID, dup.MemberID, dup.ShareSessionEpoch = &bm.group, &bm.member, bm.epoch
	entry := kmsg.ShareAcknowledgeRequestTopicPartition{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 7, LastOffset: 7, AcknowledgeTypes: []int8{1}}}}
	dup.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{entry, entry}}}
	if raw, err := bm.send(ctx, dup); err != nil {
		t.Fatal(err)
	} else if r := raw.(*kmsg.ShareAcknowledgeResponse); r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 ||
		r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("a partition named twice with one offset: %+v; want one INVALID_RECORD_STATE answer", r)
	}
	bm.epoch++
	b = b.restart()
	cl2 := b.client()
	d := &shareClient{t: t, cl: cl2, group: "sq", member: "member-d", topic: topicID}
	if r := d.heartbeat(ctx, 0, []string{"q"}); r.ErrorCode != 0 {
		t.Fatalf("join after restart: %+v", r)
	}
	r = d.fetch(ctx, 2*time.Second)
	for code, _ := shareCodes(r); code == kerr.NotLeaderForPartition.Code && ctx.Err() == nil; code, _ = shareCodes(r) {
		time.Sleep(50 * time.Millisecond) // the restarted node takes its leadership back
		r = d.fetch(ctx, 2*time.Second)
	}
	// B's fourth delivery was in flight: counted. The fifth is the last, so each record comes
	// alone (throttled delivery), and nothing of 0-6, which were accepted.
	for _, want := range []string{"7-7/5", "8-8/5", "9-9/5"} {
		if got := acquired(r); got != want {
			t.Fatalf("after a restart the fetch acquired %q (%+v); want %s", got, r, want)
		}
		r = d.fetch(ctx, 2*time.Second)
	}
}

// topicIDOf looks a topic's id up.
func topicIDOf(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	return resp.Topics[0].TopicID
}

// TestShareGroupCluster: on three nodes, a share-partition's state is written to the group's
// coordinator (another node, or the same) and survives its leader's loss: the new leader offers
// again what was in flight (its delivery counted) and never what was accepted.
func TestShareGroupCluster(t *testing.T) {
	c := startClusterWith(t, 3, func(*testCluster) {})
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, adm := c.client(kgo.DefaultProduceTopic("cq"))
	if r, err := adm.CreateTopic(ctx, 1, 3, nil, "cq"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	c.waitTopicEverywhere(ctx, cl, "cq")
	topicID := topicIDOf(t, ctx, cl, "cq")
	leader := leaderOf(t, c.brokers(), "cq", 0)
	a := &shareClient{t: t, cl: cl, group: "cg", member: "member-a", topic: topicID, leader: leader}
	if r := a.heartbeat(ctx, 0, []string{"cq"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	if r := a.fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("opening the session: %+v", r)
	}
	// The share-partition starts at the end (latest) once its leader has loaded it: until its
	// start is stored, records produced could fall before it.
	for shareStart(t, ctx, cl, "cg", "cq") < 0 {
		if r := a.fetch(ctx, 100*time.Millisecond); r.ErrorCode != 0 {
			t.Fatalf("fetch while the share-partition loads: %+v", r)
		}
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if r := a.fetch(ctx, 2*time.Second); acquired(r) != "0-9/1" {
		t.Fatalf("fetch from leader %d acquired %q; want 0-9/1", leader, acquired(r))
	}
	if r := a.ack(ctx, a.epoch, [3]int64{0, 4, 1}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accepting 0-4: %+v", r)
	}
	c.stop(leader)
	var next int32
	for next = leaderOf(t, c.brokers(), "cq", 0); next == leader; next = leaderOf(t, c.brokers(), "cq", 0) {
		time.Sleep(100 * time.Millisecond)
	}
	b := &shareClient{t: t, cl: cl, group: "cg", member: "member-b", topic: topicID, leader: next}
	if r := b.heartbeat(ctx, 0, []string{"cq"}); r.ErrorCode != 0 {
		t.Fatalf("join b: %+v", r)
	}
	var got string
	for got == "" && ctx.Err() == nil {
		r := b.fetch(ctx, time.Second)
		if code, _ := shareCodes(r); r.ErrorCode != 0 || code != 0 {
			if b.epoch == 0 || code == kerr.NotLeaderForPartition.Code || code == kerr.CoordinatorNotAvailable.Code || code == kerr.LeaderNotAvailable.Code {
				time.Sleep(100 * time.Millisecond) // the new leader or the coordinator settles
				continue
			}
			t.Fatalf("fetch from the new leader %d: %+v", next, r)
		}
		got = acquired(r)
	}
	if got != "5-9/2" {
		t.Fatalf("the new leader %d offered %q; want 5-9/2 (in flight at the old leader's loss, counted; 0-4 accepted)", next, got)
	}
}

// objectShareCluster starts three nodes on an object store with a 1-partition object topic
// known to all of them, and returns a client producing to it, the topic's id, the node that
// owns its share-partitions and a function producing records "r<from>".."r<to-1>". ctx ends
// in two minutes.
func objectShareCluster(t *testing.T, topic string) (*testCluster, context.Context, *kgo.Client, [16]byte, int32, func(from, to int)) {
	t.Helper()
	dir := t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) { c.objectStore, c.batchTimeout = "file://"+dir, 5*time.Millisecond })
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	createObjectTopic(t, c.addrs[1], topic, 1, nil)
	cl, _ := c.client(kgo.DefaultProduceTopic(topic))
	c.waitTopicEverywhere(ctx, cl, topic)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c, ctx, cl, topicIDOf(t, ctx, cl, topic), leaderOf(t, c.brokers(), topic, 0), produce
}

// TestShareGroupOnObjectTopicCluster: an object partition's share-partition is kept by the
// node Metadata names its leader (docs/share-groups.md §9), and any other node serves it by
// forwarding acquisitions, acknowledgements and a closing session's release there. When the
// owner stops, the next one Metadata names takes the state from the group's coordinator
// (what was accepted stays accepted, what was in flight comes back with its delivery
// counted), and when the first one returns and is named again it goes on from its
// successor's state.
func TestShareGroupOnObjectTopicCluster(t *testing.T) {
	c, ctx, cl, topicID, owner, produce := objectShareCluster(t, "oq")
	other := owner%3 + 1
	// member joins and opens a share session on node.
	member := func(node int32, name string) *shareClient {
		m := &shareClient{t: t, cl: cl, group: "og", member: name, topic: topicID, leader: node}
		if r := m.heartbeat(ctx, 0, []string{"oq"}); r.ErrorCode != 0 {
			t.Fatalf("join %s: %+v", name, r)
		}
		return m
	}
	// fetch fetches as m until it acquires something; a node settling is waited for.
	fetch := func(m *shareClient) string {
		for ctx.Err() == nil {
			r := m.fetch(ctx, time.Second)
			if code, _ := shareCodes(r); r.ErrorCode != 0 || code != 0 {
				if m.epoch == 0 || code == kerr.NotLeaderForPartition.Code || code == kerr.CoordinatorNotAvailable.Code || code == kerr.LeaderNotAvailable.Code {
					time.Sleep(100 * time.Millisecond) // the owner or the coordinator settles
					continue
				}
				t.Fatalf("%s's fetch from node %d: %+v", m.member, m.leader, r)
			}
			if got := acquired(r); got != "" {
				return got
			}
		}
		t.Fatalf("%s acquired nothing from node %d", m.member, m.leader)
		return ""
	}
	accept := func(m *shareClient, first, last int64) {
		if r := m.ack(ctx, m.epoch, [3]int64{first, last, 1}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("%s accepting %d-%d on node %d: %+v", m.member, first, last, m.leader, r)
		}
	}

	// Through a node that does not own the share-partition.
	a := member(other, "member-a")
	if r := a.fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("opening the session on node %d: %+v", other, r)
	}
	for shareStart(t, ctx, cl, "og", "oq") < 0 { // the owner loads it, asked through node other
		if r := a.fetch(ctx, 100*time.Millisecond); r.ErrorCode != 0 {
			t.Fatalf("fetch while the share-partition loads: %+v", r)
		}
	}
	produce(0, 10)
	if got := fetch(a); got != "0-9/1" {
		t.Fatalf("fetch through node %d acquired %q; want 0-9/1", other, got)
	}
	accept(a, 0, 4)
	// Closing the session on node other releases 5-9 on the owner at once (the lock is 30 s).
	a.epoch = -1
	if r := a.fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("closing the session: %+v", r)
	}
	b := member(owner, "member-b")
	released := time.Now()
	if got := fetch(b); got != "5-9/2" || time.Since(released) > 10*time.Second {
		t.Fatalf("the owner %d offered %q %v after the release; want 5-9/2 (0-4 accepted) before the 30 s lock ends", owner, got, time.Since(released))
	}
	accept(b, 5, 9)
	produce(10, 20)
	if got := fetch(b); got != "10-19/1" {
		t.Fatalf("the owner %d offered %q; want 10-19/1", owner, got)
	}
	accept(b, 10, 14)

	c.stop(owner)
	var next int32
	for next = leaderOf(t, c.brokers(), "oq", 0); next == owner; next = leaderOf(t, c.brokers(), "oq", 0) {
		time.Sleep(100 * time.Millisecond)
	}
	via := 6 - owner - next // the live node that does not own it now
	m := member(via, "member-c")
	if got := fetch(m); got != "15-19/2" {
		t.Fatalf("node %d offered %q from the next owner %d; want 15-19/2 (in flight at the owner's loss, counted)", via, got, next)
	}
	accept(m, 15, 19)
	produce(20, 30)

	c.start(owner)
	for back := int32(0); back != owner; back = leaderOf(t, c.brokers(), "oq", 0) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := fetch(member(owner, "member-d")); got != "20-29/1" {
		t.Fatalf("the returning owner %d offered %q; want 20-29/1 (0-19 accepted on two owners)", owner, got)
	}
}

// TestShareOwnerKeepsStateAcrossNodeChanges: a node leaving and joining again moves the owner
// epoch of every object share-partition (the image's LiveIndex) without changing the owner of
// one the node did not own. That owner keeps its state into the new epochs (docs/share-groups.md
// §9): what a member holds stays its own and is acknowledged after both changes, with nothing
// delivered again and no delivery counted twice. It used to drop the state and load it again,
// releasing what was in flight.
func TestShareOwnerKeepsStateAcrossNodeChanges(t *testing.T) {
	c, ctx, cl, topicID, owner, produce := objectShareCluster(t, "kq")
	gone := owner%3 + 1
	third := 6 - owner - gone
	// seenBy waits until node's own Metadata names n brokers and still names owner the
	// partition's leader: its image has the live nodes' change.
	seenBy := func(node int32, n int) {
		t.Helper()
		eventually(t, fmt.Sprintf("node %d's Metadata with %d brokers", node, n), 30*time.Second, func() bool {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("kq")
			req.Topics = []kmsg.MetadataRequestTopic{rt}
			raw, err := cl.Broker(int(node)).Request(ctx, req)
			if err != nil {
				return false
			}
			md := raw.(*kmsg.MetadataResponse)
			if len(md.Brokers) != n || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 {
				return false
			}
			if leader := md.Topics[0].Partitions[0].Leader; leader != owner {
				t.Fatalf("node %d names node %d the owner after the live nodes changed; want %d still (rendezvous hashing)", node, leader, owner)
			}
			return true
		})
	}
	epochs := map[*shareClient]int32{} // member epochs
	// beat heartbeats as m (joining at epoch 0): the members stay in the group through the
	// nodes' stops and starts, whatever they take.
	beat := func(m *shareClient) {
		t.Helper()
		r := m.heartbeat(ctx, epochs[m], []string{"kq"})
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: %+v", m.member, r)
		}
		epochs[m] = r.MemberEpoch
	}
	join := func(name string, node int32) *shareClient {
		m := &shareClient{t: t, cl: cl, group: "kg", member: name, topic: topicID, leader: node}
		beat(m)
		return m
	}
	accept := func(m *shareClient, first, last int64) {
		t.Helper()
		r := m.ack(ctx, m.epoch, [3]int64{first, last, 1})
		if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("%s accepting %d-%d through node %d: %+v", m.member, first, last, m.leader, r)
		}
	}

	a := join("member-a", owner)
	if r := a.fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("opening the session: %+v", r)
	}
	for shareStart(t, ctx, cl, "kg", "kq") < 0 {
		if r := a.fetch(ctx, 100*time.Millisecond); r.ErrorCode != 0 {
			t.Fatalf("fetch while the share-partition loads: %+v", r)
		}
	}
	produce(0, 10)
	if got := acquiredWithin(ctx, a, 10*time.Second); got != "0-9/1" {
		t.Fatalf("member-a acquired %q; want 0-9/1", got)
	}
	accept(a, 0, 4)

	c.stop(gone)
	seenBy(owner, 2)
	beat(a)
	accept(a, 5, 9) // held across the change
	b := join("member-b", third)
	produce(10, 20)
	if got := acquiredWithin(ctx, b, 10*time.Second); got != "10-19/1" {
		t.Fatalf("member-b acquired %q through node %d after node %d left; want 10-19/1 (0-9 accepted, nothing delivered twice)", got, third, gone)
	}

	c.start(gone)
	seenBy(owner, 3)
	seenBy(third, 3)
	beat(a)
	beat(b)
	accept(b, 10, 19) // forwarded to the owner, held across the second change
	produce(20, 25)
	if got := acquiredWithin(ctx, a, 10*time.Second); got != "20-24/1" {
		t.Fatalf("member-a acquired %q after node %d returned; want 20-24/1", got, gone)
	}
}

// TestShareSessionEndReleasesItsOwnPartitions: a member with a session on the owner of two
// object share-partitions, reading one there and the other through a session on another node,
// keeps what it holds through the first when the second ends: a session's end releases the
// partitions it acquired from, as Kafka's does, not everything the member holds on the owner.
func TestShareSessionEndReleasesItsOwnPartitions(t *testing.T) {
	dir := t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) { c.objectStore, c.batchTimeout = "file://"+dir, 5*time.Millisecond })
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, _ := c.client()
	createObjectTopic(t, c.addrs[1], "sq-0", 1, nil)
	c.waitTopicEverywhere(ctx, cl, "sq-0")
	owner := leaderOf(t, c.brokers(), "sq-0", 0)
	other := owner%3 + 1
	// A second topic kept by the same node (made again until it is).
	second := ""
	for i := 1; second == ""; i++ {
		if i == 20 {
			t.Fatalf("none of 19 topics is kept by node %d", owner)
		}
		name := fmt.Sprintf("sq-%d", i)
		createObjectTopic(t, c.addrs[1], name, 1, nil)
		c.waitTopicEverywhere(ctx, cl, name)
		if leaderOf(t, c.brokers(), name, 0) == owner {
			second = name
		}
	}
	for _, topic := range []string{"sq-0", second} {
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Both share-partitions start at the earliest offset.
	setGroupConfigs(t, ctx, cl, "sg", map[string]string{"share.auto.offset.reset": "earliest"})
	direct := &shareClient{t: t, cl: cl, group: "sg", member: "m", topic: topicIDOf(t, ctx, cl, second), leader: owner}
	if r := direct.heartbeat(ctx, 0, []string{"sq-0", second}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	forwarded := &shareClient{t: t, cl: cl, group: "sg", member: "m", topic: topicIDOf(t, ctx, cl, "sq-0"), leader: other}
	for _, m := range []*shareClient{direct, forwarded} {
		got := ""
		for got == "" && ctx.Err() == nil {
			got = acquired(m.fetch(ctx, 500*time.Millisecond))
		}
		if got != "0-4/1" {
			t.Fatalf("fetch through node %d acquired %q; want 0-4/1", m.leader, got)
		}
	}
	forwarded.epoch = -1
	if r := forwarded.fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("closing the session on node %d: %+v", other, r)
	}
	if r := direct.ack(ctx, direct.epoch, [3]int64{0, 4, 1}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accepting on node %d what the member holds through its session there, after its session on node %d ended: %+v", owner, other, r)
	}
	// What the ended session held is released: another member gets it at once.
	n := &shareClient{t: t, cl: cl, group: "sg", member: "n", topic: forwarded.topic, leader: owner}
	if r := n.heartbeat(ctx, 0, []string{"sq-0", second}); r.ErrorCode != 0 {
		t.Fatalf("join n: %+v", r)
	}
	got := ""
	for deadline := time.Now().Add(10 * time.Second); got == "" && time.Now().Before(deadline); {
		got = acquired(n.fetch(ctx, 500*time.Millisecond))
	}
	if got != "0-4/2" {
		t.Fatalf("another member acquired %q of sq-0; want 0-4/2 (released by the ended session)", got)
	}

	// One member, two sessions on the two other nodes, both forwarding to the owner for the
	// same partition (a zone's leader moved): the first one's end leaves the second's records.
	third := 6 - owner - other
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sq-0", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var sessions []*shareClient
	for i, node := range []int32{other, third} {
		produce(5+5*i, 10+5*i)
		m := &shareClient{t: t, cl: cl, group: "sg", member: "m", topic: forwarded.topic, leader: node}
		got := ""
		for got == "" && ctx.Err() == nil {
			got = acquired(m.fetch(ctx, 500*time.Millisecond))
		}
		if want := fmt.Sprintf("%d-%d/1", 5+5*i, 9+5*i); got != want {
			t.Fatalf("session on node %d acquired %q; want %s", node, got, want)
		}
		sessions = append(sessions, m)
	}
	sessions[0].epoch = -1
	if r := sessions[0].fetch(ctx, 0); r.ErrorCode != 0 {
		t.Fatalf("closing the session on node %d: %+v", other, r)
	}
	got = "" // the release is under way once another member gets what it released
	for deadline := time.Now().Add(10 * time.Second); got == "" && time.Now().Before(deadline); {
		got = acquired(n.fetch(ctx, 500*time.Millisecond))
	}
	if got != "5-9/2" {
		t.Fatalf("another member acquired %q of sq-0; want 5-9/2 (released by the first session's end; 10-14 still the second's)", got)
	}
	if r := sessions[1].ack(ctx, sessions[1].epoch, [3]int64{10, 14, 1}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accepting through node %d what the member holds through its session there, after its session on node %d ended: %+v", third, other, r)
	}
}

// TestShareGroupOnObjectTopicReadCommitted: a share group on an object topic with
// share.auto.offset.reset=earliest starts at the partition's start in the image, and with
// share.isolation.level=read_committed it gets no aborted transaction's records (archived from
// the image's aborted list) and nothing from an open transaction on (the image's last stable
// offset), as on a local topic (TestGroupConfigs).
func TestShareGroupOnObjectTopicReadCommitted(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.ObjectBatchTimeout = 5 * time.Millisecond
	})
	createObjectTopic(t, b.addr, "oq", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("oq"))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	setGroupConfigs(t, ctx, cl, "g", map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
	writeShareTxns(t, ctx, b.addr, "oq")
	m := &shareClient{t: t, cl: cl, group: "g", member: "m", topic: topicIDOf(t, ctx, cl, "oq")}
	if r := m.heartbeat(ctx, 0, []string{"oq"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	if s := acquiredWithin(ctx, m, 3*time.Second); s != "0-9/1 12-14/1" {
		t.Fatalf("read_committed acquired %q; want 0-9/1 12-14/1 (10-11 aborted, 15 on open, markers acquired for the client to skip)", s)
	}
}

// TestShareGroupOffsetsAdmin: AlterShareGroupOffsets sets where an empty share group starts,
// DescribeShareGroupOffsets shows the start and the lag as the group moves, an alteration is
// refused while a member is in, and once the group is empty again a reset takes effect on the
// leader that held the older state.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("ao", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("ao"))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	alter := func(start int64) int16 {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "ag"
		req.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "ao", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: start}}}}
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			switch resp.ErrorCode {
			case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
				time.Sleep(50 * time.Millisecond) // the offsets topic's first coordinator loads
				continue
			}
			if resp.ErrorCode == 0 && resp.Topics[0].Partitions[0].ErrorCode != 0 {
				return resp.Topics[0].Partitions[0].ErrorCode
			}
			return resp.ErrorCode
		}
	}
	describe := func() (start, lag int64) {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "ag"}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.StartOffset, p.Lag
	}
	if code := alter(5); code != 0 {
		t.Fatalf("alter to 5: error %d", code)
	}
	if start, lag := describe(); start != 5 || lag != 15 {
		t.Fatalf("after the alteration: start %d lag %d; want 5, 15", start, lag)
	}
	m := &shareClient{t: t, cl: cl, group: "ag", member: "member-m", topic: topicIDOf(t, ctx, cl, "ao")}
	if r := m.heartbeat(ctx, 0, []string{"ao"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	if r := m.fetch(ctx, time.Second); acquired(r) != "5-19/1" {
		t.Fatalf("first fetch acquired %q; want 5-19/1", acquired(r))
	}
	if r := m.ack(ctx, m.epoch, [3]int64{5, 9, 1}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accept: %+v", r)
	}
	// The start moves once the acceptance is persisted; it is stored with the next write.
	for start, lag := describe(); start != 10 || lag != 10; start, lag = describe() {
		if start != 5 || lag != 10 || ctx.Err() != nil {
			t.Fatalf("after accepting 5-9: start %d lag %d; want 10, 10 (or 5, 10 for a moment)", start, lag)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := alter(0); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: error %d; want NON_EMPTY_GROUP", code)
	}
	if r := m.ack(ctx, -1); r.ErrorCode != 0 {
		t.Fatalf("closing the session: %d", r.ErrorCode)
	}
	if r := m.heartbeat(ctx, -1, nil); r.ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	if code := alter(0); code != 0 {
		t.Fatalf("alter to 0 once empty: error %d", code)
	}
	n := &shareClient{t: t, cl: cl, group: "ag", member: "member-n", topic: m.topic}
	if r := n.heartbeat(ctx, 0, []string{"ao"}); r.ErrorCode != 0 {
		t.Fatalf("join n: %+v", r)
	}
	if r := n.fetch(ctx, time.Second); acquired(r) != "0-19/1" {
		t.Fatalf("after the reset the fetch acquired %q; want 0-19/1 (the leader loads the new start)", acquired(r))
	}
}

// shareStart is partition 0's start offset a share group's coordinator has stored (-1: none).
func shareStart(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: group, Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
		return -1 // the coordinator moving
	}
	return resp.Groups[0].Topics[0].Partitions[0].StartOffset
}

// TestShareFetchV2: ShareFetch and ShareAcknowledge v2. record_limit (KIP-1206) acquires
// exactly MaxRecords records of a larger log batch, the rest at the next fetch; an unknown mode
// is INVALID_REQUEST. RENEW (KIP-1222) keeps a record locked past its lock duration for its
// holder; a renewing ShareFetch must ask for nothing, and RENEW outside one is refused.
func TestShareFetchV2(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.ShareGroups = share.Config{LockDuration: time.Second}
	})
	b.createTopic("v2", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("v2"))
	topicID := topicIDOf(t, ctx, cl, "v2")
	a := &shareClient{t: t, cl: cl, group: "g2", member: "a", topic: topicID}
	o := &shareClient{t: t, cl: cl, group: "g2", member: "o", topic: topicID}
	for _, c := range []*shareClient{a, o} {
		if r := c.heartbeat(ctx, 0, []string{"v2"}); r.ErrorCode != 0 {
			t.Fatalf("join %s: %+v", c.member, r)
		}
		c.fetch(ctx, 0) // opens the session; the share-partition starts at the end
	}
	recs := make([]*kgo.Record, 10) // one log batch of 10
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte{byte(i)}}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v2 := func(c *shareClient, mode int8, maxRecords int32, renew bool, acks ...[3]int64) *kmsg.ShareFetchResponse {
		t.Helper()
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.ShareAcquireMode, req.IsRenewAck = 2, mode, renew
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &c.group, &c.member, c.epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 500, 1, 1<<20, maxRecords, maxRecords
		if renew { // KIP-1222: a renewal asks for nothing
			req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 0, 0, 0, 0
		}
		rp := kmsg.NewShareFetchRequestTopicPartition()
		for _, x := range acks {
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: x[0], LastOffset: x[1], AcknowledgeTypes: []int8{int8(x[2])}})
		}
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: c.topic, Partitions: []kmsg.ShareFetchRequestTopicPartition{rp}}}
		if renew && maxRecords > 0 { // a malformed renewal: it asks for records
			req.MaxRecords = maxRecords
		}
		raw, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := raw.(*kmsg.ShareFetchResponse)
		if resp.ErrorCode == 0 {
			c.epoch++
		}
		return resp
	}
	if r := v2(a, 5, 3, false); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("an unknown acquire mode: error %d; want INVALID_REQUEST", r.ErrorCode)
	}
	var got string
	for got == "" && ctx.Err() == nil {
		got = acquired(v2(a, 1, 3, false))
	}
	if got != "0-2/1" {
		t.Fatalf("record_limit of 3 from a batch of 10: %q; want 0-2/1", got)
	}
	if got := acquired(v2(o, 1, 4, false)); got != "3-6/1" {
		t.Fatalf("the next record_limit fetch of 4: %q; want 3-6/1", got)
	}
	// A renewing fetch asks for nothing; RENEW (4) is refused outside one.
	if r := v2(a, 0, 5, true, [3]int64{0, 2, 4}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a renewing fetch asking for records: error %d; want INVALID_REQUEST", r.ErrorCode)
	}
	if r := a.ack(ctx, a.epoch, [3]int64{0, 0, 4}); r.ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge: %+v", r)
	} else if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("RENEW without IsRenewAck: partition error %d; want INVALID_REQUEST", code)
	}
	// a renews 0-2 twice over 1.5 s (its lock is 1 s); o, fetching meanwhile, never gets them.
	for range 3 {
		time.Sleep(500 * time.Millisecond)
		r := v2(a, 0, 0, true, [3]int64{0, 2, 4})
		if r.ErrorCode != 0 || r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 || acquired(r) != "" {
			t.Fatalf("renewal: %+v", r)
		}
	}
	if got := acquired(v2(o, 0, 10, false)); strings.Contains(got, "0-") {
		t.Fatalf("o fetched %q while a renewed 0-2; want them still a's", got)
	}
	// Without renewals the lock runs out and the records go to o.
	time.Sleep(1500 * time.Millisecond)
	got = ""
	for !strings.Contains(got, "0-2/2") && ctx.Err() == nil {
		got += " " + acquired(v2(o, 0, 10, false))
	}
}

// TestJava43ShareConsumer: Kafka 4.3.1's share consumer over ShareFetch v2: in record_limit mode
// (share.acquire.mode) no poll returns more than max.poll.records, and AcknowledgeType.RENEW
// keeps a record it works on for longer than its lock (1 s here: three renewals 400 ms apart)
// from being delivered again; every record is accepted once, with delivery count 1.
func TestJava43ShareConsumer(t *testing.T) {
	java := testclients.Java43(t)
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.ShareGroups = share.Config{LockDuration: time.Second}
	})
	b.createTopic("j43", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("j43"))
	// The group reads from the start: the records need not wait for its first fetch.
	cfg := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "j43g"
	earliest := "earliest"
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: &earliest}}
	cfg.Resources = append(cfg.Resources, rr)
	if resp, err := cfg.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting share.auto.offset.reset: %v %+v", err, resp)
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "v/%d", i)})
	}
	recs = append(recs, &kgo.Record{Value: []byte("slow/a")}, &kgo.Record{Value: []byte("slow/b")})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := startJavaProcess(t, func(stop string) []string {
		return append(slices.Clone(java), b.addr, "j43", "j43g", "record_limit", "3", "3", stop)
	})
	accepted := func(lines []string) int {
		n := 0
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 6 && f[0] == "rec" && (strings.HasPrefix(f[3], "v/") || f[5] == "3") {
				n++
			}
		}
		return n
	}
	for accepted(m.output()) < 12 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a redelivery after a lock ran out would show now
	lines := m.stop()
	seen := map[string][]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "poll":
			if n, _ := strconv.Atoi(f[1]); n > 3 {
				t.Errorf("a poll of %d records; want at most max.poll.records=3 (record_limit)", n)
			}
		case len(f) == 6 && f[0] == "rec":
			seen[f[3]] = append(seen[f[3]], f[4]+"/"+f[5])
		case strings.HasPrefix(l, "error"):
			t.Errorf("Java share consumer: %s", l)
		}
	}
	for i := range 10 {
		if got := seen[fmt.Sprint("v/", i)]; !slices.Equal(got, []string{"1/0"}) {
			t.Errorf("v/%d given as %v; want once, delivery 1", i, got)
		}
	}
	for _, v := range []string{"slow/a", "slow/b"} {
		if got := seen[v]; !slices.Equal(got, []string{"1/0", "1/1", "1/2", "1/3"}) {
			t.Errorf("%s given as %v (delivery/renewals before); want delivery 1 each time, renewed 3 times, then accepted", v, got)
		}
	}
	if t.Failed() {
		t.Logf("Java output:\n%s", strings.Join(lines, "\n"))
	}
}

// shareTopic starts one node with topic (partitions of it) for share group tests: the node, a
// context ending with the test (at most a minute), a client producing to the topic (with
// opts), and the topic's id.
func shareTopic(t *testing.T, topic string, partitions int32, opts ...kgo.Opt) (*testBroker, context.Context, *kgo.Client, [16]byte) {
	t.Helper()
	return shareTopicOn(t, startBroker(t, t.TempDir(), "127.0.0.1:0"), topic, partitions, opts...)
}

// shareTopicOn is shareTopic on a node the caller started.
func shareTopicOn(t *testing.T, b *testBroker, topic string, partitions int32, opts ...kgo.Opt) (*testBroker, context.Context, *kgo.Client, [16]byte) {
	t.Helper()
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cl := b.client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
	return b, ctx, cl, topicIDOf(t, ctx, cl, topic)
}

// TestShareFetchWokenByRelease: a fetch waiting for records (MaxWait 10 s) while another member
// holds them all is answered as soon as that member releases them, not at MaxWait: the release
// wakes the fetches waiting on its share-partition.
func TestShareFetchWokenByRelease(t *testing.T) {
	b, ctx, cl, topicID := shareTopic(t, "wq", 1)
	// Two clients: a waiting fetch holds its connection.
	cl2 := b.client()
	a := &shareClient{t: t, cl: cl, group: "wg", member: "a", topic: topicID}
	w := &shareClient{t: t, cl: cl2, group: "wg", member: "w", topic: topicID}
	for _, c := range []*shareClient{a, w} {
		if r := c.heartbeat(ctx, 0, []string{"wq"}); r.ErrorCode != 0 {
			t.Fatalf("join %s: %+v", c.member, r)
		}
		c.fetch(ctx, 0)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got string
	for got == "" && ctx.Err() == nil {
		got = acquired(a.fetch(ctx, 200*time.Millisecond))
	}
	type answer struct {
		got  string
		took time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		start := time.Now()
		r := w.fetch(ctx, 10*time.Second)
		done <- answer{acquired(r), time.Since(start)}
	}()
	time.Sleep(300 * time.Millisecond)
	if r := a.ack(ctx, a.epoch, [3]int64{0, 0, 2}); r.ErrorCode != 0 {
		t.Fatalf("release: %+v", r)
	}
	ans := <-done
	if ans.got != "0-0/2" || ans.took > 5*time.Second {
		t.Fatalf("the waiting fetch got %q after %v; want 0-0/2 soon after the release, not at MaxWait", ans.got, ans.took)
	}
}

// TestShareFetchAbandonedTakesNothing: a member's fetch waiting for records whose connection
// closes (a client that gave up on it) acquires nothing when records arrive: nobody would read
// them, and they would sit locked (Kafka's lock is 30 s) with a delivery counted.
func TestShareFetchAbandonedTakesNothing(t *testing.T) {
	b, ctx, cl, topicID := shareTopic(t, "gone", 1)
	a := &shareClient{t: t, cl: cl, group: "gg", member: "a", topic: topicID}
	if r := a.heartbeat(ctx, 0, []string{"gone"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	a.fetch(ctx, 0) // the group's start is set: the record below is delivered

	// Member w's fetch, on a connection of its own, waits 20 s for records.
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("gg"), kmsg.StringPtr("w")
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 20000, 1, 1<<20, 500, 500
	rp := kmsg.NewShareFetchRequestTopicPartition()
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{rp}}}
	req.SetVersion(1)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("w")).AppendRequest(nil, req, 1)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // w's fetch is waiting
	nc.Close()
	time.Sleep(300 * time.Millisecond)

	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got string
	for got == "" && ctx.Err() == nil {
		got = acquired(a.fetch(ctx, 200*time.Millisecond))
	}
	if got != "0-0/1" {
		t.Fatalf("a got %q; want 0-0/1: the record's first delivery, not one after a fetch nobody read", got)
	}
}

// TestShareFetchRotatesPartitions: a member whose every fetch fills up from one partition still
// gets the records of its other partition, though it alternates ShareFetch and
// ShareAcknowledge (each moves the session's epoch: a rotation by epoch would start every fetch
// with the same partition).
func TestShareFetchRotatesPartitions(t *testing.T) {
	_, ctx, cl, topicID := shareTopic(t, "rot", 2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	m := &shareClient{t: t, cl: cl, group: "rg", member: "m", topic: topicID}
	if r := m.heartbeat(ctx, 0, []string{"rot"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	fetch := func() map[int32]int64 {
		got := map[int32]int64{}
		for p, runs := range m.fetchParts(ctx, 2) {
			for _, a := range runs {
				got[p] += a.LastOffset - a.FirstOffset + 1
			}
		}
		return got
	}
	fetch() // opens the session; the group starts at the log ends (both empty)
	// Each record its own batch: a fetch takes whole batches up to MaxRecords (100).
	for i := range 400 {
		for p := range int32(2) {
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(i))}, nil)
		}
		if i%50 == 49 {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[int32]int64{}
	for range 4 {
		for p, n := range fetch() {
			seen[p] += n
		}
		// A ShareAcknowledge between fetches (it acknowledges nothing: an empty batch list).
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.epoch
		raw, err := m.send(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp := raw.(*kmsg.ShareAcknowledgeResponse); resp.ErrorCode != 0 {
			t.Fatalf("ack: %+v", resp)
		}
		m.epoch++
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("four fetches acquired %v by partition: one partition was starved", seen)
	}
}

// TestShareAcknowledgeWritesTogether: a ShareAcknowledge of two partitions waits for one
// share-state write, not two in a row: the second partition's write reaches the group
// coordinator's log while the first one's fsync is under way. The node's file system holds
// each fsync of __consumer_offsets until two writes are in its log (up to 5 s); acknowledging
// the partitions one after another, the second write would only come after the first fsync.
// It counts the log's WriteAt calls, one per append today: a log that merged appends into one
// write would fail it with the code right.
func TestShareAcknowledgeWritesTogether(t *testing.T) {
	var armed, late atomic.Bool
	var writes atomic.Int32
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if !armed.Load() || !strings.Contains(path, broker.OffsetsTopic) {
			return nil
		}
		switch op {
		case vfs.OpWrite:
			if strings.HasSuffix(path, ".log") {
				writes.Add(1)
			}
		case vfs.OpSync, vfs.OpSyncFS:
			for deadline := time.Now().Add(5 * time.Second); writes.Load() < 2 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if writes.Load() < 2 {
				late.Store(true)
			}
		}
		return nil
	})
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.FS = vfs.NewErrorFS(vfs.Default, inj) })
	_, ctx, cl, topicID := shareTopicOn(t, b, "pair", 2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	m := &shareClient{t: t, cl: cl, group: "pg", member: "m", topic: topicID}
	if r := m.heartbeat(ctx, 0, []string{"pair"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	fetch := func() map[int32]string {
		got := map[int32]string{}
		for p, runs := range m.fetchParts(ctx, 2) {
			for _, a := range runs {
				got[p] += fmt.Sprintf("%d-%d/%d", a.FirstOffset, a.LastOffset, a.DeliveryCount)
			}
		}
		return got
	}
	fetch() // opens the session; the group starts at the log ends (both empty)
	for p := range int32(2) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int32]string{}
	for len(got) < 2 && ctx.Err() == nil {
		for p, a := range fetch() {
			got[p] += a
		}
	}
	if got[0] != "0-0/1" || got[1] != "0-0/1" {
		t.Fatalf("acquired %v; want offset 0 of both partitions", got)
	}

	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.member, m.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	for p := range int32(2) {
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = p
		rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{int8(share.Accept)}}}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ShareAcknowledgeRequestTopic{rt}
	armed.Store(true)
	start := time.Now()
	raw, err := m.send(ctx, req)
	armed.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ack: %+v", resp)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("ack of partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	if late.Load() {
		t.Fatalf("the second partition's share-state write came only after the first one's fsync (the acknowledgement took %v)", time.Since(start))
	}
}

// setGroupConfigs sets a group's configs (IncrementalAlterConfigs of resource GROUP).
func setGroupConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, group string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for name, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = name, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting group %s's configs: %v %+v", group, err, resp)
	}
}

// writeShareTxns appends to topic (whose offsets 0-9 are written) one aborted transaction
// (offsets 10-11, its marker 12), one committed (13, marker 14), one left open (15), and a
// record outside any transaction (16): what a read_committed share group must skip and stop at.
func writeShareTxns(t *testing.T, ctx context.Context, addr, topic string) {
	t.Helper()
	txn := func(id string, commit, end bool, vals ...string) {
		t.Helper()
		tc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close) // the open one stays open until the test ends
		if err := tc.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := tc.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end {
			if err := tc.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn("aborts", false, true, "a1", "a2")
	txn("commits", true, true, "c1")
	txn("stays-open", false, false, "o1")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// acquiredWithin fetches as m for d and lists the runs it acquired ("first-last/count", in order).
func acquiredWithin(ctx context.Context, m *shareClient, d time.Duration) string {
	var runs []string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if a := acquired(m.fetch(ctx, 200*time.Millisecond)); a != "" {
			runs = append(runs, a)
		}
	}
	return strings.Join(runs, " ")
}

// TestShareAcknowledgeOfUnfetchedPartition: an acknowledgement naming a share-partition its
// group has never fetched on this node is UNKNOWN_TOPIC_OR_PARTITION, as Kafka's
// SharePartitionManager answers one not in its cache, and initializes nothing: before, it set
// the share-partition's start ("latest": the end of that moment), so records written between
// it and the first fetch were delivered, where Kafka starts at the first fetch's end.
func TestShareAcknowledgeOfUnfetchedPartition(t *testing.T) {
	_, ctx, cl, topicID := shareTopic(t, "uq", 2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	a := &shareClient{t: t, cl: cl, group: "su", member: "member-a", topic: topicID}
	if r := a.heartbeat(ctx, 0, []string{"uq"}); r.ErrorCode != 0 {
		t.Fatalf("join: %+v", r)
	}
	produce := func(p int32, n int) {
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(1, 2)
	if r := a.fetch(ctx, 0); r.ErrorCode != 0 { // opens the session on partition 0 only
		t.Fatalf("first fetch: %+v", r)
	}
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &a.group, &a.member, a.epoch
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition = 1
	rp.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
	req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{rp}}}
	raw, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("acknowledging partition 1, never fetched: %+v; want its UNKNOWN_TOPIC_OR_PARTITION", resp)
	}
	a.epoch++
	produce(1, 2) // written after the acknowledgement, before partition 1's first fetch
	got := a.fetchParts(ctx, 2)
	if len(got[1]) != 0 {
		t.Fatalf("partition 1's first fetch acquired %+v; want nothing (latest: it starts at the end of its first fetch)", got[1])
	}
	produce(1, 1)
	deadline := time.Now().Add(5 * time.Second)
	for len(got[1]) == 0 && time.Now().Before(deadline) {
		got = a.fetchParts(ctx, 2)
	}
	if len(got[1]) != 1 || got[1][0].FirstOffset != 4 || got[1][0].LastOffset != 4 {
		t.Fatalf("after one more record: %+v; want offset 4 only", got[1])
	}
}
