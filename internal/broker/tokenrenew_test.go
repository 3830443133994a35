package broker

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/security"
)

// tokenBroker is a broker with delegation tokens on (Kafka's default lifetimes: 7 days max,
// 1 day expiry), User:admin a super user, and a SASL_PLAINTEXT listener taking unsecured
// OAUTHBEARER JWTs, so a test can connect as any user.
func tokenBroker(t *testing.T) string {
	t.Helper()
	return oauthBroker(t, 0, func(c *Config) {
		c.Security.TokenSecret = "token secret"
		c.Security.Authorizer = &security.Authorizer{SuperUsers: map[string]bool{"User:admin": true}}
	})
}

// connectAs opens a connection authenticated as User:name.
func connectAs(t *testing.T, addr, name string) net.Conn {
	t.Helper()
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, security.OAuthBearer
	if r := ctExchange(t, nc, hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	tok := unsecuredJWS(t, map[string]any{"sub": name, "exp": float64(time.Now().Add(time.Hour).Unix())})
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("n,,\x01auth=Bearer "+tok+"\x01\x01")
	if r := ctExchange(t, nc, au, 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslAuthenticate as %s: %v", name, kerr.ErrorForCode(r.ErrorCode))
	}
	return nc
}

// createToken creates a token on nc (owner "": the requester's own) and returns it.
func createToken(t *testing.T, nc net.Conn, owner string) *kmsg.CreateDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	req.Version, req.MaxLifetimeMillis = 3, -1
	if owner != "" {
		req.OwnerPrincipalType, req.OwnerPrincipalName = kmsg.StringPtr("User"), kmsg.StringPtr(owner)
	}
	resp := ctExchange(t, nc, req, 3).(*kmsg.CreateDelegationTokenResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("CreateDelegationToken: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

func renewToken(t *testing.T, nc net.Conn, mac []byte, periodMs int64) *kmsg.RenewDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrRenewDelegationTokenRequest()
	req.Version, req.HMAC, req.RenewTimeMillis = 2, mac, periodMs
	return ctExchange(t, nc, req, 4).(*kmsg.RenewDelegationTokenResponse)
}

// Kafka's DelegationTokenControlManager.renewDelegationToken: the renew period is at most
// delegation.token.expiry.time.ms (renewLifeTime = min(tokenDefaultRenewLifetime,
// renewPeriodMs)), and the new expiry min(maxTimestamp, now + renewLifeTime): a renewal
// asking for 3 days gets 1.
func TestRenewTokenCappedAtExpiryTime(t *testing.T) {
	addr := tokenBroker(t)
	alice := connectAs(t, addr, "alice")
	tok := createToken(t, alice, "")
	now := time.Now().UnixMilli()
	resp := renewToken(t, alice, tok.HMAC, (72 * time.Hour).Milliseconds())
	if resp.ErrorCode != 0 {
		t.Fatalf("RenewDelegationToken: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if limit := now + DefaultTokenExpiry.Milliseconds() + 60_000; resp.ExpiryTimestamp > limit {
		t.Errorf("renewing by 72h gave expiry now+%v; Kafka caps a renewal at delegation.token.expiry.time.ms (now+24h)",
			time.Duration(resp.ExpiryTimestamp-now)*time.Millisecond)
	}
}

// Kafka's renewDelegationToken takes a renew period <= 0 as "the default"
// (renewLifeTime = tokenDefaultRenewLifetime unless renewPeriodMs > 0). A renewal with period 0
// (what kadm's RenewDelegationToken sends for a zero duration) once set the expiry to now, so
// the "renewed" token stopped authenticating at once.
func TestRenewTokenZeroPeriodUsesDefault(t *testing.T) {
	addr := tokenBroker(t)
	alice := connectAs(t, addr, "alice")
	tok := createToken(t, alice, "")
	now := time.Now().UnixMilli()
	resp := renewToken(t, alice, tok.HMAC, 0)
	if resp.ErrorCode != 0 {
		t.Fatalf("RenewDelegationToken: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if want := now + DefaultTokenExpiry.Milliseconds() - 60_000; resp.ExpiryTimestamp < want {
		t.Errorf("renewing with period 0 gave expiry now+%v; Kafka renews by delegation.token.expiry.time.ms (now+24h)",
			time.Duration(resp.ExpiryTimestamp-now)*time.Millisecond)
	}
}

// Kafka's DelegationTokenControlManager.allowedToRenew lets only the token's owner and its
// renewers renew or expire it (owner.equals(principal) || renewers contains it), not the
// principal that requested it for another owner: that one gets DELEGATION_TOKEN_OWNER_MISMATCH.
// (Kafka's test for who may describe a token also admits the requester; it once decided
// renewals too.)
func TestRequesterMayNotRenewAnothersToken(t *testing.T) {
	addr := tokenBroker(t)
	admin := connectAs(t, addr, "admin")
	tok := createToken(t, admin, "alice")
	if resp := renewToken(t, admin, tok.HMAC, time.Hour.Milliseconds()); resp.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Errorf("the requester (not owner, not renewer) renewing alice's token answered %v; Kafka answers DELEGATION_TOKEN_OWNER_MISMATCH",
			kerr.ErrorForCode(resp.ErrorCode))
	}
	req := kmsg.NewPtrExpireDelegationTokenRequest()
	req.Version, req.HMAC, req.ExpiryPeriodMillis = 2, tok.HMAC, -1
	if resp := ctExchange(t, admin, req, 5).(*kmsg.ExpireDelegationTokenResponse); resp.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Errorf("the requester (not owner, not renewer) expiring alice's token answered %v; Kafka answers DELEGATION_TOKEN_OWNER_MISMATCH",
			kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestExpireLapsedToken: Kafka's DelegationTokenControlManager.expireDelegationToken checks the
// owner before the expiry, and a negative period removes the token even once it has lapsed
// (kafka-delegation-tokens --expire --expiry-time-period -1 cleans one up); a renewal checks
// the expiry first.
func TestExpireLapsedToken(t *testing.T) {
	addr := tokenBroker(t)
	alice, bob := connectAs(t, addr, "alice"), connectAs(t, addr, "bob")
	create := kmsg.NewPtrCreateDelegationTokenRequest()
	create.Version, create.MaxLifetimeMillis = 3, 500
	tok := ctExchange(t, alice, create, 3).(*kmsg.CreateDelegationTokenResponse)
	if tok.ErrorCode != 0 {
		t.Fatalf("CreateDelegationToken: %v", kerr.ErrorForCode(tok.ErrorCode))
	}
	time.Sleep(time.Until(time.UnixMilli(tok.MaxTimestamp).Add(100 * time.Millisecond)))
	expire := func(nc net.Conn, period int64) int16 {
		req := kmsg.NewPtrExpireDelegationTokenRequest()
		req.Version, req.HMAC, req.ExpiryPeriodMillis = 2, tok.HMAC, period
		return ctExchange(t, nc, req, 5).(*kmsg.ExpireDelegationTokenResponse).ErrorCode
	}
	if code := expire(bob, -1); code != kerr.DelegationTokenOwnerMismatch.Code {
		t.Errorf("another user expiring the lapsed token: %v; want DELEGATION_TOKEN_OWNER_MISMATCH", kerr.ErrorForCode(code))
	}
	if code := renewToken(t, bob, tok.HMAC, 1000).ErrorCode; code != kerr.DelegationTokenExpired.Code {
		t.Errorf("another user renewing the lapsed token: %v; want DELEGATION_TOKEN_EXPIRED (expiry first)", kerr.ErrorForCode(code))
	}
	if code := expire(alice, 3000); code != kerr.DelegationTokenExpired.Code {
		t.Errorf("the owner expiring the lapsed token in 3 s: %v; want DELEGATION_TOKEN_EXPIRED", kerr.ErrorForCode(code))
	}
	if code := expire(alice, -1); code != 0 {
		t.Errorf("the owner expiring the lapsed token now: %v; want it removed", kerr.ErrorForCode(code))
	}
	if code := expire(alice, -1); code != kerr.DelegationTokenNotFound.Code {
		t.Errorf("expiring it again: %v; want DELEGATION_TOKEN_NOT_FOUND (removed)", kerr.ErrorForCode(code))
	}
}
