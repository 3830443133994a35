package server_test

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/testclients"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestBootMarkThroughFailures: a node restarted on the same boot keeps its loss index (its boot
// mark, docs/cluster.md §4.9); an fsync that fails under a produce poisons the log, and the mark
// is gone before the producer hears of it, so no later start may say it kept its writes; a log
// whose recovery then fails (a retry could open it) makes the node register again, saying
// nothing is kept: the loss index moves.
func TestBootMarkThroughFailures(t *testing.T) {
	mem := vfs.NewMem()
	var rules vfs.Rules
	efs := vfs.NewErrorFS(mem, &rules)
	lossSince := func(s *server.Server) uint64 {
		for _, n := range s.Node().Image().Nodes {
			return n.LossSince()
		}
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func(addr, value string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("marked"), kgo.RecordRetries(0),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr()
	}

	s1, addr, stop := serveOn(t, efs)
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, map[string]*string{"write.caching": ptr("false")}, "marked"); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	eventually(t, "a first record acknowledged", 10*time.Second, func() bool { return produce(addr, "first") == nil })
	first := lossSince(s1)
	stop()

	firstIncarnation := s1.Node().Incarnation()
	s2, addr, _ := serveOn(t, efs) // the same boot: it keeps its writes
	eventually(t, "a record acknowledged after the restart", 10*time.Second, func() bool { return produce(addr, "second") == nil })
	if inc := s2.Node().Incarnation(); inc == firstIncarnation {
		t.Fatalf("the restarted node is still incarnation %d", inc)
	}
	if got := lossSince(s2); got != first {
		t.Fatalf("a restart on the same boot moved the loss index from %d to %d", first, got)
	}
	if _, err := mem.Stat("/data/boot.mark"); err != nil {
		t.Fatalf("the boot mark is gone while every log works: %v", err)
	}

	rules.Add(vfs.Rule{Op: vfs.OpSync, PathContains: "/topics/"})
	rules.Add(vfs.Rule{Op: vfs.OpSyncFS})
	if err := produce(addr, "failed"); err == nil {
		t.Fatal("a produce whose fsync failed was acknowledged")
	}
	if _, err := mem.Stat("/data/boot.mark"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a failed fsync the boot mark is still there (Stat: %v)", err)
	}

	// A new topic's log fails its recovery (its first sync): the node registers again.
	adm, err = kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	createCtx, createCancel := context.WithTimeout(ctx, 5*time.Second)
	kadm.NewClient(adm).CreateTopic(createCtx, 1, 1, nil, "unopened") // its answer does not matter
	createCancel()
	eventually(t, "a registration that says the node may have lost writes", 15*time.Second, func() bool {
		return lossSince(s2) > first
	})
}

// TestOfflinePartitionOnOneNode: on the one-node default, a partition whose log fails its
// recovery is offline (its produces fail, with an error a client retries) while the topic's
// other partition is served, and once the log reads again it is opened, led, and keeps what it
// held.
func TestOfflinePartitionOnOneNode(t *testing.T) {
	mem := vfs.NewMem()
	var rules vfs.Rules
	efs := vfs.NewErrorFS(mem, &rules)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func(addr string, partition int32, value string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "solo", Partition: partition, Value: []byte(value)}).FirstErr()
	}
	_, addr, stop := serveOn(t, efs)
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 2, 1, nil, "solo"); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	for i := range int32(2) {
		eventually(t, "a first record acknowledged", 10*time.Second, func() bool { return produce(addr, i, "before") == nil })
	}
	stop()

	rules.Add(vfs.Rule{Op: vfs.OpList, PathContains: "/topics/solo/0"})
	s, addr, _ := serveOn(t, efs)
	eventually(t, "partition 1 served while partition 0 cannot be opened", 15*time.Second, func() bool {
		return produce(addr, 1, "during") == nil
	})
	if err := produce(addr, 0, "lost"); err == nil {
		t.Fatal("a produce to the partition whose log is not open was acknowledged")
	} else if !errors.Is(err, kerr.NotLeaderForPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("producing to the offline partition: %v; want a retriable error", err)
	}
	if tp, ok := s.Topics().Get("solo"); !ok || tp.Partitions[0].Offline() == nil {
		t.Fatal("partition 0 is not offline")
	}
	if m := scrape(t, s.AdminAddr())["runnel_offline_replicas"]; m != 1 {
		t.Fatalf("runnel_offline_replicas = %v; want 1", m)
	}
	rules.Clear()
	eventually(t, "partition 0 served once its log reads again", 20*time.Second, func() bool {
		return produce(addr, 0, "after") == nil
	})
	if m := scrape(t, s.AdminAddr())["runnel_offline_replicas"]; m != 0 {
		t.Fatalf("runnel_offline_replicas = %v once the log opened; want 0", m)
	}
	vals := testclients.ReadValues(t, ctx, []string{addr}, "solo", kgo.ReadUncommitted(), 5, 5*time.Second)
	slices.Sort(vals)
	if want := []string{"after", "before", "before", "during"}; !slices.Equal(vals, want) {
		t.Fatalf("read back %q; want %q", vals, want)
	}
}
