package securitytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is an OpenID Connect provider for tests: it signs JWTs with its keys, serves the public
// ones as a JWKS (JWKSURL), and grants tokens to registered clients by the client-credentials
// flow (TokenURL), as librdkafka's and the Java client's OIDC login do: sub is the client id,
// aud "kafka", iss the issuer's URL.
type Issuer struct {
	srv *httptest.Server

	mu      sync.Mutex
	keys    map[string]any // kid -> private key
	served  []string       // the kids the JWKS lists
	clients map[string]string
	signer  string        // the kid the token endpoint signs with
	ttl     time.Duration // of the tokens the endpoint grants
	gets    int           // JWKS requests
}

// NewIssuer starts an issuer with one served RSA key, "k1", which its token endpoint signs with.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{keys: map[string]any{}, clients: map[string]string{}, signer: "k1", ttl: time.Hour}
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks", is.jwks)
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) { is.grant(t, w, r) })
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	is.AddKey(t, "k1", false, true)
	return is
}

// JWKSURL is the JWKS endpoint; TokenURL the token endpoint.
func (is *Issuer) JWKSURL() string  { return is.srv.URL + "/jwks" }
func (is *Issuer) TokenURL() string { return is.srv.URL + "/token" }

// URL is the issuer's iss.
func (is *Issuer) URL() string { return is.srv.URL }

// JWKSRequests counts the JWKS endpoint's requests.
func (is *Issuer) JWKSRequests() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.gets
}

// AddKey makes a key (RSA, or EC P-256 with ec) and, if serve, lists it in the JWKS.
func (is *Issuer) AddKey(t testing.TB, kid string, ec, serve bool) {
	t.Helper()
	var k any
	var err error
	if ec {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	if serve {
		is.served = append(is.served, kid)
	}
}

// Serve lists key kid in the JWKS.
func (is *Issuer) Serve(kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.served = append(is.served, kid)
}

// AddClient registers a client of the token endpoint.
func (is *Issuer) AddClient(id, secret string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.clients[id] = secret
}

// SetTokenTTL sets the lifetime of the tokens the endpoint grants.
func (is *Issuer) SetTokenTTL(d time.Duration) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.ttl = d
}

// Token signs claims with key kid.
func (is *Issuer) Token(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	return is.TokenAs(t, kid, kid, claims)
}

// TokenAs signs claims with key signer, naming key kid in the header.
func (is *Issuer) TokenAs(t testing.TB, signer, kid string, claims map[string]any) string {
	t.Helper()
	is.mu.Lock()
	k := is.keys[signer]
	is.mu.Unlock()
	alg := jose.RS256
	if _, ok := k.(*ecdsa.PrivateKey); ok {
		alg = jose.ES256
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: k, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Claims are the claims of a token for sub the issuer grants, valid for ttl from now.
func (is *Issuer) Claims(sub string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{"sub": sub, "aud": []string{"kafka"}, "iss": is.URL(), "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.gets++
	var set jose.JSONWebKeySet
	for _, kid := range is.served {
		var pub any
		switch k := is.keys[kid].(type) {
		case *rsa.PrivateKey:
			pub = &k.PublicKey
		case *ecdsa.PrivateKey:
			pub = &k.PublicKey
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: pub, KeyID: kid, Use: "sig"})
	}
	json.NewEncoder(w).Encode(set)
}

// grant answers a client-credentials request (client id and secret by HTTP Basic auth or in
// the form).
func (is *Issuer) grant(t testing.TB, w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.FormValue("client_id"), r.FormValue("client_secret")
	}
	is.mu.Lock()
	want, known := is.clients[id]
	signer, ttl := is.signer, is.ttl
	is.mu.Unlock()
	if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" || !known || secret != want {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
		return
	}
	tok := is.Token(t, signer, is.Claims(id, ttl))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": int(ttl.Seconds())})
}
