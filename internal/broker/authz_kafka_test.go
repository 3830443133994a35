package broker

// Differences found by sending the same requests to Apache Kafka 4.1.1 (KRaft,
// StandardAuthorizer, SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256) and to Runnel, each
// confirmed against Kafka's source.

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/security"
)

// mustCreateACLs creates the bindings through the anonymous client and fails the test on an error.
func mustCreateACLs(t *testing.T, ctx context.Context, cl *kgo.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := kadm.NewClient(cl).CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// Kafka's KafkaApis.handleOffsetFetchRequest answers a group the principal may not DESCRIBE
// with OffsetFetchResponse.groupError(group, GROUP_AUTHORIZATION_FAILED, version), which keeps
// the group id (v8+: setGroupId(group.groupId())). Runnel's filterOffsetFetch used to reset the group
// entry to a fresh OffsetFetchResponseGroup and then copies the name from that very entry
// (already reset), so the answer named the group "": a client matching the answer's groups to
// its request's (the Java admin client and consumer do, by group id) cannot find its group.
func TestOffsetFetchDeniedGroupKeepsItsName(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Groups("hidden-group").ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpDescribe))

	var g kmsg.OffsetFetchResponseGroup
	for {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "hidden-group"
		req.Groups = append(req.Groups, rg)
		resp := ctRoundTrip(t, addr, req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 {
			t.Fatalf("OffsetFetch v8 answered %d groups for one asked", len(resp.Groups))
		}
		g = resp.Groups[0]
		if g.ErrorCode == kerr.GroupAuthorizationFailed.Code {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the DENY DESCRIBE ACL on the group never took effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g.Group != "hidden-group" {
		t.Errorf("OffsetFetch v8 of a group denied DESCRIBE: group %q with GROUP_AUTHORIZATION_FAILED; Kafka answers the group's id (\"hidden-group\")", g.Group)
	}
}

// Kafka's ReplicationControlManager.createTopic fills a created topic's configs, num_partitions
// and replication_factor only when the principal may DESCRIBE_CONFIGS the topic; otherwise it
// sets topic_config_error_code TOPIC_AUTHORIZATION_FAILED and leaves num_partitions and
// replication_factor at -1. Runnel hid the configs but still answered the partition count and
// replication factor.
func TestCreateTopicsHidesLayoutWithoutDescribeConfigs(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A binding on the topic ends allow.everyone.if.no.acl.found for it: allow CREATE, deny
	// DESCRIBE_CONFIGS.
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Topics("made").ResourcePatternType(kadm.ACLPatternLiteral).
		Allow("User:ANONYMOUS").AllowHosts("*").Operations(kadm.OpCreate))
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Topics("made").ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpDescribeConfigs))
	time.Sleep(500 * time.Millisecond) // the bindings apply when their metadata commits

	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "made", 2, 1
	req.Topics = append(req.Topics, rt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("CreateTopics answered %d topics", len(resp.Topics))
	}
	got := resp.Topics[0]
	if got.ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	if got.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("topic_config_error_code = %d; want TOPIC_AUTHORIZATION_FAILED", got.ConfigErrorCode)
	}
	if got.NumPartitions != -1 || got.ReplicationFactor != -1 {
		t.Errorf("CreateTopics without DESCRIBE_CONFIGS answered num_partitions %d, replication_factor %d; Kafka answers -1 and -1 (ReplicationControlManager.createTopic fills them only for a describable topic)",
			got.NumPartitions, got.ReplicationFactor)
	}
}

// Kafka's ControllerApis.deleteTopics answers a topic named by id that the principal may
// DESCRIBE but not DELETE with TOPIC_AUTHORIZATION_FAILED and the topic's name
// (appendResponse(name, id, ...)); only a topic it may not describe is answered with a null
// name. Runnel answered a null name for both.
func TestDeleteTopicsByIDNamesADescribableTopic(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Topics("secret").ResourcePatternType(kadm.ACLPatternLiteral).
		Allow("User:ANONYMOUS").AllowHosts("*").Operations(kadm.OpDescribe))
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Topics("secret").ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpDelete))
	// An ACL on the cluster, so that allow.everyone.if.no.acl.found does not grant DELETE on it
	// (which lets every topic be deleted, as in Kafka).
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Clusters().Allow("User:ANONYMOUS").AllowHosts("*").Operations(kadm.OpAlter))
	time.Sleep(500 * time.Millisecond)

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("secret")
	md.Topics = append(md.Topics, mt)
	mresp := ctRoundTrip(t, addr, md).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata of secret: %+v", mresp.Topics)
	}
	id := mresp.Topics[0].TopicID

	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.TimeoutMillis = 10000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = id
	req.Topics = append(req.Topics, dt)
	resp := ctRoundTrip(t, addr, req).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("DeleteTopics answered %d topics", len(resp.Topics))
	}
	got := resp.Topics[0]
	if got.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DeleteTopics by id without DELETE: %v; want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(got.ErrorCode))
	}
	if got.Topic == nil || *got.Topic != "secret" {
		name := "null"
		if got.Topic != nil {
			name = *got.Topic
		}
		t.Errorf("DeleteTopics by id of a topic the principal may DESCRIBE but not DELETE answered name %s; Kafka answers \"secret\"", name)
	}
}

