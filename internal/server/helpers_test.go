package server

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/topics"
)

// WaitJoinedT (waitJoined) waits until the server's node has joined its cluster (and its registry holds the
// topics).
func WaitJoinedT(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Node().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// CreateTopicT (createTopic) creates a topic, every partition on this node, through the controller.
func CreateTopicT(t testing.TB, s *Server, name string, parts int32, configs map[string]string) *topics.Topic {
	t.Helper()
	WaitJoinedT(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var id controller.TopicID
	rand.Read(id[:])
	assignments := make([][]int32, parts)
	for i := range assignments {
		assignments[i] = []int32{s.cfg.NodeID}
	}
	res, err := s.Node().Propose(ctx, &controller.Command{Op: controller.OpCreateTopic,
		CreateTopic: &controller.CreateTopic{Name: name, ID: id, Configs: configs, Assignments: assignments}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	tp, ok := s.Topics().Get(name)
	if !ok {
		t.Fatalf("created %s, but the registry lacks it", name)
	}
	return tp
}

var (
	waitJoined  = WaitJoinedT
	createTopic = CreateTopicT
)
