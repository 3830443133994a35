package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/security"
)

// authzBroker is a one-node broker with the ACL authorizer (allow.everyone.if.no.acl.found
// on, so the anonymous plaintext client may set things up before ACLs are added).
func authzBroker(t *testing.T) (string, *kgo.Client) {
	t.Helper()
	_, addr, reg := ctBroker(t, func(c *Config) {
		c.Security.Authorizer = &security.Authorizer{AllowIfNoACL: true}
	})
	ctCreate(t, reg, "secret", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return addr, cl
}

// denyDescribeSecret hides topic "secret" from User:ANONYMOUS (DENY DESCRIBE) and waits until
// Metadata answers TOPIC_AUTHORIZATION_FAILED for it.
func denyDescribeSecret(t *testing.T, ctx context.Context, cl *kgo.Client) {
	t.Helper()
	b := kadm.NewACLs().Topics("secret").ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpDescribe)
	res, err := kadm.NewClient(cl).CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("secret")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Topics[0].ErrorCode == kerr.TopicAuthorizationFailed.Code {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the DENY DESCRIBE ACL never took effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kafka's DescribeTransactions drops, from each described transaction, the topics the caller
// may not DESCRIBE (KafkaApis.handleDescribeTransactionsRequest). Runnel listed every partition
// of the transaction, so a principal allowed to describe the transactional id learned the names
// of topics it is denied DESCRIBE on (and the console's transactions page shows them).
func TestDescribeTransactionsHidesUndescribableTopics(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("leak-tid"), kgo.DefaultProduceTopic("secret"),
		kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The transaction stays open, with secret/0 in it. Now the anonymous principal may no
	// longer describe "secret" (it still may describe the transactional id: no ACL on it).
	denyDescribeSecret(t, ctx, cl)

	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{"leak-tid"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
		t.Fatalf("DescribeTransactions: %+v", resp.TransactionStates)
	}
	for _, tt := range resp.TransactionStates[0].Topics {
		if tt.Topic == "secret" {
			t.Fatalf("DescribeTransactions names topic %q (partitions %v) to a principal denied DESCRIBE on it; Kafka leaves it out", tt.Topic, tt.Partitions)
		}
	}
}

// Kafka's DescribeShareGroupOffsets for all of a group's topics (Topics null) leaves out the
// topics the caller may not DESCRIBE (describeShareGroupAllOffsetsForGroup), as OffsetFetch
// does. Runnel kept them in the answer, with their names and ids, only blanking the offsets.
func TestDescribeShareGroupOffsetsAllTopicsHidesNames(t *testing.T) {
	_, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "leak-sg"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "secret",
		Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}}}
	for {
		resp, err := alter.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		switch resp.ErrorCode {
		case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("AlterShareGroupOffsets: %+v", resp)
		}
		break
	}
	denyDescribeSecret(t, ctx, cl)

	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "leak-sg"}} // Topics nil: all
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range resp.Groups {
		for _, tt := range g.Topics {
			if tt.Topic == "secret" {
				t.Fatalf("DescribeShareGroupOffsets (all topics) names topic %q (id %x) to a principal denied DESCRIBE on it; Kafka leaves it out", tt.Topic, tt.TopicID)
			}
		}
	}
}

// unsecuredJWS is an unsigned JWT ("alg":"none") with the claims.
func unsecuredJWS(t *testing.T, claims map[string]any) string {
	t.Helper()
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(c) + "."
}

