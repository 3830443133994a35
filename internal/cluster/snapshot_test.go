package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
)

// TestSnapshotLargerThanAFrame: a node that joins a cluster whose controller log is compacted
// catches up from a snapshot larger than the transport's frame limit: the snapshot travels in
// chunks (it used to go as one frame, which the new node refused, closing the connection, for
// ever).
func TestSnapshotLargerThanAFrame(t *testing.T) {
	const frame = 64 << 10
	tune := func(c *Config) {
		c.maxFrameBytes = frame
		c.Controller.SnapshotEvery = 50
		c.Controller.ChunkBytes = 16 << 10
	}
	lns, voters := listenNodes(t, 4, 3)
	nodes := map[int32]*testNode{}
	for id := int32(1); id <= 3; id++ {
		nodes[id] = startNodeWith(t, id, lns[id], voters, t.TempDir(), tune)
		defer nodes[id].close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitReady(t, ctx, nodes[1], nodes[2], nodes[3])
	n := nodes[1]
	waitFor(t, "the cluster at this version's command level", 20*time.Second, func() bool { return n.Image().Level == controller.Level })
	const topics = 300
	for i := range topics {
		res, err := n.Propose(ctx, &controller.Command{Op: controller.OpCreateTopic, CreateTopic: &controller.CreateTopic{
			Name: fmt.Sprintf("t%d", i), ID: controller.TopicID{byte(i), byte(i >> 8), 7}, Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}}})
		if err != nil || res.Err != nil {
			t.Fatalf("create t%d: %v %v", i, err, res.Err)
		}
	}
	if size := len(controller.EncodeImage(n.Image())); size < 2*frame {
		t.Fatalf("the image is %d bytes; the test needs more than two frames' worth", size)
	}
	joined := startNodeWith(t, 4, lns[4], voters, t.TempDir(), tune)
	defer joined.close()
	waitReady(t, ctx, joined)
	waitFor(t, "node 4 has every topic", 30*time.Second, func() bool { return len(joined.Image().Topics) == topics })
}
