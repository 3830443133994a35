package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/testclients"
)

// kafkaTool returns the command line prefix that runs one of Apache Kafka's admin tools (a main
// class of kafka-tools 4.1.1, which the Java test client's Maven build copies to target/lib).
func kafkaTool(t *testing.T, class string) []string {
	t.Helper()
	java := testclients.Java(t) // java, -cp, CLASSPATH, dev.runnel.JavaClient
	return []string{java[0], "-cp", java[2], class}
}

// TestKafkaToolsOnCluster: Kafka's own tools against a three-node Runnel cluster, as an operator
// would use them. kafka-topics creates and describes a replicated topic (leader, replicas, ISR),
// kafka-reassign-partitions moves a partition to another replica set (--execute, then --verify
// until done), and kafka-leader-election moves leadership to the new preferred replica.
func TestKafkaToolsOnCluster(t *testing.T) {
	topics := kafkaTool(t, "org.apache.kafka.tools.TopicCommand")
	reassign := kafkaTool(t, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand")
	elect := kafkaTool(t, "org.apache.kafka.tools.LeaderElectionCommand")
	c := startCluster(t, 3)
	c.waitNodes(3) // the tools place replicas on the registered nodes
	bootstrap := strings.Join(c.brokers(), ",")
	run := func(tool []string, args ...string) string {
		t.Helper()
		return runClient(t, 120*time.Second, "", tool[0], append(tool[1:], append([]string{"--bootstrap-server", bootstrap}, args...)...)...)
	}

	run(topics, "--create", "--topic", "tools", "--partitions", "2", "--replication-factor", "2")
	cl, adm := c.client(kgo.DefaultProduceTopic("tools"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 200 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	described := run(topics, "--describe", "--topic", "tools")
	for _, want := range []string{"ReplicationFactor: 2", "Partition: 0", "Partition: 1", "Leader:", "Replicas:", "Isr:"} {
		if !strings.Contains(described, want) {
			t.Fatalf("kafka-topics --describe lacks %q:\n%s", want, described)
		}
	}

	// Move partition 0 onto the node that does not hold it, that node first (preferred).
	md, err := adm.Metadata(ctx, "tools")
	if err != nil {
		t.Fatal(err)
	}
	old := md.Topics["tools"].Partitions[0].Replicas
	var target []int32
	for _, id := range []int32{1, 2, 3} {
		if !slices.Contains(old, id) {
			target = append(target, id)
		}
	}
	target = append(target, old[0])
	plan, _ := json.Marshal(map[string]any{"version": 1, "partitions": []map[string]any{
		{"topic": "tools", "partition": 0, "replicas": target}}})
	file := filepath.Join(t.TempDir(), "reassign.json")
	if err := os.WriteFile(file, plan, 0o644); err != nil {
		t.Fatal(err)
	}
	// With a replication throttle, as operators run it: --execute sets the rates and throttled
	// replica lists, --verify clears them once the move is done.
	if out := run(reassign, "--reassignment-json-file", file, "--execute", "--throttle", "50000000"); !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("kafka-reassign-partitions --execute --throttle:\n%s", out)
	}
	tc, err := adm.DescribeTopicConfigs(ctx, "tools")
	if err != nil {
		t.Fatal(err)
	}
	lists := map[string]string{}
	for _, c := range tc[0].Configs {
		if strings.HasSuffix(c.Key, ".replication.throttled.replicas") && c.Value != nil {
			lists[c.Key] = *c.Value
		}
	}
	if lists["leader.replication.throttled.replicas"] == "" || lists["follower.replication.throttled.replicas"] == "" {
		t.Errorf("the throttled replica lists after --execute --throttle: %v", lists)
	}
	eventually(t, "kafka-reassign-partitions --verify to report completion", time.Minute, func() bool {
		return strings.Contains(run(reassign, "--reassignment-json-file", file, "--verify"), "Reassignment of partition tools-0 is completed")
	})
	eventually(t, "--verify to clear the throttles", 30*time.Second, func() bool {
		bc, err := adm.DescribeBrokerConfigs(ctx, target[0])
		if err != nil {
			return false
		}
		for _, r := range bc {
			for _, c := range r.Configs {
				if c.Key == "leader.replication.throttled.rate" && c.Source == kmsg.ConfigSourceDynamicBrokerConfig {
					return false
				}
			}
		}
		return true
	})
	eventually(t, "the new replica set in metadata", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "tools")
		return err == nil && slices.Equal(md.Topics["tools"].Partitions[0].Replicas, target)
	})

	// The preferred replica leads after a preferred election (it may already: a reassignment
	// that drops the leader moves leadership to the new set).
	// Asked for every partition, Kafka answers only those it acted on: the tool prints nothing
	// for the partitions already led by their preferred replica.
	out := run(elect, "--election-type", "PREFERRED", "--all-topic-partitions")
	if strings.Contains(out, "Valid replica already elected") || strings.TrimSpace(out) != "" && !strings.Contains(out, "Successfully completed leader election") {
		t.Fatalf("kafka-leader-election --all-topic-partitions:\n%s", out)
	}
	out = run(elect, "--election-type", "PREFERRED", "--topic", "tools", "--partition", "0")
	if !strings.Contains(out, "Successfully completed leader election") && !strings.Contains(out, "Valid replica already elected") {
		t.Fatalf("kafka-leader-election --topic tools --partition 0:\n%s", out)
	}
	eventually(t, "the preferred replica to lead tools-0", 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "tools")
		return err == nil && md.Topics["tools"].Partitions[0].Leader == target[0]
	})
	described = run(topics, "--describe", "--topic", "tools")
	t.Logf("after the move:\n%s", described)

	// Every record is still there, in order, read from the new replicas.
	n := 0
	rd, _ := c.client(kgo.ConsumeTopics("tools"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n < 200 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 200 records back", n)
		}
		n += fs.NumRecords()
	}
}