// Kafka's KafkaApis.handleProduceRequest checks WRITE on the request's transactional id only
// when the request holds transactional batches (RequestUtils.hasTransactionalRecords); a
// request with a transactional id and plain batches is authorized on its topics alone. Runnel
// refused every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED when the principal could
// not write the transactional id, whatever the batches.
func TestProduceChecksTransactionalIDOnlyForTransactionalBatches(t *testing.T) {
	_, addr, reg := ctBroker(t, func(c *Config) {
		c.Security.Authorizer = &security.Authorizer{AllowIfNoACL: true}
	})
	ctCreate(t, reg, "plain", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().TransactionalIDs("tid").ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpWrite))
	time.Sleep(500 * time.Millisecond)

	req := ctProduce(9, -1, ctPart{topic: "plain", p: 0, recs: ctBatch(1, 10)})
	req.TransactionID = kmsg.StringPtr("tid")
	resp := ctRoundTrip(t, addr, req).(*kmsg.ProduceResponse)
	code := resp.Topics[0].Partitions[0].ErrorCode
	if code != 0 {
		t.Errorf("Produce acks=all of a non-transactional batch with a transactional id the principal may not write: %v; Kafka appends it (the id is checked only for transactional batches)",
			kerr.ErrorForCode(code))
	}
}

