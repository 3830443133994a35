package raftlog

import (
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestIDsAndBoot: node 0 is Raft id 1 and back; a voter boots with every voter, a learner with
// nothing.
func TestIDsAndBoot(t *testing.T) {
	for _, n := range []int32{0, 1, 7} {
		if NodeID(RaftID(n)) != n || RaftID(n) == 0 {
			t.Fatalf("node %d: Raft id %d, back %d", n, RaftID(n), NodeID(RaftID(n)))
		}
	}
	if cs := BootVoters([]int32{0, 2}, 2); !slices.Equal(cs.GetVoters(), []uint64{1, 3}) {
		t.Fatalf("a voter's boot configuration: %v; want voters [1 3]", cs)
	}
	if cs := BootVoters([]int32{0, 2}, 1); cs != nil {
		t.Fatalf("a learner's boot configuration: %v; want none", cs)
	}
}

// TestSendMessages: each message goes to its node encoded; the snapshots' peers come back.
func TestSendMessages(t *testing.T) {
	msgs := []*pb.Message{
		{Type: pb.MessageType_MsgApp.Enum(), To: new(uint64(2)), Term: new(uint64(4))},
		{Type: pb.MessageType_MsgSnap.Enum(), To: new(uint64(3))},
	}
	var to []int32
	send := func(node int32, body []byte) {
		var m pb.Message
		if err := proto.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		if RaftID(node) != m.GetTo() {
			t.Fatalf("message to Raft id %d sent to node %d", m.GetTo(), node)
		}
		to = append(to, node)
	}
	snaps, err := SendMessages(msgs, send, nil)
	if err != nil || !slices.Equal(to, []int32{1, 2}) || !slices.Equal(snaps, []uint64{3}) {
		t.Fatalf("sent to %v, snapshots to %v, %v; want [1 2], [3]", to, snaps, err)
	}
	// A snapshot taken by stream is neither sent nor returned: stream reports it.
	to = nil
	var streamed []uint64
	snaps, err = SendMessages(msgs, send, func(m *pb.Message, body []byte) bool {
		streamed = append(streamed, m.GetTo())
		return true
	})
	if err != nil || !slices.Equal(to, []int32{1}) || snaps != nil || !slices.Equal(streamed, []uint64{3}) {
		t.Fatalf("with a stream: sent to %v, snapshots to %v, streamed %v, %v; want [1], none, [3]", to, snaps, streamed, err)
	}
}
