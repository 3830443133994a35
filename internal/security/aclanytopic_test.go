package security

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's authorizeByResourceType (what an idempotent producer's InitProducerId asks when it
// has no IDEMPOTENT_WRITE on the cluster) does not count an ALLOW that a DENY dominates: a
// literal ALLOW cancelled by a literal DENY of the same name, or by a PREFIXED DENY of one of
// its prefixes. AuthorizeAnyTopic counted every ALLOW and only looked at the "*" DENYs, so a
// principal that may write no topic at all was told it may write some.
func TestAuthorizeAnyTopicHonoursDominatingDeny(t *testing.T) {
	z := &Authorizer{}
	alice := "User:alice"
	bind := func(name string, pt kmsg.ACLResourcePatternType, perm kmsg.ACLPermissionType) ACL {
		return ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: name, PatternType: pt, Principal: alice,
			Host: "*", Operation: kmsg.ACLOperationWrite, Permission: perm}
	}
	for name, acls := range map[string][]ACL{
		"literal allow, literal deny":  {bind("orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLPermissionTypeAllow), bind("orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLPermissionTypeDeny)},
		"literal allow, prefixed deny": {bind("orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLPermissionTypeAllow), bind("ord", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLPermissionTypeDeny)},
	} {
		ix := NewACLIndex(acls)
		if z.Authorize(ix, alice, "10.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, "orders") {
			t.Fatalf("%s: WRITE on orders allowed", name)
		}
		if z.AuthorizeAnyTopic(ix, alice, "10.0.0.1", kmsg.ACLOperationWrite) {
			t.Errorf("%s: AuthorizeAnyTopic(WRITE) = true, though alice may write no topic (Kafka: DENIED)", name)
		}
	}
}