// TestKafkaTransactionsTool: Kafka's kafka-transactions tool against an open transaction: list
// and describe show it Ongoing on its partition, describe-producers shows where it began, and
// find-hanging does not call it hanging (it is younger than the tool's threshold). Then abort
// (DescribeProducers, then WriteTxnMarkers to the partition) ends an open transaction on a
// local and on an object partition: its records are never read_committed, the last stable
// offset moves past the marker.
func TestKafkaTransactionsTool(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.TransactionsCommand")
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("txtool", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := b.client(kgo.TransactionalID("tool-txn"), kgo.DefaultProduceTopic("txtool"))
	if err := p.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err == nil {
		t.Fatal("a transactional producer produced outside a transaction")
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("in")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 60*time.Second, "", tool[0], append(append(tool[1:], "--bootstrap-server", b.addr), args...)...)
	}
	if out := run("list"); !strings.Contains(out, "tool-txn") || !strings.Contains(out, "Ongoing") {
		t.Errorf("kafka-transactions list:\n%s", out)
	}
	if out := run("describe", "--transactional-id", "tool-txn"); !strings.Contains(out, "Ongoing") || !strings.Contains(out, "txtool-0") {
		t.Errorf("kafka-transactions describe:\n%s", out)
	}
	out := run("describe-producers", "--topic", "txtool", "--partition", "0")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := strings.Fields(lines[len(lines)-1]); len(last) < 6 || last[len(last)-1] != "0" {
		t.Errorf("kafka-transactions describe-producers: want CurrentTransactionStartOffset 0:\n%s", out)
	}
	if out := run("find-hanging", "--broker-id", "0"); strings.Contains(out, "txtool") {
		t.Errorf("kafka-transactions find-hanging calls a fresh transaction hanging:\n%s", out)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	out = run("describe-producers", "--topic", "txtool", "--partition", "0")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); !strings.HasSuffix(strings.TrimSpace(lines[len(lines)-1]), "None") {
		t.Errorf("describe-producers after the commit: want no open transaction (None):\n%s", out)
	}

	createObjectTopic(t, b.addr, "txtool-obj", 1, nil)
	adm := kadm.NewClient(p)
	for i, topic := range []string{"txtool", "txtool-obj"} {
		q, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID(fmt.Sprint("hung-", i)), kgo.DefaultProduceTopic(topic),
			kgo.TransactionTimeout(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		start, _ := ends.Lookup(topic, 0)
		if err := q.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := q.ProduceSync(ctx, kgo.StringRecord("hung")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		out := run("abort", "--topic", topic, "--partition", "0", "--start-offset", fmt.Sprint(start.Offset))
		t.Logf("kafka-transactions abort on %s at %d: %s", topic, start.Offset, strings.TrimSpace(out))
		out = run("describe-producers", "--topic", topic, "--partition", "0")
		if strings.Contains(out, fmt.Sprintf(" %d\n", start.Offset)) || !strings.Contains(out, "None") {
			t.Errorf("describe-producers on %s after the abort: want no open transaction:\n%s", topic, out)
		}
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := stable.Lookup(topic, 0); s.Offset != start.Offset+2 {
			t.Errorf("%s: last stable offset %d after the abort; want %d (the record and its ABORT marker)", topic, s.Offset, start.Offset+2)
		}
		if got := readTopic(t, ctx, b.addr, topic, kgo.ReadCommitted(), 1000, 2*time.Second); slices.Contains(got, "hung") {
			t.Errorf("%s: read_committed read the aborted record", topic)
		}
	}
}

// TestKafkaMetadataQuorumTool: Kafka's kafka-metadata-quorum against a four-node cluster (three
// controller voters and a node that follows as a Raft learner), through a node that is not the
// active controller: --status names the active controller as leader, the three voters with
// their endpoints and the observer; --replication lists every member with its role, caught up.
func TestKafkaMetadataQuorumTool(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.MetadataQuorumCommand")
	c := startCluster(t, 4)
	c.waitNodes(4)
	var active int32
	eventually(t, "an active controller", 30*time.Second, func() bool {
		active = c.servers[1].Node().ControllerID() // Metadata names a node while none is known
		return active > 0
	})
	via := c.addrs[1+active%3] // a voter that is not the leader
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 60*time.Second, "", tool[0], append(append(tool[1:], "--bootstrap-server", via), args...)...)
	}
	status := run("describe", "--status")
	t.Logf("kafka-metadata-quorum describe --status:\n%s", status)
	want := []string{fmt.Sprintf("LeaderId:               %d", active), "HighWatermark:", `"id": 1`, `"id": 2`, `"id": 3`,
		"CONTROLLER://" + c.voters[1], `CurrentObservers:       [{"id": 4`}
	for _, w := range want {
		if !strings.Contains(status, w) {
			t.Fatalf("describe --status lacks %q", w)
		}
	}
	eventually(t, "--replication to show every member caught up", 30*time.Second, func() bool {
		out := run("describe", "--replication")
		roles := map[string]int{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 7 || f[0] == "NodeId" {
				continue
			}
			if lag, err := strconv.Atoi(f[3]); err != nil || lag != 0 {
				return false
			}
			roles[f[0]+" "+f[len(f)-1]]++
		}
		ok := roles[fmt.Sprintf("%d Leader", active)] == 1 && roles["4 Observer"] == 1 && len(roles) == 4
		if !ok {
			t.Logf("kafka-metadata-quorum describe --replication:\n%s", out)
		}
		return ok
	})
}

