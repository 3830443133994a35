// Package raftlog keeps a Raft group's log durable: a raft.MemoryStorage (what raft reads)
// backed by a write-ahead log and a snapshot file in one directory. The controller's metadata
// group uses it; any other group (the total-order sequencer) can, with its own directory and
// its own snapshot data.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// A group's Raft state lives in one directory (the controller's: <data-dir>/controller/):
//
//	wal       records, appended:  u32 length | u32 crc32c(type, payload) | u8 type | payload
//	            type 1: a raftpb.Entry (protobuf); type 2: a raftpb.HardState (protobuf)
//	            length counts the type byte and the payload
//	snapshot  a raftpb.Snapshot (protobuf; its data is the group's state machine, as the
//	          group encodes it: the controller's metadata image as JSON) | u32 crc32c
//
// The WAL holds the entries after the snapshot's index. Replaying it in order rebuilds the
// log: an entry at an index already seen replaces the tail from there, as Raft overwrote it.
// A crash between writing a snapshot received from the leader and rewriting the WAL leaves the
// WAL from before it: entries after the snapshot's index continue the snapshot only if the
// WAL's entry at that index has the snapshot's term; otherwise they are the tail Raft dropped
// on installing it, and replay drops them too.
// A torn or corrupt record ends the WAL: it and everything after it are cut off (a record is
// only trusted after the fsync that covered it, and nothing after a torn record was synced).

const (
	walName      = "wal"
	snapshotName = "snapshot"

	recEntry     byte = 1
	recHardState byte = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Storage is a group's Raft log: a raft.MemoryStorage (what raft reads) kept durable by the WAL
// and the snapshot file. It is used by the group's loop goroutine only.
type Storage struct {
	*raft.MemoryStorage
	fs      vfs.FS
	dir     string
	wal     vfs.File
	walSize int64
	buf     []byte

	snapIndex uint64 // index of the latest snapshot
	onSync    func(time.Duration)
}

// ObserveSyncs has fn called with the duration of every fsync of the log (for metrics; a
// group's commit latency is bounded below by it). Call it before the group runs.
func (s *Storage) ObserveSyncs(fn func(time.Duration)) { s.onSync = fn }

// Open loads a group's Raft state from dir and returns it with its snapshot's data. A new
// directory gets bootstrap as its initial state: a snapshot at index 1 holding the voters'
// configuration and initial as its data, the same on every voter, so that they can elect a
// leader. A learner starts with bootstrap nil and receives the log (or a snapshot) from the
// leader; its data is nil until then.
func Open(fsys vfs.FS, dir string, bootstrap *pb.ConfState, initial []byte) (*Storage, []byte, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	s := &Storage{MemoryStorage: raft.NewMemoryStorage(), fs: fsys, dir: dir}
	var data []byte
	snap, err := readSnapshot(fsys, filepath.Join(dir, snapshotName))
	switch {
	case err == nil:
		data = snap.GetData()
		if err := s.ApplySnapshot(snap); err != nil {
			return nil, nil, err
		}
		s.snapIndex = snap.GetMetadata().GetIndex()
	case errors.Is(err, vfs.ErrNotExist):
		if bootstrap != nil {
			snap = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1)), ConfState: bootstrap},
				Data: initial}
			if err := s.writeSnapshot(snap); err != nil {
				return nil, nil, err
			}
			if err := s.ApplySnapshot(snap); err != nil {
				return nil, nil, err
			}
			s.snapIndex, data = 1, initial
		}
	default:
		return nil, nil, err
	}
	if err := s.replay(); err != nil {
		return nil, nil, err
	}
	// A snapshot holds committed entries only, but the hard state saying so may not be durable:
	// raft asks for no fsync of a Ready that installs a snapshot without entries or a change of
	// term or vote, and the WAL rewritten with the snapshot holds the hard state from before it.
	// etcd/raft refuses to start on a commit index below the snapshot.
	if hs, _, _ := s.InitialState(); !raft.IsEmptyHardState(hs) && hs.GetCommit() < s.snapIndex {
		hs = proto.Clone(hs).(*pb.HardState)
		hs.Commit = new(s.snapIndex)
		if err := s.SetHardState(hs); err != nil {
			return nil, nil, err
		}
	}
	// The WAL read may hold records whose fsync failed before the process restarted: the page
	// cache keeps them, and a later fsync of the file reports nothing. Written to a new file
	// and synced, they are durable before raft acknowledges them.
	if err := s.rewriteWAL(); err != nil {
		return nil, nil, err
	}
	return s, data, nil
}

