package server_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/testclients"
)

func createObjectTopic(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	configs = maps.Clone(configs)
	if configs == nil {
		configs = map[string]*string{}
	}
	configs["runnel.storage"] = kadm.StringPtr("object")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating object topic %s: %v", topic, err)
	}
}

// TestObjectTopicSingleNode: an object topic on the embedded default store (the data dir's
// objects directory) takes an idempotent stream exactly once, serves consumers and groups,
// lists offsets by time, deletes records, refuses what it does not support, and keeps
// everything across a restart.
func TestObjectTopicSingleNode(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	const topic, partitions, n = "objects", 4, 1200
	start := time.Now()
	createObjectTopic(t, b.addr, topic, partitions, nil)
	p := idempotentProducer(t, b.addr)
	if err := produceSeq(p, topic, partitions, 0, n); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, b.addr, topic, partitions, n)

	t.Logf("produced and consumed: %v", time.Since(start))
	adm := kadm.NewClient(p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The storage is fixed.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "runnel.storage", Value: kadm.StringPtr("local")}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = ar.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("setting runnel.storage=local on the object topic: %v; want INVALID_CONFIG", err)
	}

	// ListOffsets by time: every record was produced after start.
	byTime, err := adm.ListOffsetsAfterMilli(ctx, start.UnixMilli(), topic)
	if err != nil {
		t.Fatal(err)
	}
	byTime.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("offset after the start time of partition %d: %d, %v; want 0", o.Partition, o.Offset, o.Err)
		}
	})

	// A consumer group commits and resumes.
	g, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("og"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < n {
		fs := g.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group read %d of %d", got, n)
		}
		got += fs.NumRecords()
	}
	if err := g.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	g.Close()
	committed, err := adm.FetchOffsets(ctx, "og")
	if err != nil {
		t.Fatal(err)
	}
	if total := func() (s int64) {
		committed.Each(func(o kadm.OffsetResponse) { s += o.At })
		return s
	}(); total != n {
		t.Errorf("the group committed offsets summing to %d; want %d", total, n)
	}

	// DeleteRecords moves the log start; a consumer from the start begins there.
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 100 {
		t.Fatalf("DeleteRecords to 100: %+v", r)
	}
	checkFirst := func(addr string) {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fs := c.PollRecords(ctx, 1)
		if err := fs.Err0(); err != nil || fs.NumRecords() == 0 {
			t.Fatalf("consuming partition 0 from the start: %v", err)
		}
		if r := fs.Records()[0]; r.Offset != 100 || string(r.Value) != fmt.Sprint(100*partitions) {
			t.Fatalf("the first record from the start is offset %d (%s); want 100 (%d)", r.Offset, r.Value, 100*partitions)
		}
	}
	checkFirst(b.addr)
	t.Logf("before restart: %v", time.Since(start))

	// Everything is still there after a restart.
	b = b.restart()
	checkFirst(b.addr)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p2 := idempotentProducer(t, b.addr)
	if err := produceSeq(p2, topic, partitions, n, n+400); err != nil { // 100 more per partition
		t.Fatal(err)
	}
	after, err := kadm.NewClient(p2).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	after.Each(func(o kadm.ListedOffset) {
		if before, _ := ends.Lookup(topic, o.Partition); o.Offset != before.Offset+100 {
			t.Errorf("partition %d ends at %d after 100 more records; want %d", o.Partition, o.Offset, before.Offset+100)
		}
	})
}

