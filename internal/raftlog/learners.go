package raftlog

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// LearnerChange is the one membership change (Raft applies one at a time) that brings a group's
// learners in line: adding the first node of add that is not a member yet, else removing the
// first learner keep refuses; nil when there is none. Ids are Raft ids.
func LearnerChange(cs *pb.ConfState, add []uint64, keep func(id uint64) bool) *pb.ConfChange {
	in := map[uint64]bool{}
	for _, set := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, id := range set {
			in[id] = true
		}
	}
	for _, id := range add {
		if !in[id] {
			return &pb.ConfChange{Type: pb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(id)}
		}
	}
	for _, id := range cs.GetLearners() {
		if !keep(id) {
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
