// Real Kafka clients against an in-process Server: the runnel topic commands (kadm), franz-go
// (kgo), kcat and confluent-kafka (both librdkafka).
//
// This is an external test package (server_test), not package server: the topic commands live
// in package cli, which imports package server.
package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/cli"
	"github.com/runnel-dev/runnel/internal/server"

	"github.com/runnel-dev/runnel/internal/testclients"
)

// testBroker is a Server serving Kafka on a loopback port.
type testBroker struct {
	t       *testing.T
	dataDir string
	addr    string
	s       *server.Server
	cancel  context.CancelFunc
	served  chan error
	hooks   broker.Hooks
}

// startBroker opens a Server on dataDir and serves it on addr ("127.0.0.1:0" for any port).
func startBroker(t *testing.T, dataDir, addr string) *testBroker {
	t.Helper()
	return startBrokerHooks(t, dataDir, addr, broker.Hooks{})
}

// startBrokerHooks is startBroker with test hooks in the broker; restart keeps them.
func startBrokerHooks(t *testing.T, dataDir, addr string, hooks broker.Hooks) *testBroker {
	t.Helper()
	return startBrokerConfig(t, dataDir, addr, hooks, nil)
}

// startBrokerConfig is startBrokerHooks with a change to the server's config (not kept by
// restart).
func startBrokerConfig(t *testing.T, dataDir, addr string, hooks broker.Hooks, change func(*server.Config)) *testBroker {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // rebinding the port of a broker just stopped can take a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	cfg := server.Config{
		DataDir: dataDir, KafkaAddr: ln.Addr().String(), AdvertisedKafkaAddr: ln.Addr().String(),
		AdminAddr: "127.0.0.1:0", Console: &bytes.Buffer{}, Hooks: hooks,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if change != nil {
		change(&cfg)
	}
	s, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("Open = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &testBroker{t: t, dataDir: dataDir, addr: ln.Addr().String(), s: s, cancel: cancel, served: make(chan error, 1), hooks: hooks}
	go func() { b.served <- s.Serve(ctx, ln) }()
	t.Cleanup(b.stop)
	return b
}

// stop shuts the listener down and closes the server; calling it again does nothing.
func (b *testBroker) stop() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	b.cancel = nil
	if err := <-b.served; err != nil && !errors.Is(err, net.ErrClosed) {
		b.t.Errorf("Serve = %v", err)
	}
	if err := b.s.Close(); err != nil {
		b.t.Errorf("Close = %v", err)
	}
}

// restart stops the broker and serves the same data dir on the same address again.
func (b *testBroker) restart() *testBroker {
	b.stop()
	return startBrokerHooks(b.t, b.dataDir, b.addr, b.hooks)
}

// client returns a client of the broker with opts, closed when the test ends.
func (b *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *testBroker) createTopic(name string, partitions int32) {
	b.t.Helper()
	server.CreateTopicT(b.t, b.s, name, partitions, nil)
}

// --- runnel topic ---------------------------------------------------------------------------

// runTopic runs `runnel topic args... --brokers addr` in process.
func runTopic(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	return runCommand("topic", addr, args...)
}

// runCommand runs `runnel command args... --brokers addr` in process and returns its output.
func runCommand(command, addr string, args ...string) (string, error) {
	root := cli.NewRoot("test")
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(append([]string{command}, args...), "--brokers="+addr, "--timeout=20s"))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// mustTopic is runTopic that fails the test on an error.
func mustTopic(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := runTopic(t, addr, args...)
	if err != nil {
		t.Fatalf("runnel topic %s: %v\noutput:\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// missingAdminAPIs lists the admin APIs the topic commands need that the broker does not serve.
func missingAdminAPIs(t *testing.T, addr string) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	have := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		have[k.ApiKey] = true
	}
	var missing []string
	for _, k := range []kmsg.Key{kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.DescribeConfigs, kmsg.IncrementalAlterConfigs} {
		if !have[k.Int16()] {
			missing = append(missing, k.Name())
		}
	}
	return missing
}

type describedTopic struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Partitions []struct {
		Partition   int32   `json:"partition"`
		Leader      int32   `json:"leader"`
		Replicas    []int32 `json:"replicas"`
		ISR         []int32 `json:"isr"`
		StartOffset int64   `json:"start_offset"`
		EndOffset   int64   `json:"end_offset"`
		Error       string  `json:"error"`
	} `json:"partitions"`
	Configs map[string]string `json:"configs"`
}

