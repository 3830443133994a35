package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
)

// ACL administration (KIP-140, KIP-290 prefixed patterns): bindings live in the cluster
// metadata, so a change reaches every node's authorizer once its controller entry is applied
// (docs/security.md §4).

func init() {
	register(kmsg.DescribeACLs, 0, 3, handleDescribeACLs)
	register(kmsg.CreateACLs, 0, 3, handleCreateACLs)
	register(kmsg.DeleteACLs, 0, 3, handleDeleteACLs)
}

// aclsEnabled reports whether ACLs can be managed: Kafka answers SECURITY_DISABLED without an
// authorizer.
func (b *Broker) aclsEnabled() bool { return b.cfg.Security.Authorizer != nil }

// aclFilter is a DescribeAcls or DeleteAcls filter (v0 knows only literal patterns).
func aclFilter(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) security.Filter {
	if version == 0 {
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	return security.Filter{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// aclAlterRefused is why CreateAcls or DeleteAcls may not change bindings (code 0: they may).
func (r *request) aclAlterRefused() (int16, string) {
	switch {
	case !r.conn.b.aclsEnabled():
		return kerr.SecurityDisabled.Code, "No authorizer is configured (--authorizer acl)."
	case !r.allowedCluster(kmsg.ACLOperationAlter):
		return kerr.ClusterAuthorizationFailed.Code, ""
	}
	return 0, ""
}

func handleDescribeACLs(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	b := r.conn.b
	f := aclFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	switch {
	case !b.aclsEnabled():
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strp("No authorizer is configured (--authorizer acl).")
		return reply{resp: resp}
	case !r.allowedCluster(kmsg.ACLOperationDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
		return reply{resp: resp}
	}
	for _, a := range b.cl.Image().ACLs { // sorted by resource: group consecutive bindings
		if !f.Matches(a) || req.Version == 0 && a.PatternType != kmsg.ACLResourcePatternTypeLiteral {
			continue
		}
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != a.ResourceType || resp.Resources[n-1].ResourceName != a.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != a.PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
			resp.Resources = append(resp.Resources, res)
			n++
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, acl)
	}
	return reply{resp: resp}
}

func handleCreateACLs(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	b := r.conn.b
	if code, msg := r.aclAlterRefused(); code != 0 {
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, strp(msg)
			resp.Results = append(resp.Results, res)
		}
		return reply{resp: resp}
	}
	var valid []security.ACL
	errs := make([]error, len(req.Creations))
	for i, c := range req.Creations {
		a := security.ACL{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if req.Version == 0 {
			a.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if errs[i] = a.Validate(); errs[i] == nil && a.Operation == security.ACLOperationTwoPhaseCommit &&
			b.cl.Image().Level < controller.LevelTwoPhaseCommitACLs {
			// Until every node applies such bindings (a rolling upgrade), as before: refused.
			errs[i] = fmt.Errorf("invalid operation %d", a.Operation)
		}
		if errs[i] == nil {
			valid = append(valid, a)
		}
	}
	var aerr *adminError
	if len(valid) > 0 {
		_, aerr = b.propose(ctx, &controller.Command{Op: controller.OpCreateACLs, ACLs: &controller.ACLChange{ACLs: valid}})
	}
	for i := range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		switch {
		case errs[i] != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, strp(errs[i].Error())
		case aerr != nil:
			res.ErrorCode, res.ErrorMessage = aerr.code.Code, strp(aerr.msg)
		}
		resp.Results = append(resp.Results, res)
	}
	if aerr == nil && len(valid) > 0 {
		b.logger.Info("broker: ACLs created", "count", len(valid), "by", r.conn.principal)
	}
	return reply{resp: resp}
}

func handleDeleteACLs(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	b := r.conn.b
	if code, msg := r.aclAlterRefused(); code != 0 {
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, strp(msg)
			resp.Results = append(resp.Results, res)
		}
		return reply{resp: resp}
	}
	// The filters match this node's image, which must hold every binding committed before the
	// request: one created through another node a moment ago was otherwise not matched here,
	// not deleted, and the deletion answered success (Kafka's controller matches its own
	// committed state).
	b.adminBarrier(ctx)
	acls := b.cl.Image().ACLs
	matched := make([][]security.ACL, len(req.Filters))
	errs := make([]error, len(req.Filters))
	var doomed []security.ACL
	for i, rf := range req.Filters {
		f := aclFilter(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		if errs[i] = f.Validate(); errs[i] != nil {
			continue
		}
		for _, a := range acls {
			if f.Matches(a) {
				matched[i] = append(matched[i], a)
				if !slices.Contains(doomed, a) {
					doomed = append(doomed, a)
				}
			}
		}
	}
	var aerr *adminError
	if len(doomed) > 0 {
		_, aerr = b.propose(ctx, &controller.Command{Op: controller.OpDeleteACLs, ACLs: &controller.ACLChange{ACLs: doomed}})
	}
	for i := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case errs[i] != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, strp(errs[i].Error())
		case aerr != nil:
			res.ErrorCode, res.ErrorMessage = aerr.code.Code, strp(aerr.msg)
		default:
			for _, a := range matched[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = a.Principal, a.Host, a.Operation, a.Permission
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	if aerr == nil && len(doomed) > 0 {
		b.logger.Info("broker: ACLs deleted", "count", len(doomed), "by", r.conn.principal)
	}
	return reply{resp: resp}
}
