package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrPeerRefused is ReadObjectRange's error when the node answered that it could not serve the
// range (its own read failed, or its connection to the asker is too full): it is up.
var ErrPeerRefused = errors.New("cluster: the node could not serve the object range")

// codeRangeRefused answers an object-range request the node cannot serve.
const codeRangeRefused = "range-refused"

// answerQueueLimit: an object range is not answered while the answers waiting for the asker's
// connection would pass it, so that they never fill the connection's queue (64 MiB), which
// Raft and replication share and which drops what does not fit.
const answerQueueLimit = 16 << 20

// Reads of object files between nodes (docs/object-topics.md §3): a node asks a file's owner
// for a range (object-range), which the owner answers through its read cache.

type objectRangeRequest struct {
	Key string `json:"key"`
	Off uint64 `json:"off"`
	N   uint32 `json:"n"`
}

// ServeObjectRanges answers other nodes' reads of object file ranges with serve (the read
// cache's Serve).
func (n *Node) ServeObjectRanges(serve func(ctx context.Context, key string, off uint64, n uint32) ([]byte, error)) {
	n.rpc.handle("object-range", func(ctx context.Context, from int32, payload []byte) (any, error) {
		var req objectRangeRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		data, err := serve(ctx, req.Key, req.Off, req.N)
		if err != nil {
			return nil, &rpcError{codeRangeRefused, err.Error()}
		}
		if q := n.tr.Queued(from); q+len(data) > answerQueueLimit {
			return nil, &rpcError{codeRangeRefused, fmt.Sprintf("%d bytes already wait for node %d's connection", q, from)}
		}
		return rawPayload(data), nil
	})
}

// ReadObjectRange asks node for n bytes of object key at off.
func (n *Node) ReadObjectRange(ctx context.Context, node int32, key string, off uint64, size uint32) ([]byte, error) {
	var out rawPayload
	if err := n.rpc.call(ctx, node, "object-range", objectRangeRequest{key, off, size}, &out); err != nil {
		if re := (*rpcError)(nil); errors.As(err, &re) && re.Code == codeRangeRefused {
			return nil, fmt.Errorf("%w: %s", ErrPeerRefused, re.Msg)
		}
		return nil, err
	}
	if len(out) != int(size) {
		return nil, fmt.Errorf("cluster: node %d answered %d bytes of %s at %d; asked for %d", node, len(out), key, off, size)
	}
	return out, nil
}
