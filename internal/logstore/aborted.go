package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/runnel-dev/runnel/internal/txn"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// The aborted-transaction index of a partition, file "aborted-txns": every transaction an ABORT
// marker closed, in marker order, so read_committed fetches can tell consumers which records to
// drop. One file per partition, not per segment: offsets never move (compaction removes records,
// not offsets), so the entries stay valid whatever happens to the segments.
//
//	header  "RNAT" | version uint32 (1)
//	entries of 40 bytes, big-endian, ascending by last:
//	  producerId int64 | first int64 | last int64 (the marker's offset) |
//	  lastStable int64 (the partition's first unstable offset just after the marker, or last+1) |
//	  crc32c uint32 (of the 32 bytes before) | reserved uint32 (0)
//
// Entries are appended with the marker, unsynced; the file is synced before each producer state
// snapshot, so every entry below a snapshot's offset is durable. Recovery drops the entries at or
// after the offset it replays from (and a torn tail) and the replay appends them again.
// Truncation drops the entries at or after the cut. Entries whose marker is below the log start
// are dropped when they are more than half the file, and those whose marker compaction removed
// before the compacted segments replace the old ones (their transactions' records are gone by
// then: a marker goes only once no batch of its transaction is left).

const (
	abortedName      = "aborted-txns"
	abortedMagic     = "RNAT"
	abortedVersion   = 1
	abortedHeader    = 8
	abortedEntrySize = 40
)

// abortedEntry is an index entry: an aborted transaction and the last stable offset after it.
type abortedEntry struct {
	txn.Aborted
	LastStable int64
}

func (e abortedEntry) encode(dst []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.First))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Last))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastStable))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return binary.BigEndian.AppendUint32(dst, 0)
}

var errBadAbortedEntry = errors.New("logstore: bad aborted-transaction index entry")

func decodeAbortedEntry(b []byte) (abortedEntry, error) {
	if len(b) < abortedEntrySize || crc32.Checksum(b[:32], castagnoli) != binary.BigEndian.Uint32(b[32:]) {
		return abortedEntry{}, errBadAbortedEntry
	}
	e := abortedEntry{Aborted: txn.Aborted{ProducerID: int64(binary.BigEndian.Uint64(b)), First: int64(binary.BigEndian.Uint64(b[8:])),
		Last: int64(binary.BigEndian.Uint64(b[16:]))}, LastStable: int64(binary.BigEndian.Uint64(b[24:]))}
	if e.First < 0 || e.Last < e.First || e.LastStable < 0 || e.LastStable > e.Last+1 {
		return abortedEntry{}, fmt.Errorf("%w: %+v", errBadAbortedEntry, e)
	}
	return e, nil
}

// abortedIndex is the open index file. Appends and truncations come under the log's appendMu;
// readers take mu.RLock for the length and their reads.
type abortedIndex struct {
	fs   vfs.FS
	name string

	mu sync.RWMutex
	f  vfs.File // nil until the first entry
	n  int64    // entries in the file
}

// openAbortedIndex opens the index in dir, if there is one, and cuts a torn or corrupt tail (a
// crash tears only unsynced entries, which recovery derives again).
func openAbortedIndex(fs vfs.FS, dir string) (*abortedIndex, error) {
	x := &abortedIndex{fs: fs, name: dir + "/" + abortedName}
	f, err := fs.OpenReadWrite(x.name)
	if errors.Is(err, vfs.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	hdr := make([]byte, abortedHeader)
	if info.Size() < abortedHeader {
		hdr = hdr[:0]
	} else if _, err := f.ReadAt(hdr, 0); err != nil {
		f.Close()
		return nil, err
	}
	if len(hdr) < abortedHeader || string(hdr[:4]) != abortedMagic || binary.BigEndian.Uint32(hdr[4:]) != abortedVersion {
		// A header torn by a crash right after the file was created: nothing in it was durable.
		f.Close()
		if err := fs.Remove(x.name); err != nil {
			return nil, err
		}
		return x, nil
	}
	x.f = f
	n := (info.Size() - abortedHeader) / abortedEntrySize
	buf := make([]byte, 64*abortedEntrySize)
	valid := int64(0)
scan:
	for valid < n {
		k := min(n-valid, int64(len(buf)/abortedEntrySize))
		chunk := buf[:k*abortedEntrySize]
		if _, err := f.ReadAt(chunk, abortedHeader+valid*abortedEntrySize); err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, err
		}
		for i := int64(0); i < k; i++ {
			if _, err := decodeAbortedEntry(chunk[i*abortedEntrySize:]); err != nil {
				break scan
			}
			valid++
		}
	}
	x.n = valid
	if size := abortedHeader + valid*abortedEntrySize; size != info.Size() {
		if err := f.Truncate(size); err != nil {
			f.Close()
			return nil, err
		}
	}
	return x, nil
}

