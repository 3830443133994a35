package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/server"
)

// testCluster is a cluster of servers in this process, on loopback: nodes 1-3 are the
// controller voters, any further node is a broker only.
type testCluster struct {
	t       *testing.T
	voters  map[int32]string
	servers map[int32]*server.Server
	addrs   map[int32]string
	cancels map[int32]context.CancelFunc
	served  map[int32]chan error
	dirs    map[int32]string
	// objectStore is the store every node shares ("": each node's own default).
	objectStore string
	// batchTimeout: the nodes' --object-batch-timeout (0: the default).
	batchTimeout time.Duration
	// retentionInterval: the nodes' object retention interval (0: the default).
	retentionInterval time.Duration
	// tune, if set, changes each node's configuration before it opens.
	tune func(id int32, cfg *server.Config)
}

// testLogLevel is the level of the test servers' logs: warnings, or debug with
// RUNNEL_TEST_LOG=debug when a failure needs the whole story.
func testLogLevel() slog.Level {
	if os.Getenv("RUNNEL_TEST_LOG") == "debug" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// freeAddr returns a loopback address free now, below the kernel's ephemeral port range, so
// that no outgoing connection takes it before the node binds it (see chaos.freePort).
func freeAddr(t *testing.T) string {
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+mrand.IntN(12000))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port in 20000-32000")
	return ""
}

func startCluster(t *testing.T, n int) *testCluster {
	return startClusterWith(t, n, func(*testCluster) {})
}

// startClusterWith starts a cluster after setup has set its options. The voters' cluster
// addresses are picked free before the first node starts; if another process takes one before
// its node binds it, the cluster starts again on new addresses and data directories.
func startClusterWith(t *testing.T, n int, setup func(*testCluster)) *testCluster {
	for attempt := 1; ; attempt++ {
		c := &testCluster{t: t, voters: map[int32]string{}, servers: map[int32]*server.Server{}, addrs: map[int32]string{},
			cancels: map[int32]context.CancelFunc{}, served: map[int32]chan error{}, dirs: map[int32]string{}}
		setup(c)
		for id := int32(1); id <= 3; id++ {
			c.voters[id] = freeAddr(t)
		}
		var err error
		for id := int32(1); id <= int32(n) && err == nil; id++ {
			c.dirs[id] = t.TempDir()
			if err = c.tryStart(id); err != nil {
				err = fmt.Errorf("node %d: %w", id, err)
			}
		}
		if err != nil {
			for id := range c.servers {
				c.stop(id)
			}
			if attempt < 3 && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
				t.Logf("starting the cluster again on other addresses: %v", err)
				continue
			}
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for id := range c.servers {
				c.stop(id)
			}
		})
		return c
	}
}

func (c *testCluster) start(id int32) {
	if err := c.tryStart(id); err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
}

// tryStart is start, returning the error of a node that does not open.
func (c *testCluster) tryStart(id int32) error {
	s, ln, err := c.open(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	c.servers[id], c.addrs[id], c.cancels[id], c.served[id] = s, ln.Addr().String(), cancel, served
	go func() { served <- s.Serve(ctx, ln) }()
	return nil
}

// open opens node id's server on its Kafka address (a new one the first time).
func (c *testCluster) open(id int32) (*server.Server, net.Listener, error) {
	t := c.t
	cluster := c.voters[id]
	if cluster == "" {
		cluster = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if c.addrs[id] != "" {
		ln, err = net.Listen("tcp", c.addrs[id])
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{DataDir: c.dirs[id], NodeID: id, KafkaAddr: ln.Addr().String(),
		AdminAddr: "127.0.0.1:0", ClusterAddr: cluster, ControllerVoters: c.voters, Console: &bytes.Buffer{},
		ObjectStore: c.objectStore, ObjectBatchTimeout: c.batchTimeout, ObjectRetentionInterval: c.retentionInterval,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: testLogLevel()}))}
	if c.tune != nil {
		c.tune(id, &cfg)
	}
	s, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return s, ln, nil
}

// startAgent starts an agent (server.Config.Agent) in this process as node id, sharing the
// cluster's object store, and returns its Kafka address.
func (c *testCluster) startAgent(id int32) string {
	t := c.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Agent: true, NodeID: id, KafkaAddr: ln.Addr().String(), AdminAddr: "127.0.0.1:0",
		ClusterAddr: "127.0.0.1:0", ControllerVoters: c.voters, Console: &bytes.Buffer{}, ObjectStore: c.objectStore,
		ObjectBatchTimeout: c.batchTimeout, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: testLogLevel()}))}
	if c.tune != nil {
		c.tune(id, &cfg)
	}
	s, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("agent %d: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	c.servers[id], c.addrs[id], c.cancels[id], c.served[id] = s, ln.Addr().String(), cancel, served
	go func() { served <- s.Serve(ctx, ln) }()
	return ln.Addr().String()
}

