package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/replica"
	"github.com/runnel-dev/runnel/internal/topics"
	"github.com/runnel-dev/runnel/internal/transport"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type testNode struct {
	*Node
	reg     *topics.Registry
	flusher *logstore.Flusher
	dir     string
	closed  sync.Once
}

// close closes the node; again, it does nothing.
func (tn *testNode) close() {
	tn.closed.Do(func() {
		tn.Node.Close()
		tn.reg.Close()
		tn.flusher.Close()
	})
}

// listenNodes listens on loopback for nodes 1..n, and returns the listeners and the cluster
// addresses of nodes 1..voters, the controller voters.
func listenNodes(t *testing.T, n, voters int) (map[int32]net.Listener, map[int32]string) {
	t.Helper()
	lns, addrs := map[int32]net.Listener{}, map[int32]string{}
	for id := int32(1); id <= int32(n); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id] = ln
		if id <= int32(voters) {
			addrs[id] = ln.Addr().String()
		}
	}
	return lns, addrs
}

// waitReady waits until every node has joined, or ctx ends.
func waitReady(t *testing.T, ctx context.Context, nodes ...*testNode) {
	t.Helper()
	for _, tn := range nodes {
		if err := tn.WaitReady(ctx); err != nil {
			t.Fatalf("node %d: %v", tn.NodeID(), err)
		}
	}
}

// startNodes starts nodes 1..n, all voters, on loopback.
func startNodes(t *testing.T, n int) map[int32]*testNode {
	t.Helper()
	lns, voters := listenNodes(t, n, n)
	nodes := map[int32]*testNode{}
	for id := int32(1); id <= int32(n); id++ {
		nodes[id] = startNode(t, id, lns[id], voters, t.TempDir())
	}
	t.Cleanup(func() {
		for _, tn := range nodes {
			tn.close()
		}
	})
	for _, tn := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := tn.WaitReady(ctx); err != nil {
			t.Fatalf("node %d: %v", tn.NodeID(), err)
		}
		cancel()
	}
	return nodes
}

func startNode(t *testing.T, id int32, ln net.Listener, voters map[int32]string, dir string) *testNode {
	t.Helper()
	return startNodeWith(t, id, ln, voters, dir, func(*Config) {})
}

