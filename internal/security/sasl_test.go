package security

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type users map[string]map[Mechanism]Credential

func (u users) lookup(user string, m Mechanism) (Credential, bool) {
	c, ok := u[user][m]
	return c, ok
}

func testUsers(t *testing.T) users {
	t.Helper()
	u := users{}
	for _, p := range []struct{ user, pass string }{{"alice", "alice-secret"}, {"bob", "pässwörd,=x"}} {
		u[p.user] = map[Mechanism]Credential{}
		for _, m := range Mechanisms {
			c, err := CredentialFromPassword(m, p.pass, []byte("salt-"+p.user), 4096)
			if err != nil {
				t.Fatal(err)
			}
			u[p.user][m] = c
		}
	}
	return u
}

// run drives a franz-go client mechanism (the real client's implementation) against a server
// session, as the broker does with SaslAuthenticate frames.
func run(t *testing.T, mech sasl.Mechanism, lookup Lookup) (string, error) {
	t.Helper()
	cs, msg, err := mech.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	ss, err := NewSession(mech.Name(), lookup, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		resp, done, err := ss.Step(msg)
		if err != nil {
			return "", err
		}
		cdone, next, cerr := cs.Challenge(resp)
		if cerr != nil {
			t.Fatalf("client refused the server's message: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return ss.User(), nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return "", nil
}

func TestSASLExchangesWithFranzGoClients(t *testing.T) {
	u := testUsers(t)
	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
		user string // "" means refused
	}{
		{"scram256", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), "alice"},
		{"scram512", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), "alice"},
		{"scram-escaped-name-and-utf8", scram.Auth{User: "bob", Pass: "pässwörd,=x"}.AsSha512Mechanism(), "bob"},
		{"scram-wrong-password", scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(), ""},
		{"scram-unknown-user", scram.Auth{User: "mallory", Pass: "alice-secret"}.AsSha256Mechanism(), ""},
		{"scram-authzid-other-user", scram.Auth{User: "alice", Pass: "alice-secret", Zid: "bob"}.AsSha256Mechanism(), ""},
		{"plain", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), "alice"},
		{"plain-wrong-password", plain.Auth{User: "alice", Pass: "alice-secreT"}.AsMechanism(), ""},
		{"plain-unknown-user", plain.Auth{User: "mallory", Pass: "x"}.AsMechanism(), ""},
		{"plain-authzid-other-user", plain.Auth{User: "alice", Pass: "alice-secret", Zid: "bob"}.AsMechanism(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := run(t, tc.mech, u.lookup)
			if tc.user == "" {
				var ae *AuthError
				if !errors.As(err, &ae) {
					t.Fatalf("authenticated as %q, or err %v is not an AuthError", user, err)
				}
				if strings.Contains(ae.Error(), "secret") || strings.Contains(ae.Reason, "secret") {
					t.Fatalf("error leaks the password: %v / %s", ae, ae.Reason)
				}
				return
			}
			if err != nil || user != tc.user {
				t.Fatalf("user %q, err %v; want %q", user, err, tc.user)
			}
		})
	}
}

func TestPlainChecksTheSHA512CredentialWhenThereIsNoSHA256One(t *testing.T) {
	c, err := CredentialFromPassword(ScramSHA512, "pw", []byte("s"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	u := users{"carol": {ScramSHA512: c}}
	if user, err := run(t, plain.Auth{User: "carol", Pass: "pw"}.AsMechanism(), u.lookup); err != nil || user != "carol" {
		t.Fatalf("user %q err %v", user, err)
	}
}

func TestSCRAMMessagesOutOfOrderAreRefused(t *testing.T) {
	u := testUsers(t)
	for _, msgs := range [][]string{
		{"c=biws,r=abc,p=AAAA"},                             // a final message first
		{"n,,n=alice,r=abc", "x"},                           // garbage second message
		{"n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA"},         // nonce not extended by the server's
		{"p=tls-unique,,n=alice,r=abc"},                     // channel binding asked for
		{"n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA", "more"}, // a third message
		{""},
	} {
		s, _ := NewSession(string(ScramSHA256), u.lookup, nil, "")
		var err error
		for _, m := range msgs {
			if _, _, err = s.Step([]byte(m)); err != nil {
				break
			}
		}
		if err == nil {
			t.Fatalf("%q accepted", msgs)
		}
	}
}

func TestNewCredentialChecksKafkasBounds(t *testing.T) {
	sp := make([]byte, 32)
	if _, err := NewCredential(ScramSHA256, []byte("s"), sp, 4095); err == nil {
		t.Fatal("4095 iterations accepted")
	}
	if _, err := NewCredential(ScramSHA256, []byte("s"), sp, 16385); err == nil {
		t.Fatal("16385 iterations accepted")
	}
	if _, err := NewCredential(ScramSHA512, []byte("s"), sp, 4096); err == nil {
		t.Fatal("a 32-byte salted password accepted for SHA-512")
	}
	if _, err := NewCredential(ScramSHA256, nil, sp, 4096); err == nil {
		t.Fatal("empty salt accepted")
	}
	c, err := NewCredential(ScramSHA256, []byte("s"), sp, 4096)
	if err != nil || len(c.StoredKey) != 32 || len(c.ServerKey) != 32 {
		t.Fatalf("%+v %v", c, err)
	}
}

// FuzzSASLMessages feeds arbitrary client messages to every mechanism's server session: no
// panic, and no authentication without the password.
func FuzzSASLMessages(f *testing.F) {
	f.Add("SCRAM-SHA-256", []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add("SCRAM-SHA-512", []byte("n,a=alice,n=alice,r=x"), []byte("c=biws,r=x,p="))
	f.Add("PLAIN", []byte("\x00alice\x00alice-secret"), []byte(nil))
	f.Add("PLAIN", []byte("alice\x00alice\x00x"), []byte("\x00"))
	f.Add("SCRAM-SHA-512", []byte("n,,n=tok1,r=abc,tokenauth=true"), []byte("c=biws,r=abc,p=AAAA"))
	cred, _ := CredentialFromPassword(ScramSHA256, "alice-secret", []byte("salt"), 4096)
	cred512, _ := CredentialFromPassword(ScramSHA512, "alice-secret", []byte("salt"), 4096)
	u := users{"alice": {ScramSHA256: cred, ScramSHA512: cred512}}
	tokens := func(id string) (TokenAuth, bool) { return TokenAuth{ID: id, Owner: "User:alice"}, id == "tok1" }
	f.Fuzz(func(t *testing.T, mech string, m1, m2 []byte) {
		s, err := NewSession(mech, u.lookup, tokens, "secret")
		if err != nil {
			return
		}
		_, done, err := s.Step(m1)
		if err == nil && !done {
			_, done, _ = s.Step(m2)
		}
		if done && !(mech == "PLAIN" && strings.HasSuffix(string(m1), "\x00alice-secret")) {
			t.Fatalf("%s authenticated %q without the password: %q %q", mech, s.User(), m1, m2)
		}
	})
}
