package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

func init() {
	register(kmsg.UnregisterBroker, 0, 0, handleUnregisterBroker)
}

// handleUnregisterBroker forgets a node taken out of service (KIP-631; kafka-cluster.sh
// unregister), on any node, as a Kafka broker forwards it to the active controller. Runnel
// refuses what Kafka would leave to the operator: a node still live, still holding partition
// replicas (reassign them first), or a voter (remove it first), all as INVALID_REQUEST with
// the reason, as is a cluster where a node of an older version may apply the controller's log;
// an id not registered is BROKER_ID_NOT_REGISTERED.
// docs/cluster.md §3.8.
func handleUnregisterBroker(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	cctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	err := r.conn.b.cl.UnregisterNode(cctx, req.BrokerID)
	if err == nil {
		return reply{resp: resp}
	}
	code := kerr.UnknownServerError
	switch {
	case errors.Is(err, controller.ErrUnknownNode):
		code = kerr.BrokerIDNotRegistered
	case errors.Is(err, controller.ErrNodeLive), errors.Is(err, controller.ErrNodeHostsReplicas), errors.Is(err, controller.ErrNodeIsVoter),
		errors.Is(err, controller.ErrLevelPending): // not UNSUPPORTED_VERSION: kafka-cluster takes that for "no such API" and exits 0
		code = kerr.InvalidRequest
	case errors.Is(err, context.DeadlineExceeded):
		code = kerr.RequestTimedOut
	}
	resp.ErrorCode, resp.ErrorMessage = code.Code, strp(err.Error())
	return reply{resp: resp}
}