// replay reads the WAL into the memory storage and opens it for appending.
func (s *Storage) replay() error {
	name := filepath.Join(s.dir, walName)
	f, err := s.fs.OpenReadWrite(name)
	if errors.Is(err, vfs.ErrNotExist) {
		if f, err = s.fs.Create(name); err != nil {
			return err
		}
		if err := s.fs.SyncDir(s.dir); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	s.wal = f
	info, err := f.Stat()
	if err != nil {
		return err
	}
	data := make([]byte, info.Size())
	if _, err := f.ReadAt(data, 0); err != nil && len(data) > 0 {
		return err
	}
	snapTerm, err := s.Term(s.snapIndex)
	if err != nil {
		return err
	}
	r := walReplay{snapTerm: snapTerm}
	pos := 0
	for pos < len(data) {
		typ, payload, n, ok := parseRecord(data[pos:])
		if !ok {
			break
		}
		if err := s.replayRecord(&r, typ, payload); err != nil {
			return fmt.Errorf("raftlog: wal record at %d: %w", pos, err)
		}
		pos += n
	}
	if pos < len(data) { // a torn tail: cut it so appends continue after the last good record
		if err := f.Truncate(int64(pos)); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	s.walSize = int64(pos)
	return nil
}

// walReplay is what replay tracks across records.
type walReplay struct {
	snapTerm   uint64 // the term of the snapshot's index
	termAtSnap uint64 // the term of the WAL's entry at the snapshot's index; 0 if it has none
}

func (s *Storage) replayRecord(r *walReplay, typ byte, payload []byte) error {
	switch typ {
	case recEntry:
		var e pb.Entry
		if err := proto.Unmarshal(payload, &e); err != nil {
			return err
		}
		switch {
		case e.GetIndex() < s.snapIndex: // covered by the snapshot; the tail after it is replaced
			r.termAtSnap = 0
			return nil
		case e.GetIndex() == s.snapIndex:
			r.termAtSnap = e.GetTerm()
			return nil
		case r.termAtSnap != 0 && r.termAtSnap != r.snapTerm:
			return nil // a tail the snapshot replaced: not of the snapshot's history
		}
		last, _ := s.LastIndex()
		if e.GetIndex() > last+1 {
			return fmt.Errorf("entry %d after last index %d: a gap", e.GetIndex(), last)
		}
		return s.Append([]*pb.Entry{&e})
	case recHardState:
		var hs pb.HardState
		if err := proto.Unmarshal(payload, &hs); err != nil {
			return err
		}
		return s.SetHardState(&hs)
	}
	return fmt.Errorf("unknown record type %d", typ)
}

// parseRecord decodes one WAL record at the start of b; ok is false for a torn or corrupt one.
func parseRecord(b []byte) (typ byte, payload []byte, n int, ok bool) {
	if len(b) < 9 {
		return 0, nil, 0, false
	}
	length := int(binary.BigEndian.Uint32(b))
	if length < 1 || len(b) < 8+length {
		return 0, nil, 0, false
	}
	body := b[8 : 8+length]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return 0, nil, 0, false
	}
	return body[0], body[1:], 8 + length, true
}

func appendRecord(dst []byte, typ byte, m proto.Message) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		panic(fmt.Sprintf("raftlog: encoding a raft record: %v", err))
	}
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// Save makes a Ready's hard state and entries durable (with sync) and puts them in the memory
// storage, where raft reads them.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, sync bool) error {
	s.buf = s.buf[:0]
	for _, e := range ents {
		s.buf = appendRecord(s.buf, recEntry, e)
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		s.buf = appendRecord(s.buf, recHardState, hs)
	}
	if len(s.buf) > 0 {
		if _, err := s.wal.WriteAt(s.buf, s.walSize); err != nil {
			return err
		}
		s.walSize += int64(len(s.buf))
	}
	if sync {
		start := time.Now()
		if err := s.wal.Sync(); err != nil {
			return err
		}
		if s.onSync != nil {
			s.onSync(time.Since(start))
		}
	}
	if len(ents) > 0 {
		if err := s.Append(ents); err != nil {
			return err
		}
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		return s.SetHardState(hs)
	}
	return nil
}

// InstallSnapshot makes a snapshot received from the leader durable and replaces the log with
// it.
func (s *Storage) InstallSnapshot(snap *pb.Snapshot) error {
	if err := s.writeSnapshot(snap); err != nil {
		return err
	}
	if err := s.ApplySnapshot(snap); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return err
	}
	s.snapIndex = snap.GetMetadata().GetIndex()
	return s.rewriteWAL()
}

// SaveSnapshot snapshots the state machine's data at index (applied, with configuration cs)
// and drops the log up to it, from memory and from the WAL.
func (s *Storage) SaveSnapshot(index uint64, cs *pb.ConfState, data []byte) error {
	snap, err := s.CreateSnapshot(index, cs, data)
	if err != nil {
		return err
	}
	if err := s.writeSnapshot(snap); err != nil {
		return err
	}
	if err := s.Compact(index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err
	}
	s.snapIndex = index
	return s.rewriteWAL()
}

// rewriteWAL replaces the WAL with the entries and hard state the memory storage holds.
func (s *Storage) rewriteWAL() error {
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	var buf []byte
	if last >= first {
		ents, err := s.Entries(first, last+1, 1<<62)
		if err != nil {
			return err
		}
		for _, e := range ents {
			buf = appendRecord(buf, recEntry, e)
		}
	}
	hs, _, _ := s.InitialState()
	if hs != nil && !raft.IsEmptyHardState(hs) {
		buf = appendRecord(buf, recHardState, hs)
	}
	tmp := filepath.Join(s.dir, walName+".tmp")
	if err := vfs.WriteFileSync(s.fs, tmp, buf); err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, filepath.Join(s.dir, walName)); err != nil {
		return err
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return err
	}
	old := s.wal
	f, err := s.fs.OpenReadWrite(filepath.Join(s.dir, walName))
	if err != nil {
		return err
	}
	old.Close()
	s.wal, s.walSize = f, int64(len(buf))
	return nil
}

func (s *Storage) writeSnapshot(snap *pb.Snapshot) error {
	b, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return vfs.WriteFileAtomic(s.fs, s.dir, snapshotName, b)
}

func readSnapshot(fsys vfs.FS, name string) (*pb.Snapshot, error) {
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	if len(b) < 4 || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("raftlog: %s: checksum mismatch", name)
	}
	var snap pb.Snapshot
	if err := proto.Unmarshal(b[:len(b)-4], &snap); err != nil {
		return nil, fmt.Errorf("raftlog: %s: %w", name, err)
	}
	return &snap, nil
}

// SnapIndex is the index of the latest snapshot.
func (s *Storage) SnapIndex() uint64 { return s.snapIndex }

// Close closes the WAL.
func (s *Storage) Close() error {
	if s.wal == nil {
		return nil
	}
	return s.wal.Close()
}
