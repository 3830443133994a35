package raftlog

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// TestMembershipChange: one change at a time, adding before promoting, promoting before
// removing a voter.
func TestMembershipChange(t *testing.T) {
	keepAll := func(uint64) bool { return true }
	yes := func(uint64) bool { return true }
	no := func(uint64) bool { return false }
	add, promote, remove := pb.ConfChangeType_ConfChangeAddLearnerNode, pb.ConfChangeType_ConfChangeAddNode, pb.ConfChangeType_ConfChangeRemoveNode
	for _, tc := range []struct {
		name     string
		cs       *pb.ConfState
		members  []uint64
		voters   []uint64
		keep     func(uint64) bool
		caughtUp func(uint64) bool
		typ      pb.ConfChangeType
		node     uint64 // 0: no change
	}{
		{"a new member is a learner first", &pb.ConfState{Voters: []uint64{1, 2, 3}}, []uint64{1, 2, 3, 4}, []uint64{1, 2, 4}, keepAll, yes, add, 4},
		{"a target voter not a member yet", &pb.ConfState{Voters: []uint64{1, 2, 3}}, nil, []uint64{1, 2, 4}, keepAll, yes, add, 4},
		{"a learner caught up is promoted", &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, []uint64{4}, []uint64{1, 2, 4}, keepAll, yes, promote, 4},
		{"no removal before the promotion", &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, []uint64{4}, []uint64{1, 2, 4}, keepAll, no, 0, 0},
		{"then the old voter goes", &pb.ConfState{Voters: []uint64{1, 2, 3, 4}}, []uint64{3, 4}, []uint64{1, 2, 4}, keepAll, yes, remove, 3},
		{"a sole voter stays until its successor votes", &pb.ConfState{Voters: []uint64{1}, Learners: []uint64{2}}, nil, []uint64{2}, keepAll, no, 0, 0},
		{"then it goes", &pb.ConfState{Voters: []uint64{1, 2}}, nil, []uint64{2}, keepAll, no, remove, 1},
		{"no target: voters stay", &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{5}}, nil, nil, keepAll, yes, 0, 0},
		{"a learner no longer kept", &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{5}}, nil, nil, no, yes, remove, 5},
		{"a target voter is kept as learner", &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, nil, []uint64{1, 2, 3, 4}, no, no, 0, 0},
	} {
		cc := MembershipChange(tc.cs, tc.members, tc.voters, tc.keep, tc.caughtUp)
		switch {
		case tc.node == 0 && cc != nil:
			t.Errorf("%s: %v %d; want no change", tc.name, cc.GetType(), cc.GetNodeId())
		case tc.node != 0 && (cc == nil || cc.GetType() != tc.typ || cc.GetNodeId() != tc.node):
			t.Errorf("%s: %v; want %v %d", tc.name, cc, tc.typ, tc.node)
		}
	}
}
