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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReassignAwayFromDeadReplica: a broker is gone for good, and its partitions are moved to
// another node (what an operator does with kafka-reassign-partitions after losing a machine).
// A partition of three replicas that lost one keeps committing and the move adds the new
// replica; a partition of two that lost one cannot commit (a quorum of two is two) until the
// move replaces the dead replica, and then takes appends again. The new replica holds every
// acknowledged record (it leads and serves them all), and the dead node, when it comes back,
// deletes its copies.
func TestReassignAwayFromDeadReplica(t *testing.T) {
	c := startCluster(t, 5) // 1-3 voters, 4 and 5 brokers only
	c.waitNodes(5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, adm := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const dead, spare = 5, 2
	moves := map[string][]int32{ // topic: placement → target (the spare first: it will lead)
		"lost-one-of-three": {1, 4, dead},
		"lost-one-of-two":   {4, dead},
	}
	targets := map[string][]int32{
		"lost-one-of-three": {spare, 1, 4},
		"lost-one-of-two":   {spare, 4},
	}
	produce := func(topic string, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce %s %d: %v", topic, i, err)
			}
		}
	}
	for topic, replicas := range moves {
		placeTopic(ctx, t, adm, topic, replicas...)
		produce(topic, 0, 100)
	}

	c.stop(dead)
	// The partition of two has no quorum left: an append is not acknowledged. A client of its
	// own with a delivery timeout: franz-go waits for a record already sent whatever its
	// context says, and retries it (an idempotent producer) until the timeout (CI, 2026-12-05:
	// with the context alone the test waited 24 minutes).
	probe, _ := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(2*time.Second), kgo.ProduceRequestTimeout(2*time.Second))
	err := probe.ProduceSync(ctx, &kgo.Record{Topic: "lost-one-of-two", Value: []byte("unacknowledged")}).FirstErr()
	if err == nil {
		t.Fatal("a partition of two replicas acknowledged an append with one of them down")
	}

	var req kadm.AlterPartitionAssignmentsReq
	for topic, target := range targets {
		req.Assign(topic, 0, target)
	}
	if r, err := adm.AlterPartitionAssignments(ctx, req); err != nil || r.Error() != nil {
		t.Fatalf("move away from node %d: %v %v", dead, err, r.Error())
	}
	for topic, target := range targets {
		eventually(t, fmt.Sprintf("%s on %v, all in sync", topic, target), 60*time.Second, func() bool {
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				return false
			}
			p := md.Topics[topic].Partitions[0]
			return slices.Equal(p.Replicas, target) && len(p.ISR) == len(target)
		})
	}
	if lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"lost-one-of-three": {0: {}}, "lost-one-of-two": {0: {}}}); err != nil || len(lr.Sorted()) != 0 {
		t.Fatalf("reassignments in progress after the moves: %+v, %v", lr.Sorted(), err)
	}
	for topic := range targets {
		produce(topic, 100, 100)
	}

	// The spare replica leads and serves every acknowledged record, in order, each once (the
	// unacknowledged one may be there too: its produce was retried until the move).
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"lost-one-of-three": {0: {}}, "lost-one-of-two": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for topic, parts := range er {
		if r := parts[0]; r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("ElectLeaders %s: %v %s", topic, r.Err, r.ErrMessage)
		}
	}
	for topic := range targets {
		eventually(t, fmt.Sprintf("node %d leading %s", spare, topic), 20*time.Second, func() bool {
			md, err := adm.Metadata(ctx, topic)
			return err == nil && md.Topics[topic].Partitions[0].Leader == spare
		})
		got := readAll(ctx, t, c, topic, 200)
		if len(got) != 200 {
			t.Fatalf("%s: read %d acknowledged records, want 200: %v", topic, len(got), got)
		}
		for i, v := range got {
			if v != fmt.Sprint(i) {
				t.Fatalf("%s: record %d is %q, want %d (all: %v)", topic, i, v, i, got)
			}
		}
	}

	c.start(dead)
	for topic := range targets {
		eventually(t, fmt.Sprintf("node %d's copy of %s to go", dead, topic), 30*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(c.dirs[dead], "topics", topic, "0"))
			return os.IsNotExist(err)
		})
	}
}

// readAll reads topic's partition 0 from its start until it has n records other than the
// ones whose values are not numbers, and returns their values in offset order.
func readAll(ctx context.Context, t *testing.T, c *testCluster, topic string, n int) []string {
	t.Helper()
	cl, _ := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, err := fmt.Sscan(string(r.Value), new(int)); err == nil {
				got = append(got, string(r.Value))
			}
		})
	}
	return got
}
