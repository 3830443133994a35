package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runGroup runs `runnel group args... --brokers addr` in process and fails the test on an error.
func runGroup(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := runCommand("group", addr, args...)
	if err != nil {
		t.Fatalf("runnel group %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// produceValues produces values prefix/0 .. prefix/n-1 round robin over the topic's partitions.
func produceValues(t *testing.T, addr, topic, prefix string, n int) {
	t.Helper()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		p.Produce(context.Background(), &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s/%d", prefix, i)}, nil)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// consumeGroup reads n records as a member of group, commits them, leaves, and returns them.
// opts choose the protocol (kgo.ServerSideBalancer for KIP-848).
func consumeGroup(t *testing.T, addr, group, topic string, n int, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records", group, len(got), n)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	// A short poll: nothing more must come (each record exactly once).
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	cl.PollFetches(short).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	return got
}

type describedGroup struct {
	State    string `json:"state"`
	Protocol string `json:"protocol"`
	Members  []struct {
		ID       string   `json:"id"`
		Assigned []string `json:"assigned"`
	} `json:"members"`
	Partitions []struct {
		Partition int32  `json:"partition"`
		Committed int64  `json:"committed"`
		End       int64  `json:"end"`
		Lag       int64  `json:"lag"`
		Member    string `json:"member"`
	} `json:"partitions"`
}

func describeGroupJSON(t *testing.T, addr, group string) describedGroup {
	t.Helper()
	var d describedGroup
	out := runGroup(t, addr, "describe", group, "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("group describe --json: %v\n%s", err, out)
	}
	return d
}

// TestGroupOffsetsSurviveRestart: a franz-go group consumer (classic, then KIP-848) commits what
// it read; after a broker restart a new member of the group continues exactly where it stopped.
// The group commands show the commits and the lag, reset the offsets, and delete the group.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic", nil},
		{"consumer", []kgo.Opt{kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) { groupOffsetsSurviveRestart(t, tc.opts...) })
	}
}

func groupOffsetsSurviveRestart(t *testing.T, opts ...kgo.Opt) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	const topic = "events"
	b.createTopic(topic, 4)
	produceValues(t, b.addr, topic, "first", 100)
	if got := consumeGroup(t, b.addr, "g", topic, 100, opts...); len(got) != 100 {
		t.Fatalf("first member read %d records; want 100", len(got))
	}
	d := describeGroupJSON(t, b.addr, "g")
	if d.State != "Empty" || len(d.Partitions) != 4 {
		t.Fatalf("group describe after the first member left: %+v; want Empty with 4 partitions", d)
	}
	for _, p := range d.Partitions {
		if p.Committed != 25 || p.Lag != 0 {
			t.Errorf("partition %d: committed %d lag %d; want 25, 0", p.Partition, p.Committed, p.Lag)
		}
	}

	b = b.restart()
	produceValues(t, b.addr, topic, "second", 40)
	got := consumeGroup(t, b.addr, "g", topic, 40, opts...)
	sort.Strings(got)
	if len(got) != 40 || !strings.HasPrefix(got[0], "second/") || !strings.HasPrefix(got[39], "second/") {
		t.Fatalf("after the restart the group read %d records (%v...); want exactly the 40 new ones", len(got), got[:min(3, len(got))])
	}

	if out := runGroup(t, b.addr, "list"); !strings.Contains(out, "g ") || !strings.Contains(out, "Empty") {
		t.Errorf("group list:\n%s\nwant g, Empty", out)
	}
	runGroup(t, b.addr, "reset-offsets", "g", "--topic", topic, "--to-earliest")
	for _, p := range describeGroupJSON(t, b.addr, "g").Partitions {
		if p.Committed != 0 || p.Lag != 35 {
			t.Errorf("after reset-offsets --to-earliest partition %d: committed %d lag %d; want 0, 35", p.Partition, p.Committed, p.Lag)
		}
	}
	if lag := sumSeries(scrape(t, b.s.AdminAddr()), "runnel_group_lag_records", `group="g"`); lag != 140 {
		t.Errorf("runnel_group_lag_records for g sums to %v; want 140 (35 on each of 4 partitions)", lag)
	}
	runGroup(t, b.addr, "delete", "g")
	if out := runGroup(t, b.addr, "list"); strings.Contains(out, "g ") {
		t.Errorf("group list after delete:\n%s", out)
	}
}

// TestConfluentKafkaGroupConsumer: librdkafka group consumers (confluent-kafka) take turns: the
// first reads and commits 120 of 200 records and leaves, the second continues from the commits;
// together they read every record exactly once.
func TestConfluentKafkaGroupConsumer(t *testing.T) {
	root := repoRoot(t)
	python := clientPython(t, root)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("rdk", 4)
	produceValues(t, b.addr, "rdk", "v", 200)
	script := filepath.Join(root, "test", "clients", "confluent_group.py")
	var outs []string
	for _, want := range []string{"120", "80"} {
		outs = append(outs, runClient(t, 90*time.Second, "", python, script, "--bootstrap", b.addr, "--topic", "rdk", "--group", "rdk-group", "--want", want))
	}
	valuesOnce(t, "confluent-kafka group consumers in turn", "v", 200, outs...)
}

// TestConsumerGroupSurvivesRestart: a KIP-848 member (franz-go, ServerSideBalancer) stays the
// same member across a broker restart: the group's state is in __consumer_offsets, so after the
// restart its heartbeats are accepted with its id and epoch, and the group epoch does not move
// (no rebalance).
func TestConsumerGroupSurvivesRestart(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("live", 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("live-g"), kgo.ConsumeTopics("live"), kgo.ServerSideBalancer())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	describe := func() (groupEpoch int32, member string, memberEpoch int32, owned int) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"live-g"}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return -1, "", -1, 0
		}
		g := resp.Groups[0]
		if len(g.Members) != 1 {
			return g.Epoch, "", -1, 0
		}
		m := g.Members[0]
		for _, tp := range m.Assignment.TopicPartitions {
			owned += len(tp.Partitions)
		}
		return g.Epoch, m.MemberID, m.MemberEpoch, owned
	}
	var epoch, memberEpoch int32
	var member string
	for owned := 0; owned != 4; {
		if ctx.Err() != nil {
			t.Fatal("the member never owned the 4 partitions")
		}
		time.Sleep(100 * time.Millisecond)
		epoch, member, memberEpoch, owned = describe()
	}
	b = b.restart()
	time.Sleep(6 * time.Second) // past a heartbeat interval (5 s): the member has heartbeated again
	e2, m2, me2, owned2 := describe()
	if e2 != epoch || m2 != member || me2 != memberEpoch || owned2 != 4 {
		t.Errorf("after the restart: group epoch %d, member %s epoch %d owning %d; before: %d, %s epoch %d owning 4",
			e2, m2, me2, owned2, epoch, member, memberEpoch)
	}
}

