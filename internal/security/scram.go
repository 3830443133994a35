package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// Mechanism is a SCRAM mechanism, by its SASL name.
type Mechanism string

// The SCRAM mechanisms, and Kafka's iteration bounds for them.
const (
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	ScramSHA512 Mechanism = "SCRAM-SHA-512"

	MinIterations = 4096
	MaxIterations = 16384
)

// Mechanisms lists the SCRAM mechanisms, in Kafka's numbering order (1, 2).
var Mechanisms = []Mechanism{ScramSHA256, ScramSHA512}

// MechanismByType maps Kafka's ScramMechanism numbers (1: SHA-256, 2: SHA-512).
func MechanismByType(t int8) (Mechanism, bool) {
	switch t {
	case 1:
		return ScramSHA256, true
	case 2:
		return ScramSHA512, true
	}
	return "", false
}

// Type is the mechanism's Kafka number.
func (m Mechanism) Type() int8 {
	switch m {
	case ScramSHA256:
		return 1
	case ScramSHA512:
		return 2
	}
	return 0
}

func (m Mechanism) hash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is what a server stores for one user and mechanism (RFC 5802 §3): never the
// password, nor the salted password.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// SaltPassword is SaltedPassword := Hi(password, salt, i), over the password's UTF-8 bytes as
// Kafka computes it (no SASLprep), so credentials agree with Kafka's tools.
func SaltPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h := m.hash()
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewCredential derives the stored credential from a salted password (what Kafka's
// AlterUserScramCredentials carries), checking Kafka's bounds.
func NewCredential(m Mechanism, salt, saltedPassword []byte, iterations int) (Credential, error) {
	if m.Type() == 0 {
		return Credential{}, fmt.Errorf("security: unknown SCRAM mechanism %q", m)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("security: %d iterations is outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 {
		return Credential{}, errors.New("security: the salt is empty")
	}
	if n := m.hash()().Size(); len(saltedPassword) != n {
		return Credential{}, fmt.Errorf("security: a %s salted password is %d bytes, not %d", m, n, len(saltedPassword))
	}
	return derive(m, salt, saltedPassword, iterations), nil
}

// derive computes StoredKey := H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey := HMAC(SaltedPassword, "Server Key").
func derive(m Mechanism, salt, saltedPassword []byte, iterations int) Credential {
	h := m.hash()
	stored := h()
	stored.Write(hmacSum(h, saltedPassword, "Client Key"))
	return Credential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: stored.Sum(nil), ServerKey: hmacSum(h, saltedPassword, "Server Key")}
}

// CredentialFromPassword salts the password and derives the stored credential.
func CredentialFromPassword(m Mechanism, password string, salt []byte, iterations int) (Credential, error) {
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("security: %d iterations is outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	sp, err := SaltPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return NewCredential(m, salt, sp, iterations)
}

// Matches reports, in constant time over the keys, whether password is the credential's.
func (c Credential) Matches(m Mechanism, password string) bool {
	if len(c.Salt) == 0 || c.Iterations <= 0 || c.Iterations > MaxIterations || m.Type() == 0 {
		return false
	}
	sp, err := SaltPassword(m, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	got := derive(m, c.Salt, sp, c.Iterations)
	return hmac.Equal(got.StoredKey, c.StoredKey) && hmac.Equal(got.ServerKey, c.ServerKey)
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// ParseMechanisms parses --sasl-mechanisms: a comma list of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
// OAUTHBEARER and GSSAPI.
func ParseMechanisms(spec string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(spec, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		switch s {
		case "":
			continue
		case "PLAIN", string(ScramSHA256), string(ScramSHA512), OAuthBearer, GSSAPI:
		default:
			return nil, fmt.Errorf("security: SASL mechanism %q is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("security: no SASL mechanism enabled")
	}
	return out, nil
}

// RandomSalt returns 16 random bytes, a fresh salt for a new credential.
func RandomSalt() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}
