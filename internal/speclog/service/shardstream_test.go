package service

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRefusedShardStreamIsLogged: a peer refusing this node's shard stream for want of
// authorization or authentication is logged as an error naming the fix, once per peer within
// 10 s (subscribers retry all the while); other failures (a peer restarting) are not.
func TestRefusedShardStreamIsLogged(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	denied := status.Error(codes.PermissionDenied, "User:CN=node1 may not CLUSTER_ACTION CLUSTER kafka-cluster")
	s.noteRefusal("127.0.0.1:9096", 2, status.Error(codes.Unavailable, "connection refused"))
	if buf.Len() != 0 {
		t.Fatalf("a peer that is down was logged as a refusal: %s", buf.String())
	}
	s.noteRefusal("127.0.0.1:9096", 2, denied)
	s.noteRefusal("127.0.0.1:9096", 2, denied)
	s.noteRefusal("127.0.0.1:9097", 3, status.Error(codes.Unauthenticated, "no credentials"))
	out := buf.String()
	if n := strings.Count(out, "level=ERROR"); n != 2 {
		t.Fatalf("%d errors logged; want one per refusing peer:\n%s", n, out)
	}
	if !strings.Contains(out, "CLUSTER_ACTION") || !strings.Contains(out, "node=2") || !strings.Contains(out, "node=3") {
		t.Fatalf("the log does not say what to fix or which node refused:\n%s", out)
	}
}