// TestObjectTopicClusterS3: three nodes share an S3-compatible store (versitygw). Producers
// write through every node (Metadata spreads the partitions' "leaders"), consumers read through
// every node, and a topic created without runnel.storage takes the cluster default
// runnel.default.storage. A node stops in the middle: its partitions move to the others and
// the stream goes on exactly once.
func TestObjectTopicClusterS3(t *testing.T) {
	endpoint := testclients.S3(t)
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore = "s3://runnel/cluster?endpoint=" + endpoint
		c.batchTimeout = 50 * time.Millisecond
		c.retentionInterval = 200 * time.Millisecond
	})
	_, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alter, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "runnel.default.storage", Value: kadm.StringPtr("object")}})
	if err == nil {
		_, err = alter.On("", nil)
	}
	if err != nil {
		t.Fatalf("setting runnel.default.storage: %v", err)
	}
	const topic, partitions, n = "spread", 32, 3200
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for { // every node knows the topic soon
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		v, err := rc.On(topic, nil)
		if err == nil && errors.Is(v.Err, kerr.UnknownTopicOrPartition) && ctx.Err() == nil {
			continue
		}
		if err != nil || !hasConfig(v.Configs, "runnel.storage", "object") {
			t.Fatalf("a topic created under runnel.default.storage=object: %+v, %v", v, err)
		}
		break
	}
	var md kadm.Metadata
	for len(md.Topics[topic].Partitions) < partitions { // every node knows the topic soon
		if md, err = adm.Metadata(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
	leaders := map[int32]bool{}
	for _, p := range md.Topics[topic].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) < 2 {
		t.Errorf("Metadata names %d distinct leaders for %d partitions over 3 nodes; want them spread", len(leaders), partitions)
	}

	// An agent joins: Metadata lists it and names it as the "leader" of some object
	// partitions, never of a replicated partition, and never as a coordinator.
	agent := c.startAgent(1000042)
	eventually(t, "the agent in Metadata", 20*time.Second, func() bool {
		m, err := adm.Metadata(ctx, topic, "__consumer_offsets")
		if err != nil {
			return false
		}
		listed := false
		for _, b := range m.Brokers {
			listed = listed || b.NodeID == 1000042
		}
		led := false
		for _, p := range m.Topics[topic].Partitions {
			led = led || p.Leader == 1000042
		}
		for _, p := range m.Topics["__consumer_offsets"].Partitions {
			if p.Leader == 1000042 || slices.Contains(p.Replicas, 1000042) {
				t.Fatalf("the agent holds a replica of __consumer_offsets: %+v", p)
			}
		}
		return listed && led
	})
	coord := adm.FindGroupCoordinators(ctx, "g1", "g2", "g3", "g4")
	coord.Each(func(d kadm.FindCoordinatorResponse) {
		if d.Err != nil || d.NodeID == 1000042 {
			t.Errorf("FindCoordinator(%s) = node %d, %v; want a serve node", d.Name, d.NodeID, d.Err)
		}
	})

	p := idempotentProducer(t, agent) // bootstrapped through the agent
	if err := produceSeq(p, topic, partitions, 0, n/2); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	if err := produceSeq(p, topic, partitions, n/2, n); err != nil {
		t.Fatal(err)
	}
	for _, addr := range c.brokers() { // the serve nodes and the agent
		exactlyOnce(t, addr, topic, partitions, n)
	}

	// Retention: with retention.bytes=1 every extent but the newest of each partition goes.
	_, adm = c.client()
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("1")}}, topic)
	if err == nil {
		_, err = ar.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	for {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		moved := 0
		starts.Each(func(o kadm.ListedOffset) {
			if end, _ := ends.Lookup(topic, o.Partition); o.Offset > 0 && o.Offset < end.Offset {
				moved++
			}
		})
		if moved == partitions {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("retention.bytes=1 moved the log start of %d of %d partitions", moved, partitions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// TestObjectTopicOtherClients: unchanged librdkafka (kcat, every codec) and Java (idempotent
// producer with its defaults, a classic group consumer) clients on an object topic.
func TestObjectTopicOtherClients(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	createObjectTopic(t, b.addr, "obj-kcat", 1, nil)
	createObjectTopic(t, b.addr, "obj-java", 4, nil)
	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			skipOutsideCI(t, "kcat is not on PATH (.ci/run installs it)")
		}
		var want []string
		for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			var lines []string
			for i := range 50 {
				lines = append(lines, fmt.Sprintf("%s line %d", codec, i))
			}
			runClient(t, 30*time.Second, strings.Join(lines, "\n")+"\n", kcat, "-b", b.addr, "-P", "-t", "obj-kcat", "-z", codec)
			want = append(want, lines...)
		}
		wantOut := strings.Join(want, "\n") + "\n"
		got := runClient(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", "obj-kcat", "-o", "beginning", "-e", "-u")
		if got != wantOut {
			t.Errorf("kcat consumed:\n%s\nwant:\n%s", tail(got, 2000), tail(wantOut, 2000))
		}
	})
	t.Run("java", func(t *testing.T) {
		java := testclients.Java(t)
		run := javaRunner(t, java, b.addr)
		if out := run("produce", "obj-java", "1000"); !strings.Contains(out, "acked 1000") {
			t.Fatalf("java produce: %s", out)
		}
		valuesOnce(t, "java classic consumer", "j", 1000, run("consume", "obj-java", "objgroup", "classic", "1000"))
	})
}

// TestObjectProducersExpire: an object partition forgets an idempotent producer idle past
// producer.id.expiration.ms (here set cluster-wide to a second), as a local partition does;
// DescribeProducers, answered from the controller's image, shows it until then.
func TestObjectProducersExpire(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.ObjectBatchTimeout, c.ObjectRetentionInterval = 5*time.Millisecond, 100*time.Millisecond
	})
	createObjectTopic(t, b.addr, "obj-pids", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("obj-pids"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	producers := func() int {
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "obj-pids", Partitions: []int32{0}}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("DescribeProducers: %v %+v", err, resp)
		}
		return len(resp.Topics[0].Partitions[0].ActiveProducers)
	}
	time.Sleep(time.Second) // retention passes with the default expiration (a day)
	if n := producers(); n != 1 {
		t.Fatalf("%d producers before expiry; want 1", n)
	}
	if resp, err := kadm.NewClient(cl).AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "producer.id.expiration.ms", Value: kadm.StringPtr("1000")}}); err != nil || resp[0].Err != nil {
		t.Fatalf("setting producer.id.expiration.ms cluster-wide: %v %+v", err, resp)
	}
	eventually(t, "the idle producer forgotten", 10*time.Second, func() bool { return producers() == 0 })
}

