package security

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/security/securitytest"
)

func oauthMessage(authz, token string) []byte {
	h := "n,,"
	if authz != "" {
		h = "n,a=" + authz + ","
	}
	return []byte(h + "\x01auth=Bearer " + token + "\x01\x01")
}

// TestOAuthValidator: signed tokens are checked as Kafka's OIDC validator checks them: the
// signature against the JWKS (RSA and EC keys), exp (required), nbf and iat with the clock
// skew, the expected audience and issuer, the principal claim; a key id the set lacks makes it
// fetch the set again (rotation), at most every 10 s; unsigned and HMAC tokens are refused.
func TestOAuthValidator(t *testing.T) {
	is := securitytest.NewIssuer(t)
	is.AddKey(t, "ec1", true, true)
	is.AddKey(t, "rogue", false, false)
	v, err := NewOAuthValidator(OAuthConfig{JWKSURL: is.JWKSURL(), ExpectedAudience: []string{"kafka", "other"}, ExpectedIssuer: "https://idp"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"sub": "alice", "aud": []string{"kafka"}, "iss": "https://idp", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		for k, x := range extra {
			if x == nil {
				delete(c, k)
			} else {
				c[k] = x
			}
		}
		return c
	}
	for _, kid := range []string{"k1", "ec1"} { // k1 is RSA
		sub, exp, err := v.Validate(is.Token(t, kid, claims(nil)), now)
		if err != nil || sub != "alice" || !exp.Equal(now.Add(time.Hour)) {
			t.Fatalf("a valid token signed with %s: %q, %v, %v", kid, sub, exp, err)
		}
	}
	bad := []struct {
		name, token string
	}{
		{"expired", is.Token(t, "k1", claims(map[string]any{"exp": now.Add(-time.Minute).Unix()}))},
		{"no exp", is.Token(t, "k1", claims(map[string]any{"exp": nil}))},
		{"not yet valid", is.Token(t, "k1", claims(map[string]any{"nbf": now.Add(time.Minute).Unix()}))},
		{"another audience", is.Token(t, "k1", claims(map[string]any{"aud": []string{"web"}}))},
		{"another issuer", is.Token(t, "k1", claims(map[string]any{"iss": "https://evil"}))},
		{"no sub", is.Token(t, "k1", claims(map[string]any{"sub": nil}))},
		{"a key the set does not hold", is.Token(t, "rogue", claims(nil))},
		{"unsigned", unsignedToken(claims(nil))},
		{"garbage", "not.a.token"},
	}
	// A token signed by a key that is not in the set, under a kid that is.
	bad = append(bad, struct{ name, token string }{"forged under a known kid", is.TokenAs(t, "rogue", "k1", claims(nil))})
	for _, b := range bad {
		if sub, _, err := v.Validate(b.token, now); err == nil {
			t.Errorf("%s: accepted as %q", b.name, sub)
		}
	}
	if _, _, err := v.Validate(is.Token(t, "k1", claims(map[string]any{"exp": now.Add(-20 * time.Second).Unix()})), now); err != nil {
		t.Errorf("expired 20 s ago, within the 30 s clock skew: %v", err)
	}

	// Rotation: a new key is served; a token under it makes the validator fetch the set again.
	is.AddKey(t, "rsa2", false, false)
	tok := is.Token(t, "rsa2", claims(nil))
	later := now.Add(11 * time.Second)
	if _, _, err := v.Validate(tok, later); err == nil {
		t.Fatal("a key not yet served was accepted")
	}
	is.Serve("rsa2")
	if _, _, err := v.Validate(tok, later.Add(time.Second)); err == nil {
		t.Fatal("the set was fetched again within 10 s of the last fetch")
	}
	if sub, _, err := v.Validate(tok, later.Add(11*time.Second)); err != nil || sub != "alice" {
		t.Fatalf("after rotation: %q, %v", sub, err)
	}

	// A custom principal claim.
	v2, err := NewOAuthValidator(OAuthConfig{JWKSURL: is.JWKSURL(), SubClaim: "client_id"})
	if err != nil {
		t.Fatal(err)
	}
	if sub, _, err := v2.Validate(is.Token(t, "k1", claims(map[string]any{"client_id": "svc-1"})), now); err != nil || sub != "svc-1" {
		t.Fatalf("sub claim client_id: %q, %v", sub, err)
	}
	if _, err := NewOAuthValidator(OAuthConfig{JWKSURL: "/no/such/file"}); err == nil {
		t.Fatal("a missing JWKS file was accepted")
	}
}

// unsignedToken is an alg=none JWT.
func unsignedToken(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." + enc(claims) + "."
}

// TestOAuthSession: RFC 7628 on the server side: a valid token authenticates at once (empty
// answer), with the token's expiry; an invalid token, an authorization id that is not the
// token's principal, and malformed messages fail at once with an authentication error.
func TestOAuthSession(t *testing.T) {
	is := securitytest.NewIssuer(t)
	v, err := NewOAuthValidator(OAuthConfig{JWKSURL: is.JWKSURL()})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	good := is.Token(t, "k1", map[string]any{"sub": "bob", "exp": exp.Unix()})
	s := NewOAuthSession(v)
	out, done, err := s.Step(oauthMessage("", good))
	if err != nil || !done || len(out) != 0 || s.User() != "bob" || !s.(*oauthSession).Expiry().Equal(exp) {
		t.Fatalf("a valid token: %q, %v, %v, user %q", out, done, err, s.User())
	}
	if _, _, err := s.Step(oauthMessage("", good)); err == nil {
		t.Fatal("a message after the exchange was accepted")
	}
	if _, _, err := NewOAuthSession(v).Step(oauthMessage("bob", good)); err != nil {
		t.Fatalf("authzid = the principal: %v", err)
	}
	expired := is.Token(t, "k1", map[string]any{"sub": "bob", "exp": time.Now().Add(-time.Hour).Unix()})
	for _, msg := range []string{string(oauthMessage("", expired)), string(oauthMessage("mallory", good)), "", "n,,",
		"y,,\x01auth=Bearer x\x01\x01", "n,,\x01auth=Basic x\x01\x01", "n,,\x01host=h\x01\x01", "n,a=bob\x01auth=Bearer x\x01\x01"} {
		var ae *AuthError
		if out, done, err := NewOAuthSession(v).Step([]byte(msg)); !errors.As(err, &ae) || done || out != nil || ae.Mechanism != OAuthBearer {
			t.Errorf("%q: %q, %v, %v; want an OAUTHBEARER AuthError", msg, out, done, err)
		}
	}
}

// FuzzOAuthMessage: any client message parses or fails without panicking.
func FuzzOAuthMessage(f *testing.F) {
	f.Add(oauthMessage("", "a.b.c"))
	f.Add(oauthMessage("u=2Cv", "x"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		authz, token, err := parseOAuthMessage(msg)
		if err == nil && token == "" {
			t.Fatalf("%q parsed to an empty token (authz %q)", msg, authz)
		}
	})
}

// unsecuredJWS builds a JWS of header and claims, without a signature.
func unsecuredJWS(header string, claims map[string]any) string {
	b, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

// TestOAuthUnsecured: unsigned tokens as Kafka's unsecured validator takes them (alg none, the
// principal claim, exp required and not passed, iat not in the future and before exp, 30 s of
// skew), signed tokens refused, and the mode excludes a JWKS.
func TestOAuthUnsecured(t *testing.T) {
	if _, err := NewOAuthValidator(OAuthConfig{Unsecured: true, JWKSURL: "file:///x"}); err == nil {
		t.Fatal("unsecured with a JWKS: no error")
	}
	v, err := NewOAuthValidator(OAuthConfig{Unsecured: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	none := `{"alg":"none"}`
	sec := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) / 1000 }
	sub, exp, err := v.Validate(unsecuredJWS(none, map[string]any{"sub": "alice", "iat": sec(0), "exp": sec(time.Hour)}), now)
	if err != nil || sub != "alice" || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("a good token: %q %v %v", sub, exp, err)
	}
	// librdkafka's unsecured tokens carry a scope array and fractional times: taken.
	if sub, _, err := v.Validate(unsecuredJWS(`{"alg":"none"}`, map[string]any{"sub": "bob", "iat": sec(0) + 0.5, "exp": sec(time.Minute) + 0.25, "scope": []string{"a"}}), now); err != nil || sub != "bob" {
		t.Fatalf("librdkafka's form: %q %v", sub, err)
	}
	if _, _, err := v.Validate(unsecuredJWS(none, map[string]any{"sub": "alice", "exp": sec(-10 * time.Second)}), now); err != nil {
		t.Fatalf("expired 10 s ago, within the skew: %v", err)
	}
	for name, tok := range map[string]string{
		"expired":          unsecuredJWS(none, map[string]any{"sub": "alice", "exp": sec(-time.Minute)}),
		"no exp":           unsecuredJWS(none, map[string]any{"sub": "alice"}),
		"exp not a number": unsecuredJWS(none, map[string]any{"sub": "alice", "exp": "soon"}),
		"issued later":     unsecuredJWS(none, map[string]any{"sub": "alice", "iat": sec(time.Minute), "exp": sec(time.Hour)}),
		"exp before iat":   unsecuredJWS(none, map[string]any{"sub": "alice", "iat": sec(0), "exp": sec(0)}),
		"no sub":           unsecuredJWS(none, map[string]any{"exp": sec(time.Hour)}),
		"signed":           unsecuredJWS(`{"alg":"RS256"}`, map[string]any{"sub": "alice", "exp": sec(time.Hour)}) + "c2ln",
		"alg RS256":        unsecuredJWS(`{"alg":"RS256"}`, map[string]any{"sub": "alice", "exp": sec(time.Hour)}),
		"two parts":        "eyJhbGciOiJub25lIn0.e30",
		"bad base64":       "eyJhbGciOiJub25lIn0.!!!.",
	} {
		if _, _, err := v.Validate(tok, now); err == nil {
			t.Errorf("a token %s: taken", name)
		}
	}
	s := NewOAuthSession(v).(*oauthSession)
	s.now = func() time.Time { return now }
	if _, done, err := s.Step(oauthMessage("", unsecuredJWS(none, map[string]any{"sub": "carol", "exp": sec(time.Hour)}))); err != nil || !done || s.User() != "carol" {
		t.Fatalf("an exchange: %v %v %q", done, err, s.User())
	}
}

// FuzzUnsecuredToken: any token validates or fails without panicking; one taken names a
// principal.
func FuzzUnsecuredToken(f *testing.F) {
	f.Add(unsecuredJWS(`{"alg":"none"}`, map[string]any{"sub": "alice", "exp": 1e10}))
	f.Add("a.b.")
	f.Fuzz(func(t *testing.T, tok string) {
		sub, _, err := validateUnsecured(tok, time.Unix(1_800_000_000, 0), "sub", 30*time.Second)
		if err == nil && sub == "" {
			t.Fatalf("%q taken without a principal", tok)
		}
	})
}
