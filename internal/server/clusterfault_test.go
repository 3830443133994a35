package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// fsCluster is three servers in this process, each on a file system of its own (a crashable
// in-memory one, maybe behind an error-injecting one).
type fsCluster struct {
	t      *testing.T
	voters map[int32]string
	fs     map[int32]vfs.FS
	mem    map[int32]*vfs.MemFS
	srv    map[int32]*server.Server
	addr   map[int32]string
	stop   map[int32]func()
}

func newFSCluster(t *testing.T) *fsCluster {
	c := &fsCluster{t: t, voters: map[int32]string{}, fs: map[int32]vfs.FS{}, mem: map[int32]*vfs.MemFS{},
		srv: map[int32]*server.Server{}, addr: map[int32]string{}, stop: map[int32]func(){}}
	for id := int32(1); id <= 3; id++ {
		c.voters[id] = freeAddr(t)
		c.mem[id] = vfs.NewMem()
		c.fs[id] = c.mem[id]
	}
	t.Cleanup(func() {
		for _, stop := range c.stop {
			stop()
		}
	})
	return c
}

func (c *fsCluster) start(id int32) {
	t := c.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.Open(server.Config{FS: c.fs[id], DataDir: "/data", NodeID: id, KafkaAddr: ln.Addr().String(),
		AdminAddr: "127.0.0.1:0", ClusterAddr: c.voters[id], ControllerVoters: c.voters, Console: &bytes.Buffer{},
		// A stop stands for a crash here (after vfs.MemFS.Crash): the node must not go on
		// talking to its peers, as a controlled shutdown would, past the state its crashed
		// file system kept.
		NoControlledShutdown: true,
		Logger:               slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		ln.Close()
		t.Fatalf("node %d: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	var once sync.Once
	c.srv[id], c.addr[id] = s, ln.Addr().String()
	c.stop[id] = func() { once.Do(func() { cancel(); <-served; s.Close() }) }
}

// startFaultyCluster starts three nodes, node faulty's file system failing as the rules
// returned say.
func startFaultyCluster(t *testing.T, faulty int32) (*fsCluster, *vfs.Rules) {
	c := newFSCluster(t)
	rules := &vfs.Rules{}
	c.fs[faulty] = vfs.NewErrorFS(c.mem[faulty], rules)
	for id := int32(1); id <= 3; id++ {
		c.start(id)
	}
	return c, rules
}

// createTopicEventually creates topic with three partitions on three replicas, trying again
// until ctx ends (the cluster may still be forming).
func createTopicEventually(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, configs map[string]*string) {
	t.Helper()
	for {
		resp, err := adm.CreateTopic(ctx, 3, 3, configs, topic)
		if err == nil && resp.Err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *fsCluster) brokers() []string {
	var out []string
	for _, a := range c.addr {
		out = append(out, a)
	}
	return out
}

// loadResult is what a producer got acknowledged: value → (partition, offset, when).
type acked struct {
	partition int32
	offset    int64
	at        time.Time
}

// produceUnderLoad produces idempotent acks=all records to topic until stop closes, and
// returns what was acknowledged.
func produceUnderLoad(t *testing.T, brokers []string, topic string, stop <-chan struct{}) func() map[string]acked {
	return produceUnderLoadAs(t, brokers, topic, "", stop)
}

// produceUnderLoadAs is produceUnderLoad whose record values begin with prefix.
func produceUnderLoadAs(t *testing.T, brokers []string, topic, prefix string, stop <-chan struct{}) func() map[string]acked {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.DefaultProduceTopic(topic), kgo.MetadataMinAge(100*time.Millisecond), kgo.RecordDeliveryTimeout(5*time.Second),
		kgo.AllowIdempotentProduceCancellation())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]acked{}
	closed := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := prefix + strconv.Itoa(i)
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				if err == nil && !closed {
					got[v] = acked{r.Partition, r.Offset, time.Now()}
				}
				mu.Unlock()
			})
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return func() map[string]acked {
		<-done
		cl.Close() // fails what is still in flight: not acknowledged
		// A promise may still run after Close returns: the map handed back
		// is the callers' alone from here on.
		mu.Lock()
		defer mu.Unlock()
		closed = true
		return got
	}
}