// TestKafkaMetadataQuorumVoterChanges: Kafka's kafka-metadata-quorum changes the controller
// voters of a four-node cluster (voters 1, 2, 3; node 4 an observer) through a node that does
// not lead: add-controller makes node 4 a voter (from a controller config file and the
// meta.properties of its metadata dir, as Kafka's tool requires: Runnel ignores the directory
// id and the listener, the node's cluster address serves Raft), remove-controller drops voter 3
// (zero directory id, as DescribeQuorum reports), and describe shows voters 1, 2, 4.
func TestKafkaMetadataQuorumVoterChanges(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.MetadataQuorumCommand")
	c := startCluster(t, 4)
	c.waitNodes(4)
	_, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var active int32
	var clusterID string
	eventually(t, "an active controller", 30*time.Second, func() bool {
		d, err := adm.BrokerMetadata(ctx)
		active, clusterID = c.servers[1].Node().ControllerID(), d.Cluster // Metadata names a node while none is known
		return err == nil && active > 0
	})
	via := c.addrs[1+active%3]
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 90*time.Second, "", tool[0], append(append(tool[1:], "--bootstrap-server", via), args...)...)
	}
	dir := t.TempDir()
	meta := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=4\ndirectory.id=%s\n", clusterID, "x0AGfHbVTuKsHcrTX3g2dQ")
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(t.TempDir(), "controller.properties")
	conf := fmt.Sprintf("node.id=4\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\nlisteners=CONTROLLER://127.0.0.1:9093\nmetadata.log.dir=%s\n", dir)
	if err := os.WriteFile(props, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run("--command-config", props, "add-controller")
	t.Logf("add-controller: %s", out)
	out = run("remove-controller", "--controller-id", "3", "--controller-directory-id", "AAAAAAAAAAAAAAAAAAAAAA")
	t.Logf("remove-controller: %s", out)
	status := run("describe", "--status")
	t.Logf("describe --status:\n%s", status)
	var voters string
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, "CurrentVoters:") {
			voters = line
		}
	}
	for _, want := range []string{`"id": 1`, `"id": 2`, `"id": 4`} {
		if !strings.Contains(voters, want) {
			t.Fatalf("voters %q lack %s", voters, want)
		}
	}
	if strings.Contains(voters, `"id": 3`) {
		t.Fatalf("voters %q still hold node 3", voters)
	}
}

