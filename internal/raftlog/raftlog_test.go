package raftlog

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/runnel-dev/runnel/internal/vfs"
)

func entries(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: []byte{byte(i)}})
	}
	return out
}

func lastIndex(t *testing.T, s *Storage) uint64 {
	t.Helper()
	i, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// TestReopen: a bootstrapped log keeps its initial data, synced entries and hard state across a
// reopen; a snapshot replaces the data and drops the log below it; an entry written again at an
// index replaces the tail from there, as Raft overwrote it.
func TestReopen(t *testing.T) {
	fs := vfs.NewMem()
	boot := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	s, data, err := Open(fs, "g", boot, []byte("initial"))
	if err != nil || string(data) != "initial" {
		t.Fatalf("Open: %q, %v", data, err)
	}
	if err := s.Save(&pb.HardState{Term: new(uint64(2)), Commit: new(uint64(5))}, entries(2, 6, 2), true); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(nil, entries(5, 7, 3), true); err != nil { // a new leader overwrote 5 and 6
		t.Fatal(err)
	}
	s.Close()
	s, data, err = Open(fs, "g", nil, nil)
	if err != nil || string(data) != "initial" {
		t.Fatalf("reopen: %q, %v", data, err)
	}
	if last := lastIndex(t, s); last != 7 {
		t.Fatalf("last index %d; want 7", last)
	}
	if term, _ := s.Term(6); term != 3 {
		t.Fatalf("entry 6 has term %d; want 3 (the overwrite)", term)
	}
	if hs, _, _ := s.InitialState(); hs.GetCommit() != 5 || hs.GetTerm() != 2 {
		t.Fatalf("hard state %v", hs)
	}
	if err := s.SaveSnapshot(6, boot, []byte("at six")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, data, err = Open(fs, "g", nil, nil)
	if err != nil || string(data) != "at six" || s.SnapIndex() != 6 {
		t.Fatalf("after a snapshot: %q, index %d, %v", data, s.SnapIndex(), err)
	}
	if first, _ := s.FirstIndex(); first != 7 || lastIndex(t, s) != 7 {
		t.Fatalf("log after the snapshot: first %d, last %d; want 7, 7", first, lastIndex(t, s))
	}
	s.Close()
}

// TestCrash: after a power loss that tears or garbles the WAL's unsynced tail, the log reopens
// with every synced entry and nothing after a torn record.
func TestCrash(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		fs := vfs.NewMem()
		s, _, err := Open(fs, "g", &pb.ConfState{Voters: []uint64{1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(4))}, entries(2, 4, 1), true); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(nil, entries(5, 9, 1), false); err != nil { // not synced
			t.Fatal(err)
		}
		after := fs.Crash(vfs.CrashOptions{Tear: true, Garbage: seed%2 == 1, Rand: rand.New(rand.NewPCG(seed, 7))})
		r, _, err := Open(after, "g", nil, nil)
		if err != nil {
			t.Fatalf("seed %d: reopen after a crash: %v", seed, err)
		}
		last := lastIndex(t, r)
		if last < 4 || last > 9 {
			t.Fatalf("seed %d: last index %d after a crash; want the synced 4 and at most 9", seed, last)
		}
		ents, err := r.Entries(2, last+1, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range ents {
			if e.GetIndex() != uint64(i)+2 || len(e.Data) != 1 || e.Data[0] != byte(e.GetIndex()) {
				t.Fatalf("seed %d: entry %d is %v", seed, i+2, e)
			}
		}
		r.Close()
	}
}

// TestCorruptSnapshot: a snapshot file whose checksum does not match is an error, not an empty
// state.
func TestCorruptSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	s, _, err := Open(fs, "g", &pb.ConfState{Voters: []uint64{1}}, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := vfs.ReadFile(fs, "g/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := vfs.WriteFileSync(fs, "g/snapshot", b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(fs, "g", nil, nil); err == nil {
		t.Fatalf("Open with a corrupt snapshot: no error")
	}
}

// FuzzReplay: no WAL content panics Open; the log it rebuilds is contiguous, and reopening it
// again gives the same log (the torn tail was cut, not kept).
func FuzzReplay(f *testing.F) {
	var good []byte
	for _, e := range entries(2, 4, 1) {
		good = appendRecord(good, recEntry, e)
	}
	good = appendRecord(good, recHardState, &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(3))})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, wal []byte) {
		fs := vfs.NewMem()
		s, _, err := Open(fs, "g", &pb.ConfState{Voters: []uint64{1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := vfs.WriteFileSync(fs, "g/wal", wal); err != nil {
			t.Fatal(err)
		}
		s, _, err = Open(fs, "g", nil, nil)
		if err != nil {
			return // a record that parses but does not fit (a gap): reported, not hidden
		}
		first, _ := s.FirstIndex()
		last := lastIndex(t, s)
		if last >= first {
			if _, err := s.Entries(first, last+1, 1<<62); err != nil {
				t.Fatalf("entries %d..%d: %v", first, last, err)
			}
		}
		s.Close()
		again, _, err := Open(fs, "g", nil, nil)
		if err != nil {
			t.Fatalf("second reopen: %v", err)
		}
		if l2 := lastIndex(t, again); l2 != last {
			t.Fatalf("second reopen: last %d; want %d", l2, last)
		}
		again.Close()
	})
}

var _ raft.Storage = (*Storage)(nil)

// TestSnapshotThenCrashBeforeASyncedHardState: a learner installs the leader's snapshot, and
// the Ready's hard state (its commit now at the snapshot) is written without an fsync, as raft
// asks when neither term nor vote changed and there are no entries. A crash then leaves the
// snapshot with an older hard state; reopened, the commit index is the snapshot's (everything
// a snapshot holds was committed), and raft starts (it panicked: "state.commit 0 is out of
// range [8, 8]").
func TestSnapshotThenCrashBeforeASyncedHardState(t *testing.T) {
	fs := vfs.NewMem()
	s, _, err := Open(fs, "g", nil, nil) // a learner: no bootstrap
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&pb.HardState{Term: new(uint64(3)), Commit: new(uint64(0))}, nil, true); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(8)), Term: new(uint64(3)),
		ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{5}}}, Data: []byte("image")}
	if err := s.InstallSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&pb.HardState{Term: new(uint64(3)), Commit: new(uint64(8))}, nil, false); err != nil {
		t.Fatal(err)
	}
	crashed := fs.Crash(vfs.CrashOptions{})
	s2, data, err := Open(crashed, "g", nil, nil)
	if err != nil || string(data) != "image" {
		t.Fatalf("reopen: %q, %v", data, err)
	}
	if hs, _, _ := s2.InitialState(); hs.GetCommit() != 8 || hs.GetTerm() != 3 {
		t.Fatalf("hard state %v; want term 3, commit 8", hs)
	}
	if _, err := raft.NewRawNode(&raft.Config{ID: 5, ElectionTick: 10, HeartbeatTick: 1, Storage: s2, Applied: 8,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16}); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotFromLeaderThenCrashBeforeWALRewrite: a follower held uncommitted entries 4..10 of
