package broker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
)

// Delegation tokens (KIP-48, KIP-373; docs/security.md §3): CreateDelegationToken,
// RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken, as Kafka answers
// them. Tokens live in the controller's metadata (controller/tokens.go); their HMACs derive
// from Security.TokenSecret on every node.

func init() {
	register(kmsg.CreateDelegationToken, 0, 3, handleCreateDelegationToken)
	register(kmsg.RenewDelegationToken, 0, 2, handleRenewDelegationToken)
	register(kmsg.ExpireDelegationToken, 0, 2, handleExpireDelegationToken)
	register(kmsg.DescribeDelegationToken, 0, 3, handleDescribeDelegationToken)
}

// Kafka's defaults of delegation.token.max.lifetime.ms and delegation.token.expiry.time.ms.
const (
	DefaultTokenMaxLifetime = 7 * 24 * time.Hour
	DefaultTokenExpiry      = 24 * time.Hour
)

// tokenRefusal is why a connection may not use the token APIs, as Kafka decides it: tokens are
// asked for over an authenticated connection (SASL, or SSL with a client certificate), not
// one authenticated with a token, and only where a secret key is set.
func (c *conn) tokenRefusal() *kerr.Error {
	switch {
	case c.auth.token != "", c.listener.Protocol == security.Plaintext,
		c.listener.Protocol == security.SSL && c.principal == anonymous:
		return kerr.DelegationTokenRequestNotAllowed
	case c.b.cfg.Security.TokenSecret == "":
		return kerr.DelegationTokenAuthDisabled
	}
	return nil
}

// liveToken is what token id authenticates, if it exists and has not expired (the SASL
// sessions' token lookup).
func (b *Broker) liveToken(id string) (security.TokenAuth, bool) {
	t, ok := b.cl.Image().Tokens[id]
	if !ok || t.ExpiryMs <= time.Now().UnixMilli() || !b.sameTokenKey(t) {
		return security.TokenAuth{}, false
	}
	return security.TokenAuth{ID: t.ID, Owner: t.Owner, Expiry: time.UnixMilli(t.ExpiryMs)}, true
}

// sameTokenKey reports whether t was made under this node's secret key, and logs (once) when
// it was not: the nodes' --delegation-token-secret-key differ.
func (b *Broker) sameTokenKey(t *controller.DelegationToken) bool {
	if t.KeyCheck == "" || t.KeyCheck == b.tokenKeyCheck {
		return true
	}
	if b.tokenKeyWarned.CompareAndSwap(false, true) {
		b.logger.Error("broker: delegation token made under another secret key: the nodes' --delegation-token-secret-key differ, and this node refuses tokens made elsewhere", "token", t.ID)
	}
	return false
}

// tokenLive reports whether token id still authenticates (its sessions end when it does not).
func (b *Broker) tokenLive(id string) bool {
	_, ok := b.liveToken(id)
	return ok
}

// tokenByHMAC finds the token whose HMAC is mac.
func (b *Broker) tokenByHMAC(mac []byte) (*controller.DelegationToken, bool) {
	for _, t := range b.cl.Image().Tokens {
		if b.sameTokenKey(t) && hmac.Equal(security.TokenHMAC(b.cfg.Security.TokenSecret, t.ID), mac) {
			return t, true
		}
	}
	return nil, false
}

// ownerOrRenewer is Kafka's test of who may see a token (TokenInformation.ownerOrRenewer):
// its owner, its requester and its renewers.
func ownerOrRenewer(t *controller.DelegationToken, principal string) bool {
	return principal == t.Owner || principal == t.Requester || slices.Contains(t.Renewers, principal)
}

// mayRenew is Kafka's test of who may renew or expire a token (the controller's
// allowedToRenew): its owner and its renewers, not the requester that created it for another
// owner.
func mayRenew(t *controller.DelegationToken, principal string) bool {
	return principal == t.Owner || slices.Contains(t.Renewers, principal)
}

func splitPrincipal(p string) (typ, name string) {
	typ, name, _ = strings.Cut(p, ":")
	return typ, name
}