// readBack reads every record of topic: value → (partition, offset).
func readBack(t *testing.T, brokers []string, topic string) map[string]acked {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	for {
		if ends, err = adm.ListEndOffsets(ctx, topic); err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("listing end offsets: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := map[string]acked{}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { left[o.Partition] = o.Offset })
	for {
		done := true
		for _, end := range left {
			if end > 0 {
				done = false
			}
		}
		if done {
			return out
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v (still to read %v)", ctx.Err(), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if prev, dup := out[string(r.Value)]; dup {
				t.Errorf("record %s at %d/%d and again at %d/%d", r.Value, prev.partition, prev.offset, r.Partition, r.Offset)
			}
			out[string(r.Value)] = acked{r.Partition, r.Offset, time.Time{}}
			if r.Offset+1 >= left[r.Partition] {
				left[r.Partition] = 0
			}
		})
	}
}

// TestClusterPowerLoss cuts the power of every node of a three-node cluster at once under
// acks=all idempotent load (only synced bytes and directory entries survive, torn tails
// included), restarts the cluster from what survived and reads everything back. Without write
// caching nothing acknowledged before the cut may be missing; with it, only what was
// acknowledged within the flush window (flush.ms 50) before the cut, which is counted.
// The minority case cuts the power of one node only (with write caching): the load goes on,
// the node comes back with what survived, and nothing acknowledged may be missing.
func TestClusterPowerLoss(t *testing.T) {
	for _, tc := range []struct{ caching, nodes string }{{"false", "all"}, {"true", "all"}, {"true", "minority"}} {
		caching := tc.caching
		t.Run("write.caching="+caching+"/"+tc.nodes, func(t *testing.T) {
			c := newFSCluster(t)
			for id := int32(1); id <= 3; id++ {
				c.start(id)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...))
			if err != nil {
				t.Fatal(err)
			}
			adm := kadm.NewClient(cl)
			createTopicEventually(t, ctx, adm, "cut", map[string]*string{"write.caching": &caching, "flush.ms": new("50")})
			cl.Close()
			stop := make(chan struct{})
			results := produceUnderLoad(t, c.brokers(), "cut", stop)
			time.Sleep(1500 * time.Millisecond)
			cut := time.Now()
			down := []int32{1, 2, 3}
			if tc.nodes == "minority" {
				down = []int32{leaderOf(t, c.brokers(), "cut", 0)}
			}
			crashed := map[int32]*vfs.MemFS{}
			for _, id := range down { // the power goes out
				crashed[id] = c.mem[id].Crash(vfs.CrashOptions{Tear: true})
			}
			for _, id := range down {
				c.stop[id]()
				c.mem[id], c.fs[id] = crashed[id], crashed[id]
				delete(c.stop, id)
				delete(c.addr, id)
			}
			if tc.nodes == "minority" {
				time.Sleep(1500 * time.Millisecond) // the others carry on under load
				c.start(down[0])
				time.Sleep(1500 * time.Millisecond) // it catches up
				cut = time.Now()                    // everything acknowledged before now must be there
			}
			close(stop)
			got := results()
			if tc.nodes == "all" {
				for _, id := range down {
					c.start(id)
				}
			}
			back := readBack(t, c.brokers(), "cut")
			lost, late := 0, 0
			window := 50*time.Millisecond + 100*time.Millisecond // flush.ms, and the flusher's tick and an fsync
			for v, a := range got {
				if !a.at.Before(cut) {
					continue // acknowledged as the power went: either way
				}
				b, ok := back[v]
				if ok && (b.partition != a.partition || b.offset != a.offset) {
					t.Errorf("record %s acknowledged at %d/%d, read at %d/%d", v, a.partition, a.offset, b.partition, b.offset)
				}
				if !ok {
					lost++
					if cut.Sub(a.at) > window {
						late++
					}
				}
			}
			t.Logf("write.caching=%s: %d acknowledged before the cut, %d read back, %d lost", caching, len(got), len(back), lost)
			if len(got) < 100 {
				t.Fatalf("only %d records acknowledged: the load did not run", len(got))
			}
			if (caching == "false" || tc.nodes == "minority") && lost > 0 {
				t.Errorf("%d acknowledged records lost (write.caching=%s, power lost on %s)", lost, caching, tc.nodes)
			}
			if late > 0 {
				t.Errorf("%d records acknowledged more than %v before the cut were lost", late, window)
			}
		})
	}
}

// TestReplicaDiskFailure makes one node's disk fail under load — every fsync of its partition
// logs fails, or its disk is full (writes fail with ENOSPC after writing part of their data):
// that replica stops (its log is poisoned), a leader there hands its leadership over, and the
// partition stays available on the other two with nothing acknowledged lost, every record read
// back once at the offset it was acknowledged with. Once the full disk has room again, the node
// opens the poisoned logs again without a restart and its replicas rejoin the ISRs; logs a failed
// fsync poisoned wait for a restart.
func TestReplicaDiskFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule vfs.Rule
	}{
		{"fsync-fails", vfs.Rule{Op: vfs.OpSync, PathContains: "/topics/disk/"}},
		{"disk-full", vfs.Rule{Op: vfs.OpWrite, PathContains: "/topics/disk/", Err: syscall.ENOSPC, PartialWrite: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { testReplicaDiskFailure(t, tc.rule) })
	}
}