// entry reads entry i; the caller holds mu.
func (x *abortedIndex) entry(i int64) (abortedEntry, error) {
	var b [abortedEntrySize]byte
	if _, err := x.f.ReadAt(b[:], abortedHeader+i*abortedEntrySize); err != nil {
		return abortedEntry{}, err
	}
	return decodeAbortedEntry(b[:])
}

// search returns the index of the first entry whose marker is at or after offset; the caller
// holds mu.
func (x *abortedIndex) search(offset int64) (int64, error) {
	lo, hi := int64(0), x.n
	for lo < hi {
		mid := (lo + hi) / 2
		e, err := x.entry(mid)
		if err != nil {
			return 0, err
		}
		if e.Last < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// add appends an entry, unsynced. The caller holds the log's appendMu.
func (x *abortedIndex) add(e abortedEntry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		f, err := x.fs.Create(x.name)
		if err != nil {
			return err
		}
		hdr := binary.BigEndian.AppendUint32([]byte(abortedMagic), abortedVersion)
		if _, err := f.WriteAt(hdr, 0); err != nil {
			f.Close()
			return err
		}
		x.f = f
	}
	if _, err := x.f.WriteAt(e.encode(nil), abortedHeader+x.n*abortedEntrySize); err != nil {
		return err
	}
	x.n++
	return nil
}

// sync makes every entry durable.
func (x *abortedIndex) sync() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.f == nil {
		return nil
	}
	return x.f.Sync()
}

// truncateFrom drops the entries whose marker is at or after offset.
func (x *abortedIndex) truncateFrom(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	i, err := x.search(offset)
	if err != nil {
		return err
	}
	if i == x.n {
		return nil
	}
	if err := x.f.Truncate(abortedHeader + i*abortedEntrySize); err != nil {
		return err
	}
	x.n = i
	return nil
}

// collect returns the aborted transactions a read_committed fetch of [from, upto) must report:
// every one with records in the range (last >= from, first < upto). It stops at the first entry
// whose last stable offset is at or past upto: every transaction aborted later began after it.
func (x *abortedIndex) collect(from, upto int64) ([]txn.Aborted, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.n == 0 {
		return nil, nil
	}
	i, err := x.search(from)
	if err != nil {
		return nil, err
	}
	var out []txn.Aborted
	for ; i < x.n; i++ {
		e, err := x.entry(i)
		if err != nil {
			return nil, err
		}
		if e.First < upto {
			out = append(out, e.Aborted)
		}
		if e.LastStable >= upto {
			break
		}
	}
	return out, nil
}

// trimBelow drops the entries whose marker is below start, when they are more than half the file:
// it rewrites the file (written and synced under a temporary name, then renamed over it).
func (x *abortedIndex) trimBelow(start int64, dir string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	i, err := x.search(start)
	if err != nil || i*2 <= x.n {
		return err
	}
	return x.rewriteLocked(i, nil, dir)
}

// remove drops the entries whose marker offset is in markers: compaction removed those ABORT
// markers, and a read_committed fetch must no longer report their transactions (a consumer told
// of an aborted transaction drops the producer's transactional batches until it reads the
// marker, so it would drop the producer's later committed ones too). As Kafka, whose cleaner
// keeps an aborted transaction in the cleaned segment's index only with its marker
// (CleanedTransactionMetadata). The file is rewritten as by trimBelow.
func (x *abortedIndex) remove(markers map[int64]bool, dir string) error {
	if len(markers) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	return x.rewriteLocked(0, markers, dir)
}

// rewriteLocked rewrites the file with the entries from i on, less those whose marker offset is
// in drop; the caller holds mu.
func (x *abortedIndex) rewriteLocked(i int64, drop map[int64]bool, dir string) error {
	b := binary.BigEndian.AppendUint32([]byte(abortedMagic), abortedVersion)
	n := int64(0)
	for j := i; j < x.n; j++ {
		e, err := x.entry(j)
		if err != nil {
			return err
		}
		if drop[e.Last] {
			continue
		}
		b = e.encode(b)
		n++
	}
	if i == 0 && n == x.n {
		return nil // nothing to drop
	}
	tmp := x.name + ".tmp"
	if err := vfs.WriteFileSync(x.fs, tmp, b); err != nil {
		return err
	}
	if err := x.fs.Rename(tmp, x.name); err != nil {
		return err
	}
	if err := x.fs.SyncDir(dir); err != nil {
		return err
	}
	f, err := x.fs.OpenReadWrite(x.name)
	if err != nil {
		return err
	}
	x.f.Close()
	x.f, x.n = f, n
	return nil
}

// drop removes every entry and the file.
func (x *abortedIndex) drop() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	x.f.Close()
	x.f, x.n = nil, 0
	if err := x.fs.Remove(x.name); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	return nil
}

func (x *abortedIndex) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	err := x.f.Close()
	x.f = nil
	return err
}
