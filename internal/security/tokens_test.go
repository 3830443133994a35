package security

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestTokenExchanges: franz-go's SCRAM client with IsToken (tokenauth=true) authenticates as
// the token's owner with the token id and the base64 of its HMAC; a wrong HMAC, an unknown
// token, tokens off, or a user name sent as a token are refused; without the extension the
// same id is looked up as a user.
func TestTokenExchanges(t *testing.T) {
	const secret = "cluster secret"
	expiry := time.Now().Add(time.Hour)
	tokens := func(id string) (TokenAuth, bool) {
		if id != "tok1" {
			return TokenAuth{}, false
		}
		return TokenAuth{ID: id, Owner: "User:alice", Expiry: expiry}, true
	}
	u := testUsers(t)
	drive := func(auth scram.Auth, sha512 bool, tokens TokenLookup) (*scramSession, error) {
		t.Helper()
		mech := auth.AsSha256Mechanism()
		if sha512 {
			mech = auth.AsSha512Mechanism()
		}
		cs, msg, err := mech.Authenticate(context.Background(), "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSession(mech.Name(), u.lookup, tokens, secret)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			resp, done, err := s.Step(msg)
			if err != nil {
				return nil, err
			}
			if _, next, cerr := cs.Challenge(resp); cerr != nil {
				t.Fatalf("client refused the server's message: %v", cerr)
			} else if done {
				return s.(*scramSession), nil
			} else {
				msg = next
			}
		}
		t.Fatal("exchange did not end")
		return nil, nil
	}
	for _, sha512 := range []bool{false, true} {
		s, err := drive(scram.Auth{User: "tok1", Pass: TokenPassword(secret, "tok1"), IsToken: true}, sha512, tokens)
		if err != nil || s.Token() == nil || s.Token().Owner != "User:alice" || !s.Expiry().Equal(expiry) {
			t.Fatalf("sha512 %v: token exchange: %v", sha512, err)
		}
	}
	for name, tc := range map[string]struct {
		auth   scram.Auth
		tokens TokenLookup
	}{
		"wrong hmac":          {scram.Auth{User: "tok1", Pass: TokenPassword("other secret", "tok1"), IsToken: true}, tokens},
		"unknown token":       {scram.Auth{User: "tok2", Pass: TokenPassword(secret, "tok2"), IsToken: true}, tokens},
		"tokens off":          {scram.Auth{User: "tok1", Pass: TokenPassword(secret, "tok1"), IsToken: true}, nil},
		"a user as a token":   {scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}, tokens},
		"a token as a user":   {scram.Auth{User: "tok1", Pass: TokenPassword(secret, "tok1")}, tokens},
		"user's hmac as user": {scram.Auth{User: "alice", Pass: TokenPassword(secret, "alice")}, tokens},
	} {
		if s, err := drive(tc.auth, true, tc.tokens); err == nil {
			t.Errorf("%s: authenticated (token %+v)", name, s.Token())
		}
	}
	if s, err := drive(scram.Auth{User: "alice", Pass: "alice-secret"}, true, tokens); err != nil || s.Token() != nil {
		t.Errorf("a user's exchange beside tokens: %v, token %+v", err, s)
	}
	if !tokenAuthRequested([]byte("n,,n=tok1,r=abc,tokenauth=true")) || tokenAuthRequested([]byte("n,,n=tokenauth=true,r=abc")) ||
		tokenAuthRequested([]byte("n,,n=u,r=tokenauth=true")) {
		t.Error("tokenauth=true is read only as an extension after the nonce")
	}
}
