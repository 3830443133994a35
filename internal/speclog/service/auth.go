package service

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/runnel-dev/runnel/internal/security"
)

// Auth authenticates SpecLog calls and authorizes them with the cluster's ACLs, as the Kafka
// listeners do (docs/security.md §4, the SpecLog API): a verified TLS client certificate names the principal
// (User:<subject>, mapped by ssl.principal.mapping.rules); else HTTP Basic credentials in the
// "authorization" metadata are checked against the user's SCRAM credentials, as SASL PLAIN
// is, or a Bearer token as OAUTHBEARER's (checked when a call or stream starts); else the
// caller is User:ANONYMOUS.
// Append needs WRITE on the topic, Subscribe and Read READ, Trim DELETE, Describe DESCRIBE,
// and SubscribeShard (between nodes) CLUSTER_ACTION on the cluster.
type Auth struct {
	// Authorizer decides; nil allows every call (--authorizer none), after authentication.
	Authorizer *security.Authorizer
	// ACLs returns the current bindings' index.
	ACLs func() *security.ACLIndex
	// Credential returns a user's stored SCRAM credential.
	Credential func(user string, m security.Mechanism) (security.Credential, bool)
	Failures   *security.FailureLimiter
	Logger     *slog.Logger
	// PrincipalMapper is ssl.principal.mapping.rules for client certificates (nil: DEFAULT).
	PrincipalMapper *security.PrincipalMapper
	// OAuth validates "Bearer" tokens (nil: refused), as the Kafka listeners' OAUTHBEARER.
	OAuth *security.OAuthValidator
}

type principalKey struct{}

// caller is who made a call: principal and host.
type caller struct{ principal, host string }

// authenticate finds the caller of ctx, or fails with codes.Unauthenticated.
func (a *Auth) authenticate(ctx context.Context) (caller, error) {
	c := caller{principal: "User:ANONYMOUS"}
	if p, ok := peer.FromContext(ctx); ok {
		c.host = p.Addr.String()
		if i := strings.LastIndexByte(c.host, ':'); i > 0 {
			c.host = strings.Trim(c.host[:i], "[]")
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			pr, err := security.Principal(ti.State, a.PrincipalMapper)
			if err != nil {
				a.Logger.Warn("speclog: authentication failed", "remote", c.host, "err", err)
				return c, status.Error(codes.Unauthenticated, err.Error())
			}
			if pr != "" {
				c.principal = pr
				return c, nil
			}
		}
	}
	vals := metadata.ValueFromIncomingContext(ctx, "authorization") // no copy of the whole metadata
	if len(vals) == 0 {
		return c, nil
	}
	fail := func(user, reason string) (caller, error) {
		d := a.Failures.Fail(c.host, time.Now())
		a.Logger.Warn("speclog: authentication failed", "remote", c.host, "user", user, "reason", reason, "delay", d)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return c, status.Error(codes.Unauthenticated, "authentication failed: invalid credentials")
	}
	if tok, ok := strings.CutPrefix(vals[0], "Bearer "); ok {
		if a.OAuth == nil {
			return fail("", "a bearer token, and OAUTHBEARER is not enabled")
		}
		sub, _, err := a.OAuth.Validate(strings.TrimSpace(tok), time.Now())
		if err != nil {
			return fail("", err.Error())
		}
		c.principal = "User:" + sub
		return c, nil
	}
	enc, ok := strings.CutPrefix(vals[0], "Basic ")
	raw, err := base64.StdEncoding.DecodeString(enc)
	if !ok || err != nil {
		return fail("", "the authorization metadata is not Basic base64(user:password)")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" {
		return fail("", "the credentials are not user:password")
	}
	for _, m := range security.Mechanisms {
		if cred, found := a.Credential(user, m); found {
			if !cred.Matches(m, pass) {
				return fail(user, "wrong password")
			}
			c.principal = "User:" + user
			return c, nil
		}
	}
	return fail(user, "unknown user")
}

// Unary authenticates unary calls.
func (a *Auth) Unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, err := a.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, principalKey{}, c), req)
}

// Stream authenticates streaming calls.
func (a *Auth) Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, err := a.authenticate(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, &authedStream{ss, context.WithValue(ss.Context(), principalKey{}, c)})
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

// allow reports, as a gRPC error, whether the caller of ctx may do op on the resource.
func (s *Server) allow(ctx context.Context, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) error {
	a := s.cfg.Auth
	if a == nil || a.Authorizer == nil {
		return nil
	}
	c := callerOf(ctx)
	if a.Authorizer.Authorize(a.ACLs(), c.principal, c.host, op, rt, name) {
		return nil
	}
	return status.Error(codes.PermissionDenied, fmt.Sprintf("%s may not %s %s %s", c.principal, op, rt, name))
}

// allowAnyTopic reports whether the caller of ctx may do op on some topic.
func (s *Server) allowAnyTopic(ctx context.Context, op kmsg.ACLOperation) bool {
	a := s.cfg.Auth
	if a == nil || a.Authorizer == nil {
		return true
	}
	c := callerOf(ctx)
	return a.Authorizer.AuthorizeAnyTopic(a.ACLs(), c.principal, c.host, op)
}

// callerOf is who made the call of ctx (the interceptors authenticated it; ANONYMOUS if no one).
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(principalKey{}).(caller)
	if c.principal == "" {
		c.principal = "User:ANONYMOUS"
	}
	return c
}

func (s *Server) allowTopic(ctx context.Context, op kmsg.ACLOperation, topic string) error {
	return s.allow(ctx, op, kmsg.ACLResourceTypeTopic, topic)
}
