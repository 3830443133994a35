package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/security"
)

// TestTwoPhaseCommitACLsNeedLevel13: a create-acls binding of TWO_PHASE_COMMIT (15) is applied
// from command level 13 only: older versions drop it as invalid, and every node must apply
// the same entry alike.
func TestTwoPhaseCommitACLsNeedLevel13(t *testing.T) {
	a := security.ACL{ResourceType: kmsg.ACLResourceTypeTransactionalId, ResourceName: "tx", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:u", Host: "*", Operation: security.ACLOperationTwoPhaseCommit, Permission: kmsg.ACLPermissionTypeAllow}
	for _, c := range []struct {
		level int
		want  int
	}{{LevelTwoPhaseCommitACLs - 1, 0}, {LevelTwoPhaseCommitACLs, 1}} {
		im := cluster3(t)
		im.Level = c.level
		Apply(im, im.Index+1, &Command{Op: OpCreateACLs, ACLs: &ACLChange{ACLs: []security.ACL{a}}})
		if len(im.ACLs) != c.want {
			t.Errorf("level %d: %d bindings after create-acls of TWO_PHASE_COMMIT; want %d", c.level, len(im.ACLs), c.want)
		}
	}
}
