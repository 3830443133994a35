package controller

import (
	"errors"
	"testing"
	"time"
)

// TestTokenCommands: a token is created once; a renewal moves its expiry, never past its max;
// an expiry in the past removes it; a token past its expiry can be neither renewed nor
// expired; the active controller sweeps expired tokens away. Every step survives a snapshot.
func TestTokenCommands(t *testing.T) {
	im := NewImage()
	now := t0.UnixMilli()
	apply := func(c *Command) Result {
		t.Helper()
		res := Apply(im, im.Index+1, c)
		im.Index++
		again, err := DecodeImage(EncodeImage(im))
		if err != nil || len(again.Tokens) != len(im.Tokens) {
			t.Fatalf("the image after %s does not decode the same: %v", c.Op, err)
		}
		return res
	}
	tok := &DelegationToken{ID: "t1", Owner: "User:alice", Requester: "User:admin", IssueMs: now, ExpiryMs: now + 1000, MaxMs: now + 5000}
	if res := apply(&Command{Op: OpCreateToken, CreateToken: tok}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := apply(&Command{Op: OpCreateToken, CreateToken: tok}); !errors.Is(res.Err, ErrTokenExists) {
		t.Fatalf("creating t1 again: %v; want ErrTokenExists", res.Err)
	}
	if res := apply(&Command{Op: OpRenewToken, TokenChange: &TokenChange{ID: "t1", NowMs: now + 500, ExpiryMs: now + 3000}}); res.Err != nil || res.Value != now+3000 {
		t.Fatalf("renewal: %+v", res)
	}
	if res := apply(&Command{Op: OpRenewToken, TokenChange: &TokenChange{ID: "t1", NowMs: now + 600, ExpiryMs: now + 9000}}); res.Value != now+5000 || im.Tokens["t1"].ExpiryMs != now+5000 {
		t.Fatalf("a renewal past the max: %+v, expiry %d; want the max", res, im.Tokens["t1"].ExpiryMs)
	}
	if res := apply(&Command{Op: OpRenewToken, TokenChange: &TokenChange{ID: "t1", NowMs: now + 6000, ExpiryMs: now + 7000}}); !errors.Is(res.Err, ErrTokenExpired) {
		t.Fatalf("renewing an expired token: %v; want ErrTokenExpired", res.Err)
	}
	if res := apply(&Command{Op: OpRenewToken, TokenChange: &TokenChange{ID: "nope", NowMs: now}}); !errors.Is(res.Err, ErrTokenNotFound) {
		t.Fatalf("renewing an unknown token: %v; want ErrTokenNotFound", res.Err)
	}
	if res := apply(&Command{Op: OpExpireToken, TokenChange: &TokenChange{ID: "t1", NowMs: now + 700, ExpiryMs: now + 700}}); res.Err != nil || im.Tokens["t1"] != nil {
		t.Fatalf("expiring t1 now: %+v; still there: %v", res, im.Tokens["t1"] != nil)
	}

	// The sweep: expired tokens go, live ones stay.
	for _, tk := range []*DelegationToken{
		{ID: "old", Owner: "User:a", ExpiryMs: now - 1, MaxMs: now},
		{ID: "live", Owner: "User:a", ExpiryMs: now + 60_000, MaxMs: now + 60_000},
	} {
		apply(&Command{Op: OpCreateToken, CreateToken: tk})
	}
	a := NewActive(testActiveConfig(), im.Clone(), t0)
	eff := a.Tick(t0.Add(tokenSweepInterval))
	commit(im, eff)
	if im.Tokens["old"] != nil || im.Tokens["live"] == nil {
		t.Fatalf("after the sweep: old %v, live %v; want only live", im.Tokens["old"] != nil, im.Tokens["live"] != nil)
	}
	if eff := a.Tick(t0.Add(tokenSweepInterval + time.Second)); len(eff.Propose) != 0 {
		t.Fatalf("a second sweep within the interval: %+v", eff.Propose)
	}
	// A token renewed after the sweep read the image, before its removal applied, stays.
	apply(&Command{Op: OpCreateToken, CreateToken: &DelegationToken{ID: "renewed", Owner: "User:a", ExpiryMs: now + 10, MaxMs: now + 600_000}})
	a = NewActive(testActiveConfig(), im.Clone(), t0)
	eff = a.Tick(t0.Add(tokenSweepInterval).Add(20 * time.Millisecond))
	if len(eff.Propose) != 1 {
		t.Fatalf("the sweep proposed %+v; want the removal of the expired token", eff.Propose)
	}
	apply(&Command{Op: OpRenewToken, TokenChange: &TokenChange{ID: "renewed", NowMs: now + 5, ExpiryMs: now + 300_000}})
	commit(im, eff)
	if im.Tokens["renewed"] == nil {
		t.Fatal("a token renewed before the sweep's removal applied was removed")
	}
}