// TestLazyObjectTopic: a runnel.sequencing=lazy topic acknowledges without offsets (base offset
// -1) and every client family reports that as "no offset" or a negative one, never a real
// offset; every record is then read back exactly once, in order (one healthy node). Lazy
// sequencing is refused on a local topic.
func TestLazyObjectTopic(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	lazy := map[string]*string{"runnel.sequencing": kadm.StringPtr("lazy")}
	createObjectTopic(t, b.addr, "lazy", 4, lazy)
	p := idempotentProducer(t, b.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 800
	results := p.ProduceSync(ctx, func() []*kgo.Record {
		var rs []*kgo.Record
		for seq := range n {
			rs = append(rs, &kgo.Record{Topic: "lazy", Partition: int32(seq % 4), Value: []byte(fmt.Sprint(seq))})
		}
		return rs
	}()...)
	for _, r := range results {
		if r.Err != nil || r.Record.Offset != -1 {
			t.Fatalf("franz-go lazy ack: offset %d, %v; want -1 (no offset)", r.Record.Offset, r.Err)
		}
	}
	// Acknowledged before they are sequenced: they become visible right after.
	adm := kadm.NewClient(p)
	eventually(t, "the lazy records sequenced", 20*time.Second, func() bool {
		ends, err := adm.ListEndOffsets(ctx, "lazy")
		total := int64(0)
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		return err == nil && total == n
	})
	exactlyOnce(t, b.addr, "lazy", 4, n)

	resp, err := adm.CreateTopic(ctx, 1, -1, lazy, "lazy-local")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("a local topic with runnel.sequencing=lazy: %v; want INVALID_CONFIG", err)
	}

	// The other client families, each on its own topic.
	root := repoRoot(t)
	check := func(t *testing.T, out string) {
		t.Helper()
		var acked, withOffset int
		var lo, hi int64
		if _, err := fmt.Sscanf(strings.TrimSpace(out), "acked %d with-offset %d min %d max %d", &acked, &withOffset, &lo, &hi); err == nil {
			if withOffset != 0 {
				t.Errorf("%d acknowledgements with an offset (hasOffset): %s", withOffset, out)
			}
		} else if _, err := fmt.Sscanf(strings.TrimSpace(out), "acked %d min %d max %d", &acked, &lo, &hi); err != nil {
			t.Fatalf("unexpected client output %q", out)
		}
		t.Logf("%s: offsets reported %d to %d", strings.TrimSpace(out), lo, hi)
		if acked == 0 || hi >= 0 {
			t.Errorf("a client reported offset %d for a lazy acknowledgement; want none at or above 0", hi)
		}
	}
	t.Run("java", func(t *testing.T) {
		java := testclients.Java(t)
		createObjectTopic(t, b.addr, "lazy-java", 2, lazy)
		check(t, runClient(t, 120*time.Second, "", java[0], append(java[1:], "produce", b.addr, "lazy-java", "500")...))
	})
	t.Run("kafkajs", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			skipOutsideCI(t, "node is not on PATH")
		}
		script := filepath.Join(root, "test", "clients", "node", "kafkajs_roundtrip.js")
		if _, err := os.Stat(filepath.Join(root, "test", "clients", "node", "node_modules", "kafkajs")); err != nil {
			skipOutsideCI(t, "kafkajs is not installed (.ci/run runs npm install)")
		}
		createObjectTopic(t, b.addr, "lazy-js", 2, lazy)
		check(t, runClient(t, 120*time.Second, "", node, script, "produce", b.addr, "lazy-js", "500"))
	})
	for _, client := range []string{"confluent", "kafka-python"} {
		t.Run(client, func(t *testing.T) {
			python := clientPython(t, root)
			createObjectTopic(t, b.addr, "lazy-"+client, 2, lazy)
			check(t, runClient(t, 120*time.Second, "", python, filepath.Join(root, "test", "clients", "lazy_offsets.py"),
				"--client", client, "--bootstrap", b.addr, "--topic", "lazy-"+client, "--count", "300"))
		})
	}
}

