package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/testclients"
)

// fetchBytes counts the bytes of Fetch responses a franz-go client reads, by node.
type fetchBytes struct {
	mu     sync.Mutex
	byNode map[int32]int
}

func (f *fetchBytes) OnBrokerRead(meta kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		f.mu.Lock()
		f.byNode[meta.NodeID] += n
		f.mu.Unlock()
	}
}

func (f *fetchBytes) get(node int32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byNode[node]
}

// TestRackAwareReads: KIP-392 on a three-node cluster, each node in its own rack, with
// --replica-selector rack. A consumer naming a follower's rack (client.rack) is sent there by
// the leader and reads every committed record from the follower, read_committed included (the
// follower's last stable offset and aborted-transaction index); a consumer in the leader's rack,
// or in a rack no replica is in, reads from the leader.
func TestRackAwareReads(t *testing.T) {
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(id int32, cfg *server.Config) {
			cfg.Rack, cfg.RackAwareReads = fmt.Sprintf("rack-%d", id), true
		}
	})
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := c.client()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "racks"); err != nil {
		t.Fatal(err)
	}
	var leader int32 = -1
	eventually(t, "a leader for racks", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "racks")
		if err != nil || md.Topics["racks"].Err != nil || len(md.Topics["racks"].Partitions) != 1 {
			return false
		}
		p := md.Topics["racks"].Partitions[0]
		leader = p.Leader
		return p.Leader >= 0 && len(p.ISR) == 3
	})
	follower := leader%3 + 1

	// 100 plain records, an aborted transaction of 10, a committed one of 10.
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "racks", Value: fmt.Appendf(nil, "plain %d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn, _ := c.client(kgo.TransactionalID("racks-txn"), kgo.DefaultProduceTopic("racks"))
	for _, commit := range []bool{false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if err := txn.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("txn %v %d", commit, i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	read := func(rack string, committed bool) (values []string, counts *fetchBytes) {
		t.Helper()
		counts = &fetchBytes{byNode: map[int32]int{}}
		opts := []kgo.Opt{kgo.ConsumeTopics("racks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(counts)}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		if committed {
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		}
		cons, _ := c.client(opts...)
		want := 120
		if committed {
			want = 110
		}
		for len(values) < want && ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
			pcancel()
		}
		cons.Close()
		return values, counts
	}

	// The leader points a consumer only at a replica in sync: under load (CI) the follower can
	// be out of the ISR for a moment after the writes, and the leader then serves the reads.
	eventually(t, "the follower back in the ISR", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "racks")
		return err == nil && md.Topics["racks"].Err == nil && len(md.Topics["racks"].Partitions[0].ISR) == 3
	})
	for _, committed := range []bool{false, true} {
		values, counts := read(fmt.Sprintf("rack-%d", follower), committed)
		want := 120
		if committed {
			want = 110
		}
		if len(values) != want || values[0] != "plain 0" || values[want-1] != "txn true 9" {
			t.Fatalf("read_committed %v from rack-%d: %d values, first %q last %q", committed, follower, len(values), values[0], values[len(values)-1])
		}
		for _, v := range values {
			if committed && len(v) > 9 && v[:9] == "txn false" {
				t.Fatalf("read_committed from the follower returned an aborted record %q", v)
			}
		}
		// The records came from the follower: the leader only pointed there.
		if f, l := counts.get(follower), counts.get(leader); f < 2000 || l > f/4 {
			t.Fatalf("read_committed %v in the follower's rack: %d fetch bytes from the follower (node %d), %d from the leader (node %d)",
				committed, f, follower, l, leader)
		}
	}
	// The Java client (client.rack) is sent to the follower too: the follower's node counts the
	// records' bytes going out, the leader's none more.
	t.Run("java", func(t *testing.T) {
		java := testclients.Java(t)
		bytesOut := func(id int32) float64 {
			_, body, err := adminGet(t, c.servers[id].AdminAddr(), "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, `runnel_topic_bytes_out_total{topic="racks"}`) {
					v, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
					return v
				}
			}
			return 0
		}
		fBefore, lBefore := bytesOut(follower), bytesOut(leader)
		out := runClient(t, 120*time.Second, "", java[0], append(java[1:], "consume", strings.Join(c.brokers(), ","), "racks", "java-racks", "consumer", "120", "", fmt.Sprintf("rack-%d", follower))...)
		valuesRead := len(strings.Split(strings.TrimSpace(out), "\n"))
		if f, l := bytesOut(follower)-fBefore, bytesOut(leader)-lBefore; valuesRead != 120 || f < 2000 || l > 0 {
			t.Fatalf("Java consumer in rack-%d: %d records; %v record bytes out of the follower, %v of the leader", follower, valuesRead, f, l)
		}
	})

	for _, rack := range []string{fmt.Sprintf("rack-%d", leader), "rack-elsewhere", ""} {
		values, counts := read(rack, false)
		if len(values) != 120 {
			t.Fatalf("rack %q: %d values", rack, len(values))
		}
		if f, l := counts.get(follower)+counts.get(6-leader-follower), counts.get(leader); l < 2000 || f > 0 {
			t.Fatalf("rack %q: %d fetch bytes from the leader (node %d), %d from the followers; want all from the leader", rack, l, leader, f)
		}
	}
}

