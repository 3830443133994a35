package raftlog

import (
	"log/slog"

	"go.etcd.io/raft/v3"
)

// Config is the etcd/raft configuration the controller's and the sequencer's Raft groups share:
// a heartbeat every tick, pre-vote and check-quorum (a leader cut off from a majority steps
// down, and a node that rejoins does not disrupt a working leader), step-down on removal, and
// no proposal forwarding. Both groups propose only what their leader decided from its own
// state (a fence after a missed session, a cut from the shards' reports): a node that checked
// it leads and then stepped down before raft took the proposal (a message of a newer term
// stepped in between, say after the process was paused) must have it dropped, not handed to
// the new leader to commit a decision the new leader did not make.
func Config(id uint64, electionTicks int, st raft.Storage, applied uint64, l *slog.Logger) *raft.Config {
	return &raft.Config{
		ID: id, ElectionTick: electionTicks, HeartbeatTick: 1, Storage: st, Applied: applied,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum: true, PreVote: true, Logger: Logger(l), StepDownOnRemoval: true,
		DisableProposalForwarding: true,
	}
}
