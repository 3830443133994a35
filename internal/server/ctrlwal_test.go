package server_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestControllerLogFailureStopsTheNode: a node whose controller Raft log cannot be written
// stops serving with an error that says so (the process exits with it), as Kafka halts on a
// failed metadata log write; before, the controller's loop panicked and the process ended with
// a goroutine trace. The data acknowledged before is there when the node starts again.
func TestControllerLogFailureStopsTheNode(t *testing.T) {
	rules := &vfs.Rules{}
	dir := t.TempDir()
	b := startBrokerConfig(t, dir, "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.FS = vfs.NewErrorFS(vfs.Default, rules) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := b.client(kgo.AllowAutoTopicCreation())
	r := &kgo.Record{Topic: "kept", Value: []byte("before")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	rules.Add(vfs.Rule{Op: vfs.OpWrite, PathContains: "/controller/", Err: syscall.EIO})
	acl := kadm.NewClient(b.client(kgo.RequestTimeoutOverhead(2 * time.Second)))
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	acl.CreateTopic(cctx, 1, 1, nil, "needs-the-controller") // its answer does not matter: the node stops
	ccancel()
	acl.Close()
	select {
	case err := <-b.served:
		if err == nil || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "persisting the raft log") {
			t.Fatalf("Serve = %v; want the controller log's write failure, named", err)
		}
		b.served <- nil // for stop
	case <-time.After(30 * time.Second):
		t.Fatal("the node still serves 30 s after its controller log failed")
	}
	b.stop()

	rules.Clear()
	b = startBrokerConfig(t, dir, "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) { c.FS = vfs.NewErrorFS(vfs.Default, rules) })
	cl = b.client(kgo.ConsumeTopics("kept"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "before" || recs[0].Offset != r.Offset {
		t.Fatalf("after the restart: %d records; want the one acknowledged before at offset %d", len(recs), r.Offset)
	}
}
