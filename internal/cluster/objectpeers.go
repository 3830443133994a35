package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objects"
	"github.com/runnel-dev/runnel/internal/objtopic"
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

// Merges of object extents on other nodes (docs/object-topics.md §5): the active controller
// plans a merge and asks a node (object-merge) to write the merged object; it commits the
// replacement itself.

type objectMergeRequest struct {
	Ref controller.PartitionRef `json:"ref"`
	Run []objtopic.Extent       `json:"run"`
}

type objectMergeResponse struct {
	Merged *objtopic.Extent `json:"merged"`
}

// mergeTimeout bounds a merge asked of another node: a run is at most 8 MiB, read at 16 MiB/s.
const mergeTimeout = time.Minute

// ServeObjectMerges has this node write the merged objects the active controller asks of it
// with merge (the object maintainer's MergeRun).
func (n *Node) ServeObjectMerges(merge func(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error)) {
	n.rpc.handle("object-merge", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var req objectMergeRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, mergeTimeout)
		defer cancel()
		merged, err := merge(ctx, req.Ref, req.Run)
		if err != nil {
			return nil, err
		}
		return objectMergeResponse{Merged: merged}, nil
	})
}

// MergeObjectsOn asks node to write a run's merged object and returns its extent.
func (n *Node) MergeObjectsOn(ctx context.Context, node int32, ref controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error) {
	ctx, cancel := context.WithTimeout(ctx, mergeTimeout+5*time.Second)
	defer cancel()
	var resp objectMergeResponse
	if err := n.rpc.call(ctx, node, "object-merge", objectMergeRequest{ref, run}, &resp); err != nil {
		return nil, fmt.Errorf("node %d: %w", node, err)
	}
	return resp.Merged, nil
}

// MergeWorker picks the node to write a partition's merged objects: an agent if any is live
// (agents, like WarpStream's, do the object store's bulk work), else a live serve node other
// than this one; the same node for the same partition while the members stay (rendezvous
// hashing). ok is false if there is none.
func (n *Node) MergeWorker(ref controller.PartitionRef) (node int32, ok bool) {
	return n.Worker(fmt.Sprintf("%s/%d", ref.Topic, ref.Partition))
}

// Worker picks the node for the object store's bulk work of key (a partition's merges and
// compaction passes, garbage collection): an agent if any is live, else a live serve node other
// than this one, the same for the same key while the members stay (rendezvous hashing). ok is
// false if there is none.
func (n *Node) Worker(key string) (node int32, ok bool) {
	img := n.ctrl.Image()
	best, bestAgent, bestScore := int32(-1), false, uint64(0)
	for _, id := range img.NodeIDs() {
		nd := img.Nodes[id]
		if id == n.cfg.NodeID || nd.Fenced || nd.ClusterAddr == "" {
			continue
		}
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", key, id)
		score := h.Sum64()
		if best < 0 || nd.Agent && !bestAgent || nd.Agent == bestAgent && score > bestScore {
			best, bestAgent, bestScore = id, nd.Agent, score
		}
	}
	return best, best >= 0
}

// compactTimeout bounds a compaction pass asked of another node: it reads the partition's dirty
// extents (up to the key map's bound) and rewrites them, throttled to 16 MiB/s.
const compactTimeout = 10 * time.Minute

// ServeObjectCompactions has this node run the compaction passes the active controller asks of
// it with compact (the object maintainer's CompactRun, whose replacements it proposes).
func (n *Node) ServeObjectCompactions(compact func(ctx context.Context, job objects.CompactJob) (objects.CompactStats, error)) {
	n.rpc.handle("object-compact", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var job objects.CompactJob
		if err := json.Unmarshal(payload, &job); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, compactTimeout)
		defer cancel()
		return compact(ctx, job)
	})
}

// CompactObjectsOn asks node to run a compaction pass and returns what it did.
func (n *Node) CompactObjectsOn(ctx context.Context, node int32, job objects.CompactJob) (objects.CompactStats, error) {
	ctx, cancel := context.WithTimeout(ctx, compactTimeout+5*time.Second)
	defer cancel()
	var st objects.CompactStats
	if err := n.rpc.call(ctx, node, "object-compact", job, &st); err != nil {
		return objects.CompactStats{}, fmt.Errorf("node %d: %w", node, err)
	}
	return st, nil
}

// Garbage collection on another node (docs/object-topics.md §5): the active controller asks a
// node (object-gc) to run its GC passes, one after another; that node lists the store, deletes
// and proposes forgotten writers itself.

// gcTimeout bounds a garbage collection pass asked of another node: a listing of the store's
// files and a delete per garbage object.
const gcTimeout = 10 * time.Minute

type objectGCResponse struct {
	Deleted int `json:"deleted"`
}

// ServeObjectGC has this node run the garbage collection passes the active controller asks of
// it with gc (the object maintainer's GCRun).
func (n *Node) ServeObjectGC(gc func(ctx context.Context, job objects.GCJob) (int, error)) {
	n.rpc.handle("object-gc", func(ctx context.Context, _ int32, payload []byte) (any, error) {
		var job objects.GCJob
		if err := json.Unmarshal(payload, &job); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, gcTimeout)
		defer cancel()
		deleted, err := gc(ctx, job)
		if err != nil {
			return nil, err
		}
		return objectGCResponse{Deleted: deleted}, nil
	})
}

// CollectGarbageOn asks node to run a garbage collection pass and returns how many objects it
// deleted.
func (n *Node) CollectGarbageOn(ctx context.Context, node int32, job objects.GCJob) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, gcTimeout+5*time.Second)
	defer cancel()
	var resp objectGCResponse
	if err := n.rpc.call(ctx, node, "object-gc", job, &resp); err != nil {
		return 0, fmt.Errorf("node %d: %w", node, err)
	}
	return resp.Deleted, nil
}