// startNodeWith starts a node after tune has changed its configuration.
func startNodeWith(t *testing.T, id int32, ln net.Listener, voters map[int32]string, dir string, tune func(*Config)) *testNode {
	t.Helper()
	tn, err := tryStartNode(t, id, ln, voters, dir, tune)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// tryStartNode is startNodeWith returning Start's error.
func tryStartNode(t *testing.T, id int32, ln net.Listener, voters map[int32]string, dir string, tune func(*Config)) (*testNode, error) {
	t.Helper()
	cfg := Config{NodeID: id, Listener: ln, Voters: voters, KafkaHost: "127.0.0.1", KafkaPort: 9000 + id,
		DataDir: dir, Logger: quiet}
	tune(&cfg)
	flusher := logstore.NewFlusher(0)
	reg, err := topics.Open(topics.Options{FS: cfg.FS, DataDir: dir, Flusher: flusher, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Registry = reg
	nd, err := Start(cfg)
	if err != nil {
		reg.Close()
		flusher.Close()
		return nil, err
	}
	return &testNode{Node: nd, reg: reg, flusher: flusher, dir: dir}, nil
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func oneRecord(val string) []byte {
	recs := batch.AppendRecord(nil, 0, 0, nil, []byte(val), 0, nil)
	return batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
		BaseTimestamp: 1, MaxTimestamp: 1}, recs)
}

func leaderReplica(nodes map[int32]*testNode, topic string, part int32) (*testNode, *replica.Replica) {
	for _, tn := range nodes {
		t, ok := tn.reg.Get(topic)
		if !ok || int(part) >= len(t.Partitions) || t.Partitions[part].Replica == nil {
			continue
		}
		if _, ready, leading := t.Partitions[part].Replica.Leading(); leading && ready {
			return tn, t.Partitions[part].Replica
		}
	}
	return nil, nil
}

func TestThreeNodesReplicateAndFailOver(t *testing.T) {
	nodes := startNodes(t, 3)
	n1 := nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := controller.TopicID{1, 2, 3}
	res, err := n1.Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: "orders", ID: id, Configs: map[string]string{"write.caching": "false"}, Assignments: [][]int32{{2, 3, 1}}}})
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	var lead *testNode
	var r *replica.Replica
	waitFor(t, "a ready leader", 10*time.Second, func() bool { lead, r = leaderReplica(nodes, "orders", 0); return r != nil })
	if lead.NodeID() != 2 {
		t.Fatalf("leader %d; want 2, the preferred replica", lead.NodeID())
	}
	var last int64
	for i := range 100 {
		res, epoch, err := r.Append(oneRecord(fmt.Sprintf("v%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		r.Log.SyncSoon()
		if err := r.WaitCommitted(ctx, epoch, res.Last+1); err != nil {
			t.Fatal(err)
		}
		last = res.Last + 1
	}
	for _, tn := range nodes {
		tp, _ := tn.reg.Get("orders")
		l := tp.Partitions[0].Log
		waitFor(t, fmt.Sprintf("node %d's copy", tn.NodeID()), 5*time.Second, func() bool { return l.EndOffset() == last })
	}
	// The leader dies: another replica takes over, with everything acknowledged.
	start := time.Now()
	lead.close()
	delete(nodes, lead.NodeID())
	var r2 *replica.Replica
	waitFor(t, "a new leader", 10*time.Second, func() bool { _, r2 = leaderReplica(nodes, "orders", 0); return r2 != nil })
	t.Logf("failover took %v", time.Since(start))
	if end := r2.Log.EndOffset(); end != last {
		t.Fatalf("new leader's log ends at %d; want %d", end, last)
	}
	res2, epoch, err := r2.Append(oneRecord("after"))
	if err != nil {
		t.Fatal(err)
	}
	r2.Log.SyncSoon()
	if err := r2.WaitCommitted(ctx, epoch, res2.Last+1); err != nil {
		t.Fatalf("commit with two of three replicas: %v", err)
	}
}

func TestSingleNodeRestartKeepsTopics(t *testing.T) {
	dir := t.TempDir()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	tn := startNode(t, 0, ln, nil, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: "a", ID: controller.TopicID{9}, Assignments: [][]int32{{0}, {0}}}}); err != nil {
		t.Fatal(err)
	}
	var r *replica.Replica
	waitFor(t, "leader", 5*time.Second, func() bool { _, r = leaderReplica(map[int32]*testNode{0: tn}, "a", 1); return r != nil })
	res, epoch, err := r.Append(oneRecord("x"))
	if err != nil {
		t.Fatal(err)
	}
	r.Log.SyncSoon()
	if err := r.WaitCommitted(ctx, epoch, res.Last+1); err != nil {
		t.Fatal(err)
	}
	tn.close()
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	tn = startNode(t, 0, ln, nil, dir)
	defer tn.close()
	if err := tn.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader after restart", 5*time.Second, func() bool { _, r = leaderReplica(map[int32]*testNode{0: tn}, "a", 1); return r != nil })
	if e, _, _ := r.Leading(); e <= epoch {
		t.Fatalf("epoch after restart %d; want past %d (a restarted leader gets a new epoch)", e, epoch)
	}
	if end := r.Log.EndOffset(); end != 1 {
		t.Fatalf("log end after restart %d; want 1", end)
	}
}