func TestTopicCommands(t *testing.T) {
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")

	// list and describe need only Metadata and ListOffsets, which every broker serves.
	b.createTopic("preexisting", 2)
	out := mustTopic(t, b.addr, "list")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "preexisting") {
		t.Errorf("topic list =\n%s\nwant a table with preexisting", out)
	}

	if missing := missingAdminAPIs(t, b.addr); len(missing) > 0 {
		t.Skipf("the broker does not serve %s yet", strings.Join(missing, ", "))
	}

	out = mustTopic(t, b.addr, "create", "orders", "--partitions", "3", "--config", "retention.ms=86400000", "--config", "cleanup.policy=delete")
	if !strings.Contains(out, "created topic orders: 3 partitions") {
		t.Errorf("topic create =\n%s", out)
	}
	if _, err := runTopic(t, b.addr, "create", "orders"); err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Errorf("creating orders again: err = %v; want TOPIC_ALREADY_EXISTS", err)
	}
	out = mustTopic(t, b.addr, "create", "dry-run", "--partitions", "2", "--validate-only")
	if !strings.Contains(out, "valid") {
		t.Errorf("topic create --validate-only =\n%s", out)
	}

	out = mustTopic(t, b.addr, "list", "--json")
	var listed []struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
		ID         string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("topic list --json: %v\n%s", err, out)
	}
	names := map[string]int{}
	for _, l := range listed {
		names[l.Name] = l.Partitions
		if l.ID == "" {
			t.Errorf("topic %s listed without an id", l.Name)
		}
	}
	if names["orders"] != 3 || names["preexisting"] != 2 {
		t.Errorf("topic list --json = %+v; want orders with 3 partitions and preexisting with 2", listed)
	}
	if _, ok := names["dry-run"]; ok {
		t.Errorf("--validate-only created the topic: %+v", listed)
	}

	// Write two records to partition 1, so describe has offsets to show.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cl.Close()

	describe := func() describedTopic {
		t.Helper()
		out := mustTopic(t, b.addr, "describe", "orders", "--json")
		var d []describedTopic
		if err := json.Unmarshal([]byte(out), &d); err != nil || len(d) != 1 {
			t.Fatalf("topic describe --json: %v\n%s", err, out)
		}
		return d[0]
	}
	d := describe()
	if d.Name != "orders" || d.ID == "" || len(d.Partitions) != 3 {
		t.Fatalf("describe = %+v; want orders with an id and 3 partitions", d)
	}
	for _, p := range d.Partitions {
		wantEnd := int64(0)
		if p.Partition == 1 {
			wantEnd = 2
		}
		if p.Leader != 0 || p.StartOffset != 0 || p.EndOffset != wantEnd || p.Error != "" || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Errorf("partition %+v; want leader 0, replicas [0], isr [0], offsets 0..%d", p, wantEnd)
		}
	}
	if d.Configs["retention.ms"] != "86400000" || d.Configs["cleanup.policy"] != "delete" {
		t.Errorf("describe configs = %v; want retention.ms=86400000 cleanup.policy=delete", d.Configs)
	}
	out = mustTopic(t, b.addr, "describe", "orders")
	for _, want := range []string{"Topic:", "orders", "retention.ms=86400000", "PARTITION", "LEADER", "END"} {
		if !strings.Contains(out, want) {
			t.Errorf("topic describe =\n%s\nwant %q in it", out, want)
		}
	}

	out = mustTopic(t, b.addr, "alter-config", "orders", "--set", "cleanup.policy=compact", "--delete", "retention.ms")
	if !strings.Contains(out, "altered topic orders") {
		t.Errorf("topic alter-config =\n%s", out)
	}
	if d := describe(); d.Configs["cleanup.policy"] != "compact" || d.Configs["retention.ms"] != "" {
		t.Errorf("configs after alter-config = %v; want cleanup.policy=compact and no retention.ms", d.Configs)
	}

	out = mustTopic(t, b.addr, "delete", "orders", "preexisting")
	if !strings.Contains(out, "deleted topic orders") || !strings.Contains(out, "deleted topic preexisting") {
		t.Errorf("topic delete =\n%s", out)
	}
	if _, err := runTopic(t, b.addr, "delete", "orders"); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("deleting orders again: err = %v; want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if _, err := runTopic(t, b.addr, "describe", "orders"); err == nil {
		t.Errorf("describing a deleted topic: no error")
	}
	if out := mustTopic(t, b.addr, "list"); strings.Contains(out, "orders") {
		t.Errorf("topic list after delete =\n%s", out)
	}
}

// --- franz-go -------------------------------------------------------------------------------

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// franzRecord is record seq of the producer using codec: its partition, key and value.
func franzRecord(topic, codec string, seq, partitions int) *kgo.Record {
	key := fmt.Sprintf("%s-%07d", codec, seq)
	value := fmt.Sprintf("%s value %07d ", codec, seq)
	value += strings.Repeat(string(rune('a'+seq%26)), 100-len(value)) // 100-byte values
	return &kgo.Record{Topic: topic, Partition: int32(seq % partitions), Key: []byte(key), Value: []byte(value),
		Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(codec)}}}
}

