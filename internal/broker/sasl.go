package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/security"
)

// Authentication on a connection (docs/security.md §2-3). A TLS listener's connection does its
// handshake before the first request; on an SSL listener a verified client certificate names
// the principal. A SASL listener's connection answers only ApiVersions, SaslHandshake and
// SaslAuthenticate until the exchange succeeds; anything else closes it, untouched.

func init() {
	// v0 is advertised as Kafka does (librdkafka's feature check asks for it); a v0 handshake,
	// after which raw tokens would follow instead of SaslAuthenticate, is refused.
	register(kmsg.SASLHandshake, 0, 1, handleSaslHandshake)
	register(kmsg.SASLAuthenticate, 0, 2, handleSaslAuthenticate)
}

// anonymous is the principal of an unauthenticated connection, as Kafka names it.
const anonymous = "User:ANONYMOUS"

// tlsHandshakeTimeout bounds a TLS handshake (a silent client holds only its goroutine).
const tlsHandshakeTimeout = 10 * time.Second

// authState is a connection's SASL state; read loop only.
type authState struct {
	session       security.Session // an exchange in progress, after SaslHandshake
	mechanism     string           // of the session, or of the authenticated one
	authenticated bool
	token         string    // the delegation token authenticated with (it cannot ask for tokens)
	failed        bool      // an exchange failed: the connection is closing
	sessionEnd    time.Time // zero: the session does not expire
	reauthBegun   time.Time // the last re-authentication's SaslHandshake (zero: none yet)
}

// minReauthInterval is the least time between two re-authentications of a connection (Kafka's
// KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
const minReauthInterval = time.Second

// errAuthFailed closes a connection whose authentication failed, once the answer is written.
var errAuthFailed = errors.New("broker: authentication failed")

func (c *conn) handshakeTLS() error {
	tc := tls.Server(progressConn{c.nc, &c.act}, c.listener.TLS) // TLS records written count as progress
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		return err
	}
	tc.SetDeadline(time.Time{})
	c.nc, c.zeroCopy = tc, false
	if c.listener.Protocol == security.SSL {
		p, err := security.Principal(tc.ConnectionState(), c.b.cfg.Security.PrincipalMapper)
		if err != nil { // logged here: the handshake failures of scanners are only debug
			c.b.logger.Warn("broker: authentication failed", "remote", c.remote, "listener", c.listener.Name, "err", err)
			return fmt.Errorf("%w: %v", errAuthFailed, err)
		}
		if p != "" {
			c.principal = p
		}
	}
	return nil
}

// admit reports why a request may not be handled now; the connection then closes.
func (c *conn) admit(key int16) error {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return nil
	}
	switch {
	case c.auth.failed:
		return fmt.Errorf("%s request after a failed authentication", kmsg.NameForKey(key))
	case !c.listener.Protocol.SASL():
		return nil
	case !c.auth.authenticated:
		return fmt.Errorf("unexpected %s request during SASL authentication on listener %s", kmsg.NameForKey(key), c.listener.Name)
	case !c.auth.sessionEnd.IsZero() && time.Now().After(c.auth.sessionEnd):
		return fmt.Errorf("%s request after the SASL session of %s expired (connections.max.reauth.ms) without re-authentication", kmsg.NameForKey(key), c.principal)
	case c.auth.token != "" && !c.b.tokenLive(c.auth.token):
		return fmt.Errorf("%s request on a session of delegation token %s, which has been expired", kmsg.NameForKey(key), c.auth.token)
	}
	return nil
}

func handleSaslHandshake(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := r.conn
	mechs := c.b.cfg.Security.SASLMechanisms
	resp.SupportedMechanisms = slices.Clone(mechs)
	switch {
	case req.Version == 0:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{resp: resp, closeAfter: errors.New("SaslHandshake v0 (raw SASL tokens) is not supported: the client must use SaslAuthenticate")}
	case !c.listener.Protocol.SASL():
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{resp: resp, closeAfter: fmt.Errorf("SaslHandshake on %s listener %s", c.listener.Protocol, c.listener.Name)}
	case c.auth.session != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{resp: resp, closeAfter: errors.New("a second SaslHandshake before SaslAuthenticate")}
	case c.auth.authenticated && (c.auth.sessionEnd.IsZero() || (!c.auth.reauthBegun.IsZero() && time.Since(c.auth.reauthBegun) < minReauthInterval)):
		// As Kafka (KafkaChannel.maybeBeginServerReauthentication): a session re-authenticates
		// only if it expires, and at most once a second; otherwise the handshake is an
		// ordinary request, refused, and the connection goes on as it was.
		resp.ErrorCode, resp.SupportedMechanisms = kerr.IllegalSaslState.Code, nil
		return reply{resp: resp}
	case !slices.Contains(mechs, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{resp: resp, closeAfter: fmt.Errorf("SASL mechanism %q is not enabled (%v)", req.Mechanism, mechs)}
	case c.auth.authenticated && req.Mechanism != c.auth.mechanism:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{resp: resp, closeAfter: fmt.Errorf("re-authentication with %s, not the session's %s", req.Mechanism, c.auth.mechanism)}
	}
	var s security.Session
	var err error
	switch {
	case req.Mechanism == security.OAuthBearer && c.b.cfg.Security.OAuth != nil:
		s = security.NewOAuthSession(c.b.cfg.Security.OAuth)
	case req.Mechanism == security.GSSAPI && c.b.cfg.Security.Kerberos != nil:
		s = security.NewGSSAPISession(c.b.cfg.Security.Kerberos, net.ParseIP(c.host))
	default:
		var tokens security.TokenLookup // nil: delegation tokens are off
		if c.b.cfg.Security.TokenSecret != "" {
			tokens = c.b.liveToken
		}
		s, err = security.NewSession(req.Mechanism, c.b.cl.Image().ScramCredential, tokens, c.b.cfg.Security.TokenSecret)
	}
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{resp: resp, closeAfter: err}
	}
	c.auth.session, c.auth.mechanism = s, req.Mechanism
	if c.auth.authenticated {
		c.auth.reauthBegun = time.Now()
	}
	return reply{resp: resp}
}

