// Package replica replicates partitions: a leader pushes its log to its followers, followers
// append it and acknowledge what they appended and fsynced, and the leader's high watermark
// follows a quorum. Offsets are the log's indexes and leader epochs its terms; elections are run
// by the controller. The design, and why it keeps Raft's properties, is in docs/cluster.md §4.
//
// The protocol's decisions are pure functions and I/O-free state (Divergence, Leader), tested
// deterministically and by a randomized simulation; Replica and Manager drive them over the
// partition logs (package logstore) and the transport.
package replica

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// EpochEntry says that the batches from Start on (up to the next entry) were written by the
// leader of Epoch.
type EpochEntry struct {
	Epoch int32
	Start int64
}

// The leader epoch cache of a partition, in <partition dir>/leader-epochs:
//
//	"RNLE" | u8 version (1) | u32 count | count × (i32 epoch | i64 start) | u32 crc32c of all before
//
// replaced atomically (tmp, fsync, rename, directory fsync). Entries ascend in both epoch and
// start. An entry whose start is the log end and that no batch follows is an epoch marker: the
// replica's log is known to match its leader's at the start of that epoch.
const (
	epochsFile    = "leader-epochs"
	epochsMagic   = "RNLE"
	epochsVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadEpochs reports a corrupt leader-epochs file.
var ErrBadEpochs = errors.New("replica: bad leader-epochs file")

// EpochCache is a partition's leader epochs, kept durable in its directory. It is not safe for
// concurrent use; its Replica serialises access.
type EpochCache struct {
	fs      vfs.FS
	dir     string
	entries []EpochEntry
}

// LoadEpochCache reads dir's leader-epochs file. A log without one that holds data was written
// by a single node before clusters existed, all in epoch 0. Entries past logEnd (a crash cut the
// log below them) are dropped.
func LoadEpochCache(fsys vfs.FS, dir string, logStart, logEnd int64) (*EpochCache, error) {
	c := &EpochCache{fs: fsys, dir: dir}
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, epochsFile))
	switch {
	case errors.Is(err, vfs.ErrNotExist):
		if logEnd > logStart {
			c.entries = []EpochEntry{{0, logStart}}
		}
		return c, nil
	case err != nil:
		return nil, err
	}
	if c.entries, err = decodeEpochs(b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadEpochs, dir, err)
	}
	n := len(c.entries)
	for n > 0 && c.entries[n-1].Start > logEnd {
		n--
	}
	if n != len(c.entries) {
		c.entries = c.entries[:n]
		if err := c.persist(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func decodeEpochs(b []byte) ([]EpochEntry, error) {
	if len(b) < 13 || string(b[:4]) != epochsMagic || b[4] != epochsVersion {
		return nil, errors.New("no magic or unknown version")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, errors.New("checksum mismatch")
	}
	n := int(binary.BigEndian.Uint32(b[5:9]))
	if len(body) != 9+12*n {
		return nil, fmt.Errorf("%d entries in %d bytes", n, len(body))
	}
	out := make([]EpochEntry, n)
	for i := range out {
		p := body[9+12*i:]
		out[i] = EpochEntry{int32(binary.BigEndian.Uint32(p)), int64(binary.BigEndian.Uint64(p[4:]))}
		if i > 0 && (out[i].Epoch <= out[i-1].Epoch || out[i].Start < out[i-1].Start) {
			return nil, fmt.Errorf("entry %d (%d, %d) does not ascend", i, out[i].Epoch, out[i].Start)
		}
	}
	return out, nil
}

func encodeEpochs(entries []EpochEntry) []byte {
	b := append([]byte(epochsMagic), epochsVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Start))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func (c *EpochCache) persist() error {
	return vfs.WriteFileAtomic(c.fs, c.dir, epochsFile, encodeEpochs(c.entries))
}

// Entries returns the entries; the caller must not modify them.
func (c *EpochCache) Entries() []EpochEntry { return c.entries }

// Last returns the newest entry's epoch, or -1 if there is none.
func (c *EpochCache) Last() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// Add records, durably, that epoch starts at start. An entry for an epoch not newer than the
// last is a no-op if it starts where the last one does and an error otherwise (the log's
// batches would not ascend in epoch).
func (c *EpochCache) Add(epoch int32, start int64) error {
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		switch {
		case epoch == last.Epoch:
			return nil
		case epoch < last.Epoch:
			return fmt.Errorf("replica: epoch %d at %d after epoch %d at %d", epoch, start, last.Epoch, last.Start)
		case start < last.Start:
			return fmt.Errorf("replica: epoch %d starts at %d, before epoch %d at %d", epoch, start, last.Epoch, last.Start)
		}
	}
	c.entries = append(c.entries, EpochEntry{epoch, start})
	return c.persist()
}

// Truncate drops, durably, the entries of epochs newer than keepEpoch and those starting past
// offset: the log was cut to end at offset, agreeing with its leader up to epoch keepEpoch.
func (c *EpochCache) Truncate(offset int64, keepEpoch int32) error {
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch > keepEpoch || c.entries[n-1].Start > offset) {
		n--
	}
	if n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	return c.persist()
}

