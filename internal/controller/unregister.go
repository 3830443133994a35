package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// OpUnregisterNode forgets a node taken out of service: Kafka's UnregisterBroker (KIP-631).
// docs/cluster.md §3.8.
const OpUnregisterNode = "unregister-node"

// UnregisterNode names the node to forget and the incarnation the active controller saw
// fenced. Below LevelUnregisterNode, Others are the other registered nodes, with their
// incarnations, that the active controller knew to apply this command: it is applied only if
// they are exactly the image's other nodes then, as for FinalizeLevel. (A version before
// LevelUnregisterNode ignores the op; the command then reaches no node that would: the node
// it forgets is stopped, and no longer a Raft learner once forgotten.) This is how a node
// that never returns stops holding the command level back: unregistered, it is no longer
// counted.
type UnregisterNode struct {
	Node        int32            `json:"node"`
	Incarnation uint64           `json:"incarnation"`
	Others      map[int32]uint64 `json:"others,omitempty"`
}

// Why an unregister-node is refused.
var (
	// ErrNodeLive: the node is registered and heartbeating (or registered again since).
	ErrNodeLive = errors.New("controller: the node is live")
	// ErrNodeHostsReplicas: partitions still have a replica on the node.
	ErrNodeHostsReplicas = errors.New("controller: the node still holds partition replicas")
	// ErrNodeIsVoter: the node is a voter of the controller quorum.
	ErrNodeIsVoter = errors.New("controller: the node is a controller voter")
	// ErrLevelPending: a node that may apply the log is not known to apply the command yet.
	ErrLevelPending = errors.New("controller: not every node runs a version that applies this")
	// ErrNodesChanged: a node registered (or re-registered) after the command was made.
	ErrNodesChanged = errors.New("controller: the registered nodes changed since the command was made")
)

// UnregisterNode makes the command that forgets node id, or says why it cannot be: the node
// must be registered, fenced (stopped: its session expired), and hold no partition replica
// (a replica counts in its partition's quorums, and an empty node could come back under the
// same id once the id is forgotten); below LevelUnregisterNode every other node that applies
// the controller's log must be known to apply the command. req names the request (the same
// in every attempt): an attempt whose first one was applied gets the first one's answer. The
// caller refuses a controller voter, which the image does not know.
func (a *Active) UnregisterNode(id int32, req *Request) (*Command, error) {
	cmd := &Command{Op: OpUnregisterNode, Req: req, UnregisterNode: &UnregisterNode{Node: id}}
	if _, done := a.img.appliedRequest(req); done {
		return cmd, nil
	}
	n := a.img.Nodes[id]
	if n == nil {
		return nil, fmt.Errorf("%w %d: it is not registered", ErrUnknownNode, id)
	}
	cmd.UnregisterNode.Incarnation = n.Incarnation
	if err := mayUnregister(a.img, id, n); err != nil {
		return nil, err
	}
	if a.img.Level >= LevelUnregisterNode {
		return cmd, nil
	}
	c := a.census(id)
	if c.unregistered >= 0 {
		// A learner whose removal is pending (an agent expired), a voter not started yet:
		// soon done, or registered; asked again.
		return nil, fmt.Errorf("%w: controller member %d is not registered", ErrNodesChanged, c.unregistered)
	}
	if c.lowest < LevelUnregisterNode {
		return nil, fmt.Errorf("%w: node %d applies command level %d, unregistering a node needs %d (run this version or a newer one on it)",
			ErrLevelPending, c.lowNode, c.lowest, LevelUnregisterNode)
	}
	cmd.UnregisterNode.Others = c.nodes
	return cmd, nil
}

// mayUnregister refuses to forget a node that is live or holds a replica.
func mayUnregister(im *Image, id int32, n *Node) error {
	if !n.Fenced {
		return fmt.Errorf("%w: node %d is registered and heartbeating; stop it first (it is fenced once its session expires)", ErrNodeLive, id)
	}
	var held []string
	count := 0
	for _, name := range im.TopicNames() {
		for i, p := range im.Topics[name].Partitions {
			if slices.Contains(p.Replicas, id) || slices.Contains(p.Target, id) { // Hosts, without its copy
				if count++; count <= 3 {
					held = append(held, fmt.Sprintf("%s-%d", name, i))
				}
			}
		}
	}
	if count > 0 {
		more := ""
		if count > len(held) {
			more = fmt.Sprintf(" and %d more", count-len(held))
		}
		return fmt.Errorf("%w: node %d holds replicas of %d partitions (%s%s); reassign them to other nodes first",
			ErrNodeHostsReplicas, id, count, strings.Join(held, ", "), more)
	}
	return nil
}

func applyUnregisterNode(im *Image, u *UnregisterNode) error {
	n := im.Nodes[u.Node]
	if n == nil {
		return fmt.Errorf("%w %d: it is not registered", ErrUnknownNode, u.Node)
	}
	if n.Incarnation != u.Incarnation {
		return fmt.Errorf("%w: node %d registered again", ErrNodeLive, u.Node)
	}
	if err := mayUnregister(im, u.Node, n); err != nil {
		return err
	}
	if im.Level < LevelUnregisterNode {
		if len(u.Others) != len(im.Nodes)-1 {
			return ErrNodesChanged
		}
		for id, o := range im.Nodes {
			if inc, ok := u.Others[id]; id != u.Node && (!ok || inc != o.Incarnation) {
				return ErrNodesChanged
			}
		}
	}
	delete(im.Nodes, u.Node)
	im.forgetRequests(n.Run, "")
	dropWriters(im, u.Node, "")
	return nil
}