// TestKafkaClusterToolUnregister: Kafka's kafka-cluster unregister forgets a stopped node that
// holds no replica (UnregisterBroker), and every node's metadata drops it.
func TestKafkaClusterToolUnregister(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.ClusterTool")
	c := startCluster(t, 4)
	c.waitNodes(4)
	c.stop(4)
	eventually(t, "node 4 fenced", 30*time.Second, func() bool {
		n := c.servers[1].Node().Image().Nodes[4]
		return n != nil && n.Fenced
	})
	out := runClient(t, 90*time.Second, "", tool[0], append(tool[1:], "unregister", "--bootstrap-server", c.addrs[2], "--id", "4")...)
	t.Logf("kafka-cluster unregister: %s", out)
	eventually(t, "node 4 gone from every node's metadata", 10*time.Second, func() bool {
		for _, s := range c.servers {
			if s.Node().Image().Nodes[4] != nil {
				return false
			}
		}
		return true
	})
}

// TestKafkaFeaturesTool: Kafka's kafka-features describes the command level among the
// features (supported up to this version's, finalized at the cluster's) and upgrades it to
// the level it is at.
func TestKafkaFeaturesTool(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.FeatureCommand")
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 90*time.Second, "", tool[0], append(append(tool[1:], "--bootstrap-server", b.addr), args...)...)
	}
	want := fmt.Sprintf("Feature: %s\tSupportedMinVersion: 0\tSupportedMaxVersion: %d\tFinalizedVersionLevel: %d", controller.LevelFeature, controller.Level, controller.Level)
	var out string
	eventually(t, "the command level finalized", 60*time.Second, func() bool {
		out = run("describe")
		return strings.Contains(out, want)
	})
	t.Logf("kafka-features describe:\n%s", out)
	out = run("upgrade", "--feature", fmt.Sprintf("%s=%d", controller.LevelFeature, controller.Level))
	t.Logf("kafka-features upgrade: %s", out)
}

