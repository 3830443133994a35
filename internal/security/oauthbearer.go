package security

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// OAuthConfig configures OAUTHBEARER (RFC 7628) as Kafka's OIDC validator does (KIP-768): a
// client presents a signed JWT, checked against the keys of a JWKS endpoint; the principal is
// User:<the token's sub claim>. Or, with Unsecured, as Kafka's unsecured validator (its default
// when no JWKS is configured) does: unsigned tokens, for development.
type OAuthConfig struct {
	// Unsecured takes unsigned tokens (a JWS with "alg":"none" and no signature, what
	// librdkafka's enable.sasl.oauthbearer.unsecure.jwt and the Java client's default login
	// send), as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: the principal claim
	// (SubClaim) must be a string, exp is required, iat (if present) may not be in the future,
	// both with ClockSkew. Anyone can claim any principal: for development only. It excludes
	// JWKSURL.
	Unsecured bool
	// JWKSURL is sasl.oauthbearer.jwks.endpoint.url: an http(s) URL, or a file (file:// URL or
	// path) holding the JSON Web Key Set the tokens are signed with.
	JWKSURL string
	// ExpectedAudience (sasl.oauthbearer.expected.audience): a token's aud must hold one of
	// them; empty: not checked. ExpectedIssuer (sasl.oauthbearer.expected.issuer): its iss must
	// equal it; "": not checked.
	ExpectedAudience []string
	ExpectedIssuer   string
	// SubClaim is sasl.oauthbearer.sub.claim.name, the claim naming the principal (default sub).
	SubClaim string
	// ClockSkew is sasl.oauthbearer.clock.skew.seconds (default 30 s) for exp, nbf and iat.
	ClockSkew time.Duration
	// Refresh is sasl.oauthbearer.jwks.endpoint.refresh.ms (default 1 h); a token signed with a
	// key id the set does not hold makes it refresh sooner, at most every 10 s.
	Refresh time.Duration
	Logger  *slog.Logger
	// HTTPClient fetches the JWKS (default: 10 s timeout).
	HTTPClient *http.Client
}

// OAuthBearer is the SASL mechanism's name.
const OAuthBearer = "OAUTHBEARER"

// oauthAlgorithms are the signature algorithms a token may use (no "none", no HMAC: the keys
// are public).
var oauthAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// OAuthValidator validates OAUTHBEARER tokens against a JWKS it keeps fresh.
type OAuthValidator struct {
	cfg OAuthConfig

	mu        sync.Mutex
	keys      *jose.JSONWebKeySet
	fetchedAt time.Time
	triedAt   time.Time // the last fetch attempt, successful or not
	fetching  bool      // a fetch is running
}

// NewOAuthValidator checks the config and fetches the key set once (an unreachable endpoint is
// an error at start, as in Kafka).
func NewOAuthValidator(cfg OAuthConfig) (*OAuthValidator, error) {
	switch {
	case cfg.Unsecured && cfg.JWKSURL != "":
		return nil, errors.New("security: OAUTHBEARER takes unsigned tokens (--sasl-oauthbearer-unsecured) or tokens signed by a JWKS's keys (--sasl-oauthbearer-jwks-endpoint-url), not both")
	case !cfg.Unsecured && cfg.JWKSURL == "":
		return nil, errors.New("security: OAUTHBEARER needs a JWKS endpoint (--sasl-oauthbearer-jwks-endpoint-url), or --sasl-oauthbearer-unsecured for unsigned development tokens")
	}
	if cfg.SubClaim == "" {
		cfg.SubClaim = "sub"
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = 30 * time.Second
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	v := &OAuthValidator{cfg: cfg}
	if cfg.Unsecured {
		cfg.Logger.Warn("security: OAUTHBEARER takes unsigned tokens: any client can claim any principal (for development only)")
		return v, nil
	}
	if _, err := v.keySet(time.Now(), true); err != nil {
		return nil, err
	}
	return v, nil
}

// fetch reads the key set from the endpoint.
func (v *OAuthValidator) fetch() (*jose.JSONWebKeySet, error) {
	var body []byte
	u, err := url.Parse(v.cfg.JWKSURL)
	switch {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https"):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := v.cfg.HTTPClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("security: fetching the JWKS: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("security: fetching the JWKS from %s: %s", v.cfg.JWKSURL, resp.Status)
		}
		if body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, fmt.Errorf("security: fetching the JWKS: %w", err)
		}
	default:
		path := v.cfg.JWKSURL
		if err == nil && u.Scheme == "file" {
			path = u.Path
		}
		if body, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("security: reading the JWKS: %w", err)
		}
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("security: the JWKS at %s: %w", v.cfg.JWKSURL, err)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("security: the JWKS at %s holds no key", v.cfg.JWKSURL)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("security: the JWKS at %s holds a private or symmetric key (%q)", v.cfg.JWKSURL, k.KeyID)
		}
	}
	return &set, nil
}