// TestObjectTopicCompaction: an object topic with cleanup.policy=compact refuses records without
// a key, and the active controller compacts it: a consumer from the start reads each record at
// its original offset, only the latest of each key outside the active extents, tombstones go
// after delete.retention.ms, every key ends with its latest value, DeleteRecords is refused as
// on any compact-only topic, and all of it survives a restart.
func TestObjectTopicCompaction(t *testing.T) {
	dir := t.TempDir()
	change := func(c *server.Config) {
		c.ObjectBatchTimeout = 5 * time.Millisecond
		c.ObjectCompactionInterval = 200 * time.Millisecond
	}
	b := startBrokerConfig(t, dir, "127.0.0.1:0", broker.Hooks{}, change)
	const topic = "objects-compacted"
	createObjectTopic(t, b.addr, topic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.3"), "delete.retention.ms": kadm.StringPtr("0")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a record without a key: %v; want INVALID_RECORD", err)
	}

	// 80 files of 5 records (one produce each): 10 keys, k0-k4 in even rounds, k5-k9 in odd
	// ones; k9 deleted in round 41 and never written again (k10 takes its place).
	produced := map[int64]string{}
	want := map[string]string{}
	for round := range 80 {
		var recs []*kgo.Record
		for i := range 5 {
			k := fmt.Sprint("k", (round*5+i)%10)
			if round > 41 && k == "k9" {
				k = "k10"
			}
			r := &kgo.Record{Key: []byte(k), Value: []byte(fmt.Sprint(k, "@", round))}
			if round == 41 && k == "k9" {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			produced[r.Record.Offset] = string(r.Record.Key) + "=" + value(r.Record)
			if r.Record.Value == nil {
				delete(want, string(r.Record.Key))
			} else {
				want[string(r.Record.Key)] = string(r.Record.Value)
			}
		}
	}
	// Compaction runs until everything outside the 32 newest files is one record per key, and
	// the tombstone of k9 (delete.retention.ms 0) is gone with k9's values.
	var got map[int64]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = consumeAll(t, ctx, b.addr, topic, 400)
		k9 := slices.ContainsFunc(slices.Collect(maps.Values(got)), func(r string) bool { return strings.HasPrefix(r, "k9=") })
		if len(got) <= 32*5+10 && !k9 || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	checkCompacted(t, got, produced, want, 400-32*5)

	adm := kadm.NewClient(cl)
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dr.Error(); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on a compact-only object topic: %v; want POLICY_VIOLATION", err)
	}
	b.stop()
	b = startBrokerConfig(t, dir, b.addr, broker.Hooks{}, change)
	after := consumeAll(t, ctx, b.addr, topic, 400)
	if fmt.Sprint(after) != fmt.Sprint(got) {
		t.Fatalf("after a restart the topic reads\n%v\nbefore it\n%v", after, got)
	}
}