// TestCallFailsWhenPeerDies: a call waiting for a node that dies ends at once with an error, not
// at its deadline (a Kafka request waiting on it would time out at the client first).
func TestCallFailsWhenPeerDies(t *testing.T) {
	nodes := startNodes(t, 3)
	release := make(chan struct{})
	defer close(release)
	nodes[2].Handle("test.hang", func(context.Context, int32, []byte) (any, error) {
		<-release // the answer never comes while the node lives
		return nil, nil
	})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- nodes[1].Call(ctx, 2, "test.hang", struct{}{}, nil)
	}()
	time.Sleep(200 * time.Millisecond)
	nodes[2].close()
	delete(nodes, 2)
	select {
	case err := <-done:
		if err == nil || time.Since(start) > 10*time.Second {
			t.Fatalf("call to a dead node = %v after %v; want an error at once", err, time.Since(start))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call to a dead node still waits")
	}
}

// TestCanTakeOver: the sequencer waits for a takeover instead of failing a total-order shard
// exactly when another replica is live (or already leads it); a shard whose only replica is
// gone, or whose other replicas are all fenced, is failed as a whole.
func TestCanTakeOver(t *testing.T) {
	liveSet := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	for _, c := range []struct {
		name string
		p    controller.Partition
		ran  int32
		live func(int32) bool
		want bool
	}{
		{"leader frozen, followers live", controller.Partition{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2, 3}}, 1, liveSet(1, 2, 3), true},
		{"leader fenced, election due", controller.Partition{Replicas: []int32{1, 2, 3}, Leader: -1, ISR: []int32{2, 3}}, 1, liveSet(2, 3), true},
		{"taken over, its ISR alone", controller.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{2}}, 1, liveSet(2, 3), true},
		{"new leader reporting, followers catching up", controller.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{2}}, 2, liveSet(2, 3), true},
		{"new leader reporting, no follower live", controller.Partition{Replicas: []int32{1, 2}, Leader: 2, ISR: []int32{2}}, 2, liveSet(2), false},
		{"one replica", controller.Partition{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}, 1, liveSet(1, 2, 3), false},
		{"one replica, its node gone", controller.Partition{Replicas: []int32{1}, Leader: -1, ISR: []int32{1}}, 1, liveSet(2, 3), false},
		{"every other replica fenced", controller.Partition{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1}}, 1, liveSet(1), false},
		{"reporter unknown (new sequencer leader), replicas live", controller.Partition{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1, 2}}, -1, liveSet(1, 2), true},
	} {
		if got := canTakeOver(&c.p, c.ran, c.live); got != c.want {
			t.Errorf("%s: canTakeOver = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestProposeRetryIsAppliedOnce: the active controller's answers to a node are lost for a
// while, so the node's proposal times out and is proposed again; the command is applied once,
// and the node gets the first attempt's result (the topic its first attempt created is not
// reported as existing already).
func TestProposeRetryIsAppliedOnce(t *testing.T) {
	nodes := startNodes(t, 3)
	var leader int32
	waitFor(t, "an active controller", 10*time.Second, func() bool { leader = nodes[1].ControllerID(); return leader > 0 })
	asker := nodes[1+leader%3]
	var mu sync.Mutex
	var until time.Time
	dropped := 0
	asker.Transport().SetFilter(func(from, _ int32, kind transport.Kind) bool {
		mu.Lock()
		defer mu.Unlock()
		if from == leader && kind == kindRPCResponse && time.Now().Before(until) {
			dropped++
			return true
		}
		return false
	})
	mu.Lock()
	until = time.Now().Add(1200 * time.Millisecond)
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := asker.Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: "once", ID: controller.TopicID{9}, Assignments: [][]int32{{leader}}}})
	mu.Lock()
	n := dropped
	mu.Unlock()
	if err != nil || res.Err != nil {
		t.Fatalf("the proposal after %d lost answers: %v, %v; want the first attempt's success", n, err, res.Err)
	}
	if n == 0 {
		t.Fatal("no answer was lost: the test did not test a retry")
	}
	// A new request (not a retry) to create it again is refused.
	res, err = asker.Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
		Name: "once", ID: controller.TopicID{10}, Assignments: [][]int32{{leader}}}})
	if err != nil || !errors.Is(res.Err, controller.ErrTopicExists) {
		t.Fatalf("a new request to create the topic again: %v, %v; want ErrTopicExists", err, res.Err)
	}
}