// keySet returns the key set, fetched again when it is older than Refresh, or when force and
// the last attempt is 10 s old. A failed refresh keeps the previous set (logged). The fetch
// runs outside the lock: logins meanwhile use the set they have, and one fetch runs at a time.
func (v *OAuthValidator) keySet(now time.Time, force bool) (*jose.JSONWebKeySet, error) {
	v.mu.Lock()
	stale := v.keys == nil || now.Sub(v.fetchedAt) >= v.cfg.Refresh
	due := stale || force && now.Sub(v.triedAt) >= 10*time.Second
	if !due || v.fetching || v.keys != nil && now.Sub(v.triedAt) < time.Second {
		defer v.mu.Unlock()
		if v.keys == nil {
			return nil, errors.New("security: the OAUTHBEARER JWKS is being fetched")
		}
		return v.keys, nil // a failing endpoint is not asked once per login either
	}
	v.fetching, v.triedAt = true, now
	v.mu.Unlock()
	set, err := v.fetch()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fetching = false
	if err != nil {
		if v.keys == nil {
			return nil, err
		}
		v.cfg.Logger.Warn("security: refreshing the OAUTHBEARER JWKS; keeping the previous keys", "err", err)
		return v.keys, nil
	}
	v.keys, v.fetchedAt = set, now
	return set, nil
}

// Validate checks a token at now and returns its principal name (the sub claim) and expiry.
func (v *OAuthValidator) Validate(token string, now time.Time) (string, time.Time, error) {
	if v.cfg.Unsecured {
		return validateUnsecured(token, now, v.cfg.SubClaim, v.cfg.ClockSkew)
	}
	tok, err := jwt.ParseSigned(token, oauthAlgorithms)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("malformed token: %v", err)
	}
	if len(tok.Headers) != 1 {
		return "", time.Time{}, errors.New("the token has more than one signature")
	}
	kid := tok.Headers[0].KeyID
	candidates := func(set *jose.JSONWebKeySet) []jose.JSONWebKey {
		if kid != "" {
			return set.Key(kid)
		}
		return set.Keys
	}
	set, err := v.keySet(now, false)
	if err != nil {
		return "", time.Time{}, err
	}
	keys := candidates(set)
	if len(keys) == 0 { // a key the set did not hold yet: the issuer may have rotated
		if set, err = v.keySet(now, true); err != nil {
			return "", time.Time{}, err
		}
		keys = candidates(set)
	}
	if len(keys) == 0 {
		return "", time.Time{}, fmt.Errorf("no key with id %q in the JWKS", kid)
	}
	var claims jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if err := tok.Claims(k.Key, &claims, &all); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return "", time.Time{}, errors.New("the token's signature does not verify with the JWKS")
	}
	if claims.Expiry == nil {
		return "", time.Time{}, errors.New("the token has no exp claim")
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.ExpectedIssuer, AnyAudience: v.cfg.ExpectedAudience, Time: now}, v.cfg.ClockSkew); err != nil {
		return "", time.Time{}, fmt.Errorf("the token's claims: %v", err)
	}
	sub, _ := all[v.cfg.SubClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("the token has no %s claim naming its principal", v.cfg.SubClaim)
	}
	return sub, claims.Expiry.Time(), nil
}

