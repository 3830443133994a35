package security

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"strings"
	"time"
)

// Delegation tokens (KIP-48; docs/security.md §3). A token is an id and an HMAC: the HMAC is
// HMAC-SHA512 of the id under the cluster's secret key (delegation.token.secret.key), as
// Kafka computes it, so every node derives it and none stores it. A client authenticates with
// SCRAM, the token id as its user name, the base64 of the HMAC as its password, and the
// extension tokenauth=true; it is then its token's owner.

// TokenAuth is what a token authenticates: its owner, until its expiry.
type TokenAuth struct {
	ID     string
	Owner  string // a principal, "User:alice"
	Expiry time.Time
}

// TokenLookup returns what token id authenticates, if it is a live token.
type TokenLookup func(id string) (TokenAuth, bool)

// TokenHMAC is token id's HMAC under the secret key.
func TokenHMAC(secret, id string) []byte {
	m := hmac.New(sha512.New, []byte(secret))
	m.Write([]byte(id))
	return m.Sum(nil)
}

// TokenKeyCheck names a secret key without giving it away: a short HMAC of a constant under it.
func TokenKeyCheck(secret string) string {
	return base64.RawURLEncoding.EncodeToString(TokenHMAC(secret, "runnel delegation token key check")[:9])
}

// TokenPassword is the SCRAM password of token id: its HMAC in base64, as Kafka's clients send
// it.
func TokenPassword(secret, id string) string {
	return base64.StdEncoding.EncodeToString(TokenHMAC(secret, id))
}

// TokenCredential is token id's SCRAM credential for mechanism m: the minimum iterations, over
// a salt derived from the secret and the id (the same on every node, and never sent before the
// client has named a live token).
func TokenCredential(m Mechanism, secret, id string) Credential {
	salt := hmac.New(sha512.New, []byte(secret))
	salt.Write([]byte("scram-salt\x00" + string(m) + "\x00" + id))
	c, err := CredentialFromPassword(m, TokenPassword(secret, id), salt.Sum(nil)[:16], MinIterations)
	if err != nil {
		panic("security: deriving a token's credential: " + err.Error()) // fixed, valid inputs
	}
	return c
}

// tokenAuthRequested reports whether a SCRAM client-first message carries the extension
// tokenauth=true (after its user name and nonce).
func tokenAuthRequested(clientFirst []byte) bool {
	fields := strings.Split(string(clientFirst), ",")
	if len(fields) < 5 {
		return false
	}
	for _, f := range fields[4:] {
		if k, v, _ := strings.Cut(f, "="); k == "tokenauth" && strings.EqualFold(v, "true") { // Java's parseBoolean
			return true
		}
	}
	return false
}
