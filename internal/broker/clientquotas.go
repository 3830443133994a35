package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (KIP-546) are not enforced and cannot be set (AlterClientQuotas is not served),
// so DescribeClientQuotas answers that there are none. kafka-configs --describe --entity-type
// users asks for them next to the SCRAM credentials.

func init() { register(kmsg.DescribeClientQuotas, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(_ context.Context, r *request) reply {
	req := r.req.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !r.allowedCluster(kmsg.ACLOperationDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply{resp: resp}
	}
	seen := map[string]bool{}
	for _, c := range req.Components {
		switch {
		case c.EntityType != "user" && c.EntityType != "client-id" && c.EntityType != "ip":
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp("Unknown entity type "+c.EntityType)
		case seen[c.EntityType]:
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp("Duplicate "+c.EntityType+" filter component")
		case c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil:
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp("An exact match needs a name")
		}
		if resp.ErrorCode != 0 {
			return reply{resp: resp}
		}
		seen[c.EntityType] = true
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // none is configured
	return reply{resp: resp}
}
