package raftlog

import (
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// LearnerChange is the one membership change (Raft applies one at a time) that brings a group's
// learners in line: adding the first node of add that is not a member yet, else removing the
// first learner keep refuses; nil when there is none. Ids are Raft ids.
func LearnerChange(cs *pb.ConfState, add []uint64, keep func(id uint64) bool) *pb.ConfChange {
	return MembershipChange(cs, add, nil, keep, nil)
}

// MembershipChange is the one membership change that brings a group in line with its members
// (add: every node that should follow the group) and, unless voters is empty, with its voters,
// in this order: add a node of add or voters that is not a member yet, as a learner; promote a
// learner of voters that caughtUp says has the log; remove a voter not in voters (never the
// last one, and only while every voter to add is one already); else remove a learner keep
// refuses. nil when there is none. Adding before removing keeps as many voters as the target
// has through a replacement. Ids are Raft ids.
func MembershipChange(cs *pb.ConfState, add, voters []uint64, keep func(id uint64) bool, caughtUp func(id uint64) bool) *pb.ConfChange {
	in := map[uint64]bool{}
	for _, set := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, id := range set {
			in[id] = true
		}
	}
	for _, id := range slices.Concat(voters, add) {
		if !in[id] {
			return &pb.ConfChange{Type: pb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(id)}
		}
	}
	if len(voters) > 0 {
		promoted := true
		for _, id := range voters {
			if slices.Contains(cs.GetLearners(), id) {
				if caughtUp != nil && caughtUp(id) {
					return &pb.ConfChange{Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: new(id)}
				}
				promoted = false
			}
		}
		if promoted && len(cs.GetVoters()) > 1 {
			for _, id := range cs.GetVoters() {
				if !slices.Contains(voters, id) {
					return &pb.ConfChange{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(id)}
				}
			}
		}
	}
	for _, id := range cs.GetLearners() {
		if !keep(id) && !slices.Contains(voters, id) {
			return &pb.ConfChange{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(id)}
		}
	}
	return nil
}

// ReportSnapshots tells raft that the snapshots its last Ready asked to send to these peers went
// out; call it after Advance. The transport does not say when a snapshot arrived, and etcd raft
// keeps a peer it sent a snapshot to paused until the peer answers or the snapshot is reported:
// an answer lost on the way (a dropped frame, a full receive queue) would leave the peer behind
// for good. Reported as sent, the peer is probed again once it answers a heartbeat, and sent the
// snapshot again if it still lacks it.
func ReportSnapshots(rn *raft.RawNode, to []uint64) {
	for _, id := range to {
		rn.ReportSnapshot(id, raft.SnapshotFinish)
	}
}