// plainBroker is a broker with PLAIN on a SASL_PLAINTEXT listener and no authorizer, and user
// alice (password alice-secret) added through the plaintext listener; it returns the SASL
// listener's address; mod, if not nil, changes the config further (connections.max.reauth.ms is
// 0 unless it sets it: sessions do not expire).
func plainBroker(t *testing.T, mod func(*Config)) string {
	t.Helper()
	b, addr, _ := ctBroker(t, func(c *Config) {
		c.Security.SASLMechanisms = []string{"PLAIN", string(security.ScramSHA256)}
		if mod != nil {
			mod(c)
		}
	})
	salt := []byte("0123456789abcdef")
	salted, err := security.SaltPassword(security.ScramSHA256, "alice-secret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	up := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "alice", 1, 4096, salt, salted
	up.Upsertions = append(up.Upsertions, u)
	if r := ctRoundTrip(t, addr, up).(*kmsg.AlterUserSCRAMCredentialsResponse); r.Results[0].ErrorCode != 0 {
		t.Fatalf("AlterUserScramCredentials: %v", kerr.ErrorForCode(r.Results[0].ErrorCode))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		du := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		du.Name = "alice"
		d.Users = append(d.Users, du)
		r := ctRoundTrip(t, addr, d).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if len(r.Results) == 1 && r.Results[0].ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("user alice never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go b.ServeListener(ln, Listener{Name: "SASL_PLAINTEXT", Protocol: security.SASLPlaintext})
	return ln.Addr().String()
}

// plainLogin authenticates nc as alice with PLAIN (correlation ids 1 and 2).
func plainLogin(t *testing.T, nc net.Conn) {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if r := ctExchange(t, nc, hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("\x00alice\x00alice-secret")
	if r := ctExchange(t, nc, au, 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslAuthenticate: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// Kafka answers a SaslAuthenticate that arrives after a successful authentication (with no
// SaslHandshake before it) in KafkaApis.handleSaslAuthenticateRequest: ILLEGAL_SASL_STATE,
// "SaslAuthenticate request received after successful authentication", and the connection
// stays open and authenticated. Runnel answered ILLEGAL_SASL_STATE too but then closed the
// connection.
func TestSaslAuthenticateAfterLoginKeepsTheConnection(t *testing.T) {
	addr := plainBroker(t, nil)
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	plainLogin(t, nc)

	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("\x00alice\x00alice-secret")
	if r := ctExchange(t, nc, au, 3).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate after login: %v; want ILLEGAL_SASL_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	if _, err := nc.Write(ctEncode(md, 4)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := ctReadFrame(nc); err != nil {
		t.Errorf("Metadata after a stray SaslAuthenticate on an authenticated connection: %v; Kafka keeps the connection (KafkaApis.handleSaslAuthenticateRequest answers ILLEGAL_SASL_STATE only)", err)
	}
}

// Kafka re-authenticates a connection (KIP-368) only when its session has an expiration time
// (KafkaChannel.maybeBeginServerReauthentication returns false when
// serverSessionExpirationTimeNanos is null, i.e. connections.max.reauth.ms is 0 and the
// credential does not expire); the SaslHandshake then goes to KafkaApis.handleSaslHandshakeRequest,
// which answers ILLEGAL_SASL_STATE. Runnel started a re-authentication on any authenticated
// connection, so a client could run the server's PBKDF2 / SCRAM work again and again on one
// connection where Kafka refuses (Kafka also bounds re-authentication to once a second).
func TestNoReauthenticationWithoutSessionExpiry(t *testing.T) {
	addr := plainBroker(t, nil)
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	plainLogin(t, nc)

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	r := ctExchange(t, nc, hs, 3).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslHandshake on an authenticated connection whose session does not expire: %v; Kafka answers ILLEGAL_SASL_STATE (no re-authentication without connections.max.reauth.ms)",
			kerr.ErrorForCode(r.ErrorCode))
	}
}

// Kafka's CreateAcls checks, before the controller, only that a CLUSTER binding is named
// kafka-cluster and that the resource name is not empty (AclApis.handleCreateAcls), then
// AclControlManager.validateNewAcl the enums and that the principal holds a colon. It takes a
// host of "" (never matching a client), a principal "User:" or ":x", and a PREFIXED binding on
// the cluster resource kafka-cluster (which matches the cluster, as a prefix matches itself).
// Runnel refused all four with INVALID_REQUEST, so `kafka-acls --cluster
// --resource-pattern-type prefixed` failed on Runnel.
func TestCreateAclsTakesWhatKafkaTakes(t *testing.T) {
	addr, _ := authzBroker(t)
	type c struct {
		name string
		mod  func(*kmsg.CreateACLsRequestCreation)
	}
	cases := []c{
		{"host \"\"", func(x *kmsg.CreateACLsRequestCreation) { x.Host = "" }},
		{"principal \"User:\"", func(x *kmsg.CreateACLsRequestCreation) { x.Principal = "User:" }},
		{"principal \":x\"", func(x *kmsg.CreateACLsRequestCreation) { x.Principal = ":x" }},
		{"PREFIXED kafka-cluster", func(x *kmsg.CreateACLsRequestCreation) {
			x.ResourceType, x.ResourceName, x.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypePrefixed
			x.Operation = kmsg.ACLOperationAlter
		}},
	}
	for _, tc := range cases {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Version = 3
		x := kmsg.NewCreateACLsRequestCreation()
		x.ResourceType, x.ResourceName, x.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
		x.Principal, x.Host, x.Operation, x.PermissionType = "User:carol", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		tc.mod(&x)
		req.Creations = append(req.Creations, x)
		resp := ctRoundTrip(t, addr, req).(*kmsg.CreateACLsResponse)
		if code := resp.Results[0].ErrorCode; code != 0 {
			t.Errorf("CreateAcls with %s: %v; Kafka 4.1.1 creates the binding", tc.name, kerr.ErrorForCode(code))
		}
	}
}

// Kafka refuses an AlterPartitionReassignments without ALTER on the cluster through
// AlterPartitionReassignmentsRequest.getErrorResponse, which answers the top-level error and
// also every partition of the request with it. Runnel answered the top-level error with no
// topics, so a client reading the per-partition results (Kafka 4.1.1 answers alice's
// [aread-0] with CLUSTER_AUTHORIZATION_FAILED there) found none.
func TestAlterPartitionReassignmentsDeniedAnswersEachPartition(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Clusters().ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpAlter))
	var resp *kmsg.AlterPartitionAssignmentsResponse
	for {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = "secret"
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp = ctRoundTrip(t, addr, req).(*kmsg.AlterPartitionAssignmentsResponse)
		if resp.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the DENY ALTER ACL on the cluster never took effect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AlterPartitionReassignments without cluster ALTER answered topics %+v; Kafka answers secret-0 with CLUSTER_AUTHORIZATION_FAILED as well as the top-level error", resp.Topics)
	}
}

// With connections.max.reauth.ms set, Kafka re-authenticates a connection at most once a second
// (KafkaChannel.maybeBeginServerReauthentication: a SaslHandshake within
// MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS of the last re-authentication's start is handled as a
// plain request, and KafkaApis.handleSaslHandshakeRequest answers ILLEGAL_SASL_STATE). Kafka
// 4.1.1 answered the second of two back-to-back re-authentications so; Runnel ran any number
// of them, each a fresh PBKDF2 / SCRAM computation on the server.
func TestReauthenticationAtMostOncePerSecond(t *testing.T) {
	addr := plainBroker(t, func(c *Config) { c.Security.MaxReauth = time.Minute })
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	plainLogin(t, nc)
	corr := int32(3)
	reauth := func() int16 {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		r := ctExchange(t, nc, hs, corr).(*kmsg.SASLHandshakeResponse)
		corr++
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 2, []byte("\x00alice\x00alice-secret")
		a := ctExchange(t, nc, au, corr).(*kmsg.SASLAuthenticateResponse)
		corr++
		if a.ErrorCode != 0 {
			t.Fatalf("re-authentication: %v", kerr.ErrorForCode(a.ErrorCode))
		}
		return 0
	}
	if code := reauth(); code != 0 {
		t.Fatalf("first re-authentication: %v", kerr.ErrorForCode(code))
	}
	if code := reauth(); code != kerr.IllegalSaslState.Code {
		t.Errorf("a second re-authentication right after the first: SaslHandshake answered %v; Kafka answers ILLEGAL_SASL_STATE (at most one re-authentication a second)", kerr.ErrorForCode(code))
	}
}

// TestDeleteTopicsAuthorizationAsKafka: Kafka's ControllerApis.deleteTopics refuses a name the
// principal may not DESCRIBE before anything else, answers a describable name that does not
// exist UNKNOWN_TOPIC_OR_PARTITION before checking DELETE, and lets DELETE on the cluster
// describe and delete every topic. Runnel checked DELETE alone: a topic denied DESCRIBE but
// allowed DELETE was deleted, a missing describable topic was TOPIC_AUTHORIZATION_FAILED, and
// DELETE on the cluster deleted nothing.
func TestDeleteTopicsAuthorizationAsKafka(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	anon := func(b *kadm.ACLBuilder, allow bool, ops ...kadm.ACLOperation) *kadm.ACLBuilder {
		if allow {
			return b.Allow("User:ANONYMOUS").AllowHosts("*").Operations(ops...)
		}
		return b.Deny("User:ANONYMOUS").DenyHosts("*").Operations(ops...)
	}
	literal := func(topic string) *kadm.ACLBuilder {
		return kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral)
	}
	mustCreateACLs(t, ctx, cl, anon(kadm.NewACLs().Clusters(), true, kadm.OpAlter)) // the cluster has ACLs: no DELETE on it
	mustCreateACLs(t, ctx, cl, anon(literal("secret"), true, kadm.OpDelete))
	mustCreateACLs(t, ctx, cl, anon(literal("secret"), false, kadm.OpDescribe))
	mustCreateACLs(t, ctx, cl, anon(literal("ghost"), true, kadm.OpDescribe))
	mustCreateACLs(t, ctx, cl, anon(literal("ghost"), false, kadm.OpDelete))
	time.Sleep(500 * time.Millisecond)

	del := func(names ...string) map[string]int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TimeoutMillis = 6, 10000
		for _, n := range names {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, dt)
		}
		out := map[string]int16{}
		for _, rt := range ctRoundTrip(t, addr, req).(*kmsg.DeleteTopicsResponse).Topics {
			if rt.Topic != nil {
				out[*rt.Topic] = rt.ErrorCode
			}
		}
		return out
	}
	got := del("secret", "ghost")
	if got["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("DeleteTopics of a topic denied DESCRIBE, allowed DELETE: %s; want TOPIC_AUTHORIZATION_FAILED", errName(got["secret"]))
	}
	if got["ghost"] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("DeleteTopics of a missing topic allowed DESCRIBE, denied DELETE: %s; want UNKNOWN_TOPIC_OR_PARTITION", errName(got["ghost"]))
	}

	mustCreateACLs(t, ctx, cl, anon(kadm.NewACLs().Clusters(), true, kadm.OpDelete))
	time.Sleep(500 * time.Millisecond)
	if got := del("secret"); got["secret"] != 0 {
		t.Errorf("DeleteTopics with DELETE on the cluster: %s; want the topic deleted", errName(got["secret"]))
	}
}

// TestOffsetForLeaderEpochWithClusterAction: Kafka's handleOffsetForLeaderEpochRequest lets
// CLUSTER_ACTION on the cluster (what replicas' principals hold) look up every partition; only
// without it is DESCRIBE checked per topic. Runnel checked DESCRIBE alone.
func TestOffsetForLeaderEpochWithClusterAction(t *testing.T) {
	addr, cl := authzBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Topics("secret").ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpDescribe))
	mustCreateACLs(t, ctx, cl, kadm.NewACLs().Clusters().Allow("User:ANONYMOUS").AllowHosts("*").Operations(kadm.OpClusterAction))
	time.Sleep(500 * time.Millisecond)
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "secret"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := ctRoundTrip(t, addr, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Errorf("OffsetForLeaderEpoch with CLUSTER_ACTION, DESCRIBE denied on the topic: %s; want NONE", errName(p.ErrorCode))
	}
}
