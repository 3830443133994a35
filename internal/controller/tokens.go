package controller

import (
	"errors"
	"maps"
)

// DelegationToken is a Kafka delegation token (KIP-48; docs/security.md §3): its id and what
// it grants. Its HMAC (the client's password) is not stored: every node derives it from the
// id with the cluster's secret key. A *DelegationToken is never modified once in an image:
// changes replace it.
type DelegationToken struct {
	ID        string   `json:"id"`
	Owner     string   `json:"owner"`     // the principal it authenticates as ("User:alice")
	Requester string   `json:"requester"` // the principal that created it
	Renewers  []string `json:"renewers,omitempty"`
	IssueMs   int64    `json:"issue_ms"`
	ExpiryMs  int64    `json:"expiry_ms"` // it authenticates no one from then on
	MaxMs     int64    `json:"max_ms"`    // no renewal goes past it
	// KeyCheck tells the secret key the token was made under (security.TokenKeyCheck), so a
	// node whose key differs says so instead of refusing its clients as if they had a wrong
	// password.
	KeyCheck string `json:"key_check,omitempty"`
}

// TokenChange renews a token (ExpiryMs, capped by its MaxMs) or expires it (ExpiryMs, and at or
// before NowMs it is removed). Remove drops the named tokens that are expired as of NowMs (the
// active controller's sweep: one renewed since the sweep read the image stays). NowMs is the
// proposer's clock: the nodes' clocks must agree to well within a token's lifetime, as every
// node also checks expiry with its own when a client authenticates.
type TokenChange struct {
	ID       string   `json:"id,omitempty"`
	ExpiryMs int64    `json:"expiry_ms,omitempty"`
	NowMs    int64    `json:"now_ms,omitempty"`
	Remove   []string `json:"remove,omitempty"`
}

// Errors of the token commands.
var (
	ErrTokenExists   = errors.New("controller: a delegation token with this id exists")
	ErrTokenNotFound = errors.New("controller: no such delegation token")
	ErrTokenExpired  = errors.New("controller: the delegation token has expired")
)

func applyCreateToken(im *Image, t *DelegationToken) Result {
	if t.ID == "" || t.Owner == "" || t.ExpiryMs > t.MaxMs {
		return Result{Err: errors.New("controller: a delegation token needs an id, an owner, and an expiry within its max")}
	}
	if _, ok := im.Tokens[t.ID]; ok {
		return Result{Err: ErrTokenExists}
	}
	im.Tokens = maps.Clone(im.Tokens)
	if im.Tokens == nil {
		im.Tokens = map[string]*DelegationToken{}
	}
	c := *t
	im.Tokens[t.ID] = &c
	return Result{}
}

// applyTokenChange renews (expire false) or expires a token. The command's NowMs is the
// proposer's clock: a token past its expiry then can be neither renewed nor expired again.
func applyTokenChange(im *Image, c *TokenChange, expire bool) Result {
	t, ok := im.Tokens[c.ID]
	switch {
	case !ok:
		return Result{Err: ErrTokenNotFound}
	case t.ExpiryMs < c.NowMs:
		return Result{Err: ErrTokenExpired}
	}
	im.Tokens = maps.Clone(im.Tokens)
	if expire && c.ExpiryMs <= c.NowMs {
		delete(im.Tokens, c.ID)
		return Result{Value: int64(c.NowMs)}
	}
	n := *t
	n.ExpiryMs = min(c.ExpiryMs, t.MaxMs)
	im.Tokens[c.ID] = &n
	return Result{Value: n.ExpiryMs}
}

func applyRemoveTokens(im *Image, c *TokenChange) {
	im.Tokens = maps.Clone(im.Tokens)
	for _, id := range c.Remove {
		if t, ok := im.Tokens[id]; ok && t.ExpiryMs < c.NowMs {
			delete(im.Tokens, id)
		}
	}
}