func handleCreateDelegationToken(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	c := r.conn
	requester := c.principal
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(requester)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = resp.PrincipalType, resp.PrincipalName
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1 // Kafka's, on an error
	if e := c.tokenRefusal(); e != nil {
		resp.ErrorCode = e.Code
		return reply{resp: resp}
	}
	owner := requester
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "User"
		if req.OwnerPrincipalType != nil {
			typ = *req.OwnerPrincipalType
		}
		if typ != "User" {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			return reply{resp: resp}
		}
		owner = typ + ":" + *req.OwnerPrincipalName
		// KIP-373: a token for another user needs CreateTokens on that user, granted by an
		// ACL or super.users (stricter than Kafka, which also lets no authorizer or
		// allow.everyone.if.no.acl.found grant it: that would let anyone become anyone).
		if owner != requester && !r.allowedExplicitly(kmsg.ACLOperationCreateTokens, kmsg.ACLResourceTypeUser, owner) {
			// The refusal names the owner asked for, as Kafka's.
			resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
			resp.ErrorCode = kerr.DelegationTokenAuthorizationFailed.Code
			return reply{resp: resp}
		}
	}
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(owner)
	var renewers []string
	for _, rn := range req.Renewers {
		if rn.PrincipalType != "User" {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			return reply{resp: resp}
		}
		if p := rn.PrincipalType + ":" + rn.PrincipalName; !slices.Contains(renewers, p) {
			renewers = append(renewers, p)
		}
	}
	maxLife := c.b.tokenMaxLifetime().Milliseconds()
	if req.MaxLifetimeMillis > 0 {
		maxLife = min(maxLife, req.MaxLifetimeMillis)
	}
	now := time.Now().UnixMilli()
	t := &controller.DelegationToken{ID: newTokenID(), Owner: owner, Requester: requester, Renewers: renewers, IssueMs: now,
		MaxMs: now + maxLife}
	t.ExpiryMs = min(t.MaxMs, now+c.b.tokenExpiry().Milliseconds())
	t.KeyCheck = c.b.tokenKeyCheck
	if _, aerr := c.b.propose(ctx, &controller.Command{Op: controller.OpCreateToken, CreateToken: t}); aerr != nil {
		resp.ErrorCode = aerr.code.Code
		return reply{resp: resp}
	}
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
	resp.TokenID, resp.HMAC = t.ID, security.TokenHMAC(c.b.cfg.Security.TokenSecret, t.ID)
	c.b.logger.Info("broker: delegation token created", "token", t.ID, "owner", owner, "by", requester, "expiry", time.UnixMilli(t.ExpiryMs))
	return reply{resp: resp}
}

// newTokenID is a random token id, as Kafka's (a UUID in URL-safe base64).
func newTokenID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (b *Broker) tokenMaxLifetime() time.Duration {
	if d := b.cfg.Security.TokenMaxLifetime; d > 0 {
		return d
	}
	return DefaultTokenMaxLifetime
}

func (b *Broker) tokenExpiry() time.Duration {
	if d := b.cfg.Security.TokenExpiry; d > 0 {
		return d
	}
	return DefaultTokenExpiry
}

