package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/group"
)

// killableDialer hands out connections that can all be cut at once, after which dialing fails:
// a consumer process killed without a goodbye (no LeaveGroup, no more heartbeats).
type killableDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed {
		return nil, errors.New("killed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killed = true
	for _, c := range d.conns {
		c.Close()
	}
}

// groupConsumer is a franz-go group member that records what it consumed and is assigned, and
// commits what it processed.
type groupConsumer struct {
	name   string
	cl     *kgo.Client
	dialer *killableDialer

	mu       sync.Mutex
	assigned map[int32]bool
}

func (c *groupConsumer) owned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.assigned)
}

// TestGroupConsumersShareAndTakeOver: three franz-go consumers in one group share 12 partitions
// evenly; one leaves, one is killed and its session times out; the survivor takes every
// partition over and, because everyone committed what it processed, no record is skipped. Run
// with an eager (range) and a cooperative (cooperative-sticky) assignor: their logic is in the
// client, the broker only carries it.
func TestGroupConsumersShareAndTakeOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		kip848   bool // group.protocol=consumer: the broker assigns (uniform / range)
	}{
		{"classic/range", kgo.RangeBalancer(), false},
		{"classic/cooperative-sticky", kgo.CooperativeStickyBalancer(), false},
		{"consumer/uniform", kgo.CooperativeStickyBalancer(), true},
		{"consumer/range", kgo.RangeBalancer(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr, reg := ctBroker(t, func(c *Config) {
				c.Groups = group.DefaultConfig()
				c.Groups.InitialRebalanceDelay = 100 * time.Millisecond
				c.Groups.ConsumerSessionTimeout, c.Groups.ConsumerHeartbeatInterval = 6*time.Second, 500*time.Millisecond
				c.OffsetsTopicPartitions = 4
			})
			const topic, partitions, perPartition = "orders", 12, 50
			ctCreate(t, reg, topic, partitions, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			produce := func(round int) {
				p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				for part := range int32(partitions) {
					for i := range perPartition {
						p.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Value: fmt.Appendf(nil, "%d/%d/%d", round, part, i)}, nil)
					}
				}
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var seenMu sync.Mutex
			seen := map[string]bool{}
			newConsumer := func(name string) *groupConsumer {
				c := &groupConsumer{name: name, dialer: &killableDialer{}, assigned: map[int32]bool{}}
				opts := []kgo.Opt{}
				if tc.kip848 {
					opts = append(opts, kgo.ServerSideBalancer())
				}
				cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic),
					kgo.Balancers(tc.balancer), kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second),
					kgo.HeartbeatInterval(500*time.Millisecond), kgo.Dialer(c.dialer.dial),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
						c.mu.Lock()
						defer c.mu.Unlock()
						for _, p := range m[topic] {
							c.assigned[p] = true
						}
					}),
					kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
						cl.CommitUncommittedOffsets(ctx)
						c.mu.Lock()
						defer c.mu.Unlock()
						for _, p := range m[topic] {
							delete(c.assigned, p)
						}
					}),
					kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
						c.mu.Lock()
						defer c.mu.Unlock()
						for _, p := range m[topic] {
							delete(c.assigned, p)
						}
					}))...)
				if err != nil {
					t.Fatal(err)
				}
				c.cl = cl
				go func() {
					for {
						fs := cl.PollFetches(ctx)
						if fs.IsClientClosed() || ctx.Err() != nil {
							return
						}
						fs.EachRecord(func(r *kgo.Record) {
							seenMu.Lock()
							seen[string(r.Value)] = true
							seenMu.Unlock()
						})
						if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, kgo.ErrClientClosed) {
							t.Logf("%s: commit: %v", name, err)
						}
					}
				}()
				return c
			}
			waitFor := func(what string, cond func() bool) {
				t.Helper()
				for !cond() {
					if ctx.Err() != nil {
						t.Fatalf("timed out waiting for %s", what)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			consumed := func(rounds int) func() bool {
				return func() bool {
					seenMu.Lock()
					defer seenMu.Unlock()
					for round := range rounds {
						for part := range partitions {
							for i := range perPartition {
								if !seen[fmt.Sprintf("%d/%d/%d", round, part, i)] {
									return false
								}
							}
						}
					}
					return true
				}
			}

			a, b, c := newConsumer("a"), newConsumer("b"), newConsumer("c")
			defer a.cl.Close()
			defer c.cl.Close()
			waitFor("an even 4/4/4 split", func() bool { return a.owned() == 4 && b.owned() == 4 && c.owned() == 4 })
			listed, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, a.cl)
			if err != nil || len(listed.Groups) != 1 {
				t.Fatalf("ListGroups = %v, %v", listed, err)
			}
			if want := map[bool]string{false: "classic", true: "consumer"}[tc.kip848]; listed.Groups[0].GroupType != want {
				t.Fatalf("the group's type is %q; want %q", listed.Groups[0].GroupType, want)
			}
			produce(0)
			waitFor("round 0 consumed", consumed(1))

			b.cl.Close() // b leaves (LeaveGroup)
			waitFor("a 6/6 split after b left", func() bool { return a.owned() == 6 && c.owned() == 6 })
			produce(1)
			waitFor("round 1 consumed", consumed(2))

			c.dialer.kill() // c dies: no leave, its session (6 s) must time out
			produce(2)
			waitFor("a owns all 12 after c's session expired", func() bool { return a.owned() == 12 })
			waitFor("round 2 consumed, none skipped", consumed(3))

			// The committed offsets are the log ends: nothing left behind.
			adm := kadm.NewClient(a.cl)
			waitFor("committed offsets at the log end", func() bool {
				offsets, err := adm.FetchOffsets(ctx, "g")
				if err != nil {
					return false
				}
				ok := true
				for part := range int32(partitions) {
					o, found := offsets.Lookup(topic, part)
					ok = ok && found && o.At == 3*perPartition
				}
				return ok
			})
		})
	}
}

