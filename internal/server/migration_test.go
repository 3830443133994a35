package server_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// groupMember is a franz-go group consumer running in the background: it records what it
// reads, marks it, and commits on revoke and on close.
type groupMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startGroupMember(t *testing.T, addr, group, topic string, seen *sync.Map, opts ...kgo.Opt) *groupMember {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks(), kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			cl.CommitMarkedOffsets(ctx)
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				n, _ := seen.LoadOrStore(string(r.Value), new(atomic.Int64)) // two members may read one record
				n.(*atomic.Int64).Add(1)
				cl.MarkCommitRecords(r)
			})
		}
	}()
	return m
}

// stop leaves the group: marked offsets are committed and the member says goodbye.
func (m *groupMember) stop() {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.cl.CommitMarkedOffsets(ctx)
	m.cl.LeaveGroupContext(ctx)
	m.cl.Close()
}

// migrationMember is a group member of a migration test, stopped by leaving the group.
type migrationMember interface{ stop() }

// TestOnlineGroupMigration: consumers upgraded one at a time from the classic protocol to the
// consumer protocol (KIP-848) and back, while records keep coming, as Kafka 4 allows
// (group.consumer.migration.policy=bidirectional), with franz-go members (cooperative sticky
// when classic). See testMigration.
func TestOnlineGroupMigration(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	var seen sync.Map
	testMigration(t, b.addr, func(classic bool) migrationMember {
		if classic {
			return startGroupMember(t, b.addr, "mig-g", "mig", &seen)
		}
		return startGroupMember(t, b.addr, "mig-g", "mig", &seen, kgo.ServerSideBalancer())
	}, func() map[string]int {
		out := map[string]int{}
		seen.Range(func(k, n any) bool {
			out[k.(string)] = int(n.(*atomic.Int64).Load())
			return true
		})
		return out
	})
}

// TestJavaOnlineGroupMigration: the same rolling upgrade and downgrade with the Java client
// 4.1.1: classic members with its default assignors (range first: eager rebalances, so a
// member gives up everything before it joins again) and group.protocol=consumer members.
//
// Up to three JVMs run at once, which starves the tests running beside it on two cores, so it
// runs on its own: RUNNEL_JAVA_MIGRATION=1 go test ./internal/server -run
// TestJavaOnlineGroupMigration (.ci/run has a step for it).
func TestJavaOnlineGroupMigration(t *testing.T) {
	if os.Getenv("RUNNEL_JAVA_MIGRATION") == "" {
		t.Skip("runs alone: RUNNEL_JAVA_MIGRATION=1 go test ./internal/server -run TestJavaOnlineGroupMigration")
	}
	java := testclients.Java(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	var mu sync.Mutex
	seen := map[string]int{}
	testMigration(t, b.addr, func(classic bool) migrationMember {
		protocol := "consumer"
		if classic {
			protocol = "classic"
		}
		return startJavaMember(t, java, b.addr, protocol, func(out string) {
			mu.Lock()
			defer mu.Unlock()
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) == 3 && f[0] != "error" {
					seen[f[2]]++
				} else if strings.HasPrefix(line, "error ") {
					t.Logf("%s member: %s", protocol, line)
				}
			}
		})
	}, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	})
}

// javaMember is a Java group member (JavaClient member) running until its stop file exists.
type javaMember struct {
	t      *testing.T
	stopAt string
	done   chan struct{}
}

func startJavaMember(t *testing.T, java []string, addr, protocol string, output func(string)) *javaMember {
	t.Helper()
	m := &javaMember{t: t, stopAt: filepath.Join(t.TempDir(), "stop"), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, java[0], append(java[1:], "member", addr, "mig", "mig-g", protocol, m.stopAt)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Errorf("java %s member: %v\n%s", protocol, err, tail(stderr.String(), 1200))
		}
		output(stdout.String())
	}()
	return m
}

func (m *javaMember) stop() {
	if err := os.WriteFile(m.stopAt, nil, 0o644); err != nil {
		m.t.Fatal(err)
	}
	<-m.done
}

// testMigration runs the rolling upgrade and downgrade with members start makes: two classic
// members, then a consumer-protocol member joins (the group becomes a consumer group and all
// three share the partitions), the classic members leave, a classic member joins the consumer
// group, and the consumer-protocol member leaves (the group is classic again, its member takes
// every partition). No member is refused, every record is read (seen: value → times read, once
// the members stopped) and the group's committed offsets reach the end.
func testMigration(t *testing.T, addr string, start func(classic bool) migrationMember, seen func() map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if r, err := adm.CreateTopic(ctx, 6, 1, nil, "mig"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	groupType := func() (string, int) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"mig-g"}
		if resp, err := req.RequestWith(ctx, admin); err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			owners := 0
			for _, m := range resp.Groups[0].Members {
				if len(m.Assignment.TopicPartitions) > 0 {
					owners++
				}
			}
			return "consumer", owners
		}
		d, err := adm.DescribeGroups(ctx, "mig-g")
		if err != nil || d["mig-g"].Err != nil {
			return "", 0
		}
		owners := 0
		for _, m := range d["mig-g"].Members {
			if ca, ok := m.Assigned.AsConsumer(); ok && len(ca.Topics) > 0 {
				owners++
			}
		}
		return "classic:" + d["mig-g"].State, owners
	}
	waitFor := func(what, wantType string, wantOwners int) {
		t.Helper()
		eventually(t, what, 90*time.Second, func() bool {
			typ, owners := groupType()
			return typ == wantType && owners == wantOwners
		})
	}

	// A producer that keeps writing during every step.
	var produced sync.WaitGroup
	var sent int
	stopProducing := make(chan struct{})
	produced.Add(1)
	go func() {
		defer produced.Done()
		p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("mig"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			t.Error(err)
			return
		}
		defer p.Close()
		for {
			select {
			case <-stopProducing:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "m/%d", sent)}).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			sent++
		}
	}()

	c1, c2 := start(true), start(true)
	waitFor("two classic members sharing the partitions", "classic:Stable", 2)
	k := start(false)
	waitFor("the upgrade: a consumer group of three members, each with partitions", "consumer", 3)
	c1.stop()
	waitFor("two members after a classic one left", "consumer", 2)
	c2.stop()
	waitFor("the consumer-protocol member alone", "consumer", 1)
	c3 := start(true)
	waitFor("a classic member joining the consumer group", "consumer", 2)
	k.stop()
	waitFor("the downgrade: a classic group of the classic member with every partition", "classic:Stable", 1)

	close(stopProducing)
	produced.Wait()
	var total int64
	eventually(t, "the group's committed offsets at the end", 60*time.Second, func() bool {
		committed, err := adm.FetchOffsets(ctx, "mig-g")
		if err != nil {
			return false
		}
		total = 0
		committed.Each(func(o kadm.OffsetResponse) { total += o.At })
		return total == int64(sent)
	})
	c3.stop()
	got := seen()
	dups := 0
	for i := range sent {
		n := got[fmt.Sprintf("m/%d", i)]
		if n == 0 {
			t.Errorf("record m/%d was never read", i)
		}
		dups += max(n-1, 0)
	}
	t.Logf("%d records, %d read twice (at least once across rebalances), committed offsets sum %d", sent, dups, total)
}