// value is a record's value as the compaction tests print it.
func value(r *kgo.Record) string {
	if r.Value == nil {
		return "<deleted>"
	}
	return string(r.Value)
}

// consumeAll reads topic's partition 0 from the start to offset end and returns its records by
// offset, as key=value.
func consumeAll(t *testing.T, ctx context.Context, addr, topic string, end int64) map[int64]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int64]string{}
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Offset] = string(r.Key) + "=" + value(r)
			last = r.Offset
		})
		if last == end-1 {
			return out
		}
	}
}

// checkCompacted checks what a consumer read of a compacted topic: each record is the one
// produced at its offset; below cleanEnd no key appears twice; reading in offset order ends
// with want.
func checkCompacted(t *testing.T, got, produced map[int64]string, want map[string]string, cleanEnd int64) {
	t.Helper()
	offs := slices.Sorted(maps.Keys(got))
	seen := map[string]bool{}
	final := map[string]string{}
	for _, o := range offs {
		if got[o] != produced[o] {
			t.Fatalf("offset %d reads %s; %s was produced there", o, got[o], produced[o])
		}
		k, val, _ := strings.Cut(got[o], "=")
		if o < cleanEnd && seen[k] {
			t.Fatalf("key %s twice below offset %d (%d records read of %d): not compacted", k, cleanEnd, len(got), len(produced))
		}
		seen[k] = true
		if val == "<deleted>" {
			delete(final, k)
		} else {
			final[k] = val
		}
	}
	if !maps.Equal(final, want) {
		t.Fatalf("a consumer from the start ends with %v; want %v", final, want)
	}
	if seen["k9"] {
		var k9 []int64
		for _, o := range offs {
			if strings.HasPrefix(got[o], "k9=") {
				k9 = append(k9, o)
			}
		}
		t.Fatalf("k9's tombstone or values are still there, at %v (%d records read)", k9, len(got))
	}
	t.Logf("%d records read of %d produced", len(got), len(produced))
}