// TestOffsetsOfADeletedTopicAreDeleted: a group's committed offsets of a topic go with the
// topic, as Kafka's coordinator deletes them when the metadata deletes its partitions; a topic
// created again under the name starts with none, so its consumers do not resume at the old
// positions (they skipped the new topic's first records). Other topics' offsets stay.
func TestOffsetsOfADeletedTopicAreDeleted(t *testing.T) {
	addr, _ := testBroker(t)
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 2, nil, "gone", "kept")
	offsets := kadm.Offsets{}
	offsets.AddOffset("gone", 0, 5, -1)
	offsets.AddOffset("gone", 1, 6, -1)
	offsets.AddOffset("kept", 0, 7, -1)
	if resp, err := adm.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resps, err := adm.CreateTopics(ctx, 2, -1, nil, "gone")
		if err == nil && resps["gone"].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating gone again: %v %v", err, resps)
		}
	}
	var got kadm.OffsetResponses
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if got, err = adm.FetchOffsets(ctx, "g"); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Lookup("gone", 0); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets of the deleted topic still there: %v", got)
		}
	}
	if o, ok := got.Lookup("kept", 0); !ok || o.At != 7 {
		t.Fatalf("kept-0: %+v %v; want 7", o, ok)
	}
	if _, ok := got.Lookup("gone", 1); ok {
		t.Fatalf("gone-1 still committed: %v", got)
	}
}

// TestOffsetsOfATopicDeletedWithinATick: a topic created, committed to and deleted within one of
// the group service's ticks (100 ms) loses its offsets too. The service saw the topics only at
// its ticks, so it never saw this one, and its offsets stayed for good: a topic created again
// under the name resumed at them (a test suite's create, consume, delete, reuse). The ticks are
// 2 s apart here, so that hardly ever does one fall within a topic's few milliseconds of life.
func TestOffsetsOfATopicDeletedWithinATick(t *testing.T) {
	_, addr, _ := ctBroker(t, func(c *Config) { c.Hooks.GroupTick = 2 * time.Second })
	ctx, _, adm := adminClients(t, addr)
	mustCreate(t, ctx, adm, 1, nil, "anchor")
	offsets := kadm.Offsets{}
	offsets.AddOffset("anchor", 0, 1, -1)
	if resp, err := adm.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil { // the coordinator is up
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	for i := range 5 {
		name := fmt.Sprintf("brief-%d", i)
		mustCreate(t, ctx, adm, 1, nil, name)
		offsets := kadm.Offsets{}
		offsets.AddOffset(name, 0, 2, -1)
		if resp, err := adm.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
		if _, err := adm.DeleteTopics(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		got.Each(func(o kadm.OffsetResponse) {
			if strings.HasPrefix(o.Topic, "brief-") {
				left++
			}
		})
		if left == 0 {
			if _, ok := got.Lookup("anchor", 0); !ok {
				t.Fatalf("the live topic's offset went too: %v", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets of %d deleted topics stayed: %v", left, got)
		}
	}
}

// TestCoordinatorTopicConfigs: the coordinator topics are created with Kafka's topic configs
// (GroupCoordinator.offsetsTopicConfigs, TransactionStateManager.transactionTopicConfigs), so a
// cluster-wide unclean.leader.election.enable=true, compression.type or min.insync.replicas does
// not reach the transaction log. __transaction_state had __consumer_offsets's alone.
func TestCoordinatorTopicConfigs(t *testing.T) {
	b, addr, _ := ctBroker(t, nil)
	ctx, _, adm := adminClients(t, addr)
	for _, name := range []string{OffsetsTopic, TxnStateTopic} {
		if aerr := b.ensureCoordinatorTopic(ctx, name, 1, 1); aerr != nil {
			t.Fatalf("creating %s: %v", name, aerr)
		}
	}
	want := map[string]map[string]string{
		OffsetsTopic: {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"},
		TxnStateTopic: {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "uncompressed",
			"unclean.leader.election.enable": "false", "min.insync.replicas": "2"},
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, OffsetsTopic, TxnStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for name, value := range want[rc.Name] {
			found := false
			for _, c := range rc.Configs {
				if c.Key == name {
					found = true
					if c.Value == nil || *c.Value != value || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
						t.Errorf("%s %s = %v (%v); want %s, set on the topic", rc.Name, name, c.Value, c.Source, value)
					}
				}
			}
			if !found {
				t.Errorf("%s: %s not described", rc.Name, name)
			}
		}
	}
}