func testReplicaDiskFailure(t *testing.T, rule vfs.Rule) {
	c, rules := startFaultyCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopicEventually(t, ctx, adm, "disk", nil) // node 2 leads one partition and follows the others
	stop := make(chan struct{})
	results := produceUnderLoad(t, c.brokers(), "disk", stop)
	time.Sleep(time.Second)
	rules.Add(rule) // from now on, every such operation on node 2's logs fails
	failedAt := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	got := results()
	after := 0
	for _, a := range got {
		if a.at.After(failedAt.Add(time.Second)) {
			after++
		}
	}
	if after == 0 {
		t.Errorf("nothing acknowledged after the disk failure: the partition did not stay available")
	}
	md, err := adm.Metadata(ctx, "disk")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["disk"].Partitions {
		if p.Leader == 2 {
			t.Errorf("partition %d still led by the node whose disk fails", p.Partition)
		}
	}
	back := readBack(t, []string{c.addr[1], c.addr[3]}, "disk")
	lost := 0
	for v, a := range got {
		b, ok := back[v]
		if !ok {
			lost++
		} else if b.partition != a.partition || b.offset != a.offset {
			t.Errorf("record %s acknowledged at %d/%d, read at %d/%d", v, a.partition, a.offset, b.partition, b.offset)
		}
	}
	t.Logf("%d acknowledged (%d after the failure), %d read back", len(got), after, len(back))
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}

	rules.Clear()
	if rule.Op == vfs.OpSync {
		// A failed fsync may have lost what the page cache still shows: the logs wait for a
		// restart, counted offline meanwhile, past the retries a full disk gets.
		time.Sleep(3 * time.Second)
		if n := c.srv[2].Topics().Offline(); n == 0 {
			t.Errorf("node 2 opened again logs a failed fsync poisoned, or does not count them offline")
		}
		return
	}
	// Space freed: node 2 opens its poisoned logs again by itself, as a restart would, and its
	// replicas catch up and rejoin every ISR.
	eventually(t, "node 2 back in every ISR once its disk works", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "disk")
		if err != nil {
			return false
		}
		for _, p := range md.Topics["disk"].Partitions {
			if !slices.Contains(p.ISR, 2) {
				return false
			}
		}
		return true
	})
	if n := c.srv[2].Topics().Offline(); n != 0 {
		t.Errorf("node 2 counts %d offline replicas once back", n)
	}
}