// changeToken renews or expires the token of mac by period, for the request's principal, as
// Kafka's controller does: a renewal is by delegation.token.expiry.time.ms, or by a positive
// period up to that; an expiry is in period from now (negative: now). Both stop at the token's
// maximum. It returns the new expiry.
func changeToken(ctx context.Context, r *request, mac []byte, period int64, expire bool) (int64, int16) {
	c := r.conn
	if e := c.tokenRefusal(); e != nil {
		return 0, e.Code
	}
	c.b.adminBarrier(ctx) // a token created through another node a moment ago is known here
	t, ok := c.b.tokenByHMAC(mac)
	now := time.Now().UnixMilli()
	expired := ok && (t.ExpiryMs < now || t.MaxMs < now)
	// Kafka's DelegationTokenControlManager: a renewal checks expiry before the owner; an
	// expiry checks the owner first, and a negative period removes the token even once it has
	// lapsed (kafka-delegation-tokens --expire --expiry-time-period -1 cleans one up).
	switch {
	case !ok:
		return 0, kerr.DelegationTokenNotFound.Code
	case !expire && expired:
		return 0, kerr.DelegationTokenExpired.Code
	case !mayRenew(t, c.principal):
		return 0, kerr.DelegationTokenOwnerMismatch.Code
	case expire && period < 0 && expired:
		// The sweep's removal of lapsed tokens, for this one now.
		if _, aerr := c.b.propose(ctx, &controller.Command{Op: controller.OpRemoveTokens,
			TokenChange: &controller.TokenChange{Remove: []string{t.ID}, NowMs: now}}); aerr != nil {
			return 0, aerr.code.Code
		}
		c.b.logger.Info("broker: delegation token changed", "token", t.ID, "op", controller.OpRemoveTokens, "by", c.principal)
		return now, 0
	case expired:
		return 0, kerr.DelegationTokenExpired.Code
	}
	ch := &controller.TokenChange{ID: t.ID, NowMs: now}
	op := controller.OpRenewToken
	if expire {
		op = controller.OpExpireToken
	}
	switch {
	case expire && period < 0:
		ch.ExpiryMs = now
	case !expire:
		renew := c.b.tokenExpiry().Milliseconds()
		if period > 0 {
			renew = min(renew, period)
		}
		ch.ExpiryMs = now + min(renew, max(t.MaxMs-now, 0))
	default: // capped at the token's max (the apply caps too); no overflow for huge periods
		ch.ExpiryMs = now + min(period, max(t.MaxMs-now, 0))
	}
	res, aerr := c.b.propose(ctx, &controller.Command{Op: op, TokenChange: ch})
	if aerr != nil {
		return 0, aerr.code.Code
	}
	c.b.logger.Info("broker: delegation token changed", "token", t.ID, "op", op, "by", c.principal, "expiry", time.UnixMilli(res.Value))
	return res.Value, 0
}

func handleRenewDelegationToken(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	resp.ExpiryTimestamp, resp.ErrorCode = changeToken(ctx, r, req.HMAC, req.RenewTimeMillis, false)
	return reply{resp: resp}
}

func handleExpireDelegationToken(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	resp.ExpiryTimestamp, resp.ErrorCode = changeToken(ctx, r, req.HMAC, req.ExpiryPeriodMillis, true)
	return reply{resp: resp}
}

func handleDescribeDelegationToken(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	c := r.conn
	if e := c.tokenRefusal(); e != nil {
		resp.ErrorCode = e.Code
		return reply{resp: resp}
	}
	if req.Owners != nil && len(req.Owners) == 0 { // an empty filter names no one (Kafka's ownersListEmpty)
		return reply{resp: resp}
	}
	now := time.Now().UnixMilli()
	img := c.b.cl.Image()
	ids := make([]string, 0, len(img.Tokens))
	for id := range img.Tokens {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := img.Tokens[id]
		if t.ExpiryMs < now {
			continue // expired, not yet swept
		}
		if req.Owners != nil && !slices.ContainsFunc(req.Owners, func(o kmsg.DescribeDelegationTokenRequestOwner) bool {
			return ownerOrRenewer(t, o.PrincipalType+":"+o.PrincipalName) // Kafka's filter
		}) {
			continue
		}
		// Another's token (and its HMAC, a password) only by an ACL or super.users.
		if !ownerOrRenewer(t, c.principal) && !r.allowedExplicitly(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeDelegationToken, t.ID) &&
			!r.allowedExplicitly(kmsg.ACLOperationDescribeTokens, kmsg.ACLResourceTypeUser, t.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = splitPrincipal(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = splitPrincipal(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
		d.TokenID, d.HMAC = t.ID, security.TokenHMAC(c.b.cfg.Security.TokenSecret, t.ID)
		for _, p := range t.Renewers {
			rn := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			rn.PrincipalType, rn.PrincipalName = splitPrincipal(p)
			d.Renewers = append(d.Renewers, rn)
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return reply{resp: resp}
}
