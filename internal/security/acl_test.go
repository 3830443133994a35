package security

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func allow(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func deny(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation) ACL {
	a := allow(rt, pt, name, principal, host, op)
	a.Permission = kmsg.ACLPermissionTypeDeny
	return a
}

// TestAuthorizerRules checks Kafka's StandardAuthorizer rules one by one.
func TestAuthorizerRules(t *testing.T) {
	const (
		topic, group, cluster = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster
		lit, pre              = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		read, write, describe = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe
	)
	ix := NewACLIndex([]ACL{
		allow(topic, lit, "orders", "User:alice", "*", read),
		allow(topic, pre, "pay-", "User:bob", "10.0.0.1", write),
		deny(topic, lit, "pay-secret", "User:bob", "*", write),
		allow(topic, lit, "*", "User:*", "*", describe),
		deny(topic, lit, "hidden", "User:*", "*", describe),
		allow(group, pre, "", "User:carol", "*", kmsg.ACLOperationAll), // prefix "" covers every group
		allow(topic, lit, "configs", "User:dave", "*", kmsg.ACLOperationAlterConfigs),
		deny(topic, lit, "orders", "User:erin", "*", kmsg.ACLOperationAll),
		allow(topic, lit, "orders", "User:erin", "*", read),
		allow(cluster, lit, ClusterResource, "User:ops", "*", kmsg.ACLOperationAlter),
	})
	z := &Authorizer{SuperUsers: map[string]bool{"User:root": true}}
	for _, c := range []struct {
		principal, host string
		op              kmsg.ACLOperation
		rt              kmsg.ACLResourceType
		name            string
		want            bool
	}{
		{"User:alice", "1.2.3.4", read, topic, "orders", true},
		{"User:alice", "1.2.3.4", write, topic, "orders", false},                           // not granted
		{"User:alice", "1.2.3.4", describe, topic, "orders", true},                         // READ implies DESCRIBE, and the wildcard
		{"User:alice", "1.2.3.4", read, topic, "orders2", false},                           // literal is exact
		{"User:bob", "10.0.0.1", write, topic, "pay-eu", true},                             // prefixed
		{"User:bob", "10.0.0.2", write, topic, "pay-eu", false},                            // other host
		{"User:bob", "10.0.0.1", write, topic, "pay-secret", false},                        // deny wins
		{"User:bob", "10.0.0.1", describe, topic, "pay-secret", true},                      // a WRITE deny does not deny DESCRIBE
		{"User:zed", "1.1.1.1", describe, topic, "anything", true},                         // User:* and the * resource
		{"User:zed", "1.1.1.1", describe, topic, "hidden", false},                          // deny for everyone
		{"User:carol", "1.1.1.1", kmsg.ACLOperationDelete, group, "any", true},             // ALL
		{"User:dave", "1.1.1.1", kmsg.ACLOperationDescribeConfigs, topic, "configs", true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{"User:dave", "1.1.1.1", kmsg.ACLOperationAlter, topic, "configs", false},
		{"User:erin", "1.1.1.1", read, topic, "orders", false}, // DENY ALL beats ALLOW READ
		{"User:ops", "1.1.1.1", kmsg.ACLOperationAlter, cluster, ClusterResource, true},
		{"User:ops", "1.1.1.1", describe, cluster, ClusterResource, true}, // ALTER implies DESCRIBE
		{"User:alice", "1.1.1.1", describe, cluster, ClusterResource, false},
		{"User:root", "1.1.1.1", kmsg.ACLOperationDelete, topic, "hidden", true},          // super user
		{"User:alice", "1.1.1.1", read, kmsg.ACLResourceTypeTransactionalId, "tx", false}, // no ACL at all: denied
	} {
		if got := z.Authorize(ix, c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s@%s %s %s:%s = %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}
	open := &Authorizer{AllowIfNoACL: true}
	if !open.Authorize(ix, "User:x", "h", read, kmsg.ACLResourceTypeTransactionalId, "tx") {
		t.Error("allow.everyone.if.no.acl.found: a resource no ACL names is denied")
	}
	if open.Authorize(ix, "User:x", "h", read, topic, "orders") {
		t.Error("allow.everyone.if.no.acl.found allowed a resource that ACLs name")
	}
	if !z.AuthorizeAnyTopic(ix, "User:bob", "10.0.0.1", write) || z.AuthorizeAnyTopic(ix, "User:alice", "1.1.1.1", write) {
		t.Error("AuthorizeAnyTopic")
	}
	ix2 := NewACLIndex([]ACL{allow(topic, pre, "a", "User:bob", "*", write), deny(topic, lit, "*", "User:bob", "*", write)})
	if z.AuthorizeAnyTopic(ix2, "User:bob", "h", write) {
		t.Error("AuthorizeAnyTopic ignored a DENY on every topic")
	}
}

func TestACLValidateAndFilters(t *testing.T) {
	if f := (Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: ACLOperationTwoPhaseCommit,
		Permission: kmsg.ACLPermissionTypeAny}); f.Validate() != nil {
		t.Errorf("a filter of TWO_PHASE_COMMIT refused: %v", f.Validate())
	}
	if op, err := ParseOperation("TwoPhaseCommit"); err != nil || op != ACLOperationTwoPhaseCommit || OperationName(op) != "TWO_PHASE_COMMIT" {
		t.Errorf("ParseOperation(TwoPhaseCommit) = %v, %v", op, err)
	}
	good := allow(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, "t", "User:a", "*", kmsg.ACLOperationRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*ACL){
		func(a *ACL) { a.ResourceType = kmsg.ACLResourceTypeAny },
		func(a *ACL) { a.PatternType = kmsg.ACLResourcePatternTypeMatch },
		func(a *ACL) { a.ResourceName = "" },
		func(a *ACL) { a.Principal = "alice" },
		func(a *ACL) { a.Operation = kmsg.ACLOperationAny },
		func(a *ACL) { a.Permission = kmsg.ACLPermissionTypeAny },
		func(a *ACL) { a.ResourceType, a.ResourceName = kmsg.ACLResourceTypeCluster, "other" },
		func(a *ACL) { a.Operation = ACLOperationTwoPhaseCommit + 1 },
	} {
		a := good
		bad(&a)
		if a.Validate() == nil {
			t.Errorf("%v accepted", a)
		}
	}
	// What Kafka's AclControlManager.validateNewAcl takes: any host (an empty one matches no
	// client), a principal with a colon anywhere, a prefixed binding on the cluster resource.
	for _, ok := range []func(*ACL){
		func(a *ACL) { a.Host = "" },
		func(a *ACL) { a.Principal = "User:" },
		func(a *ACL) { a.Principal = ":x" },
		func(a *ACL) {
			a.ResourceType, a.PatternType, a.ResourceName = kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypePrefixed, ClusterResource
		},
		// Kafka 4's TWO_PHASE_COMMIT (KIP-939), as kafka-acls --operation TwoPhaseCommit sends it.
		func(a *ACL) {
			a.ResourceType, a.Operation = kmsg.ACLResourceTypeTransactionalId, ACLOperationTwoPhaseCommit
		},
	} {
		a := good
		ok(&a)
		if err := a.Validate(); err != nil {
			t.Errorf("%v refused: %v", a, err)
		}
	}
	pre := allow(kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "pay-", "User:a", "*", kmsg.ACLOperationRead)
	name := "pay-eu"
	match := Filter{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: &name, PatternType: kmsg.ACLResourcePatternTypeMatch,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if !match.Matches(pre) || match.Matches(good) {
		t.Error("MATCH filter")
	}
	exact := match
	exact.PatternType = kmsg.ACLResourcePatternTypeLiteral
	if exact.Matches(pre) {
		t.Error("a LITERAL filter matched a PREFIXED binding")
	}
	anyF := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if !anyF.Matches(pre) || !anyF.Matches(good) {
		t.Error("ANY filter")
	}
}
