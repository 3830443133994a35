package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/cluster"
)

// TestLostDataDirRefused: a node that comes back on an empty data dir under an id the cluster
// knows refuses to start, before its Raft members take part in anything (its votes would count
// as if it held what it acknowledged; etcd/raft panics on the leader's commit index): a broker
// and a voter alike. A new node id on an empty data dir joins, and the cluster carries on.
func TestLostDataDirRefused(t *testing.T) {
	c := startCluster(t, 4) // voters 1-3, broker 4
	c.waitNodes(4)
	for _, id := range []int32{4, 3} {
		c.stop(id)
		if err := os.RemoveAll(c.dirs[id]); err != nil {
			t.Fatal(err)
		}
		s, ln, err := c.open(id)
		if s != nil {
			s.Close()
			ln.Close()
		}
		if !errors.Is(err, cluster.ErrLostData) {
			t.Fatalf("node %d on an empty data dir: Open = %v; want %v", id, err, cluster.ErrLostData)
		}
		t.Logf("node %d: %v", id, err)
		// Started again (a supervisor restarting it): the refused start wrote files, but the
		// data dir is still one that was never accepted.
		s, ln, err = c.open(id)
		if s != nil {
			s.Close()
			ln.Close()
		}
		if !errors.Is(err, cluster.ErrLostData) {
			t.Fatalf("node %d started again after its refusal: Open = %v; want %v", id, err, cluster.ErrLostData)
		}
	}

	// Node 5, new, on an empty data dir: it joins, and takes replicas next to voters 1 and 2.
	c.dirs[5] = t.TempDir()
	c.start(5)
	eventually(t, "node 5's joining mark removed once registered", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.dirs[5], cluster.JoiningFile))
		return errors.Is(err, os.ErrNotExist)
	})
	// A delivery timeout: franz-go retries a record already sent whatever its context says, so a
	// partition that cannot commit would otherwise hold the test until go test's own timeout.
	cl, adm := c.client(kgo.RecordDeliveryTimeout(60 * time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Three brokers in Metadata is not enough: nodes 3 and 4 may not be fenced yet.
	eventually(t, "Metadata to name nodes 1, 2 and 5", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx)
		ids := md.Brokers.NodeIDs()
		slices.Sort(ids)
		return err == nil && slices.Equal(ids, []int32{1, 2, 5})
	})
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "after"); err != nil {
		t.Fatal(err)
	}
	c.waitTopicEverywhere(ctx, cl, "after")
	for i := range 30 {
		r := &kgo.Record{Topic: "after", Partition: int32(i % 3), Value: fmt.Appendf(nil, "%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// TestJoiningMark: the one-node default's first start marks its data dir JOINING until its
// registration is taken; a process that died between the registration and the removal of the
// mark is started again on that data dir, and its registration (by the earlier run, which the
// mark lists) is its own: it is not refused as a node that lost its data.
func TestJoiningMark(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, "127.0.0.1:0")
	mark := filepath.Join(dir, cluster.JoiningFile)
	eventually(t, "the registration taken and the mark removed", 20*time.Second, func() bool {
		_, err := os.Stat(mark)
		return errors.Is(err, os.ErrNotExist) && b.s.Node().Image().Nodes[0] != nil
	})
	run := b.s.Node().Image().Nodes[0].Run
	b.stop()
	if err := os.WriteFile(mark, []byte(run+"\n"), 0o644); err != nil { // as if it had died before removing it
		t.Fatal(err)
	}
	b = b.restart()
	eventually(t, "the node ready again, its mark removed", 20*time.Second, func() bool {
		_, err := os.Stat(mark)
		select {
		case <-b.s.Node().Ready():
			return errors.Is(err, os.ErrNotExist)
		default:
			return false
		}
	})
}