// validateUnsecured checks an unsigned token as Kafka's unsecured validator does
// (OAuthBearerUnsecuredJws and OAuthBearerValidationUtils): three base64url parts, the last
// empty; a header with "alg":"none"; claims with the principal claim a non-empty string, exp a
// number of seconds not passed (with skew), iat, if present, a number not in the future (with
// skew) and before exp.
func validateUnsecured(token string, now time.Time, subClaim string, skew time.Duration) (string, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		return "", time.Time{}, errors.New("malformed unsecured token: not header.claims. (an unsigned JWS)")
	}
	decode := func(what, s string) (map[string]any, error) {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil {
			return nil, fmt.Errorf("malformed unsecured token %s: %v", what, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("malformed unsecured token %s: %v", what, err)
		}
		return m, nil
	}
	header, err := decode("header", parts[0])
	if err != nil {
		return "", time.Time{}, err
	}
	if alg, _ := header["alg"].(string); alg != "none" {
		return "", time.Time{}, fmt.Errorf("an unsecured token must have alg \"none\", not %q", header["alg"])
	}
	claims, err := decode("claims", parts[1])
	if err != nil {
		return "", time.Time{}, err
	}
	seconds := func(name string) (time.Time, bool, error) {
		v, ok := claims[name]
		if !ok {
			return time.Time{}, false, nil
		}
		f, ok := v.(float64)
		if !ok {
			return time.Time{}, false, fmt.Errorf("the token's %s claim is not a number", name)
		}
		return time.UnixMilli(int64(f * 1000)), true, nil
	}
	exp, ok, err := seconds("exp")
	switch {
	case err != nil:
		return "", time.Time{}, err
	case !ok:
		return "", time.Time{}, errors.New("the token has no exp claim")
	case !now.Before(exp.Add(skew)):
		return "", time.Time{}, fmt.Errorf("the token's claims: token is expired (exp %s)", exp.UTC().Format(time.RFC3339))
	}
	iat, ok, err := seconds("iat")
	switch {
	case err != nil:
		return "", time.Time{}, err
	case ok && iat.After(now.Add(skew)):
		return "", time.Time{}, fmt.Errorf("the token's claims: issued in the future (iat %s)", iat.UTC().Format(time.RFC3339))
	case ok && !exp.After(iat):
		return "", time.Time{}, errors.New("the token's claims: exp is not after iat")
	}
	sub, _ := claims[subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("the token has no %s claim naming its principal", subClaim)
	}
	return sub, exp, nil
}

// oauthSession is the server side of RFC 7628. The client's first message is a GS2 header
// ("n,," or "n,a=<authzid>,"), then key=value pairs each ended by 0x01, one of them
// "auth=Bearer <token>", then 0x01. A valid token ends the exchange. An invalid one fails it at
// once, with SaslAuthenticate's SASL_AUTHENTICATION_FAILED: Kafka's server first sends RFC
// 7628's error JSON and fails on the client's 0x01 acknowledgement, which Kafka clients turn
// into the same failure, and which franz-go does not acknowledge.
type oauthSession struct {
	v      *OAuthValidator
	now    func() time.Time
	user   string
	expiry time.Time
	done   bool
}

// NewOAuthSession starts an OAUTHBEARER exchange validated by v.
func NewOAuthSession(v *OAuthValidator) Session { return &oauthSession{v: v, now: time.Now} }

func (s *oauthSession) Step(msg []byte) ([]byte, bool, error) {
	fail := func(user, reason string) ([]byte, bool, error) {
		s.done = true
		return nil, false, &AuthError{Mechanism: OAuthBearer, User: user, Reason: reason}
	}
	if s.done {
		return fail(s.user, "message after the exchange ended")
	}
	authz, token, err := parseOAuthMessage(msg)
	if err != nil {
		return fail("", err.Error())
	}
	sub, exp, err := s.v.Validate(token, s.now())
	if err != nil {
		return fail("", err.Error())
	}
	if authz != "" && authz != sub {
		return fail(sub, fmt.Sprintf("the authorization id %q is not the token's principal %q", authz, sub))
	}
	s.user, s.expiry, s.done = sub, exp, true
	return []byte{}, true, nil
}

func (s *oauthSession) User() string { return s.user }

// Expiry is the token's expiry: the session may not outlive it (KIP-368).
func (s *oauthSession) Expiry() time.Time { return s.expiry }

// parseOAuthMessage parses an RFC 7628 client first message into its authorization id and
// bearer token.
func parseOAuthMessage(msg []byte) (authz, token string, err error) {
	header, rest, ok := bytes.Cut(msg, []byte{0x01})
	if !ok || !bytes.HasSuffix(rest, []byte{0x01}) {
		return "", "", errors.New("malformed OAUTHBEARER message: not a GS2 header and 0x01-separated pairs")
	}
	h := string(header)
	switch {
	case strings.HasPrefix(h, "n,,"):
	case strings.HasPrefix(h, "n,a="):
		end := strings.IndexByte(h[4:], ',')
		if end < 0 {
			return "", "", errors.New("malformed OAUTHBEARER GS2 header")
		}
		authz = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(h[4 : 4+end])
	default:
		return "", "", errors.New("OAUTHBEARER GS2 header without channel binding (\"n,\") expected")
	}
	for _, kv := range bytes.Split(rest[:len(rest)-1], []byte{0x01}) {
		k, val, _ := strings.Cut(string(kv), "=")
		if k != "auth" {
			continue
		}
		scheme, tok, ok := strings.Cut(val, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return "", "", errors.New("the auth value is not \"Bearer <token>\"")
		}
		return authz, strings.TrimSpace(tok), nil
	}
	return "", "", errors.New("the OAUTHBEARER message has no auth value")
}