func handleSaslAuthenticate(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.conn
	s := c.auth.session
	if s == nil && c.auth.authenticated {
		// As Kafka's KafkaApis: answered, and the connection stays authenticated.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = strp("SaslAuthenticate request received after successful authentication")
		return reply{resp: resp}
	}
	if s == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = strp("SaslAuthenticate without a SaslHandshake naming the mechanism")
		c.auth.failed = true
		return reply{resp: resp, closeAfter: errors.New("SaslAuthenticate before SaslHandshake")}
	}
	out, done, err := s.Step(req.SASLAuthBytes)
	principal, token := "User:"+s.User(), (*security.TokenAuth)(nil)
	if ts, ok := s.(interface{ Token() *security.TokenAuth }); ok && done && ts.Token() != nil {
		token = ts.Token()
		principal = token.Owner
	}
	if err == nil && done && c.auth.authenticated && principal != c.principal {
		err = &security.AuthError{Mechanism: c.auth.mechanism, User: s.User(), Reason: "re-authentication as another principal than " + c.principal}
	}
	if err != nil {
		return c.authFailed(ctx, resp, err)
	}
	resp.SASLAuthBytes = out
	if !done {
		return reply{resp: resp}
	}
	c.auth.session = nil
	reauth := c.auth.authenticated
	c.auth.authenticated, c.principal, c.auth.token, c.auth.sessionEnd = true, principal, "", time.Time{}
	if token != nil {
		c.auth.token = token.ID
	}
	// KIP-368: the session ends after connections.max.reauth.ms, or when the credential (an
	// OAUTHBEARER token, a delegation token) expires, whichever comes first; a credential's
	// expiry ends it even when sessions do not otherwise expire, as Kafka's
	// calcCompletionTimesAndReturnSessionLifetimeMs (an OAUTHBEARER session outlived its token
	// with the default connections.max.reauth.ms=0).
	var credentialEnd time.Time
	if token != nil {
		credentialEnd = token.Expiry
	}
	if e, ok := s.(interface{ Expiry() time.Time }); ok && !e.Expiry().IsZero() && (credentialEnd.IsZero() || e.Expiry().Before(credentialEnd)) {
		credentialEnd = e.Expiry()
	}
	if d := c.b.cfg.Security.MaxReauth; d > 0 || !credentialEnd.IsZero() {
		now := time.Now()
		c.auth.sessionEnd = credentialEnd
		if d > 0 && (credentialEnd.IsZero() || now.Add(d).Before(credentialEnd)) {
			c.auth.sessionEnd = now.Add(d)
		}
		if req.Version >= 1 {
			resp.SessionLifetimeMillis = max(c.auth.sessionEnd.Sub(now).Milliseconds(), 1)
		}
	}
	c.b.logger.Debug("broker: authenticated", "remote", c.remote, "listener", c.listener.Name, "principal", c.principal, "mechanism", c.auth.mechanism, "reauthentication", reauth)
	return reply{resp: resp}
}

// authFailed answers a failed exchange after the host's failure delay and closes the connection.
func (c *conn) authFailed(ctx context.Context, resp *kmsg.SASLAuthenticateResponse, err error) reply {
	c.auth.failed, c.auth.session = true, nil
	var ae *security.AuthError
	reason, user := err.Error(), ""
	if errors.As(err, &ae) {
		reason, user = ae.Reason, ae.User
	}
	delay := c.b.authFailures.Fail(c.host, time.Now())
	c.b.cfg.Metrics.AuthFailed(c.listener.Name)
	c.b.logger.Warn("broker: authentication failed", "remote", c.remote, "listener", c.listener.Name, "mechanism", c.auth.mechanism, "user", user, "reason", reason, "delay", delay)
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = strp(err.Error())
	wait := func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return reply{resp: resp, wait: wait, closeAfter: errAuthFailed}
}