// TestCompactedObjectTopicClients: a tombstone kept by compaction sits in a batch with a
// KIP-534 delete horizon (its base timestamp is the horizon, the records' timestamp deltas
// re-encoded); franz-go, kcat (librdkafka) and the Java client read such batches, and each
// record keeps the timestamp it was produced with.
func TestCompactedObjectTopicClients(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.ObjectBatchTimeout = 5 * time.Millisecond
		c.ObjectCompactionInterval = 200 * time.Millisecond
	})
	const topic = "horizon"
	createObjectTopic(t, b.addr, topic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"), "delete.retention.ms": kadm.StringPtr("3600000")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// 40 files: "gone" set then deleted, then k0..k2 over and over.
	stamps := map[int64]int64{}
	for i := range 40 {
		r := &kgo.Record{Key: []byte(fmt.Sprint("k", i%3)), Value: []byte(fmt.Sprint(i)), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000)}
		switch i {
		case 0:
			r.Key = []byte("gone")
		case 1:
			r.Key, r.Value = []byte("gone"), nil
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		stamps[r.Offset] = r.Timestamp.UnixMilli()
	}
	// Compaction works through the files pass after pass (every 200 ms): the clients below are
	// compared with a read of its fixed point, the same records a second apart, or a pass
	// between the reads removes a record one of them still saw.
	var got, prev map[int64]string
	eventually(t, "compaction to keep the tombstone and drop what it and later values supersede, and to settle", 60*time.Second, func() bool {
		prev, got = got, consumeAll(t, ctx, b.addr, topic, 40)
		_, tomb := got[1]
		_, first := got[0]
		if !tomb || first || len(got) >= 40 || !maps.Equal(prev, got) {
			time.Sleep(time.Second)
			return false
		}
		return true
	})
	// franz-go: each record's timestamp is the one it was produced with.
	rd, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	seen := 0
	for seen < len(got) {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if r.Timestamp.UnixMilli() != stamps[r.Offset] {
				t.Errorf("franz-go: record %d has timestamp %d; it was produced at %d", r.Offset, r.Timestamp.UnixMilli(), stamps[r.Offset])
			}
		})
	}
	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			skipOutsideCI(t, "kcat is not on PATH (.ci/run installs it)")
		}
		out := runClient(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-Z", "-f", "%o %k %T\n")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(got) {
			t.Fatalf("kcat read %d records; franz-go %d:\n%s", len(lines), len(got), out)
		}
		for _, l := range lines {
			var off, ts int64
			var key string
			if _, err := fmt.Sscanf(l, "%d %s %d", &off, &key, &ts); err != nil || ts != stamps[off] {
				t.Fatalf("kcat: %q: timestamp %d; it was produced at %d (%v)", l, ts, stamps[off], err)
			}
		}
	})
	t.Run("java", func(t *testing.T) {
		java := testclients.Java(t)
		out := runClient(t, 120*time.Second, "", java[0], append(java[1:], "consume", b.addr, topic, "horizon-group", "classic", fmt.Sprint(len(got)))...)
		if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != len(got) {
			t.Fatalf("java consumed %d records; want %d:\n%s", n, len(got), out)
		}
		if !strings.Contains(out, "0 1 null") {
			t.Fatalf("java did not read the tombstone at offset 1:\n%s", out)
		}
	})
}

// TestRipcordMetadataOnEachListener: a node with two Kafka listeners, in Ripcord mode (its
// controllers are gone), names the processes in its Metadata on the listener the client came
// in on, from the listeners its and the others' announcements in the object store carry.
func TestRipcordMetadataOnEachListener(t *testing.T) {
	store := "file://" + t.TempDir()
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.objectStore = store
		c.tune = func(_ int32, cfg *server.Config) {
			cfg.Ripcord = true
			cfg.Listeners = []security.Listener{
				{Name: "PLAINTEXT", Protocol: security.Plaintext, Addr: cfg.KafkaAddr, Advertised: cfg.KafkaAddr},
				{Name: "OTHER", Protocol: security.Plaintext, Addr: "127.0.0.1:0", Advertised: "127.0.0.1:0"},
			}
		}
	})
	c.waitNodes(3)
	c.stop(2)
	c.stop(3)
	other := c.servers[1].ListenerAddrs()["OTHER"]
	cl, err := kgo.NewClient(kgo.SeedBrokers(other))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var brokers []kmsg.MetadataResponseBroker
	eventually(t, "node 1 alone in its Metadata (Ripcord mode)", 20*time.Second, func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		brokers = resp.Brokers
		return len(brokers) == 1
	})
	if got := net.JoinHostPort(brokers[0].Host, strconv.Itoa(int(brokers[0].Port))); brokers[0].NodeID != 1 || got != other {
		t.Fatalf("in Ripcord mode, Metadata on the OTHER listener names node %d at %s; want node 1 at %s", brokers[0].NodeID, got, other)
	}
}
