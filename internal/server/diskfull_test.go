package server_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestFullDiskPartitionComesBack: on one node, a partition whose write hit a full disk (ENOSPC
// after writing part of the data) is offline while the disk is full (its only replica's log is
// poisoned; runnel_offline_replicas counts it), and serves again once space is back, without a
// restart: the node opens the log again, its recovery cuts the half-written tail, and the
// partition is elected again. Every record acknowledged before is read back once, at its offset.
// Before, the partition stayed leaderless until the node was restarted, while it said it was
// ready.
func TestFullDiskPartitionComesBack(t *testing.T) {
	rules := &vfs.Rules{}
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.FS = vfs.NewErrorFS(vfs.Default, rules) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func(cl *kgo.Client, from, to int) (map[string]int64, error) {
		acked := map[string]int64{}
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: "full", Value: fmt.Appendf(nil, "r%03d", i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return acked, err
			}
			acked[string(r.Value)] = r.Offset
		}
		return acked, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	acked, err := produce(cl, 0, 20)
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}

	rules.Add(vfs.Rule{Op: vfs.OpWrite, PathContains: "/topics/full/", Err: syscall.ENOSPC, PartialWrite: true})
	short, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordDeliveryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produce(short, 20, 21); err == nil {
		t.Fatal("a produce on a full disk was acknowledged")
	}
	short.Close()
	if n := b.s.Topics().Offline(); n != 1 {
		t.Errorf("with the disk full: %d offline replicas; want 1", n)
	}

	rules.Clear() // space is back
	var more map[string]int64
	eventually(t, "a produce acknowledged once the disk has room", 30*time.Second, func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordDeliveryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		more, err = produce(cl, 100, 110)
		return err == nil
	})
	for v, off := range more {
		acked[v] = off
	}
	if n := b.s.Topics().Offline(); n != 0 {
		t.Errorf("with room again: %d offline replicas; want 0", n)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int64{}
	for len(seen) < len(acked) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if _, dup := seen[string(r.Value)]; dup {
				t.Errorf("record %s read twice", r.Value)
			}
			seen[string(r.Value)] = r.Offset
		})
	}
	for v, off := range acked {
		if got, ok := seen[v]; !ok || got != off {
			t.Errorf("record %s acknowledged at offset %d, read at %d (found %v)", v, off, got, ok)
		}
	}
}
