package server_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestBootMarkWithdrawnByAFailedSync: a node leaves its boot mark in its data dir (what lets its
// next start on the same boot say it kept every write, docs/cluster.md §4.9); an fsync that
// fails under a produce poisons the log, and the mark is gone before the producer hears of the
// failure, so no later start may say that; the node registers again as one that may have lost
// writes.
func TestBootMarkWithdrawnByAFailedSync(t *testing.T) {
	mem := vfs.NewMem()
	var rules vfs.Rules
	s, addr, _ := serveOn(t, vfs.NewErrorFS(mem, &rules))
	lossSince := func() uint64 {
		for _, n := range s.Node().Image().Nodes {
			return n.LossSince()
		}
		return 0
	}
	if _, err := mem.Stat("/data/boot.mark"); err != nil {
		t.Fatalf("the node left no boot mark: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("marked"), kgo.RecordRetries(0),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"write.caching": ptr("false")}, "marked"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a first record acknowledged", 10*time.Second, func() bool {
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr() == nil
	})
	if _, err := mem.Stat("/data/boot.mark"); err != nil {
		t.Fatalf("the boot mark is gone while every log works: %v", err)
	}
	before := lossSince()
	rules.Add(vfs.Rule{Op: vfs.OpSync, PathContains: "/topics/"})
	rules.Add(vfs.Rule{Op: vfs.OpSyncFS})
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("failed")}).FirstErr(); err == nil {
		t.Fatal("a produce whose fsync failed was acknowledged")
	}
	if _, err := mem.Stat("/data/boot.mark"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after a failed fsync the boot mark is still there (Stat: %v)", err)
	}
	// The node's registration said it kept its writes (it is the running process): it
	// registers again, saying nothing is kept, and the image's loss index moves.
	eventually(t, "a registration that says the node may have lost writes", 10*time.Second, func() bool {
		return lossSince() > before
	})
}
