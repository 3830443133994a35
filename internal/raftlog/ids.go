package raftlog

import (
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// RaftID is a node's id in Runnel's Raft groups (the controller's and the sequencer's): etcd
// raft reserves 0, which is a node id. NodeID is its inverse.
func RaftID(node int32) uint64 { return uint64(node) + 1 }

// NodeID is the node of a Raft id.
func NodeID(id uint64) int32 { return int32(id - 1) }

// Removed returns the node a membership change removes from its group, if it removes one.
func Removed(cc *pb.ConfChange) (int32, bool) {
	if cc.GetType() == pb.ConfChangeType_ConfChangeRemoveNode {
		return NodeID(cc.GetNodeId()), true
	}
	return 0, false
}

// BootVoters is the configuration a group's member starts a new log with: the voters, if self
// is one; nil for a learner, which starts from the leader's snapshot.
func BootVoters(voters []int32, self int32) *pb.ConfState {
	if !slices.Contains(voters, self) {
		return nil
	}
	cs := &pb.ConfState{}
	for _, v := range voters {
		cs.Voters = append(cs.Voters, RaftID(v))
	}
	return cs
}

// SendMessages sends a Ready's messages to their nodes, encoded, and returns the peers it sent
// a snapshot (for ReportSnapshots after Advance). stream, if not nil, is offered each snapshot
// message first: when it takes one (to send in chunks) it reports the snapshot itself.
func SendMessages(msgs []*pb.Message, send func(to int32, body []byte), stream func(m *pb.Message, body []byte) bool) (snapshotsTo []uint64, err error) {
	for _, m := range msgs {
		body, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		if m.GetType() == pb.MessageType_MsgSnap {
			if stream != nil && stream(m, body) {
				continue
			}
			snapshotsTo = append(snapshotsTo, m.GetTo())
		}
		send(NodeID(m.GetTo()), body)
	}
	return snapshotsTo, nil
}