// an old leader's term 2 and installed the term-4 leader's snapshot at index 6; the process
// crashed after the snapshot file was durable, before the WAL was rewritten. Reopened, the log
// used to put the stale entries 7..10 of term 2 after the snapshot: its last term (2) below the
// snapshot's, the node granted its vote to a candidate lacking the committed entry 6@4.
func TestSnapshotFromLeaderThenCrashBeforeWALRewrite(t *testing.T) {
	mem := vfs.NewMem()
	rules := &vfs.Rules{}
	boot := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	s, _, err := Open(vfs.NewErrorFS(mem, rules), "g", boot, []byte("initial"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&pb.HardState{Term: new(uint64(2)), Commit: new(uint64(3))},
		append(entries(2, 3, 1), entries(4, 10, 2)...), true); err != nil {
		t.Fatal(err)
	}
	rules.Add(vfs.Rule{Op: vfs.OpCreate, PathContains: "wal.tmp"}) // the crash point
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(6)), Term: new(uint64(4)), ConfState: boot},
		Data: []byte("image at six")}
	if err := s.InstallSnapshot(snap); err == nil {
		t.Fatal("InstallSnapshot: no error injected")
	}
	r, data, err := Open(mem.Crash(vfs.CrashOptions{}), "g", nil, nil)
	if err != nil || string(data) != "image at six" {
		t.Fatalf("reopen: %q, %v", data, err)
	}
	if last := lastIndex(t, r); last != 6 {
		term, _ := r.Term(last)
		t.Fatalf("log after the snapshot 6@4 ends at %d@%d; want 6@4", last, term)
	}
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: r, Applied: 6,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16})
	if err != nil {
		t.Fatal(err)
	}
	rn.Step(&pb.Message{Type: pb.MessageType_MsgVote.Enum(), From: new(uint64(2)), To: new(uint64(1)),
		Term: new(uint64(5)), LogTerm: new(uint64(3)), Index: new(uint64(20))})
	for _, m := range rn.Ready().Messages {
		if m.GetType() == pb.MessageType_MsgVoteResp && !m.GetReject() {
			t.Fatalf("vote granted to a candidate at 20@3, which lacks the committed 6@4")
		}
	}
}

// TestFailedSyncThenRestartThenPowerLoss: a failed fsync of the WAL stopped the process; the
// restarted one read the records whose fsync had failed from the page cache (Linux keeps them,
// marked clean: a later fsync of the file reports nothing) and took them for durable, to be
// acknowledged to the leader; a power loss then took them. Open now writes the WAL it read to
// a new file and syncs it.
func TestFailedSyncThenRestartThenPowerLoss(t *testing.T) {
	mem := vfs.NewMem()
	rules := &vfs.Rules{}
	s, _, err := Open(vfs.NewErrorFS(mem, rules), "g", &pb.ConfState{Voters: []uint64{1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}, entries(2, 2, 1), true); err != nil {
		t.Fatal(err)
	}
	rules.Add(vfs.Rule{Op: vfs.OpSync, PathContains: "wal"})
	if err := s.Save(nil, entries(3, 5, 1), true); err == nil {
		t.Fatal("Save: no error injected")
	}
	r, _, err := Open(mem, "g", nil, nil) // a restart, the page cache kept
	if err != nil {
		t.Fatal(err)
	}
	last := lastIndex(t, r)
	after, _, err := Open(mem.Crash(vfs.CrashOptions{}), "g", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := lastIndex(t, after); l != last {
		t.Fatalf("log ended at %d after the restart, at %d after a power loss; want the same", last, l)
	}
}