func (c *testCluster) stop(id int32) {
	if c.cancels[id] == nil {
		return
	}
	c.cancels[id]()
	<-c.served[id]
	c.servers[id].Close()
	delete(c.cancels, id)
	delete(c.servers, id)
}

// forgetBoot makes stopped node id's next start count as one after its machine crashed (a new
// boot): it removes the boot mark from its data dir, so its registration cannot say it kept the
// previous run's writes.
func (c *testCluster) forgetBoot(id int32) {
	if err := os.Remove(filepath.Join(c.dirs[id], "boot.mark")); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) brokers() []string {
	var out []string
	for id, a := range c.addrs {
		if c.servers[id] != nil {
			out = append(out, a)
		}
	}
	return out
}

func (c *testCluster) client(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.brokers()...), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// waitNodes waits until the cluster's Metadata names n brokers: a node serves before its
// registration is applied, and a topic created meanwhile cannot be placed on it.
func (c *testCluster) waitNodes(n int) {
	c.t.Helper()
	_, adm := c.client()
	eventually(c.t, fmt.Sprintf("%d brokers in Metadata", n), 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == n
	})
}

func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTopicEverywhere waits until every node's Metadata knows topic (metadata reaches nodes
// after a creation is answered, as in Kafka), asking each node directly through cl.
func (c *testCluster) waitTopicEverywhere(ctx context.Context, cl *kgo.Client, topic string) {
	c.t.Helper()
	eventually(c.t, topic+" in every node's metadata", 30*time.Second, func() bool {
		for id := range c.servers {
			if md, err := nodeMetadata(ctx, cl, id, topic); err != nil || md.Topics[0].ErrorCode != 0 {
				return false
			}
		}
		return true
	})
}

// nodeMetadata asks one node for its Metadata of topic (kadm answers from the client's cache).
func nodeMetadata(ctx context.Context, cl *kgo.Client, node int32, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// TestClusterProduceReassignElect runs four nodes (three voters and a broker-only node):
// a topic replicated three times is produced to and read back, a partition is moved to the
// broker-only node (kafka-reassign-partitions' requests), leadership is moved back to the
// preferred replica (kafka-leader-election's), and a node is stopped under load.
func TestClusterProduceReassignElect(t *testing.T) {
	c := startCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, adm := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var md kadm.Metadata
	eventually(t, "four brokers in Metadata", 20*time.Second, func() bool {
		var err error
		md, err = adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 4
	})
	if md.Controller < 1 || md.Controller > 3 {
		t.Errorf("controller %d; want a voter (1-3)", md.Controller)
	}
	// Every node registered with this version's command level: the cluster finalizes it.
	eventually(t, "the cluster at this version's command level on every node", 20*time.Second, func() bool {
		for _, s := range c.servers {
			if img := s.Node().Image(); img.Level != controller.Level || img.NodesLevel() != controller.Level {
				return false
			}
		}
		return true
	})
	resp, err := adm.CreateTopic(ctx, 3, 3, nil, "orders")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: int32(i % 3), Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 300)

	// Move partition 0 from its first replica to the node that has none.
	md, _ = adm.Metadata(ctx, "orders")
	p0 := md.Topics["orders"].Partitions[0]
	var spare int32
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(p0.Replicas, id) {
			spare = id
		}
	}
	target := []int32{spare, p0.Replicas[1], p0.Replicas[2]}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("orders", 0, target)
	ar, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || ar.Error() != nil {
		t.Fatalf("reassign: %v %v", err, ar.Error())
	}
	eventually(t, "the reassignment to finish", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "orders")
		if err != nil {
			return false
		}
		p := md.Topics["orders"].Partitions[0]
		return slices.Equal(p.Replicas, target) && p.Leader == spare
	})
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"orders": {0: {}}})
	if err != nil || len(lr.Sorted()) != 0 {
		t.Fatalf("reassignments in progress after finishing: %+v, %v", lr.Sorted(), err)
	}
	removed := p0.Replicas[0]
	eventually(t, "the removed replica's copy to go", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.dirs[removed], "topics", "orders", "0"))
		return os.IsNotExist(err)
	})
	produce(300, 30)

	// Move partition 1's leadership away from its preferred replica, then elect it back.
	md, _ = adm.Metadata(ctx, "orders")
	p1 := md.Topics["orders"].Partitions[1]
	pref := p1.Replicas[0]
	c.stop(pref)
	eventually(t, "a new leader of partition 1", 15*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "orders")
		return err == nil && md.Topics["orders"].Partitions[1].Leader != pref && md.Topics["orders"].Partitions[1].Leader >= 0
	})
	produce(330, 30) // two of three replicas commit
	c.start(pref)
	eventually(t, "the preferred replica back in sync", 20*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "orders")
		return err == nil && slices.Contains(md.Topics["orders"].Partitions[1].ISR, pref)
	})
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	// Not needed if the controller's preferred-leader balancing got there first.
	if r := er["orders"][1]; r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("ElectLeaders: %v %s", r.Err, r.ErrMessage)
	}
	eventually(t, "the preferred replica leading again", 15*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "orders")
		return err == nil && md.Topics["orders"].Partitions[1].Leader == pref
	})

	// Every record, exactly once.
	seen := map[string]int{}
	for len(seen) < 360 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 360 records", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %s read %d times", v, n)
		}
	}
}

