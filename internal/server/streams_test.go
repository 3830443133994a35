package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/testclients"
)

// Kafka Streams applications (test/clients/java43's StreamsApp43, Kafka Streams 4.3.1) over
// Runnel: the application re-keys its input (a repartition topic), sums per key in a RocksDB
// store (a compacted changelog topic) and writes every update as "SUM:COUNT". Under
// exactly_once_v2 the committed updates of a key count 1, 2, 3, ... with no gap and no repeat
// however often the application or a node dies: a repeat is a record processed twice, a gap
// an update lost.

// streamsGroups is how many keys the application's repartition makes (the input's keys are
// "gN/I" with N below it).
const streamsGroups = 7

// streamsApp starts StreamsApp43 as application app, reading topic "in" and writing topic
// "out" of the cluster at bootstrap.
func startStreamsApp(t *testing.T, bootstrap, app, guarantee, protocol, stateDir string, server ...string) *javaProcess {
	t.Helper()
	java := testclients.Java43Streams(t)
	return startJavaProcess(t, func(stop string) []string {
		return append(append(slices.Clone(java), bootstrap, app, "in", "out", guarantee, protocol, "2", stateDir, stop), server...)
	})
}

// streamsMetadata is the application's last complete report of Interactive Queries'
// metadata (started with an application.server): host:port → its topic-partitions.
func (m *javaProcess) streamsMetadata() map[string][]string {
	var last, cur map[string][]string
	for _, l := range m.output() {
		switch f := strings.Fields(l); {
		case len(f) == 2 && f[0] == "meta" && f[1] == "end":
			last, cur = cur, nil
		case len(f) >= 2 && f[0] == "meta":
			if cur == nil {
				cur = map[string][]string{}
			}
			cur[f[1]] = f[2:]
		}
	}
	return last
}

