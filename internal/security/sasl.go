package security

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/xdg-go/scram"
)

// Lookup returns a user's stored credential for a SCRAM mechanism.
type Lookup func(user string, m Mechanism) (Credential, bool)

// AuthError is a failed authentication. Reason is for the server's log (it never holds a
// password, proof or nonce); the client is told only that its credentials were refused.
type AuthError struct {
	Mechanism string
	User      string // as the client sent it ("" if it did not get that far)
	Reason    string
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", e.Mechanism)
}

// Session is one SASL exchange on the server side.
type Session interface {
	// Step takes the client's next message and returns the server's answer; done is set when
	// the client is authenticated (the answer is then the last message). An error ends the
	// exchange: it is an *AuthError.
	Step(msg []byte) (resp []byte, done bool, err error)
	// User is the authenticated user name (valid once Step reported done).
	User() string
}

// NewSession starts a server exchange of mechanism mech (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
// A SCRAM client may authenticate with a delegation token (tokenauth=true) when tokens is not
// nil: secret is the key its HMACs derive from.
func NewSession(mech string, lookup Lookup, tokens TokenLookup, secret string) (Session, error) {
	switch mech {
	case "PLAIN":
		return &plainSession{lookup: lookup}, nil
	case string(ScramSHA256), string(ScramSHA512):
		return newScramSession(Mechanism(mech), lookup, tokens, secret)
	}
	return nil, fmt.Errorf("security: SASL mechanism %q is not supported", mech)
}

// plainSession is RFC 4616: one message "authzid NUL authcid NUL passwd", checked against the
// user's SCRAM credentials (SHA-256 first, else SHA-512).
type plainSession struct {
	lookup Lookup
	user   string
	done   bool
}

func (s *plainSession) Step(msg []byte) ([]byte, bool, error) {
	fail := func(user, reason string) ([]byte, bool, error) {
		s.done = true
		return nil, false, &AuthError{Mechanism: "PLAIN", User: user, Reason: reason}
	}
	if s.done {
		return fail(s.user, "message after the exchange ended")
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return fail("", "malformed PLAIN message: not authzid NUL authcid NUL passwd")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || pass == "" {
		return fail(user, "empty user name or password")
	}
	if authz != "" && authz != user {
		return fail(user, "the authorization id differs from the user name")
	}
	for _, m := range Mechanisms {
		if c, ok := s.lookup(user, m); ok {
			if !c.Matches(m, pass) {
				return fail(user, "wrong password")
			}
			s.user, s.done = user, true
			return []byte{}, true, nil
		}
	}
	return fail(user, "unknown user")
}

func (s *plainSession) User() string { return s.user }

// scramSession runs xdg-go/scram's server conversation over the stored credential, or a
// delegation token's.
type scramSession struct {
	mech      Mechanism
	conv      *scram.ServerConversation
	unknown   bool // the client-first message named a user (or token) without a credential
	user      string
	step      int
	tokenAuth bool       // the client asked for token authentication
	token     *TokenAuth // the token it named
}

func newScramSession(m Mechanism, lookup Lookup, tokens TokenLookup, secret string) (*scramSession, error) {
	s := &scramSession{mech: m}
	hg := scram.SHA256
	if m == ScramSHA512 {
		hg = scram.SHA512
	}
	srv, err := hg.NewServer(func(user string) (scram.StoredCredentials, error) {
		s.user = user
		var c Credential
		ok := false
		if s.tokenAuth {
			var t TokenAuth
			if tokens != nil {
				if t, ok = tokens(user); ok {
					c, s.token = TokenCredential(m, secret, user), &t
				}
			}
		} else {
			c, ok = lookup(user, m)
		}
		if !ok {
			s.unknown = true
			return scram.StoredCredentials{}, errors.New("unknown user")
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations}, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
	})
	if err != nil {
		return nil, err
	}
	s.conv = srv.NewConversation()
	return s, nil
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	s.step++
	if s.step > 2 || s.conv.Done() {
		return nil, false, &AuthError{Mechanism: string(s.mech), User: s.user, Reason: "message after the exchange ended"}
	}
	if s.step == 1 {
		s.tokenAuth = tokenAuthRequested(msg)
	}
	resp, err := s.conv.Step(string(msg))
	if err != nil {
		reason := "malformed or refused message: " + err.Error()
		switch {
		case s.unknown && s.tokenAuth:
			reason = "unknown or expired delegation token"
		case s.unknown:
			reason = "unknown user"
		case s.step == 2 && resp == scram.ErrInvalidProof:
			reason = "wrong password (invalid proof)"
		}
		return nil, false, &AuthError{Mechanism: string(s.mech), User: s.user, Reason: reason}
	}
	if s.step == 1 {
		if authz := s.conv.AuthzID(); authz != "" && authz != s.conv.Username() {
			return nil, false, &AuthError{Mechanism: string(s.mech), User: s.user, Reason: "the authorization id differs from the user name"}
		}
		return []byte(resp), false, nil
	}
	if !s.conv.Valid() {
		return nil, false, &AuthError{Mechanism: string(s.mech), User: s.user, Reason: "exchange did not validate"}
	}
	return []byte(resp), true, nil
}

func (s *scramSession) User() string { return s.conv.Username() }

// Token is the delegation token the client authenticated with (nil: a user's credential).
func (s *scramSession) Token() *TokenAuth { return s.token }

// Expiry is when a token session's token expires (a user's session: never, the zero time).
func (s *scramSession) Expiry() time.Time {
	if s.token == nil {
		return time.Time{}
	}
	return s.token.Expiry
}