// TestStaticMembersRestartWithoutRebalance: two franz-go consumers with instance ids (KIP-345)
// restart in turn, one of them the group's leader; neither restart rebalances the group (the
// other member's partitions are never revoked), and each restarted member gets its partitions
// back. The leader's join (v9) is answered with SkipAssignment (KIP-814). Before, a restarted
// static leader rebalanced the group.
func TestStaticMembersRestartWithoutRebalance(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("st", 4)
	var mu sync.Mutex
	events := map[string][]string{}
	owned := map[string][]int32{}
	consumer := func(instance string) *kgo.Client {
		note := func(what string) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				events[instance] = append(events[instance], fmt.Sprintf("%s %v", what, m["st"]))
				if what == "assigned" {
					owned[instance] = append(owned[instance], m["st"]...)
				} else {
					owned[instance] = nil
				}
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("statics"), kgo.ConsumeTopics("st"),
			kgo.InstanceID(instance), kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(30*time.Second),
			kgo.OnPartitionsAssigned(note("assigned")), kgo.OnPartitionsRevoked(note("revoked")), kgo.OnPartitionsLost(note("lost")))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				if f := cl.PollFetches(context.Background()); f.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	ownedOf := func(instance string) []int32 {
		mu.Lock()
		defer mu.Unlock()
		o := slices.Clone(owned[instance])
		slices.Sort(o)
		return o
	}
	clients := map[string]*kgo.Client{"a": consumer("a")}
	eventually(t, "a owns the four partitions", 30*time.Second, func() bool { return len(ownedOf("a")) == 4 })
	clients["b"] = consumer("b")
	eventually(t, "a and b own two partitions each", 30*time.Second, func() bool { return len(ownedOf("a")) == 2 && len(ownedOf("b")) == 2 })
	time.Sleep(time.Second)
	for _, restarting := range []string{"a", "b"} {
		other := map[string]string{"a": "b", "b": "a"}[restarting]
		before, otherBefore := ownedOf(restarting), ownedOf(other)
		mu.Lock()
		events[other] = nil
		mu.Unlock()
		clients[restarting].Close() // a static member does not leave on close
		mu.Lock()
		owned[restarting] = nil
		mu.Unlock()
		clients[restarting] = consumer(restarting)
		eventually(t, restarting+" restarted owns its partitions again", 30*time.Second, func() bool { return slices.Equal(ownedOf(restarting), before) })
		time.Sleep(3 * time.Second) // a rebalance would revoke the other member's partitions by now
		mu.Lock()
		seen := slices.Clone(events[other])
		mu.Unlock()
		if len(seen) != 0 || !slices.Equal(ownedOf(other), otherBefore) {
			t.Errorf("%s restarted: %s saw %q, owns %v (owned %v); want no rebalance", restarting, other, seen, ownedOf(other), otherBefore)
		}
	}
	for _, cl := range clients {
		cl.Close()
	}
}

