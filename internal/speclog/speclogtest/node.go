// Package speclogtest starts a one-node Runnel (the embedded default, with the SpecLog API) for
// tests of total-order topics outside package server.
package speclogtest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/speclog"
)

// Node is a running one-node Runnel.
type Node struct {
	S     *server.Server
	Kafka string // its Kafka address
}

// Start starts a node on loopback ports in a temporary data dir; the test's cleanup stops it.
func Start(t testing.TB) *Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.Open(server.Config{DataDir: t.TempDir(), KafkaAddr: ln.Addr().String(), AdminAddr: "127.0.0.1:0",
		ClusterAddr: "127.0.0.1:0", SpecLogAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Console: io.Discard})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return &Node{S: s, Kafka: ln.Addr().String()}
}

// admin runs f with an admin client of the node, for up to 20 s.
func (n *Node) admin(t testing.TB, f func(context.Context, *kadm.Client) error) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return f(ctx, kadm.NewClient(cl))
}

// CreateTopic creates a topic through Kafka's CreateTopics.
func (n *Node) CreateTopic(t testing.TB, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	if err := n.admin(t, func(ctx context.Context, adm *kadm.Client) error {
		res, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
		if err == nil {
			err = res.Err
		}
		return err
	}); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
}

// AddPartitions grows a topic to total partitions through Kafka's CreatePartitions.
func (n *Node) AddPartitions(t testing.TB, name string, total int) {
	t.Helper()
	if err := n.admin(t, func(ctx context.Context, adm *kadm.Client) error {
		res, err := adm.UpdatePartitions(ctx, total, name)
		if err == nil {
			err = res.Error()
		}
		return err
	}); err != nil {
		t.Fatalf("growing %s to %d partitions: %v", name, total, err)
	}
}

// Total is the configs of a total-order topic.
func Total() map[string]*string {
	v := "total"
	return map[string]*string{"runnel.ordering": &v}
}

// Stall freezes the runner of a topic's shard for d (as a whole shard failing).
func (n *Node) Stall(t testing.TB, topic string, shard int32, d time.Duration) {
	t.Helper()
	tp, ok := n.S.Topics().Get(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	r := n.S.Node().Shards().Runner(tp.ID, shard)
	if r == nil {
		t.Fatalf("no runner for %s[%d]", topic, shard)
	}
	r.Stall(d)
}

// Log creates a total-order topic of the given shards, dials the node's SpecLog API and waits
// until the sequencer has taken the topic up. The client is closed at the test's end. configs
// are more topic configs, name, value, name, value...
func (n *Node) Log(ctx context.Context, t testing.TB, topic string, shards int32, configs ...string) *speclog.Log {
	t.Helper()
	all := Total()
	for i := 0; i+1 < len(configs); i += 2 {
		all[configs[i]] = &configs[i+1]
	}
	n.CreateTopic(t, topic, shards, all)
	c, err := speclog.Dial(ctx, n.S.SpecLogAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	log := c.Topic(topic)
	for {
		_, err := log.Describe(ctx)
		if err == nil {
			return log
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s not sequenced: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