// produceAll produces records [from, to) of every codec's producer, concurrently, and waits
// until every one is acknowledged.
func produceAll(t *testing.T, producers []*kgo.Client, topic string, from, to, partitions int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := from; seq < to; seq++ {
				p.Produce(context.Background(), franzRecord(topic, codecs[i].name, seq, partitions), func(r *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("producing %s with %s: %w", r.Key, codecs[i].name, err))
						mu.Unlock()
					}
				})
			}
			if err := p.Flush(context.Background()); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d produce errors; first: %v", len(errs), errs[0])
	}
}

// consumed tracks what a consumer read: per codec, the next seq expected in each partition.
type consumed struct {
	topic      string
	partitions int
	next       map[string][]int // codec -> partition -> next seq
	count      int
	lastOffset map[int32]int64
}

func newConsumed(topic string, partitions int) *consumed {
	c := &consumed{topic: topic, partitions: partitions, next: map[string][]int{}, lastOffset: map[int32]int64{}}
	for _, cd := range codecs {
		c.next[cd.name] = make([]int, partitions)
		for p := range partitions {
			c.next[cd.name][p] = p // seq s goes to partition s % partitions
		}
	}
	return c
}

// check takes one consumed record: it must be the next of its producer in its partition, with
// exactly the contents produced, at an offset above the partition's previous one.
func (c *consumed) check(r *kgo.Record) error {
	codec := string(r.Key[:strings.IndexByte(string(r.Key), '-')])
	next, ok := c.next[codec]
	if !ok {
		return fmt.Errorf("record with unknown key %q", r.Key)
	}
	seq := next[r.Partition]
	want := franzRecord(c.topic, codec, seq, c.partitions)
	if !bytes.Equal(r.Key, want.Key) {
		return fmt.Errorf("partition %d offset %d: key %q; want %q (lost, duplicated or reordered)", r.Partition, r.Offset, r.Key, want.Key)
	}
	if !bytes.Equal(r.Value, want.Value) || len(r.Headers) != 1 || r.Headers[0].Key != "codec" || string(r.Headers[0].Value) != codec {
		return fmt.Errorf("partition %d offset %d (%s): value %q headers %v; want %q and codec=%s", r.Partition, r.Offset, r.Key, r.Value, r.Headers, want.Value, codec)
	}
	if last, ok := c.lastOffset[r.Partition]; ok && r.Offset <= last {
		return fmt.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, last)
	}
	c.lastOffset[r.Partition] = r.Offset
	next[r.Partition] = seq + c.partitions
	c.count++
	return nil
}

// consumeUntil polls cl until c has want records, failing on a bad record or after a timeout.
func consumeUntil(t *testing.T, cl *kgo.Client, c *consumed, want int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for c.count < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records in %v; want %d", c.count, timeout, want)
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("fetch %s[%d]: %w", topic, p, err)
			}
		})
		if ferr != nil {
			t.Logf("%v (retrying)", ferr)
		}
		var rerr error
		fetches.EachRecord(func(r *kgo.Record) {
			if rerr == nil {
				rerr = c.check(r)
			}
		})
		if rerr != nil {
			t.Fatal(rerr)
		}
	}
}

// TestFranzGoCodecsAndRestart produces with every compression codec across 8 partitions,
// consumes everything back checking count, order and contents, restarts the broker on the same
// data dir and port, and goes on producing and consuming with the same clients.
func TestFranzGoCodecsAndRestart(t *testing.T) {
	perCodec := 20_000 // 100k records in all
	if testing.Short() {
		perCodec = 2_000
	}
	const partitions = 8
	const topic = "franz"
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic(topic, partitions)
	addr := b.addr

	var producers []*kgo.Client
	for _, cd := range codecs {
		p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(cd.codec), kgo.DisableIdempotentWrite(),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		producers = append(producers, p)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	c := newConsumed(topic, partitions)

	half := perCodec / 2
	start := time.Now()
	produceAll(t, producers, topic, 0, half, partitions)
	t.Logf("produced %d records in %v", half*len(codecs), time.Since(start))
	consumeUntil(t, consumer, c, half*len(codecs), 60*time.Second)
	t.Logf("consumed %d records after %v", c.count, time.Since(start))

	b = b.restart()
	if b.addr != addr {
		t.Fatalf("restarted on %s; want %s", b.addr, addr)
	}
	produceAll(t, producers, topic, half, perCodec, partitions)
	consumeUntil(t, consumer, c, perCodec*len(codecs), 60*time.Second)
	t.Logf("after the restart: %d records consumed in all after %v", c.count, time.Since(start))

	// Nothing more may arrive: no duplicates.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if n := consumer.PollFetches(ctx).NumRecords(); n > 0 {
		t.Errorf("%d records beyond the %d produced", n, c.count)
	}
	var total int64
	for _, p := range b.s.Partitions() {
		if p.Topic == topic {
			total += p.EndOffset
		}
	}
	if total != int64(perCodec*len(codecs)) {
		t.Errorf("partition end offsets sum to %d; want %d", total, perCodec*len(codecs))
	}

	// Offsets as the admin API sees them after the restart.
	adm := kadm.NewClient(consumer)
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	if sum != total {
		t.Errorf("ListEndOffsets sum = %d; want %d", sum, total)
	}
}