// A node restarted while the controller quorum is lost cannot serve: its Kafka listeners stay
// closed until an active controller answers it, as a Kafka broker's acceptors stay closed until
// it is unfenced, so a client with it in its bootstrap list is refused at once and tries its
// next address instead of waiting out its request timeout on a connection nobody answers. From
// its registration on, the metadata names the node (object partitions' leaders are picked among
// the live nodes), so its listeners are open by then: a client sent there is not refused (and
// left waiting for its next metadata refresh, 5 s with franz-go).
func TestRestartedNodeOpensItsListenersOnceJoined(t *testing.T) {
	other := freeAddr(t)
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(id int32, cfg *server.Config) {
			if id == 1 {
				cfg.Listeners = []security.Listener{
					{Name: "PLAINTEXT", Protocol: security.Plaintext, Addr: cfg.KafkaAddr, Advertised: cfg.KafkaAddr},
					{Name: "OTHER", Protocol: security.Plaintext, Addr: other, Advertised: other},
				}
			}
		}
	})
	c.waitNodes(3)
	kafka := c.addrs[1]
	ctx := context.Background()
	cl, _ := c.client()
	// Partitions for node 1 to open when it joins: the time between its registration and its
	// joining grows with them.
	createTopicWith(ctx, t, cl, "many", 48, 3, nil, nil)

	// run starts node 1 with Run, which binds its configured addresses itself; stop stops it.
	run := func() (stop func()) {
		s, ln, err := c.open(1)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		rctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- s.Run(rctx) }()
		return func() {
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("Run = %v", err)
			}
			s.Close()
		}
	}
	refused := func(addr string) bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	// watch asks node via for Metadata without a pause until node 1 serves, and fails the test
	// if an answer names node 1 while one of its ports refuses connections.
	watch := func(via string) {
		t.Helper()
		watcher, err := kgo.NewClient(kgo.SeedBrokers(via))
		if err != nil {
			t.Fatal(err)
		}
		defer watcher.Close()
		direct, err := kgo.NewClient(kgo.SeedBrokers(kafka))
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		named := 0
		serving := func() bool {
			mctx, mcancel := context.WithTimeout(ctx, 2*time.Second)
			defer mcancel()
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, watcher)
			if err != nil || !slices.ContainsFunc(resp.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == 1 }) {
				return false
			}
			named++
			for _, addr := range []string{kafka, other} {
				if refused(addr) {
					t.Fatalf("node %s's metadata names node 1 live, and %s refuses connections", via, addr)
				}
			}
			actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer acancel()
			_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(actx, direct)
			return err == nil // answered: node 1 serves
		}
		for deadline := time.Now().Add(60 * time.Second); !serving(); {
			if time.Now().After(deadline) {
				t.Fatal("node 1 did not serve within 60 s")
			}
		}
		t.Logf("the metadata named node 1 in %d answers before it served", named)
	}

	// gone waits until node 2's metadata no longer names node 1 (stopped).
	gone := func() {
		t.Helper()
		eventually(t, "node 1 out of node 2's metadata", 30*time.Second, func() bool {
			resp, err := nodeMetadata(ctx, cl, 2, "many")
			return err == nil && !slices.ContainsFunc(resp.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == 1 })
		})
	}

	// A restart with the quorum up: node 1 is named once the controller takes its registration.
	c.stop(1)
	gone()
	stop := run()
	watch(c.addrs[2])
	stop()
	gone() // else node 2 starts again below with node 1 live in its image, from before

	// Node 1 alone: one voter of three, no quorum. Its ports stay closed.
	c.stop(2)
	c.stop(3)
	stop = run()
	defer stop()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, addr := range []string{kafka, other} {
			if !refused(addr) {
				t.Fatalf("%s accepted a connection while the node cannot join (no controller quorum); want it refused", addr)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The quorum is back: node 1 registers and opens both listeners.
	c.start(2)
	watch(c.addrs[2])
	for _, addr := range []string{kafka, other} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		rcancel()
		cl.Close()
		if err != nil || len(resp.Brokers) == 0 {
			t.Errorf("Metadata on %s = %v, %v; want the brokers", addr, resp, err)
		}
	}
}