// TestGroupDescribeOfALiveConsumerGroup: `runnel group describe` of a KIP-848 group with a
// member shows the member, its partitions and the lag of each, from ConsumerGroupDescribe
// (DescribeGroups knows only classic groups, as Kafka's).
func TestGroupDescribeOfALiveConsumerGroup(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("live", 3)
	produceValues(t, b.addr, "live", "v", 30)
	cl := b.client(kgo.ConsumerGroup("live-g"), kgo.ConsumeTopics("live"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for n := 0; n < 30; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 30", n)
		}
		n += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	produceValues(t, b.addr, "live", "more", 6) // 2 more on each partition: lag 2
	d := describeGroupJSON(t, b.addr, "live-g")
	if d.State != "Stable" || d.Protocol != "consumer" || len(d.Members) != 1 || len(d.Members[0].Assigned) != 3 || len(d.Partitions) != 3 {
		t.Fatalf("group describe: %+v; want Stable, consumer, one member with 3 partitions", d)
	}
	for _, p := range d.Partitions {
		if p.Committed != 10 || p.End != 12 || p.Lag != 2 || p.Member != d.Members[0].ID {
			t.Errorf("partition %d: %+v; want committed 10, end 12, lag 2, member %s", p.Partition, p, d.Members[0].ID)
		}
	}
}

// TestConfluentKafkaDescribeGroups: librdkafka's AdminClient (confluent-kafka) describes a live
// classic group and a live KIP-848 group, each with its member and partitions. Like Kafka's
// admin client it asks ConsumerGroupDescribe and falls back to DescribeGroups on
// GROUP_ID_NOT_FOUND, which both must answer as Kafka's do for the other kind of group.
func TestConfluentKafkaDescribeGroups(t *testing.T) {
	root := repoRoot(t)
	python := clientPython(t, root)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("rdkd", 2)
	produceValues(t, b.addr, "rdkd", "v", 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, g := range []struct {
		id   string
		opts []kgo.Opt
	}{{"rdkd-classic", nil}, {"rdkd-consumer", []kgo.Opt{kgo.ServerSideBalancer()}}} {
		cl := b.client(append([]kgo.Opt{kgo.ConsumerGroup(g.id), kgo.ConsumeTopics("rdkd"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, g.opts...)...)
		for n := 0; n < 10; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s read %d of 10", g.id, n)
			}
			n += fs.NumRecords()
		}
	}
	out := runClient(t, 60*time.Second, "", python, filepath.Join(root, "test", "clients", "confluent_describe_groups.py"),
		"--bootstrap", b.addr, "rdkd-classic", "rdkd-consumer")
	for _, g := range []string{"rdkd-classic", "rdkd-consumer"} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[0] == g {
				found = true
				if f[1] != "STABLE" || f[3] != "1" || f[4] != "2" {
					t.Errorf("%s described as %q; want STABLE, 1 member, 2 partitions", g, l)
				}
			}
		}
		if !found {
			t.Errorf("%s not described:\n%s", g, out)
		}
	}
	t.Logf("confluent-kafka:\n%s", out)
}
