package broker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
)

// TestTokenOfAnotherKey: a token made on a node with another secret key (the nodes' keys
// differ) authenticates no one here, and the node says why in its log, once.
func TestTokenOfAnotherKey(t *testing.T) {
	var logs syncBuffer
	b, _, _ := ctBroker(t, func(c *Config) {
		c.Security.TokenSecret = "this node's key"
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now().UnixMilli()
	for id, key := range map[string]string{"ours": "this node's key", "theirs": "another node's key"} {
		tok := &controller.DelegationToken{ID: id, Owner: "User:alice", IssueMs: now, ExpiryMs: now + 60_000, MaxMs: now + 60_000,
			KeyCheck: security.TokenKeyCheck(key)}
		if _, aerr := b.propose(ctx, &controller.Command{Op: controller.OpCreateToken, CreateToken: tok}); aerr != nil {
			t.Fatal(aerr)
		}
	}
	if _, ok := b.liveToken("ours"); !ok {
		t.Error("a token of this node's key does not authenticate")
	}
	for range 2 {
		if _, ok := b.liveToken("theirs"); ok {
			t.Error("a token of another key authenticates")
		}
	}
	if _, ok := b.tokenByHMAC(security.TokenHMAC("this node's key", "theirs")); ok {
		t.Error("a token of another key is found by this node's HMAC of it")
	}
	if n := strings.Count(logs.String(), "another secret key"); n != 1 {
		t.Errorf("the key mismatch was logged %d times; want once:\n%s", n, logs.String())
	}
}