// leaderOf is the leader of a partition of topic, as Metadata says.
func leaderOf(t *testing.T, brokers []string, topic string, partition int32) int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range 100 {
		md, err := kadm.NewClient(cl).Metadata(context.Background(), topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[partition]; ok && p.Leader >= 0 {
				return p.Leader
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s/%d has no leader", topic, partition)
	return -1
}

// TestRecoveryFailureTakesOnePartitionOffline: a node restarted with one partition's log
// unreadable (its recovery fails) joins anyway and serves its other partitions; that partition
// is offline on it alone (led and written elsewhere meanwhile, nothing acknowledged lost), the
// node does not keep registering again, and once the log reads again the node opens it and
// catches up.
func TestRecoveryFailureTakesOnePartitionOffline(t *testing.T) {
	c, rules := startFaultyCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopicEventually(t, ctx, adm, "rec", nil)
	load := func(prefix string, d time.Duration) map[string]acked {
		stop := make(chan struct{})
		results := produceUnderLoadAs(t, c.brokers(), "rec", prefix, stop)
		time.Sleep(d)
		close(stop)
		return results()
	}
	got := load("before-", time.Second)

	c.stop[3]()
	delete(c.stop, 3)
	rules.Add(vfs.Rule{Op: vfs.OpList, PathContains: "/topics/rec/0"}) // partition 0's recovery fails
	c.start(3)
	partition := func(i int32) *topics.Partition {
		if tp, ok := c.srv[3].Topics().Get("rec"); ok && int(i) < len(tp.Partitions) {
			return tp.Partitions[i]
		}
		return nil
	}
	// The failed recovery may have lost the log's unsynced tail: the node, which registered as
	// one that kept its writes (a restart on the same boot), registers once more as one that
	// may have lost some (docs/cluster.md §4.9), and not again.
	eventually(t, "node 3 joined as a node that may have lost writes, partition 0 offline on it and the others open", 20*time.Second, func() bool {
		n := c.srv[3].Node()
		nd := n.Image().Nodes[3]
		p0, p1, p2 := partition(0), partition(1), partition(2)
		return n.Incarnation() != 0 && nd != nil && nd.LossSince() == n.Incarnation() &&
			p0 != nil && p0.Offline() != nil && p1.Hosted() && p2.Hosted()
	})
	inc := c.srv[3].Node().Incarnation()
	if l := leaderOf(t, c.brokers(), "rec", 0); l == 3 {
		t.Fatal("partition 0 is led by the node that cannot open its log")
	}
	for v, a := range load("offline-", 2*time.Second) {
		got[v] = a
	}
	acked0 := 0
	for _, a := range got {
		if a.partition == 0 {
			acked0++
		}
	}
	if acked0 == 0 {
		t.Fatal("nothing acknowledged on partition 0")
	}
	rules.Clear()
	eventually(t, "node 3 opened partition 0 again", 20*time.Second, func() bool { return partition(0).Hosted() })
	eventually(t, "node 3 back in partition 0's ISR", 20*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "rec")
		return err == nil && slices.Contains(md.Topics["rec"].Partitions[0].ISR, 3)
	})
	if now := c.srv[3].Node().Incarnation(); now != inc {
		t.Errorf("node 3 registered again (incarnation %d, then %d) while a partition was offline", inc, now)
	}
	back := readBack(t, []string{c.addr[3]}, "rec") // its own copy where it leads, the others' elsewhere
	for v, a := range got {
		if b, ok := back[v]; !ok || b.partition != a.partition || b.offset != a.offset {
			t.Errorf("record %s acknowledged at %d/%d, read back at %+v (%v)", v, a.partition, a.offset, b, ok)
		}
	}
	t.Logf("%d acknowledged, %d on partition 0", len(got), acked0)

	// A new partition whose log node 3 cannot create, with node 3 its first replica (the
	// leader a new partition gets): node 3 hands the leadership on.
	rules.Add(vfs.Rule{Op: vfs.OpList, PathContains: "/topics/fresh/"})
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fresh", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Replicas = []int32{3, 1, 2}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating fresh: %v %v", err, resp)
	}
	eventually(t, "fresh/0 led by a node that has its log", 20*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "fresh")
		if err != nil {
			return false
		}
		p, ok := md.Topics["fresh"].Partitions[0]
		return ok && p.Leader >= 0 && p.Leader != 3
	})
	p, err := kgo.NewClient(kgo.SeedBrokers(c.brokers()...), kgo.DefaultProduceTopic("fresh"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("producing to fresh/0: %v", err)
	}
}

// TestRestartWithoutQuorumKeepsWrites: a node restarted while the controller quorum is down
// cannot register, and is restarted again (a restart loop, or an operator's); once the quorum
// is back and it registers, its registration still says it kept every write of its last
// registered run (the run that never registered passed on what it held), so its loss index
// stays where it was.
func TestRestartWithoutQuorumKeepsWrites(t *testing.T) {
	c := newFSCluster(t)
	for id := int32(1); id <= 3; id++ {
		c.start(id)
	}
	registered := func(id int32) bool {
		n := c.srv[id].Node()
		nd := n.Image().Nodes[id]
		return n.Incarnation() != 0 && nd != nil && nd.Incarnation == n.Incarnation()
	}
	eventually(t, "three nodes registered", 20*time.Second, func() bool { return registered(1) && registered(2) && registered(3) })
	lossSince := func() uint64 { return c.srv[1].Node().Image().Nodes[3].LossSince() }
	before := lossSince()

	for _, id := range []int32{3, 1, 2} {
		c.stop[id]()
	}
	c.start(3) // alone: nodes 1, 2 and 3 are the voters, so there is no quorum
	time.Sleep(time.Second)
	if c.srv[3].Node().Incarnation() != 0 {
		t.Fatal("node 3 registered without a controller quorum")
	}
	c.stop[3]()
	for _, id := range []int32{1, 2, 3} {
		c.start(id)
	}
	eventually(t, "node 3 registered again", 30*time.Second, func() bool { return registered(3) })
	eventually(t, "node 1's image has node 3's registration", 10*time.Second, func() bool {
		nd := c.srv[1].Node().Image().Nodes[3]
		return nd != nil && nd.Incarnation == c.srv[3].Node().Incarnation()
	})
	if got := lossSince(); got != before {
		t.Fatalf("node 3's loss index moved from %d to %d: a restart on the same boot counted as a loss", before, got)
	}
}