// TestKafkaConfigsGroups: Kafka's kafka-configs sets, describes and lists a group's configs
// (--entity-type groups), and a Java share consumer of that group then reads, from the log's
// start, the records written before the group existed (share.auto.offset.reset=earliest, the
// step Kafka's share group quickstart takes).
func TestKafkaConfigsGroups(t *testing.T) {
	configs := kafkaTool(t, "kafka.admin.ConfigCommand")
	java := testclients.Java(t)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("jq", 1)
	cl := b.client(kgo.DefaultProduceTopic("jq"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 20
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "old/%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 90*time.Second, "", configs[0], append(configs[1:], append([]string{"--bootstrap-server", b.addr}, args...)...)...)
	}
	out := run("--alter", "--entity-type", "groups", "--entity-name", "jg", "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")
	if !strings.Contains(out, "Completed updating config for group jg") {
		t.Fatalf("kafka-configs --alter: %s", out)
	}
	out = run("--describe", "--entity-type", "groups", "--entity-name", "jg")
	if !strings.Contains(out, "share.auto.offset.reset=earliest") || !strings.Contains(out, "share.record.lock.duration.ms=20000") {
		t.Fatalf("kafka-configs --describe of group jg:\n%s", out)
	}
	if out = run("--describe", "--entity-type", "groups"); !strings.Contains(out, "group jg") {
		t.Fatalf("kafka-configs --describe of every group:\n%s", out)
	}
	if out = run("--describe", "--entity-type", "groups", "--entity-name", "jg", "--all"); !strings.Contains(out, "consumer.session.timeout.ms=45000") {
		t.Fatalf("kafka-configs --describe --all of group jg:\n%s", out)
	}

	m := startJavaShareMember(t, java, b.addr, "jq", "jg")
	old := func(ds []shareDelivery) map[string]int {
		got := map[string]int{}
		for _, d := range ds {
			if strings.HasPrefix(d.value, "old/") {
				got[d.value]++
			}
		}
		return got
	}
	for len(old(parseShareDeliveries(t, m.output()))) < n && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	got := old(parseShareDeliveries(t, m.stop()))
	for i := range n {
		if c := got[fmt.Sprint("old/", i)]; c != 1 {
			t.Errorf("old/%d delivered %d times; want once (the group starts at the earliest offset)", i, c)
		}
	}
}

// TestKafkaConsumerGroupsTool: kafka-consumer-groups describes, on one node, a live classic group
// and a live KIP-848 group, each with its member, partitions, commits and lag: Kafka's admin
// client asks ConsumerGroupDescribe and falls back to DescribeGroups on GROUP_ID_NOT_FOUND, so
// both must answer as Kafka's do for the other kind of group.
func TestKafkaConsumerGroupsTool(t *testing.T) {
	groups := kafkaTool(t, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("cgt", 2)
	produceValues(t, b.addr, "cgt", "v", 20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, g := range []struct {
		id   string
		opts []kgo.Opt
	}{{"cgt-classic", nil}, {"cgt-consumer", []kgo.Opt{kgo.ServerSideBalancer()}}} {
		cl := b.client(append([]kgo.Opt{kgo.ConsumerGroup(g.id), kgo.ConsumeTopics("cgt"), kgo.ClientID(g.id + "-client"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}, g.opts...)...)
		for n := 0; n < 20; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s read %d of 20", g.id, n)
			}
			n += fs.NumRecords()
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produceValues(t, b.addr, "cgt", "more", 4) // lag 2 on each partition
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 60*time.Second, "", groups[0], append(groups[1:], append([]string{"--bootstrap-server", b.addr}, args...)...)...)
	}
	for _, g := range []string{"cgt-classic", "cgt-consumer"} {
		out := run("--describe", "--group", g)
		lines := 0
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
			if len(f) >= 9 && f[0] == g && f[1] == "cgt" {
				lines++
				if f[3] != "10" || f[4] != "12" || f[5] != "2" || f[8] != g+"-client" {
					t.Errorf("%s: %q; want current 10, end 12, lag 2, client %s-client", g, l, g)
				}
			}
		}
		if lines != 2 {
			t.Errorf("kafka-consumer-groups --describe --group %s: %d partition lines; want 2:\n%s", g, lines, out)
		}
		if out := run("--describe", "--members", "--group", g); !strings.Contains(out, g+"-client") {
			t.Errorf("kafka-consumer-groups --describe --members --group %s lacks its member:\n%s", g, out)
		}
		if out := run("--describe", "--state", "--group", g); !strings.Contains(out, "Stable") {
			t.Errorf("kafka-consumer-groups --describe --state --group %s: not Stable:\n%s", g, out)
		}
	}
}