// waitRunning waits until the application has reached RUNNING n times in all.
func (m *javaProcess) waitRunning(ctx context.Context, n int) {
	m.t.Helper()
	for ctx.Err() == nil {
		runs := 0
		for _, l := range m.output() {
			if l == "state REBALANCING RUNNING" {
				runs++
			}
			if strings.HasPrefix(l, "error ") {
				m.t.Fatalf("the Streams application failed: %s", l)
			}
		}
		if runs >= n {
			return
		}
		select {
		case <-m.done:
			m.t.Fatalf("the Streams application exited before RUNNING:\n%s", strings.Join(m.output(), "\n"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	m.t.Fatalf("the Streams application is not RUNNING: %v", ctx.Err())
}

// produceStreamsInput produces records first..last-1 ("gN/I" = I, N = I mod streamsGroups) to
// topic "in", one synchronous batch of 50 at a time, or of 10 every 10 ms if paced (the
// application then has work in hand for seconds).
func produceStreamsInput(t *testing.T, ctx context.Context, cl *kgo.Client, first, last int, paced bool) {
	t.Helper()
	batch := 50
	if paced {
		batch = 10
	}
	for i := first; i < last; {
		if paced {
			time.Sleep(10 * time.Millisecond)
		}
		var recs []*kgo.Record
		for ; i < last && len(recs) < batch; i++ {
			recs = append(recs, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "g%d/%d", i%streamsGroups, i), Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("producing the input: %v", err)
		}
	}
}

// checkStreamsOutput reads topic "out" read_committed until every key's last update counts all
// n input records of its key (records 0..n-1), and fails unless each key's updates count 1, 2,
// 3, ... in order and its last sum is the sum of its inputs.
func checkStreamsOutput(t *testing.T, ctx context.Context, seeds []string, n int) {
	t.Helper()
	wantCount, wantSum := map[string]int64{}, map[string]int64{}
	for i := range n {
		k := fmt.Sprintf("g%d", i%streamsGroups)
		wantCount[k]++
		wantSum[k] += int64(i)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	counts, sums := map[string]int64{}, map[string]int64{}
	var problems []string
	done := func() bool {
		for k, c := range wantCount {
			if counts[k] < c {
				return false
			}
		}
		return true
	}
	for !done() && ctx.Err() == nil && len(problems) < 10 {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				problems = append(problems, fmt.Sprintf("fetching %s/%d: %v", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			sum, count, ok := strings.Cut(string(r.Value), ":")
			s, err1 := strconv.ParseInt(sum, 10, 64)
			c, err2 := strconv.ParseInt(count, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				problems = append(problems, fmt.Sprintf("out/%d@%d: bad update %q=%q", r.Partition, r.Offset, k, r.Value))
				return
			}
			if c != counts[k]+1 {
				problems = append(problems, fmt.Sprintf("out/%d@%d: key %s counts %d after %d (a repeat or a lost update)", r.Partition, r.Offset, k, c, counts[k]))
			}
			counts[k], sums[k] = c, s
		})
	}
	if !done() {
		problems = append(problems, fmt.Sprintf("the output reached counts %v, want %v (%v)", counts, wantCount, ctx.Err()))
	}
	for k, c := range counts {
		if c > wantCount[k] {
			problems = append(problems, fmt.Sprintf("key %s counts %d inputs, it has %d", k, c, wantCount[k]))
		}
	}
	for k, s := range wantSum {
		if counts[k] == wantCount[k] && sums[k] != s {
			problems = append(problems, fmt.Sprintf("key %s sums to %d, want %d", k, sums[k], s))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("the Streams output is not exactly once:\n%s", strings.Join(problems, "\n"))
	}
}

// checkStreamsCommitted fails unless the application's committed offsets of topic "in" are its
// end offsets (everything read was committed, through TxnOffsetCommit under exactly_once_v2).
func checkStreamsCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, app string) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	// A coordinator moving (its partition between a leader and the next after a node came
	// back) answers a retriable error; kadm does not retry a FindCoordinator's, a user would.
	offsets, err := adm.FetchOffsets(ctx, app)
	for kerr.IsRetriable(err) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		offsets, err = adm.FetchOffsets(ctx, app)
	}
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := offsets.Lookup("in", e.Partition); !ok || o.At != e.Offset {
			t.Errorf("application %s committed in/%d at %d (%v), the end is %d", app, e.Partition, o.At, ok, e.Offset)
		}
	})
}

// TestKafkaStreamsExactlyOnce: a Kafka Streams application under exactly_once_v2 on one node,
// killed (SIGKILL) while a transaction of it holds records in the log and has not asked to
// commit, restarted on the same state directory, gives each update exactly once, and its
// committed offsets reach the input's end.
func TestKafkaStreamsExactlyOnce(t *testing.T) {
	testclients.Java43Streams(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("in", 4)
	b.createTopic("out", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := b.client()
	adm := kadm.NewClient(cl)
	state := filepath.Join(t.TempDir(), "state")
	app := startStreamsApp(t, b.addr, "sums", "exactly_once_v2", "classic", state)
	app.waitRunning(ctx, 1)
	produceStreamsInput(t, ctx, cl, 0, 2000, false)
	// While the input comes in paced, the application is stopped (SIGSTOP) as soon as one of
	// its transactions holds records in "out" (its last stable offset trails the end). A
	// transaction it had already asked to commit is completed by its coordinator within a
	// second; one still open after it can only end by an abort, and the application is killed
	// there (SIGKILL): the next instance's InitProducerId aborts it, and none of its updates
	// may show read_committed. A stop that finds the transaction committed after all lets the
	// application go on and tries again.
	next, aborted := 2000, false
	for try := 0; try < 20 && !aborted; try++ {
		produced := make(chan struct{})
		go func(first int) {
			defer close(produced)
			produceStreamsInput(t, ctx, cl, first, first+500, true)
		}(next)
		next += 500
		for ctx.Err() == nil && !openTransaction(t, ctx, adm, "out") {
			time.Sleep(5 * time.Millisecond)
		}
		app.pause()
		time.Sleep(time.Second)
		if aborted = openTransaction(t, ctx, adm, "out"); aborted {
			t.Logf("stop %d found a transaction open", try+1)
			app.kill()
		} else {
			app.resume()
		}
		<-produced
	}
	if !aborted {
		t.Fatal("no stop found a transaction open in 20 tries")
	}
	app = startStreamsApp(t, b.addr, "sums", "exactly_once_v2", "classic", state)
	app.waitRunning(ctx, 1)
	produceStreamsInput(t, ctx, cl, next, next+1000, false)
	next += 1000
	checkStreamsOutput(t, ctx, []string{b.addr}, next)
	if out := app.stop(); !slices.Contains(out, "closed") {
		t.Fatalf("the application did not close:\n%s", strings.Join(out, "\n"))
	}
	checkStreamsCommitted(t, ctx, adm, "sums")
	all := testclients.ReadValues(t, ctx, []string{b.addr}, "out", kgo.ReadUncommitted(), next+1, 5*time.Second)
	if len(all) <= next {
		t.Errorf("read_uncommitted finds %d updates, read_committed %d: the aborted transaction's are missing", len(all), next)
	}
}

// openTransaction reports whether some partition of topic holds records of a transaction not
// yet ended (its last stable offset is below its end).
func openTransaction(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) bool {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return false
	}
	open := false
	ends.Each(func(e kadm.ListedOffset) {
		if s, ok := stable.Lookup(topic, e.Partition); ok && e.Err == nil && s.Err == nil && s.Offset < e.Offset {
			open = true
		}
	})
	return open
}

// TestKafkaStreamsOnACluster: the same application on a three-node cluster (its internal
// topics replicated three times), with one node stopped and later restarted while it runs, and
// a second instance joining: each update exactly once. The node stopped is the group's
// coordinator: a classic group's members rejoin the next one, a streams group's state is
// loaded from __consumer_offsets by it (members, epochs, tasks) and goes on.
func TestKafkaStreamsOnACluster(t *testing.T) {
	for _, protocol := range []string{"classic", "streams"} {
		t.Run(protocol, func(t *testing.T) { kafkaStreamsOnACluster(t, protocol) })
	}
}

func kafkaStreamsOnACluster(t *testing.T, protocol string) {
	testclients.Java43Streams(t)
	c := startCluster(t, 3)
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, adm := c.client()
	for topic, n := range map[string]int32{"in": 4, "out": 2} {
		if r, err := adm.CreateTopic(ctx, n, 3, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
		c.waitTopicEverywhere(ctx, cl, topic)
	}
	seeds := c.brokers()
	bootstrap := strings.Join(seeds, ",")
	a := startStreamsApp(t, bootstrap, "csums", "exactly_once_v2", protocol, filepath.Join(t.TempDir(), "a"))
	a.waitRunning(ctx, 1)
	produceStreamsInput(t, ctx, cl, 0, 1500, false)
	b := startStreamsApp(t, bootstrap, "csums", "exactly_once_v2", protocol, filepath.Join(t.TempDir(), "b"))
	b.waitRunning(ctx, 1)
	produceStreamsInput(t, ctx, cl, 1500, 3000, true)
	// The group's coordinator node goes away (and with it the leaderships it held).
	coord := adm.FindGroupCoordinators(ctx, "csums")
	if coord["csums"].Err != nil {
		t.Fatalf("finding the coordinator: %v", coord["csums"].Err)
	}
	gone := coord["csums"].NodeID
	c.stop(gone)
	produceStreamsInput(t, ctx, cl, 3000, 4500, true)
	c.start(gone)
	produceStreamsInput(t, ctx, cl, 4500, 6000, true)
	checkStreamsOutput(t, ctx, seeds, 6000)
	for _, m := range []*javaProcess{a, b} {
		if out := m.stop(); !slices.Contains(out, "closed") {
			t.Fatalf("an application instance did not close:\n%s", strings.Join(out, "\n"))
		}
	}
	checkStreamsCommitted(t, ctx, adm, "csums")
}

// TestKafkaStreamsGroupProtocol: the application with group.protocol=streams (KIP-1071, a
// streams group): the broker creates its repartition and changelog topics with the configs the
// application sent, assigns its tasks (a standby of each stateful task on the other instance),
// moves them when a second instance joins and when one is killed (SIGKILL: its session
// expires), and each update counts exactly once under exactly_once_v2.
func TestKafkaStreamsGroupProtocol(t *testing.T) {
	testclients.Java43Streams(t)
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.StreamsSessionTimeout, c.StreamsHeartbeatInterval, c.StreamsStandbyReplicas = 6*time.Second, 500*time.Millisecond, 1
	})
	b.createTopic("in", 4)
	b.createTopic("out", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := b.client()
	adm := kadm.NewClient(cl)
	a := startStreamsApp(t, b.addr, "ssums", "exactly_once_v2", "streams", filepath.Join(t.TempDir(), "a"), "localhost:7001")
	a.waitRunning(ctx, 1)
	configs, err := adm.DescribeTopicConfigs(ctx, "ssums-regroup-repartition", "ssums-totals-changelog")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range configs {
		want := map[string]string{"ssums-regroup-repartition": "delete", "ssums-totals-changelog": "compact"}[rc.Name]
		var got string
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				got = *c.Value
			}
		}
		if rc.Err != nil || got != want {
			t.Errorf("internal topic %s: cleanup.policy %q (%v), want %q", rc.Name, got, rc.Err, want)
		}
	}
	produceStreamsInput(t, ctx, cl, 0, 1500, false)
	bApp := startStreamsApp(t, b.addr, "ssums", "exactly_once_v2", "streams", filepath.Join(t.TempDir(), "b"), "localhost:7002")
	bApp.waitRunning(ctx, 1)
	produceStreamsInput(t, ctx, cl, 1500, 3000, true)
	waitStreamsGroup(t, ctx, cl, "ssums", 4, 2)
	// Interactive Queries: each instance learns (from the heartbeats' endpoint information)
	// which instance serves which input partition, each partition of "in" by exactly one.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var problem string
		for name, app := range map[string]*javaProcess{"A": a, "B": bApp} {
			meta := app.streamsMetadata()
			owners := map[string]int{}
			for _, tps := range meta {
				for _, tp := range tps {
					owners[tp]++
				}
			}
			for p := range 4 {
				if n := owners[fmt.Sprintf("in-%d", p)]; n != 1 || len(meta) != 2 {
					problem = fmt.Sprintf("instance %s's metadata: %v", name, meta)
				}
			}
		}
		if problem == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Interactive Queries metadata never settled: %s", problem)
		}
	}
	tool := kafkaTool(t, "org.apache.kafka.tools.streams.StreamsGroupCommand")
	streamsGroups := func(args ...string) string {
		t.Helper()
		return runClient(t, 60*time.Second, "", tool[0], append(tool[1:], append([]string{"--bootstrap-server", b.addr}, args...)...)...)
	}
	// `runnel group describe` (and the console, through the same adminops) describes it.
	if out, err := runCommand("group", b.addr, "describe", "ssums"); err != nil || !strings.Contains(out, `group ssums: Stable, protocol "streams", 4 members`) ||
		len(regexp.MustCompile(`(?m)^in\s+[0-3]\s+\d+\s+\d+\s+\d+\s+\S+\s*$`).FindAllString(out, -1)) != 4 {
		t.Errorf("runnel group describe ssums: %v\n%s", err, out)
	}
	// Kafka's kafka-streams-groups tool (4.1.1) lists and describes it.
	if out := streamsGroups("--list", "--state"); !regexp.MustCompile(`(?m)^ssums\s+Stable\s*$`).MatchString(out) {
		t.Errorf("kafka-streams-groups --list --state:\n%s", out)
	}
	members := streamsGroups("--describe", "--members", "--group", "ssums", "--verbose")
	if n := len(regexp.MustCompile(`(?m)^ssums\s+\d+\s+0\s+\S+\s+streams\s+\d+\s+\S+\s+ssums-\S+-StreamThread-[12]-consumer\s+ACTIVE: `).FindAllString(members, -1)); n != 4 {
		t.Errorf("kafka-streams-groups --describe --members: %d member lines with active tasks, want 4:\n%s", n, members)
	}
	if out := streamsGroups("--describe", "--group", "ssums"); len(regexp.MustCompile(`(?m)^ssums\s+in\s+[0-3]\s+\d+\s*$`).FindAllString(out, -1)) != 4 {
		t.Errorf("kafka-streams-groups --describe (offsets): want a line per partition of in:\n%s", out)
	}
	if out := streamsGroups("--describe", "--state", "--group", "ssums"); !regexp.MustCompile(`(?m)^ssums\s+\S+ \(0\)\s+Stable\s+4\s*$`).MatchString(out) {
		t.Errorf("kafka-streams-groups --describe --state: want Stable with 4 members:\n%s", out)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"streams"}
	if list, err := lg.RequestWith(ctx, cl); err != nil || len(list.Groups) != 1 || list.Groups[0].Group != "ssums" || list.Groups[0].GroupState != "Stable" {
		t.Errorf("ListGroups of type streams: %+v %v", list, err)
	}
	// A is killed while input comes in: its session expires and B takes every task.
	done := make(chan struct{})
	go func() {
		defer close(done)
		produceStreamsInput(t, ctx, cl, 3000, 4500, true)
	}()
	time.Sleep(500 * time.Millisecond)
	a.kill()
	<-done
	waitStreamsGroup(t, ctx, cl, "ssums", 2, 1)
	produceStreamsInput(t, ctx, cl, 4500, 5000, false)
	checkStreamsOutput(t, ctx, []string{b.addr}, 5000)
	if out := bApp.stop(); !slices.Contains(out, "closed") {
		t.Fatalf("the application did not close:\n%s", strings.Join(out, "\n"))
	}
	checkStreamsCommitted(t, ctx, adm, "ssums")
	// Once empty (B left, A's session expired), the tool deletes its offsets of a topic...
	if offsets, err := adm.FetchOffsets(ctx, "ssums"); err != nil {
		t.Fatal(err)
	} else if _, ok := offsets.Lookup("in", 0); !ok {
		t.Fatal("in/0 not committed before --delete-offsets")
	}
	if out := streamsGroups("--delete-offsets", "--group", "ssums", "--input-topic", "in"); !strings.Contains(out, "in") {
		t.Errorf("kafka-streams-groups --delete-offsets:\n%s", out)
	}
	if offsets, err := adm.FetchOffsets(ctx, "ssums"); err != nil {
		t.Fatal(err)
	} else if _, ok := offsets.Lookup("in", 0); ok {
		t.Errorf("in/0 still committed after --delete-offsets")
	}
	// ...and deletes the group with its internal topics.
	if out := streamsGroups("--delete", "--group", "ssums"); strings.Count(out, "was successful") != 2 {
		t.Errorf("kafka-streams-groups --delete:\n%s", out)
	}
	if md, err := adm.ListTopics(ctx); err != nil || !slices.Equal(md.Names(), []string{"in", "out"}) {
		t.Errorf("topics after the group's deletion: %v %v; want in and out", md.Names(), err)
	}
	if g := describeStreams(t, ctx, cl, "ssums"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("the deleted group is described: %+v", g)
	}
}