// TestLocalCallTimesOutAsARemoteOne: a call to this node's own handler that runs out of time is
// reported as no answer (a context error), as a remote call is, not as the handler's failure:
// callController tries it again instead of giving up (it gave up: a node that was itself the
// active controller answered NOT_CONTROLLER to an admin change whose commit took over 1 s).
func TestLocalCallTimesOutAsARemoteOne(t *testing.T) {
	r := newRPC(context.Background(), 1, func(int32, transport.Kind, []byte) {})
	r.handle("slow", func(ctx context.Context, _ int32, _ []byte) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.call(ctx, 1, "slow", struct{}{}, nil)
	var re *rpcError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &re) {
		t.Fatalf("a local call past its deadline: %v (%T); want a context error, not an rpcError", err, err)
	}
}

// TestClosingNodeDoesNotAnswer: a handler that fails because its node is closing (a proposal
// waiting on the controller being stopped) sends no answer, as a node that is gone: the caller
// asks again elsewhere instead of taking the failure for the controller's answer.
func TestClosingNodeDoesNotAnswer(t *testing.T) {
	sctx, closing := context.WithCancel(context.Background())
	var server, client *rpcLayer
	server = newRPC(sctx, 2, func(to int32, kind transport.Kind, body []byte) { go client.receive(2, kind, body) })
	client = newRPC(context.Background(), 1, func(to int32, kind transport.Kind, body []byte) { go server.receive(1, kind, body) })
	server.handle("propose", func(ctx context.Context, _ int32, _ []byte) (any, error) {
		<-ctx.Done()
		return nil, errors.New("controller: stopped")
	})
	server.handle("fail", func(context.Context, int32, []byte) (any, error) { return nil, errors.New("refused") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var re *rpcError
	if err := client.call(ctx, 2, "fail", struct{}{}, nil); !errors.As(err, &re) {
		t.Fatalf("a handler's failure: %v; want it answered", err)
	}
	time.AfterFunc(50*time.Millisecond, closing)
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := client.call(short, 2, "propose", struct{}{}, nil); !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &re) {
		t.Fatalf("a proposal on a closing node: %v; want no answer (a context error), not an rpcError", err)
	}
}

// TestRegisterOnEmptyDataDirRefused: the active controller refuses the registration of a node
// id it knows from a process that started on an empty data dir (the second check, for a node
// that could not ask the voters before it started), and the same node's registration from its
// own data is taken; so is a registration from an empty data dir retried after its answer was
// lost (the image has it already, from the same run).
func TestRegisterOnEmptyDataDirRefused(t *testing.T) {
	nodes := startNodes(t, 3)
	n := nodes[2].Node
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(t, "node 3 registered in node 2's image", 10*time.Second, func() bool { return n.Image().Nodes[3] != nil })
	known := n.Image().Nodes[3]
	req := registerRequest{Register: controller.Register{Node: 3, KafkaHost: known.KafkaHost, KafkaPort: known.KafkaPort,
		ClusterAddr: known.ClusterAddr, Level: controller.Level}, EmptyDataDir: true} // as this version registers: the level may be finalized already
	var resp registerResponse
	err := n.callController(ctx, "register", req, &resp)
	var re *rpcError
	if !errors.As(err, &re) || re.Code != codeLostData {
		t.Fatalf("register of known node 3 from an empty data dir = %v; want code %s", err, codeLostData)
	}
	if n.Image().Nodes[3].Incarnation != known.Incarnation {
		t.Fatalf("the refused registration changed node 3's incarnation")
	}
	req.EmptyDataDir = false
	if err := n.callController(ctx, "register", req, &resp); err != nil {
		t.Fatalf("register of node 3 from its data = %v", err)
	}
	// A new node (no cluster address: nothing follows it) on an empty data dir.
	req = registerRequest{Register: controller.Register{Node: 9, KafkaHost: "127.0.0.1", KafkaPort: 1, Run: "9-a", Level: controller.Level}, EmptyDataDir: true}
	for attempt := range 2 { // the second as if the first one's answer was lost
		if err := n.callController(ctx, "register", req, &resp); err != nil {
			t.Fatalf("node 9's registration from an empty data dir, attempt %d = %v", attempt+1, err)
		}
	}
	req.Run = "9-b"
	if err := n.callController(ctx, "register", req, &resp); !errors.As(err, &re) || re.Code != codeLostData {
		t.Fatalf("another run of node 9 from an empty data dir = %v; want code %s", err, codeLostData)
	}
	// A node on an empty data dir whose flags make it a voter the cluster does not have.
	req = registerRequest{Register: controller.Register{Node: 8, KafkaHost: "127.0.0.1", KafkaPort: 1, Run: "8-a", Level: controller.Level}, EmptyDataDir: true, Voter: true}
	if err := n.callController(ctx, "register", req, &resp); !errors.As(err, &re) || re.Code != codeNotVoter {
		t.Fatalf("node 8 on an empty data dir, a voter by its flags only = %v; want code %s", err, codeNotVoter)
	}
	// A voter's empty-data-dir check runs beside its registration: its own run's registration
	// is not "known", nor that of an earlier process on the same data dir since it was empty
	// (it died before it removed the JOINING mark). Node 1 answers from its own image, which
	// may trail the active controller's (under -race and load it did, by one registration).
	waitFor(t, "node 9's registration in node 1's image", 10*time.Second, func() bool {
		nd := nodes[1].Node.Image().Nodes[9]
		return nd != nil && nd.Run == "9-a"
	})
	for _, c := range []struct {
		runs  []string
		known bool
	}{{[]string{"9-a"}, false}, {[]string{"9-b"}, true}, {[]string{"9-a", "9-c"}, false}} {
		var kr nodeKnownResponse
		if err := n.rpc.call(ctx, 1, "node-known", nodeKnownRequest{Node: 9, Runs: c.runs}, &kr); err != nil || kr.Known != c.known {
			t.Fatalf("node-known of node 9 asked by runs %v: %+v, %v; want known %v", c.runs, kr, err, c.known)
		}
	}
	req = registerRequest{Register: controller.Register{Node: 9, KafkaHost: "127.0.0.1", KafkaPort: 1, Run: "9-c", Level: controller.Level}, EmptyDataDir: true,
		JoiningRuns: []string{"9-a", "9-c"}} // as this version registers: the level may be finalized by now
	if err := n.callController(ctx, "register", req, &resp); err != nil {
		t.Fatalf("node 9 again on the data dir it registered from (its mark not removed) = %v; want it taken", err)
	}
}

// TestBrokerOnEmptyDataDirFailsAtRegistration: a broker on an empty data dir whose id the
// cluster knows, whose voters could not answer the check before it started (here: voters of an
// older version, without node-known), is refused when it registers, and the node fails with
// ErrLostData (runnel serve exits with it) instead of serving.
func TestBrokerOnEmptyDataDirFailsAtRegistration(t *testing.T) {
	nodes := startNodes(t, 3)
	voters := nodes[1].cfg.Voters
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	b := startNode(t, 4, listen(), voters, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	b.close()
	for _, v := range nodes {
		v.rpc.handle("node-known", func(context.Context, int32, []byte) (any, error) {
			return nil, &rpcError{codeUnknownMethod, "unknown method node-known"}
		})
	}
	b = startNodeWith(t, 4, listen(), voters, t.TempDir(), func(c *Config) { c.EmptyDataDir = true })
	defer b.close()
	select {
	case <-b.Failed():
		if !errors.Is(b.Err(), ErrLostData) {
			t.Fatalf("broker 4 failed with %v; want %v", b.Err(), ErrLostData)
		}
	case <-b.Ready():
		t.Fatal("broker 4 on an empty data dir joined")
	case <-ctx.Done():
		t.Fatal("broker 4 on an empty data dir neither joined nor failed in 20 s")
	}
}

// TestOlderVersionRefusedBelowTheClusterLevel: three nodes of this version raise the cluster's
// command level to theirs; a node of a version before levels is then refused registration and
// fails with controller.ErrLevel (runnel serve exits with it) instead of following the log.
func TestOlderVersionRefusedBelowTheClusterLevel(t *testing.T) {
	nodes := startNodes(t, 3)
	waitFor(t, "the cluster at this version's level", 10*time.Second, func() bool {
		return nodes[1].Image().Level == controller.Level
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := startNodeWith(t, 4, ln, nodes[1].cfg.Voters, t.TempDir(), func(c *Config) { c.olderVersion = true })
	defer b.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case <-b.Failed():
		if !errors.Is(b.Err(), controller.ErrLevel) {
			t.Fatalf("node 4 failed with %v; want %v", b.Err(), controller.ErrLevel)
		}
	case <-b.Ready():
		t.Fatal("node 4 of an older version joined a cluster above its level")
	case <-ctx.Done():
		t.Fatal("node 4 of an older version neither joined nor failed in 20 s")
	}
	if n := nodes[1].Image().Nodes[4]; n != nil {
		t.Fatalf("node 4 is in the image: %+v", n)
	}
}

// TestVoterOnEmptyDataDirWaitsForAnAnswer: a controller voter that lost its data dir and
// starts while the other voters are all away does not start its Raft members on an empty log
// (where it would give its vote to whichever peer came back first, entries or not); once the
// others are back, they say the cluster knows it, and it fails with ErrLostData, its Raft
// members never started.
func TestVoterOnEmptyDataDirWaitsForAnAnswer(t *testing.T) {
	nodes := startNodes(t, 3)
	voters := nodes[1].cfg.Voters
	waitFor(t, "node 3 registered", 10*time.Second, func() bool { return nodes[1].Image().Nodes[3] != nil })
	for _, tn := range nodes {
		tn.close()
	}
	listen := func(id int32) net.Listener {
		ln, err := net.Listen("tcp", voters[id])
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	lost := startNodeWith(t, 3, listen(3), voters, t.TempDir(), func(c *Config) { c.EmptyDataDir = true })
	defer lost.close()
	time.Sleep(time.Second) // a few rounds of asking
	if lost.ctrl.Started() {
		t.Fatal("voter 3 started its controller member on an empty data dir with no other voter answering")
	}
	for _, id := range []int32{1, 2} {
		back := startNode(t, id, listen(id), voters, nodes[id].dir)
		defer back.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case <-lost.Failed():
		if !errors.Is(lost.Err(), ErrLostData) {
			t.Fatalf("voter 3 failed with %v; want %v", lost.Err(), ErrLostData)
		}
	case <-ctx.Done():
		t.Fatal("voter 3 on an empty data dir did not fail in 20 s after the other voters came back")
	}
	if lost.ctrl.Started() {
		t.Error("voter 3 started its controller member before it was refused")
	}
}

// TestNewVotersOnEmptyDataDirsStart: voters of a new cluster, all on empty data dirs and
// started one after another, tell each other that they are new, and form the cluster.
func TestNewVotersOnEmptyDataDirsStart(t *testing.T) {
	lns, voters := listenNodes(t, 3, 3)
	var started []*testNode
	for id := int32(1); id <= 3; id++ {
		tn := startNodeWith(t, id, lns[id], voters, t.TempDir(), func(c *Config) { c.EmptyDataDir = true })
		defer tn.close()
		started = append(started, tn)
	}
	for _, tn := range started {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := tn.WaitReady(ctx); err != nil {
			t.Fatalf("node %d: %v", tn.NodeID(), err)
		}
		cancel()
	}
}
