package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel-dev/runnel/internal/controller"
)

func init() {
	register(kmsg.AddRaftVoter, 0, 1, handleAddRaftVoter)
	register(kmsg.RemoveRaftVoter, 0, 0, handleRemoveRaftVoter)
}

// voterTimeout bounds a RemoveRaftVoter (which carries no timeout) and an AddRaftVoter without
// one, as Kafka's request.timeout.ms does.
const voterTimeout = 30 * time.Second

// handleAddRaftVoter makes a registered serve node a voter of the controller quorum (KIP-853),
// on any node (as a Kafka broker forwards it to the active controller). The new voter's
// endpoint is the cluster address it registered with: the request's listeners are not used,
// nor its directory id (Runnel's voters have none: DescribeQuorum reports zero). The answer
// comes once the change is committed and applied (as with AckWhenCommitted), or
// REQUEST_TIMED_OUT if the node has not caught up with the log within TimeoutMillis.
// docs/cluster.md §3.7.
func handleAddRaftVoter(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	timeout := voterTimeout
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	resp.ErrorCode, resp.ErrorMessage = voterChange(ctx, r, req.ClusterID, timeout, func(ctx context.Context) error {
		return r.conn.b.cl.AddVoter(ctx, req.VoterID)
	})
	return reply{resp: resp}
}

// handleRemoveRaftVoter removes a voter of the controller quorum (KIP-853). It refuses to
// remove the last voter or to leave voters without a live majority (INVALID_REQUEST).
func handleRemoveRaftVoter(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	resp.ErrorCode, resp.ErrorMessage = voterChange(ctx, r, req.ClusterID, voterTimeout, func(ctx context.Context) error {
		return r.conn.b.cl.RemoveVoter(ctx, req.VoterID)
	})
	return reply{resp: resp}
}

// voterChange runs a voter change and turns its outcome into Kafka's error code and message.
func voterChange(ctx context.Context, r *request, clusterID *string, timeout time.Duration, change func(context.Context) error) (int16, *string) {
	b := r.conn.b
	if clusterID != nil && *clusterID != b.cl.Image().ClusterID {
		return kerr.InconsistentClusterID.Code, strp("the request's cluster id is not this cluster's")
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := change(cctx)
	var code *kerr.Error
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, controller.ErrDuplicateVoter):
		code = kerr.DuplicateVoter
	case errors.Is(err, controller.ErrVoterNotFound):
		code = kerr.VoterNotFound
	case errors.Is(err, controller.ErrInvalidVoterChange):
		code = kerr.InvalidRequest
	case errors.Is(err, context.DeadlineExceeded):
		code = kerr.RequestTimedOut
	default:
		code = kerr.UnknownServerError
	}
	return code.Code, strp(err.Error())
}
