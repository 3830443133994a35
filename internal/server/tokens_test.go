package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/runnel-dev/runnel/internal/server"
)

// TestDelegationTokens: Kafka's delegation tokens (KIP-48, KIP-373) through franz-go's kadm and
// SCRAM client. A super user creates a token owned by alice; a client authenticating with it
// (SCRAM-SHA-512, tokenauth=true) is alice: her ACLs let it produce to her topic and not to
// another. A connection authenticated with a token, or over PLAINTEXT, may not ask for tokens.
// Who may see a token is Kafka's: its owner, requester and renewers; who may renew and expire
// it too: its owner and renewers, not the requester. An
// expired token no longer authenticates, and a node without a secret key has tokens off.
func TestDelegationTokens(t *testing.T) {
	b := startSecureBroker(t, func(c *server.Config) {
		c.DelegationTokenSecret = "a secret key shared by the cluster's nodes"
		c.Authorizer, c.SuperUsers = "acl", "User:admin"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	user := func(name, pw string) *kgo.Client {
		return b.client(t, "SASL_PLAINTEXT", scram.Auth{User: name, Pass: pw}.AsSha512Mechanism(), nil)
	}
	admin := kadm.NewClient(user("admin", "admin-secret"))
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"},
	}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"alices", "others"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	acl := kadm.NewACLs().Allow("User:alice").Topics("alices").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := admin.CreateACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}

	tok, err := admin.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "alice"},
		Renewers: []kadm.Principal{{Name: "carol"}}, MaxLifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Owner.Name != "alice" || tok.TokenRequesterPrincipal.Name != "admin" || tok.TokenID == "" || len(tok.HMAC) != 64 ||
		!tok.ExpiryTimestamp.After(time.Now()) || tok.MaxTimestamp.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Fatalf("created token %+v", tok)
	}
	tokenClient := func(tok kadm.DelegationToken) *kgo.Client {
		return b.client(t, "SASL_PLAINTEXT", scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC), IsToken: true}.AsSha512Mechanism(), nil,
			kgo.RequestRetries(0))
	}
	asAlice := tokenClient(tok)
	if err := asAlice.ProduceSync(ctx, &kgo.Record{Topic: "alices", Value: []byte("by token")}).FirstErr(); err != nil {
		t.Fatalf("produce with alice's token to her topic: %v", err)
	}
	if err := asAlice.ProduceSync(ctx, &kgo.Record{Topic: "others", Value: []byte("by token")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce with alice's token to another topic: %v; want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := kadm.NewClient(asAlice).CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Errorf("a token-authenticated connection creating a token: %v; want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err)
	}
	plain := kadm.NewClient(b.client(t, "PLAINTEXT", nil, nil))
	if _, err := plain.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Errorf("creating a token over PLAINTEXT: %v; want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err)
	}
	// A user may create tokens for herself, not for another without CreateTokens on that user.
	alice, bob := kadm.NewClient(user("alice", "alice-pw")), kadm.NewClient(user("bob", "bob-pw"))
	if _, err := bob.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "alice"}}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Errorf("bob creating a token owned by alice: %v; want DELEGATION_TOKEN_AUTHORIZATION_FAILED", err)
	}
	bobs, err := bob.CreateDelegationToken(ctx, kadm.CreateDelegationToken{})
	if err != nil || bobs.Owner.Name != "bob" {
		t.Fatalf("bob creating his own token: %+v, %v", bobs, err)
	}

	// Each sees the tokens it owns, asked for, or may renew; the super user sees all.
	for _, tc := range []struct {
		who  *kadm.Client
		name string
		want int
	}{{admin, "admin", 2}, {alice, "alice", 1}, {bob, "bob", 1}} {
		got, err := tc.who.DescribeDelegationTokens(ctx)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s describes %d tokens (%v); want %d", tc.name, len(got), err, tc.want)
		}
		for _, d := range got {
			if d.TokenID == tok.TokenID && (len(d.Renewers) != 1 || d.Renewers[0].Name != "carol" || string(d.HMAC) != string(tok.HMAC)) {
				t.Errorf("%s describes alice's token as %+v", tc.name, d)
			}
		}
	}
	if got, err := admin.DescribeDelegationTokens(ctx, kadm.Principal{Type: "User", Name: "bob"}); err != nil || len(got) != 1 || got[0].TokenID != bobs.TokenID {
		t.Errorf("admin describing bob's tokens: %+v, %v", got, err)
	}

	// Renewal and expiry: the owner may, someone else may not.
	if _, err := bob.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Errorf("bob renewing alice's token: %v; want DELEGATION_TOKEN_OWNER_MISMATCH", err)
	}
	expiry, err := alice.RenewDelegationToken(ctx, tok.HMAC, 10*time.Minute)
	if err != nil || expiry.Before(time.Now().Add(9*time.Minute)) || expiry.After(time.Now().Add(11*time.Minute)) {
		t.Errorf("alice renewing her token by 10 minutes: expiry %v, %v", expiry, err)
	}
	if expiry, err := alice.RenewDelegationToken(ctx, tok.HMAC, 48*time.Hour); err != nil || !expiry.Equal(tok.MaxTimestamp) {
		t.Errorf("a renewal past the token's max: expiry %v, %v; want its max %v", expiry, err, tok.MaxTimestamp)
	}
	if _, err := alice.RenewDelegationToken(ctx, []byte("not a token's hmac"), time.Hour); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Errorf("renewing an unknown HMAC: %v; want DELEGATION_TOKEN_NOT_FOUND", err)
	}
	if _, err := admin.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Errorf("the requester expiring alice's token: %v; want DELEGATION_TOKEN_OWNER_MISMATCH", err)
	}
	if _, err := alice.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatalf("alice expiring her token now: %v", err)
	}
	if got, _ := alice.DescribeDelegationTokens(ctx); len(got) != 0 {
		t.Errorf("alice still describes %d tokens after hers expired", len(got))
	}
	short, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	_, err = kadm.NewClient(tokenClient(tok)).ListTopics(short)
	cancelShort()
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a request with an expired token: %v; want SASL_AUTHENTICATION_FAILED", err)
	}
	// The connection alice's token had opened is closed at its next request, and the client
	// cannot authenticate again.
	short, cancelShort = context.WithTimeout(ctx, 10*time.Second)
	_, err = kadm.NewClient(asAlice).ListTopics(short)
	cancelShort()
	if err == nil {
		t.Error("a session of an expired token still served a request")
	}

	// Without an authorizer (or with allow.everyone.if.no.acl.found), acting for another
	// owner or reading another's token still takes an ACL: none can be granted here.
	open := startSecureBroker(t, func(c *server.Config) { c.DelegationTokenSecret = "another secret" })
	openAdmin := kadm.NewClient(open.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism(), nil))
	if _, err := openAdmin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := openAdmin.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); err != nil {
		t.Fatal(err)
	}
	openBob := kadm.NewClient(open.client(t, "SASL_PLAINTEXT", scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism(), nil))
	if _, err := openBob.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "admin"}}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Errorf("without an authorizer, bob creating a token owned by admin: %v; want DELEGATION_TOKEN_AUTHORIZATION_FAILED", err)
	}
	if got, err := openBob.DescribeDelegationTokens(ctx); err != nil || len(got) != 0 {
		t.Errorf("without an authorizer, bob describes %d tokens of others (%v); want none", len(got), err)
	}

	// Without a secret key, tokens are off.
	off := startSecureBroker(t, nil)
	adminOff := kadm.NewClient(off.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism(), nil))
	if _, err := adminOff.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Errorf("creating a token without a secret key: %v; want DELEGATION_TOKEN_AUTH_DISABLED", err)
	}
}

