package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID, 0, 5, handleInitProducerID) }

// handleInitProducerID gives an idempotent producer a new producer id at epoch 0. As in Kafka,
// a request without a transactional id always gets a fresh id, even when it names its current
// id and epoch (KIP-360): an idempotent producer bumps its epoch itself and asks for a new id
// only when the epoch would overflow. A transactional id goes to its coordinator.
func handleInitProducerID(ctx context.Context, r *request) reply {
	req := r.req.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
		// As Kafka's handleInitProducerIdRequest: an id and an epoch come together (KIP-360),
		// or neither does.
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply{resp: resp}
	}
	if req.TransactionalID != nil && *req.TransactionalID == "" {
		// As Kafka's TransactionCoordinator: only a null id means an idempotent producer.
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply{resp: resp}
	}
	if req.TransactionalID != nil {
		return r.conn.b.initTransactional(ctx, req, resp)
	}
	id, err := r.conn.b.cfg.ProducerIDs.Next()
	if err != nil {
		r.conn.b.logger.Error("allocating a producer id", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return reply{resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return reply{resp: resp}
}