// --- librdkafka clients ---------------------------------------------------------------------

// runClient runs a client command with a timeout, returning stdout and failing with all output.
func runClient(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v", timeout)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, tail(stdout.String(), 300), tail(stderr.String(), 1200))
	}
	return stdout.String()
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func TestKcatRoundTrip(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		skipOutsideCI(t, "kcat is not on PATH (.ci/run installs it)")
	}
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("kcat", 1)
	var want []string
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var lines []string
		for i := range 50 {
			lines = append(lines, fmt.Sprintf("%s line %d", codec, i))
		}
		runClient(t, 30*time.Second, strings.Join(lines, "\n")+"\n", kcat, "-b", b.addr, "-P", "-t", "kcat", "-z", codec)
		want = append(want, lines...)
	}
	wantOut := strings.Join(want, "\n") + "\n"
	// -c: exit after that many messages.
	got := runClient(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", "kcat", "-o", "beginning", "-c", fmt.Sprint(len(want)), "-q", "-u")
	if got != wantOut {
		t.Errorf("kcat -c consumed:\n%s\nwant:\n%s", tail(got, 2000), tail(wantOut, 2000))
	}
	// -e: exit at the end of the partition, which needs a well-formed empty fetch response.
	// Not -q, so librdkafka's errors reach stderr (and the failure message).
	got = runClient(t, 15*time.Second, "", kcat, "-b", b.addr, "-C", "-t", "kcat", "-o", "beginning", "-e", "-u")
	if got != wantOut {
		t.Errorf("kcat -e consumed:\n%s\nwant:\n%s", tail(got, 2000), tail(wantOut, 2000))
	}
}

func repoRoot(t *testing.T) string { return testclients.RepoRoot(t) }

func TestConfluentKafkaRoundTrip(t *testing.T) {
	root := repoRoot(t)
	python := clientPython(t, root)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("confluent", 1)
	count := "500"
	if testing.Short() {
		count = "100"
	}
	out := runClient(t, 60*time.Second, "", python, filepath.Join(root, "test", "clients", "confluent_roundtrip.py"),
		"--bootstrap", b.addr, "--topic", "confluent", "--count", count, "--timeout", "20")
	t.Logf("%s", out)
}

// TestConfluentKafkaTransactions: librdkafka's transactional producer (commits and aborts over
// three partitions) and its read_committed consumer, which must read exactly the committed
// messages, each once; read_uncommitted sees every one. On a local topic, then on an object
// topic.
func TestConfluentKafkaTransactions(t *testing.T) {
	root := repoRoot(t)
	python := clientPython(t, root)
	b := startBroker(t, t.TempDir(), "127.0.0.1:0")
	b.createTopic("confluent-txn", 3)
	createObjectTopic(t, b.addr, "confluent-txn-object", 3, nil)
	for _, topic := range []string{"confluent-txn", "confluent-txn-object"} {
		out := runClient(t, 120*time.Second, "", python, filepath.Join(root, "test", "clients", "confluent_txn.py"),
			"--bootstrap", b.addr, "--topic", topic, "--partitions", "3")
		t.Logf("%s: %s", topic, out)
	}
}

// clientPython is the Python with confluent-kafka: $RUNNEL_PYTHON, else the venv .ci/run makes.
func clientPython(t *testing.T, root string) string {
	t.Helper()
	if python := os.Getenv("RUNNEL_PYTHON"); python != "" {
		return python
	}
	python := filepath.Join(root, ".ci", "venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		skipOutsideCI(t, "no .ci/venv/bin/python and RUNNEL_PYTHON is unset (.ci/run makes the venv)")
	}
	return python
}

func skipOutsideCI(t *testing.T, why string) { testclients.SkipOutsideCI(t, why) }

// valuesOnce checks that the clients' outputs, lines "PARTITION OFFSET VALUE", hold each of the
// values prefix/0 .. prefix/n-1 exactly once between them.
func valuesOnce(t *testing.T, name, prefix string, n int, outs ...string) {
	t.Helper()
	seen := map[string]int{}
	for _, out := range outs {
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				seen[f[2]]++
			}
		}
	}
	for i := range n {
		if c := seen[fmt.Sprintf("%s/%d", prefix, i)]; c != 1 {
			t.Fatalf("%s: %s/%d read %d times; want exactly once", name, prefix, i, c)
		}
	}
}
