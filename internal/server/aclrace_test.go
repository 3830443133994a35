package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/server"
)

// TestSecurityChangesOnATrailingNode: an ACL, and a SCRAM credential, created through the
// controller's node are deleted through a node whose image trails (cut off while they were
// created, back just now), as Kafka's controller deletes from its committed state. The trailing
// node matched DeleteAcls' filters against its own image: the binding, not yet applied there,
// was not matched, nothing was deleted, the deletion answered success, and the permission stayed
// in force on every node (the fifteenth round saw 12-24 % of deletions sent to another node right
// after the creation lost this way, with no fault at all). A credential's deletion answered
// RESOURCE_NOT_FOUND.
func TestSecurityChangesOnATrailingNode(t *testing.T) {
	c := startClusterWith(t, 3, func(c *testCluster) {
		c.tune = func(id int32, cfg *server.Config) { cfg.Authorizer, cfg.SuperUsers = "acl", "User:ANONYMOUS" }
	})
	c.waitNodes(3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, trailing, others := trailingNode(t, c)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs[leader]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	on := func(node int32, req kmsg.Request) kmsg.Response { // sent to that node, not routed
		t.Helper()
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	c.servers[trailing].Node().Transport().Isolate(others...)
	create := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:bob", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, cr)
	if resp := on(leader, create).(*kmsg.CreateACLsResponse); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateACLs: %+v", resp.Results)
	}
	c.servers[trailing].Node().Transport().Heal()

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("t"), kmsg.ACLResourcePatternTypeLiteral
	f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr("User:bob"), kmsg.StringPtr("*"), kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	del.Filters = append(del.Filters, f)
	if resp := on(trailing, del).(*kmsg.DeleteACLsResponse); resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteACLs on the trailing node: %+v; want the binding matched and deleted", resp.Results)
	}
	for id := int32(1); id <= 3; id++ {
		eventually(t, "every node to hold no ACL", 10*time.Second, func() bool {
			return len(c.servers[id].Node().Image().ACLs) == 0
		})
	}
	c.servers[trailing].Node().Transport().Isolate(others...) // again: the credential
	upsert := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "sam", 2, 8192, []byte("salt-salt-salt"), make([]byte, 64)
	upsert.Upsertions = append(upsert.Upsertions, u)
	if resp := on(leader, upsert).(*kmsg.AlterUserSCRAMCredentialsResponse); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("upserting a SCRAM credential: %+v", resp.Results)
	}
	c.servers[trailing].Node().Transport().Heal()
	delCred := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = "sam", 2
	delCred.Deletions = append(delCred.Deletions, d)
	if resp := on(trailing, delCred).(*kmsg.AlterUserSCRAMCredentialsResponse); resp.Results[0].ErrorCode != 0 {
		t.Fatalf("deleting on the trailing node a credential created through another: %+v", resp.Results)
	}
}