// TestKafkaDelegationTokenTool: Kafka 4.1.1's kafka-delegation-tokens creates, describes,
// renews and expires a token over SASL_SSL, and Kafka's console producer (the Java client's
// ScramLoginModule with tokenauth=true) produces with it.
func TestKafkaDelegationTokenTool(t *testing.T) {
	tool := kafkaTool(t, "org.apache.kafka.tools.DelegationTokenCommand")
	producer := kafkaTool(t, "org.apache.kafka.tools.ConsoleProducer")
	b := startSecureBroker(t, func(c *server.Config) { c.DelegationTokenSecret = "tool secret" })
	addr := b.addrs["SASL_SSL"]
	dir := t.TempDir()
	config := func(name, jaas string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required %s;\n"+
			"ssl.truststore.type=PEM\nssl.truststore.location=%s\n", jaas, b.pki.CAFile)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	admin := config("admin.properties", `username="admin" password="admin-secret"`)
	run := func(args ...string) string {
		t.Helper()
		return runClient(t, 120*time.Second, "", tool[0], append(tool[1:], append([]string{"--bootstrap-server", addr, "--command-config", admin}, args...)...)...)
	}
	out := run("--create", "--max-life-time-period", "-1", "--renewer-principal", "User:carol")
	// TOKENID  HMAC  OWNER  REQUESTER  RENEWERS  ISSUEDATE  EXPIRYDATE  MAXDATE
	var id, mac string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.Contains(line, "User:admin") && strings.Contains(line, "User:carol") {
			id, mac = f[0], f[1]
		}
	}
	if id == "" {
		t.Fatalf("kafka-delegation-tokens --create printed no token:\n%s", out)
	}
	// Without --owner-principal the tool sends an empty owner list, which Kafka answers with
	// no tokens (ownersListEmpty), so name the owner.
	if out := run("--describe", "--owner-principal", "User:admin"); !strings.Contains(out, id) || !strings.Contains(out, "User:carol") {
		t.Fatalf("kafka-delegation-tokens --describe:\n%s", out)
	}
	if out := run("--renew", "--hmac", mac, "--renew-time-period", "3600000"); !strings.Contains(out, "Completed renew operation") {
		t.Fatalf("kafka-delegation-tokens --renew:\n%s", out)
	}

	tokenCfg := config("token.properties", fmt.Sprintf(`username="%s" password="%s" tokenauth="true"`, id, mac))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t, "SASL_PLAINTEXT", scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism(), nil))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "by-token"); err != nil {
		t.Fatal(err)
	}
	runClient(t, 120*time.Second, "produced with a token\n", producer[0], append(producer[1:], "--bootstrap-server", addr,
		"--topic", "by-token", "--producer.config", tokenCfg)...)
	ends, err := adm.ListEndOffsets(ctx, "by-token")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("by-token", 0); o.Offset != 1 {
		t.Fatalf("by-token ends at %d after the console producer's record; want 1", o.Offset)
	}

	if out := run("--expire", "--hmac", mac, "--expiry-time-period", "-1"); !strings.Contains(strings.ToLower(out), "expire") {
		t.Fatalf("kafka-delegation-tokens --expire:\n%s", out)
	}
	if out := run("--describe", "--owner-principal", "User:admin"); strings.Contains(out, id) {
		t.Fatalf("kafka-delegation-tokens --describe after --expire still lists the token:\n%s", out)
	}
}
