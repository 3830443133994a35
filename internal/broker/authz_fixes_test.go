package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
)

// addACLs adds bindings through the controller and waits until this node applied them.
func addACLs(t *testing.T, b *Broker, acls ...security.ACL) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, aerr := b.propose(ctx, &controller.Command{Op: controller.OpCreateACLs, ACLs: &controller.ACLChange{ACLs: acls}}); aerr != nil {
		t.Fatal(aerr.msg)
	}
	for len(b.cl.Image().ACLs) < len(acls) {
		if ctx.Err() != nil {
			t.Fatal("the ACLs were never applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allowACL(principal string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) security.ACL {
	return security.ACL{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

// TestDescribeClusterNeedsNoACL: Kafka's DescribeCluster needs no ACL at all
// (AuthHelper.computeDescribeClusterResponse answers the brokers, cluster id and controller to
// every authenticated client and asks for DESCRIBE on CLUSTER only to fill in
// cluster_authorized_operations, 0 when denied). The Admin client's describeCluster() uses it
// (KIP-700), so an ordinary user can list the brokers, as it can through Metadata. Runnel
// refused the whole request with CLUSTER_AUTHORIZATION_FAILED.
func TestDescribeClusterNeedsNoACL(t *testing.T) {
	b, addr, reg := ctBroker(t, func(c *Config) {
		c.Security.Authorizer = &security.Authorizer{} // strict: no allow.everyone.if.no.acl.found
	})
	ctCreate(t, reg, "orders", 1, nil)
	// The anonymous client may read one topic; nothing on the cluster.
	addACLs(t, b, allowACL("User:ANONYMOUS", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders"))

	nc := ctDial(t, addr)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 0
	req.IncludeClusterAuthorizedOperations = true
	resp := ctExchange(t, nc, req, 1).(*kmsg.DescribeClusterResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("DescribeCluster answered %v to a principal without DESCRIBE on the cluster; Kafka answers the brokers (and cluster_authorized_operations 0)", kerr.ErrorForCode(resp.ErrorCode))
	}
	if len(resp.Brokers) == 0 {
		t.Fatalf("DescribeCluster listed no broker")
	}
	if resp.ClusterAuthorizedOperations != 0 {
		t.Errorf("cluster_authorized_operations = %d; Kafka answers 0 without DESCRIBE on the cluster", resp.ClusterAuthorizedOperations)
	}
}

// TestIdempotentProducerWithAllowEveryoneIfNoACL: Kafka's InitProducerId without a
// transactional id (an idempotent producer, the default of every modern client) is allowed
// with IDEMPOTENT_WRITE on the cluster or, failing that, authorizeByResourceType(WRITE, TOPIC)
// (KafkaApis.handleInitProducerIdRequest, KIP-679), which with allow.everyone.if.no.acl.found
// answers authorize(WRITE, TOPIC "*"): ALLOWED unless bindings cover that name. So a principal
// that may write (by the no-ACL rule) to topics without bindings may open an idempotent
// producer, although other topics and the cluster have bindings. Runnel ignored the no-ACL
// rule as soon as any topic binding existed, and the producer could not write.
func TestIdempotentProducerWithAllowEveryoneIfNoACL(t *testing.T) {
	b, addr, reg := ctBroker(t, func(c *Config) {
		c.Security.Authorizer = &security.Authorizer{AllowIfNoACL: true}
	})
	ctCreate(t, reg, "free", 1, nil)   // no binding: anyone may write (no-ACL rule)
	ctCreate(t, reg, "orders", 1, nil) // bound to admin only
	addACLs(t, b,
		allowACL("User:admin", kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, security.ClusterResource),
		allowACL("User:admin", kmsg.ACLOperationAll, kmsg.ACLResourceTypeTopic, "orders"))

	// The anonymous principal may write to "free" (no binding covers it) ...
	if !b.cfg.Security.Authorizer.Authorize(b.aclIndex(), anonymous, "127.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "free") {
		t.Fatal("setup: WRITE on an unbound topic should be allowed by allow.everyone.if.no.acl.found")
	}
	// ... and Kafka's authorizeByResourceType(WRITE, TOPIC) allows it through the "hardcode" check.
	if !b.cfg.Security.Authorizer.AuthorizeAnyTopic(b.aclIndex(), anonymous, "127.0.0.1", kmsg.ACLOperationWrite) {
		t.Errorf("AuthorizeAnyTopic(WRITE) = false with allow.everyone.if.no.acl.found and no binding on most topics; Kafka's authorizeByResourceType answers ALLOWED")
	}

	nc := ctDial(t, addr)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := ctExchange(t, nc, req, 1).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Errorf("idempotent InitProducerId answered %v; Kafka allows it (the principal may write to topics without bindings)", kerr.ErrorForCode(resp.ErrorCode))
	}

	// End to end: franz-go's default (idempotent) producer cannot write to "free".
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("free"), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("an idempotent produce to a topic the principal may write to failed: %v", err)
	}
}

// TestElectLeadersV0Denied: ElectLeaders v0 has no top-level error code, so a principal without
// ALTER on the cluster must be told on every partition it named, as Kafka does. It used to get
// an empty answer, which reads as "nothing to elect".
func TestElectLeadersV0Denied(t *testing.T) {
	_, addr, reg := ctBroker(t, func(c *Config) {
		c.Security.Authorizer = &security.Authorizer{}
	})
	ctCreate(t, reg, "orders", 2, nil)
	nc := ctDial(t, addr)
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 0
	req.Topics = append(req.Topics, kmsg.ElectLeadersRequestTopic{Topic: "orders", Partitions: []int32{0, 1}})
	resp := ctExchange(t, nc, req, 1).(*kmsg.ElectLeadersResponse)
	n := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			n++
			if p.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
				t.Errorf("%s-%d: %v; want CLUSTER_AUTHORIZATION_FAILED", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	if n != 2 {
		t.Errorf("ElectLeaders v0 denied answered %d partitions; want the 2 named, each CLUSTER_AUTHORIZATION_FAILED", n)
	}
}