// oauthBroker is a broker with a SASL_PLAINTEXT listener taking unsecured OAUTHBEARER JWTs
// (checked with clock skew skew; 0: the validator's default), so a test can connect as any
// user; cfg, if not nil, changes the broker's config further. It returns the listener's address.
func oauthBroker(t *testing.T, skew time.Duration, cfg func(*Config)) string {
	t.Helper()
	v, err := security.NewOAuthValidator(security.OAuthConfig{Unsecured: true, ClockSkew: skew,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := ctBroker(t, func(c *Config) {
		c.Security.SASLMechanisms = []string{security.OAuthBearer}
		c.Security.OAuth = v
		if cfg != nil {
			cfg(c)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go b.ServeListener(ln, Listener{Name: "SASL_PLAINTEXT", Protocol: security.SASLPlaintext})
	return ln.Addr().String()
}

// Kafka's SaslServerAuthenticator (calcCompletionTimesAndReturnSessionLifetimeMs) ends an
// OAUTHBEARER session when its token expires even with connections.max.reauth.ms at its default
// 0: the session lifetime is the credential's, the client is told it, and a request after it
// closes the connection. Runnel bounded the session by the token only when MaxReauth > 0 (it
// did so for delegation tokens also without it), so with the default config a connection
// kept acting as the token's principal for ever after the JWT had expired.
func TestOAuthSessionEndsWithTokenWithoutMaxReauth(t *testing.T) {
	// MaxReauth left 0: Kafka's default connections.max.reauth.ms.
	addr := oauthBroker(t, time.Millisecond, nil)
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, security.OAuthBearer
	if r := ctExchange(t, nc, hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	exp := time.Now().Add(1500 * time.Millisecond)
	tok := unsecuredJWS(t, map[string]any{"sub": "alice", "exp": float64(exp.UnixMilli()) / 1000})
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("n,,\x01auth=Bearer "+tok+"\x01\x01")
	r := ctExchange(t, nc, au, 2).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("SaslAuthenticate: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 1500 {
		t.Errorf("session_lifetime_ms = %d; Kafka sends the token's remaining life (<= 1500 ms), so the client re-authenticates", r.SessionLifetimeMillis)
	}
	time.Sleep(time.Until(exp) + 500*time.Millisecond)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	if _, err := nc.Write(ctEncode(md, 3)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, _, err := ctReadFrame(nc); err == nil {
		t.Errorf("a request 500 ms after the OAUTHBEARER token expired was answered as User:alice; Kafka closes the connection")
	}
}

// Kafka closes a connection whose SASL authentication failed and reads nothing more from it.
// Runnel answered the failure after the delay and then closed, but its read loop went on
// meanwhile: SaslHandshake and SaslAuthenticate pipelined behind the failed attempt were run
// (their answers never sent), each one more failure counted against the client's host, so
// one connection could spend the server's CPU on attempts and lengthen every later login's
// delay from that host.
func TestFailedSASLReadsNothingMore(t *testing.T) {
	const base = 200 * time.Millisecond
	addr := oauthBroker(t, 0, func(c *Config) { c.Security.FailedAuthDelay = base })
	attempt := func(corr int32) []byte {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, security.OAuthBearer
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, []byte("n,,\x01auth=Bearer not-a-token\x01\x01")
		return append(ctEncode(hs, corr), ctEncode(au, corr+1)...)
	}

	// Three failing attempts pipelined on one connection: one failure answered, then EOF.
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write(append(append(attempt(1), attempt(3)...), attempt(5)...)); err != nil {
		t.Fatal(err)
	}
	var got []int32
	for {
		corr, _, err := ctReadFrame(nc)
		if err != nil {
			break
		}
		got = append(got, corr)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("answers on the failed connection: correlation ids %v, want [1 2] then EOF", got)
	}

	// The next failure from this host is its second: answered after 2 × base, not after the
	// fourth failure's 8 × base.
	nc2 := ctDial(t, addr)
	nc2.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	if _, err := nc2.Write(attempt(1)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, _, err := ctReadFrame(nc2); err != nil {
			t.Fatalf("answer %d on the second connection: %v", i+1, err)
		}
	}
	if d := time.Since(start); d >= 4*base {
		t.Errorf("the host's second failed login was answered after %v: the pipelined attempts behind the first failure were counted (want about %v)", d, 2*base)
	}
}
