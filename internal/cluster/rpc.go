package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/runnel-dev/runnel/internal/transport"
)

// Transport frame kinds of the cluster's own messages (replication uses 10-13).
const (
	kindRaft        transport.Kind = 1
	kindRPCRequest  transport.Kind = 2
	kindRPCResponse transport.Kind = 3
	kindRaftChunk   transport.Kind = 4 // a chunk of a controller snapshot message (internal/raftlog/chunks.go)
)

// RPCs between nodes ride the transport as two frames:
//
//	request   u64 id | string method | bytes payload (JSON)
//	response  u64 id | string error code | string error message | bytes payload (JSON, or
//	          the bytes themselves for a handler that returns rawPayload)
//
// The caller matches a response to its request by id; a request whose response never comes
// ends with the caller's context, or at once with an error when the connection to the node
// breaks or cannot be made (its process died: the caller need not wait out its deadline).
// Handlers run on their own goroutine.

// rpcError is an error that crossed the network: a code the caller can act on, and a message.
type rpcError struct {
	Code string
	Msg  string
}

func (e *rpcError) Error() string { return e.Msg }

// Error codes of the RPCs.
const (
	codeNotController = "not-controller" // Msg names the active controller's node id, or "-1"
	codeUnknownMethod = "unknown-method"
	codeFailed        = "failed"
	codeLostData      = "lost-data" // the register of a node on an empty data dir whose id the cluster knows
	codeLevel         = "level"     // the register of a node whose version is older than the cluster's command level
	codeNotVoter      = "not-voter" // the register of a node on an empty data dir whose flags make it a voter the cluster does not have
)

type rpcHandler func(ctx context.Context, from int32, payload []byte) (any, error)

// rawPayload is a handler's answer sent as it is, not as JSON (bulk bytes); the caller passes
// a *rawPayload to receive it.
type rawPayload []byte

// encodeAnswer is a handler's answer on the wire.
func encodeAnswer(v any) ([]byte, error) {
	if b, ok := v.(rawPayload); ok {
		return b, nil
	}
	return json.Marshal(v)
}

type rpcLayer struct {
	self int32
	send func(to int32, kind transport.Kind, body []byte)

	mu       sync.Mutex
	next     uint64
	pending  map[uint64]pendingCall
	handlers map[string]rpcHandler
	ctx      context.Context // ends when the node closes: cancels running handlers
}

type pendingCall struct {
	to int32
	ch chan rpcResult
}

type rpcResult struct {
	err     error
	payload []byte
}

func newRPC(ctx context.Context, self int32, send func(to int32, kind transport.Kind, body []byte)) *rpcLayer {
	return &rpcLayer{self: self, send: send, pending: map[uint64]pendingCall{}, handlers: map[string]rpcHandler{}, ctx: ctx}
}

func (r *rpcLayer) handle(method string, h rpcHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[method] = h
}

func (r *rpcLayer) handler(method string) (rpcHandler, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.handlers[method]
	return h, ok
}

// call sends a request to node to and decodes the answer into resp. Calling this node runs the
// handler directly.
func (r *rpcLayer) call(ctx context.Context, to int32, method string, req, resp any) error {
	payload, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var out []byte
	if to == r.self {
		h, ok := r.handler(method)
		if !ok {
			return &rpcError{codeUnknownMethod, "unknown method " + method}
		}
		v, err := h(ctx, r.self, payload)
		if err != nil && r.ctx.Err() != nil {
			// This node is closing: no answer, as serve gives none (callController asks on).
			return fmt.Errorf("cluster: %s to node %d: the node is closing: %w", method, to, r.ctx.Err())
		}
		if err != nil && ctx.Err() != nil {
			// The caller's time ran out, as when a remote node does not answer in time: no
			// answer, not the handler's failure (callController tries again).
			return fmt.Errorf("cluster: %s to node %d: %w", method, to, ctx.Err())
		}
		if err != nil {
			return toRPCError(err)
		}
		if out, err = encodeAnswer(v); err != nil {
			return err
		}
	} else {
		r.mu.Lock()
		r.next++
		id := r.next
		ch := make(chan rpcResult, 1)
		r.pending[id] = pendingCall{to: to, ch: ch}
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			delete(r.pending, id)
			r.mu.Unlock()
		}()
		body := kbin.AppendInt64(nil, int64(id))
		body = kbin.AppendString(body, method)
		body = kbin.AppendBytes(body, payload)
		r.send(to, kindRPCRequest, body)
		select {
		case res := <-ch:
			if res.err != nil {
				return res.err
			}
			out = res.payload
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s to node %d: %w", method, to, ctx.Err())
		}
	}
	if raw, ok := resp.(*rawPayload); ok {
		*raw = out
		return nil
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(out, resp)
}

func toRPCError(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	return &rpcError{codeFailed, err.Error()}
}

// receive takes an RPC frame from the transport.
func (r *rpcLayer) receive(from int32, kind transport.Kind, body []byte) {
	rd := kbin.Reader{Src: body}
	switch kind {
	case kindRPCRequest:
		id, method, payload := rd.Int64(), rd.String(), rd.Bytes()
		if rd.Complete() != nil {
			return
		}
		payload = append([]byte(nil), payload...)
		go r.serve(from, uint64(id), method, payload)
	case kindRPCResponse:
		id, code, msg, payload := rd.Int64(), rd.String(), rd.String(), rd.Bytes()
		if rd.Complete() != nil {
			return
		}
		res := rpcResult{payload: append([]byte(nil), payload...)}
		if code != "" {
			res.err = &rpcError{code, msg}
		}
		r.mu.Lock()
		pc, ok := r.pending[uint64(id)]
		r.mu.Unlock()
		if ok {
			select {
			case pc.ch <- res:
			default:
			}
		}
	}
}

// peerDown fails the calls waiting for node's answers: the connection to it broke or could not
// be made, so a request may be lost (a lost answer is not told apart; callers retry).
func (r *rpcLayer) peerDown(node int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pc := range r.pending {
		if pc.to == node {
			select {
			case pc.ch <- rpcResult{err: fmt.Errorf("cluster: the connection to node %d broke", node)}:
			default:
			}
		}
	}
}

func (r *rpcLayer) serve(from int32, id uint64, method string, payload []byte) {
	var code, msg string
	var out []byte
	h, ok := r.handler(method)
	if !ok {
		code, msg = codeUnknownMethod, "unknown method "+method
	} else if v, err := h(r.ctx, from, payload); err != nil {
		if r.ctx.Err() != nil {
			// This node is closing (a proposal waiting on its controller ends so): no answer, as
			// from a node that is gone, so the caller asks the next controller after its attempt's
			// timeout (a proposal with a request id, Node.Propose's, is then answered as the
			// first; a retried registration makes a new incarnation).
			return
		}
		re := toRPCError(err)
		code, msg = re.Code, re.Msg
	} else if out, err = encodeAnswer(v); err != nil {
		code, msg = codeFailed, err.Error()
	}
	body := kbin.AppendInt64(nil, int64(id))
	body = kbin.AppendString(body, code)
	body = kbin.AppendString(body, msg)
	body = kbin.AppendBytes(body, out)
	r.send(from, kindRPCResponse, body)
}