func describeStreams(t *testing.T, ctx context.Context, cl *kgo.Client, group string) kmsg.StreamsGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("StreamsGroupDescribe: %v", err)
	}
	return resp.Groups[0]
}

// waitStreamsGroup waits until a streams group is Stable with members members over processes
// processes, every task of the application (4 of each of its two subtopologies) active on one
// member and, with two processes, each stateful task (subtopology 1) standing by on the other.
func waitStreamsGroup(t *testing.T, ctx context.Context, cl *kgo.Client, group string, members, processes int) {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			g := resp.Groups[0]
			active, standby := map[string][]string{}, map[string][]string{}
			procs := map[string]bool{}
			for _, m := range g.Members {
				procs[m.ProcessID] = true
				for _, ts := range m.Assignment.ActiveTasks {
					for _, p := range ts.Partitions {
						k := fmt.Sprintf("%s_%d", ts.SubtopologyID, p)
						active[k] = append(active[k], m.ProcessID)
					}
				}
				for _, ts := range m.Assignment.StandbyTasks {
					for _, p := range ts.Partitions {
						k := fmt.Sprintf("%s_%d", ts.SubtopologyID, p)
						standby[k] = append(standby[k], m.ProcessID)
					}
				}
			}
			ok := g.State == "Stable" && len(g.Members) == members && len(procs) == processes && len(active) == 8
			for k, ps := range active {
				ok = ok && len(ps) == 1
				if processes > 1 && strings.HasPrefix(k, "1_") {
					ok = ok && len(standby[k]) == 1 && standby[k][0] != ps[0]
				}
			}
			if ok {
				return
			}
			last = fmt.Sprintf("state %s, %d members, %d processes, active %v, standby %v", g.State, len(g.Members), len(procs), active, standby)
		} else if err != nil {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("streams group %s never settled with %d members on %d processes: %s", group, members, processes, last)
}