// TestRackAwarePlacement: on four nodes in two racks, a topic created with replication factor
// 2, the partitions added to it, and __consumer_offsets (default factor 3) put replicas in both
// racks for every partition, so losing a rack loses no partition.
func TestRackAwarePlacement(t *testing.T) {
	c := startClusterWith(t, 4, func(c *testCluster) {
		c.tune = func(id int32, cfg *server.Config) { cfg.Rack = fmt.Sprintf("rack-%d", (id+1)%2) } // 1, 3: rack-0; 2, 4: rack-1
	})
	c.waitNodes(4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, adm := c.client()
	if r, err := adm.CreateTopic(ctx, 6, 2, nil, "placed"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	// kadm reads the partition count from Metadata first, and the node answering may not have
	// the new topic yet (metadata reaches brokers after the creation is answered, as in Kafka).
	c.waitTopicEverywhere(ctx, cl, "placed")
	if rs, err := adm.CreatePartitions(ctx, 4, "placed"); err != nil || rs.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, rs.Error())
	}
	// A group's commit makes the cluster create __consumer_offsets.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "placed", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CommitOffsets(ctx, "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "placed", Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	rack := func(id int32) int32 { return (id + 1) % 2 }
	var seen string // what the last look found, for a failure
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		td, err := adm.ListTopics(ctx, "placed", "__consumer_offsets")
		if err == nil && len(td["placed"].Partitions) == 10 && len(td["__consumer_offsets"].Partitions) > 0 {
			break
		}
		seen = fmt.Sprintf("err %v; placed: %d partitions (%v); __consumer_offsets: %d partitions (%v)", err,
			len(td["placed"].Partitions), td["placed"].Err, len(td["__consumer_offsets"].Partitions), td["__consumer_offsets"].Err)
		if time.Now().After(deadline) {
			t.Fatalf("waiting for placed with 10 partitions and __consumer_offsets: %s", seen)
		}
	}
	td, err := adm.ListTopics(ctx, "placed", "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"placed", "__consumer_offsets"} {
		for _, p := range td[topic].Partitions.Sorted() {
			racks := map[int32]bool{}
			for _, id := range p.Replicas {
				racks[rack(id)] = true
			}
			if len(racks) != 2 {
				t.Errorf("%s partition %d: replicas %v all in one rack", topic, p.Partition, p.Replicas)
			}
		}
	}
}

// TestJavaRackAwareAssignment: Kafka's client-side assignors place a classic group's partitions
// on consumers in their replicas' racks (KIP-881) from the racks Metadata reports, so Runnel's
// nodes must report theirs. Six partitions alternate between node 1 (rack-a) and node 2
// (rack-b); two Java consumers, one per rack, each get their rack's three (the plain range
// assignment would give each three neighbours, across racks). Kafka's server-side (KIP-848)
// assignors have been rack-unaware since 3.8 (KAFKA-16694), and so are Runnel's.
func TestJavaRackAwareAssignment(t *testing.T) {
	java := testclients.Java(t)
	rackOf := map[int32]string{1: "rack-a", 2: "rack-b", 3: "rack-a"}
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(id int32, cfg *server.Config) { cfg.Rack = rackOf[id] }
	})
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, adm := c.client()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "racked", -1, -1
	for p := range int32(6) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1 + p%2}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	c.waitTopicEverywhere(ctx, cl, "racked")

	// Both consumers join before anything is produced, so each reads only what it is assigned.
	type consumer struct {
		rack string
		cmd  *exec.Cmd
		out  bytes.Buffer
		errs bytes.Buffer
	}
	var consumers []*consumer
	for _, rack := range []string{"rack-a", "rack-b"} {
		cs := &consumer{rack: rack}
		cs.cmd = exec.CommandContext(ctx, java[0], append(java[1:], "consume", strings.Join(c.brokers(), ","), "racked", "racked-group", "classic", "30", "", rack)...)
		cs.cmd.Stdout, cs.cmd.Stderr = &cs.out, &cs.errs
		if err := cs.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, cs)
	}
	eventually(t, "a stable group of two members owning every partition", 60*time.Second, func() bool {
		gs, err := adm.DescribeGroups(ctx, "racked-group")
		if err != nil {
			return false
		}
		g := gs["racked-group"]
		owned := 0
		for _, m := range g.Members {
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range a.Topics {
					owned += len(tp.Partitions)
				}
			}
		}
		return g.State == "Stable" && len(g.Members) == 2 && owned == 6
	})
	var rs []*kgo.Record
	for p := range int32(6) {
		for i := range 10 {
			rs = append(rs, &kgo.Record{Topic: "racked", Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	producer, _ := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, cs := range consumers {
		if err := cs.cmd.Wait(); err != nil {
			t.Fatalf("Java consumer in %s: %v\n%s\n%s", cs.rack, err, tail(cs.out.String(), 300), tail(cs.errs.String(), 1200))
		}
		partitions := map[int32]int{}
		for _, line := range strings.Split(strings.TrimSpace(cs.out.String()), "\n") {
			p, err := strconv.ParseInt(strings.Fields(line)[0], 10, 32)
			if err != nil {
				t.Fatalf("Java consumer in %s printed %q", cs.rack, line)
			}
			partitions[int32(p)]++
		}
		for p, n := range partitions {
			if rackOf[1+p%2] != cs.rack || n != 10 {
				t.Errorf("the consumer in %s read %d records of partition %d, whose replica is in %s", cs.rack, n, p, rackOf[1+p%2])
			}
		}
		if len(partitions) != 3 {
			t.Errorf("the consumer in %s read partitions %v; want its rack's three", cs.rack, partitions)
		}
	}
}