// Reset drops every entry, durably: the log restarted empty.
func (c *EpochCache) Reset() error {
	if len(c.entries) == 0 {
		return nil
	}
	c.entries = nil
	return c.persist()
}

// EpochOf returns the leader epoch of the batch at offset (an offset of the log): the newest
// entry starting at or before it, or -1 if none does.
func (c *EpochCache) EpochOf(offset int64) int32 {
	// i: the first entry starting after offset.
	i, _ := slices.BinarySearchFunc(c.entries, offset+1, func(e EpochEntry, t int64) int { return cmp.Compare(e.Start, t) })
	if i == 0 {
		return -1
	}
	return c.entries[i-1].Epoch
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka's LeaderEpochFileCache.endOffsetFor does:
// for the latest epoch, the log end; for an epoch above every entry, (-1, -1) (undefined); for
// one below every entry, that epoch and the first entry's start; else the largest epoch not
// above it and the start of the next one.
func (c *EpochCache) EndOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	return endOffsetFor(c.entries, epoch, logEnd)
}

func endOffsetFor(entries []EpochEntry, epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(entries) == 0 {
		return -1, -1
	}
	if last := entries[len(entries)-1]; epoch == last.Epoch {
		return epoch, logEnd
	} else if epoch > last.Epoch {
		return -1, -1
	}
	i := -1
	for j, e := range entries {
		if e.Epoch <= epoch {
			i = j
		}
	}
	if i < 0 {
		return epoch, entries[0].Start
	}
	return entries[i].Epoch, entries[i+1].Start
}

// Divergence is the leader's answer to a follower joining its epoch: where the follower's log
// must end to agree with the leader's. l and lEnd, lStart are the leader's epoch entries, log
// end and log start; f and fEnd the follower's. The logs agree up to the end of the newest epoch
// both have (an epoch's batches come from its one leader, so two logs holding the same epoch
// agree on it up to the shorter of its two ends); the follower's newer epochs diverged. With no
// common epoch, or if the agreed prefix ends before the leader's log start, the follower must
// restart its log empty at the leader's log start (reset). common is the shared epoch, or -1.
func Divergence(l []EpochEntry, lEnd, lStart int64, f []EpochEntry, fEnd int64) (truncateTo int64, common int32, reset bool) {
	for i := len(f) - 1; i >= 0; i-- {
		fEpochEnd := fEnd
		if i+1 < len(f) {
			fEpochEnd = f[i+1].Start
		}
		j := slices.IndexFunc(l, func(e EpochEntry) bool { return e.Epoch == f[i].Epoch })
		if j < 0 {
			continue
		}
		lEpochEnd := lEnd
		if j+1 < len(l) {
			lEpochEnd = l[j+1].Start
		}
		to := min(fEpochEnd, lEpochEnd)
		if to < lStart {
			return lStart, -1, true
		}
		return to, f[i].Epoch, false
	}
	if fEnd == lStart && len(f) == 0 {
		return lStart, -1, false // an empty follower exactly at the leader's start: nothing to cut
	}
	return lStart, -1, true
}
