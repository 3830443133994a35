package objtopic

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/txn"
)

// Partition is what the controller keeps of one object partition (docs/object-topics.md §2.2):
// its offsets, the extents of files that hold its records, and its idempotent producers. It is
// an I/O-free state machine: the controller applies committed files to it in log order, so every
// replica of the controller assigns the same offsets.
type Partition struct {
	Start     int64          // log start offset
	Next      int64          // the offset the next accepted record gets
	Extents   []Extent       // ascending, non-overlapping, covering [Start-ish, Next)
	producers *txn.Partition // the last batches of each idempotent producer, open transactions
	lazy      map[int64]*lazyProducer
	// Aborted is the aborted-transaction index (docs/object-topics.md §10): the transactions an
	// ABORT marker closed, in marker order. Retention drops the entries below the log start.
	Aborted []AbortedTxn
	// EpochStartFollows, set by the applier for each commit (not kept: the cluster's command
	// level decides it, controller.LevelObjectEpochStart), takes an idempotent batch that
	// starts its epoch (sequence 0) when a later batch of the epoch was committed first and
	// none of it was: see followsCommitted.
	EpochStartFollows bool
	// KeepPrevEpoch, set by the applier for each commit as EpochStartFollows
	// (controller.LevelObjectEpochs), keeps a producer's committed sequence ranges of its
	// previous epoch when a batch of a later one is committed: a retry of an older epoch's
	// batch journaled twice is then recognized (seqCovered).
	KeepPrevEpoch bool
	// MarkerEpochAhead (controller.LevelObjectEpochs): a batch of the epoch a transaction
	// marker began (no batch of it yet) that does not start at sequence 0 is ahead of its
	// predecessor (ErrSequenceAhead, retriable), as when a batch began the epoch; below it,
	// OUT_OF_ORDER_SEQUENCE_NUMBER made the producer bump its epoch.
	MarkerEpochAhead bool
	// TrackPrevEpoch (controller.LevelObjectPrevCopies): a batch of the previous epoch
	// accepted after the next epoch began (a late lazy copy) is added to that epoch's kept
	// ranges, so a second copy of it is a duplicate; below it, it was kept untracked and a
	// second copy was stored again.
	TrackPrevEpoch bool
}

// AbortedTxn is an aborted transaction of the partition: its producer's records in [First,
// Last] (Last: the ABORT marker) are not for read_committed consumers. Stable is the last
// stable offset right after the marker: every transaction aborted later began at or after it.
type AbortedTxn struct {
	ProducerID int64 `json:"p"`
	First      int64 `json:"f"`
	Last       int64 `json:"l"`
	Stable     int64 `json:"s"`
}

// Extent is one file's section of a partition, with the offsets its commit assigned.
type Extent struct {
	File         string   `json:"f"`           // object key
	Offset       uint64   `json:"o"`           // of the section in the file
	Length       uint32   `json:"n"`           // of the section
	Base         int64    `json:"b"`           // offset of the extent's first accepted record
	Last         int64    `json:"l"`           // offset of its last accepted record
	MaxTimestamp int64    `json:"t"`           // of its accepted batches
	Skip         []uint32 `json:"s,omitempty"` // indexes of the section's batches not accepted (duplicates, refused)
	// Absolute: the section's batches carry their own base offsets (merged and compacted
	// objects), and compaction may have left gaps between them. Otherwise they are the
	// producers' batches as sent, numbered from Base in order (skipping Skip).
	Absolute bool `json:"a,omitempty"`
	// Clean: compaction wrote it; its keys are unique within the clean extents (§5.1).
	Clean bool `json:"c,omitempty"`
	// Horizon: the earliest KIP-534 delete horizon (unix ms) of the tombstones it holds, 0 if
	// none: compaction drops them once it has passed.
	Horizon int64 `json:"h,omitempty"`
	// Inline: the section's bytes, kept in the image instead of a file (File is empty): a
	// transaction marker, one control batch, which a merge later writes into an object.
	Inline []byte `json:"i,omitempty"`
}

// EachBatch calls fn with every accepted batch of e's section data and the batch's base offset,
// in order, and checks that their offsets lie within the extent's (ErrBadFile otherwise). b is
// data's bytes: it is not to be modified (data is shared by readers), and its own base offset is
// meaningful only for an Absolute extent. fn returning an error stops the walk with it.
func EachBatch(e Extent, data []byte, fn func(b []byte, h batch.Header, base int64) error) error {
	next := e.Base
	for i := 0; len(data) > 0; i++ {
		size, err := batch.Split(data)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadFile, e.File, err)
		}
		b := data[:size]
		data = data[size:]
		if slices.Contains(e.Skip, uint32(i)) {
			continue
		}
		h, err := batch.ParseHeader(b)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadFile, e.File, err)
		}
		base := next
		if e.Absolute {
			if h.BaseOffset < next {
				return fmt.Errorf("%w: %s: a batch at offset %d after offset %d", ErrBadFile, e.File, h.BaseOffset, next-1)
			}
			base = h.BaseOffset
		}
		next = base + int64(h.LastOffsetDelta) + 1
		if next > e.Last+1 {
			return fmt.Errorf("%w: %s: a batch ends at offset %d, past its extent's %d", ErrBadFile, e.File, next-1, e.Last)
		}
		if err := fn(b, h, base); err != nil {
			return err
		}
	}
	if !e.Absolute && next != e.Last+1 {
		return fmt.Errorf("%w: %s: the section's batches end at offset %d, its commit at %d", ErrBadFile, e.File, next-1, e.Last)
	}
	return nil
}

// NewPartition returns an empty object partition.
func NewPartition() *Partition { return &Partition{producers: txn.NewPartition()} }

// BatchMeta is what a commit carries of each batch of a partition's section, in order. A run of
// consecutive batches without a producer id may be carried as one BatchMeta (Batches > 1): the
// commit's size then grows with the partitions and idempotent producers in a file, not with
// its batches.
type BatchMeta struct {
	Records       int32 `json:"r"`           // lastOffsetDelta+1, summed over the run: the offsets it takes
	Batches       int32 `json:"n,omitempty"` // the section's batches this stands for; 0 means 1
	ProducerID    int64 `json:"p"`           // -1: not idempotent
	Epoch         int16 `json:"e,omitempty"`
	FirstSeq      int32 `json:"s,omitempty"`
	Transactional bool  `json:"x,omitempty"`
	MaxTimestamp  int64 `json:"t"`
}

// Count is the number of section batches b stands for.
func (b *BatchMeta) Count() int {
	if b.Batches > 1 {
		return int(b.Batches)
	}
	return 1
}

// BatchResult is a batch's outcome: its base offset, or the error the producer gets for it. A
// duplicate of a batch already committed gets that batch's base offset and is not stored again.
type BatchResult struct {
	Base      int64
	Duplicate bool
	Err       error
}

// ErrTransactional refuses transactional batches on lazily sequenced object topics: a lazy
// batch is acknowledged before its commit could check it against the producer's transaction.
var ErrTransactional = fmt.Errorf("%w: transactions are not supported on lazily sequenced object topics (runnel.sequencing=lazy, Ripcord mode)", kerr.InvalidTxnState)

// ErrPreviousTxnOpen refuses a transactional batch of a producer whose transaction of an older
// epoch is still open on the partition: its marker is on the way (the broker waits for it
// before writing the batch; this only catches a race). Retriable.
var ErrPreviousTxnOpen = fmt.Errorf("%w: the producer's previous transaction is still open on the partition", kerr.NotEnoughReplicas)

// ErrSequenceAhead answers an eager idempotent batch whose predecessor is not committed yet
// (a sequence gap, or a new epoch's batch after sequence 0). On an object topic the missing
// batch may still come: it waits in another writer's commit queue (the partition's traffic
// moved between processes), in a file the slow path commits later (Ripcord), or in a request a
// stopped process has not read yet. Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER would make the
// producer bump its epoch and send its unanswered batches again under the new one (KIP-360;
// franz-go does it for any such answer), and the old copies, committed when their file comes,
// would be stored twice: a dedup works only within an epoch. A retriable answer makes the
// producer send the same batch again, in sequence once the gap is filled. A gap that can never
// be filled (the producer gave its batch up) ends on the client's side: it fails the batch's
// partition and renumbers under a new epoch itself.
//
// NOT_ENOUGH_REPLICAS, not REQUEST_TIMED_OUT: the batch was not stored, and clients take a
// timeout for "maybe stored" (franz-go then retries it past its retry limit and delivery
// timeout, forever if the gap never fills).
var ErrSequenceAhead = fmt.Errorf("%w: an earlier batch of the producer is not committed yet; retry", kerr.NotEnoughReplicas)

// Commit applies one file's section of the partition: every batch is checked against the
// producer state, the accepted ones get consecutive offsets from Next, and one extent records
// them (none if no batch was accepted). The cost is one extent per file and partition, whatever
// the number of batches.
func (p *Partition) Commit(file string, e IndexEntry, batches []BatchMeta) []BatchResult {
	return p.commit(file, e, batches, false)
}

// CommitLazy applies a lazy section (docs/object-topics.md §9): its batches were acknowledged
// when the file was written, so none is refused for its sequence or epoch. An idempotent batch
// whose sequence range this partition has already committed (a retry journaled twice) is
// skipped, so each record is stored once; others are accepted in commit order, gaps and
// reorderings included (the documented price of lazy sequencing).
func (p *Partition) CommitLazy(file string, e IndexEntry, batches []BatchMeta) []BatchResult {
	return p.commit(file, e, batches, true)
}

// lazyProducer is what a lazy partition keeps of an idempotent producer: the sequence numbers
// committed in its current epoch, unwrapped: Kafka's sequences wrap past MaxInt32 to 0, and
// these count on (2^31 + 5 for the sixth sequence after a wrap), so a batch after the wrap is
// not taken for the one of the same number before it.
type lazyProducer struct {
	Epoch int16  `json:"e"`
	Seqs  Ranges `json:"s"`
	// Dropped: ranges were dropped to keep maxLazyRanges (the lowest ones), so a batch outside
	// Seqs may have been committed.
	Dropped bool `json:"d,omitempty"`
	// Prev: the previous epoch's committed ranges (KeepPrevEpoch): a lazy batch of it
	// journaled twice, whose second copy commits after the next epoch's first batch (Ripcord:
	// the copy's file waits for the slow path while the producer bumped its epoch), is a
	// duplicate all the same. One epoch back: a copy older than that is stored again.
	Prev *lazyEpoch `json:"p,omitempty"`
}

// lazyEpoch is a lazy producer's committed sequence ranges of an earlier epoch.
type lazyEpoch struct {
	Epoch int16  `json:"e"`
	Seqs  Ranges `json:"s"`
}

// unwrapped returns the sequence range of batch b in lp's unwrapped space: the one congruent to
// its first sequence modulo 2^31 nearest lp's highest committed sequence (at most 2^30 either
// way; sequence 0 with nothing committed).
func (lp *lazyProducer) unwrapped(b BatchMeta) (first, last int64) {
	const space = math.MaxInt32 + 1
	first = int64(b.FirstSeq)
	if lp != nil && len(lp.Seqs) > 0 {
		hi := lp.Seqs[len(lp.Seqs)-1].To
		first += hi - ((hi%space)+space)%space // hi's wrap, b's number
		switch {
		case first > hi+space/2:
			first -= space
		case first < hi-space/2:
			first += space
		}
	}
	return first, first + int64(b.Records) - 1
}

// maxLazyRanges bounds a producer's committed sequence ranges: beyond it the lowest go (a batch
// that old, still uncommitted, is no longer recognized as a duplicate).
const maxLazyRanges = 64

// seqCovered reports whether an idempotent batch's sequence range was committed already in its
// epoch (by an eager or a lazy commit: a retry journaled twice).
func (p *Partition) seqCovered(b BatchMeta) bool {
	lp := p.lazy[b.ProducerID]
	switch {
	case lp == nil:
		return false
	case lp.Epoch != b.Epoch && lp.Prev != nil && lp.Prev.Epoch == b.Epoch:
		prev := &lazyProducer{Epoch: lp.Prev.Epoch, Seqs: lp.Prev.Seqs}
		return prev.Seqs.Covers(prev.unwrapped(b))
	case lp.Epoch != b.Epoch:
		return false
	}
	return lp.Seqs.Covers(lp.unwrapped(b))
}

// followsCommitted reports whether an idempotent batch's predecessor (the sequence number before
// its first) was committed in its epoch: it is in sequence, whatever Kafka's state (the last
// five batches, moved on only by batches committed in order) says. Refusing it as out of order
// would make the producer bump its epoch (KIP-360) and send its unanswered batches again, some
// of which may be stored already.
//
// A batch that starts its epoch (sequence 0, not a wrap) has no predecessor: with
// EpochStartFollows it is taken when a later batch of its epoch was committed first (the
// partition did not know the producer, so Kafka's rule took that one at its sequence) and
// nothing of it was, provided no range was ever dropped (one of them could have been it). That
// happens when a new producer's first batches are split between processes, or when the first
// one was failed at a switch into Ripcord mode and its successor journaled lazily; it is stored
// after its successor, where an OUT_OF_ORDER_SEQUENCE_NUMBER would make the client bump its
// epoch and send its unanswered batches again, some of them stored already.
func (p *Partition) followsCommitted(b BatchMeta) bool {
	lp := p.lazy[b.ProducerID]
	if lp == nil || lp.Epoch != b.Epoch {
		return false
	}
	first, last := lp.unwrapped(b)
	if lp.Seqs.Overlaps(first, last) {
		return false // part of it stored already: an overlap, not a batch in sequence
	}
	if first == 0 {
		return p.EpochStartFollows && !lp.Dropped && len(lp.Seqs) < maxLazyRanges
	}
	return first > 0 && lp.Seqs.Covers(first-1, first-1)
}

// seqAhead reports whether an idempotent batch is out of sequence because it is ahead: its
// epoch's predecessor is not committed (a gap after the last batch, or a new epoch's batch that
// does not start at sequence 0), rather than behind (an overlap that is not a retry).
func (p *Partition) seqAhead(b txn.Batch) bool {
	epoch, last, ok := p.producers.Sequence(b.ProducerID)
	switch {
	case !ok:
		return false
	case b.Epoch > epoch:
		return b.FirstSeq != 0
	case b.Epoch < epoch:
		return false
	case last < 0:
		return p.MarkerEpochAhead && b.FirstSeq != 0
	}
	return seqAfter(b.FirstSeq, txn.IncrementSequence(last, 1))
}

// seqAfter reports whether sequence a comes after b, sequences wrapping past MaxInt32 to 0
// (half the space ahead of b counts as after it).
func seqAfter(a, b int32) bool {
	d := int64(a) - int64(b)
	if d < 0 {
		d += math.MaxInt32 + 1
	}
	return d > 0 && d < (math.MaxInt32+1)/2
}

// recordSeq records an accepted idempotent batch's sequence range.
func (p *Partition) recordSeq(b BatchMeta) {
	lp := p.lazy[b.ProducerID]
	switch {
	case lp == nil:
		lp = &lazyProducer{Epoch: b.Epoch}
	case b.Epoch > lp.Epoch:
		var prev *lazyEpoch
		if p.KeepPrevEpoch && len(lp.Seqs) > 0 {
			prev = &lazyEpoch{Epoch: lp.Epoch, Seqs: lp.Seqs}
		}
		lp = &lazyProducer{Epoch: b.Epoch, Prev: prev}
	case b.Epoch < lp.Epoch:
		// A fenced producer's batch, acknowledged anyway: kept. One of the previous epoch is
		// added to its kept ranges (copy on write), so another copy of it is a duplicate.
		if !p.TrackPrevEpoch || lp.Prev == nil || lp.Prev.Epoch != b.Epoch {
			return
		}
		prev := &lazyProducer{Epoch: lp.Prev.Epoch, Seqs: lp.Prev.Seqs}
		p.lazy[b.ProducerID] = &lazyProducer{Epoch: lp.Epoch, Seqs: lp.Seqs, Dropped: lp.Dropped,
			Prev: &lazyEpoch{Epoch: prev.Epoch, Seqs: prev.Seqs.Add(prev.unwrapped(b)).DropBelow(maxLazyRanges)}}
		return
	default:
		lp = &lazyProducer{Epoch: lp.Epoch, Seqs: lp.Seqs, Dropped: lp.Dropped, Prev: lp.Prev} // copy on write: lp may be shared with a published copy
	}
	seqs := lp.Seqs.Add(lp.unwrapped(b))
	// Only from command level 4 on: an older version's snapshot has no Dropped, so a node
	// that replayed older commits with this version must not have it either (below level 4
	// nothing reads it; from level 4 every snapshot is this version's or newer).
	lp.Dropped = lp.Dropped || p.EpochStartFollows && len(seqs) > maxLazyRanges
	lp.Seqs = seqs.DropBelow(maxLazyRanges)
	if p.lazy == nil {
		p.lazy = map[int64]*lazyProducer{}
	}
	p.lazy[b.ProducerID] = lp
}

func (p *Partition) commit(file string, e IndexEntry, batches []BatchMeta, lazy bool) []BatchResult {
	results := make([]BatchResult, len(batches))
	ext := Extent{File: file, Offset: e.Offset, Length: e.Length, Base: p.Next, MaxTimestamp: -1}
	accepted := 0
	next := uint32(0) // the section index of b's first batch
	for i, b := range batches {
		res := &results[i]
		first := next
		next += uint32(b.Count())
		skip := func() {
			for j := first; j < next; j++ {
				ext.Skip = append(ext.Skip, j)
			}
		}
		if b.Records <= 0 {
			res.Err = fmt.Errorf("%w: a batch of %d records", kerr.CorruptMessage, b.Records)
		} else if b.Transactional && lazy {
			res.Err = ErrTransactional
		} else if b.Transactional && p.olderTxnOpen(b) {
			res.Err = ErrPreviousTxnOpen
		} else if b.ProducerID >= 0 && b.Count() != 1 {
			res.Err = fmt.Errorf("%w: an idempotent batch carried as a run of %d", kerr.CorruptMessage, b.Count())
		}
		// An idempotent batch is checked by Kafka's rules (the last five batches) and against
		// every sequence range committed in its epoch, eager or lazy: a batch acknowledged
		// lazily (Ripcord) and retried eagerly, or the reverse, is stored once. A lazy batch is
		// never refused (it was acknowledged); one in sequence also moves Kafka's state on, so
		// an eager stream can follow a lazy one.
		var dup *txn.BatchMeta
		var seqErr error
		tb := txn.Batch{ProducerID: b.ProducerID, Epoch: b.Epoch, FirstSeq: b.FirstSeq, LastOffsetDelta: b.Records - 1, Transactional: b.Transactional}
		if res.Err == nil && b.ProducerID >= 0 {
			dup, seqErr = p.producers.Check(tb)
			if errors.Is(seqErr, kerr.OutOfOrderSequenceNumber) && p.followsCommitted(b) {
				// Its predecessor is stored: committed lazily out of Kafka's order (after one
				// before it, retried, was committed later), which left Kafka's state behind.
				seqErr = nil
			}
			if !lazy {
				res.Err = seqErr
				if errors.Is(seqErr, kerr.OutOfOrderSequenceNumber) && !p.seqCovered(b) && p.seqAhead(tb) {
					res.Err = ErrSequenceAhead
				}
			}
		}
		switch {
		case dup != nil:
			res.Base, res.Duplicate, res.Err = dup.FirstOffset, true, nil
			skip()
			continue
		case res.Err == nil && b.ProducerID >= 0 && p.seqCovered(b),
			errors.Is(res.Err, kerr.OutOfOrderSequenceNumber) && p.seqCovered(b):
			res.Base, res.Duplicate, res.Err = -1, true, nil // committed, its offset no longer known
			skip()
			continue
		case res.Err != nil:
			skip()
			continue
		}
		res.Base = p.Next
		if b.ProducerID >= 0 {
			if seqErr == nil {
				p.producers.Apply(tb, p.Next, b.MaxTimestamp, 0)
			}
			p.recordSeq(b)
		}
		p.Next += int64(b.Records)
		ext.MaxTimestamp = max(ext.MaxTimestamp, b.MaxTimestamp)
		accepted++
	}
	if accepted > 0 {
		ext.Last = p.Next - 1
		p.Extents = append(p.Extents, ext)
	}
	return results
}

// olderTxnOpen reports whether b's producer has a transaction of an older epoch open here.
func (p *Partition) olderTxnOpen(b BatchMeta) bool {
	_, _, epoch, open := p.producers.Open(b.ProducerID)
	return open && epoch < b.Epoch
}

// CheckMarker reports whether AppendMarker would take m.
func (p *Partition) CheckMarker(m txn.Marker) error { return p.producers.CheckMarker(m) }

// AppendMarker writes a transaction marker (a COMMIT or ABORT control batch, as
// txn.Marker.AppendBatch builds it, stamped timestampMs) at the partition's next offset, as an
// inline extent, and closes the producer's open transaction; an ABORT that closes one adds it
// to the aborted-transaction index. A marker the producer state refuses (an older producer or
// coordinator epoch: txn.Partition.CheckMarker) changes nothing. It returns the marker's offset.
func (p *Partition) AppendMarker(m txn.Marker, timestampMs int64) (int64, error) {
	if err := p.producers.CheckMarker(m); err != nil {
		return 0, err
	}
	b := m.AppendBatch(nil, timestampMs)
	off := p.Next
	p.Extents = append(p.Extents, Extent{Length: uint32(len(b)), Base: off, Last: off, MaxTimestamp: timestampMs, Inline: b})
	p.Next++
	if ab := p.producers.ApplyMarker(m, off, timestampMs); ab != nil {
		p.Aborted = append(p.Aborted, AbortedTxn{ProducerID: ab.ProducerID, First: ab.First, Last: ab.Last, Stable: p.LastStable()})
	}
	return off, nil
}

// DropAborted removes the aborted-transaction index entries of the ABORT markers at the given
// offsets (compaction dropped them with the last records of their transactions: nothing is
// left to skip). The remaining entries keep their order and their Stable bound.
func (p *Partition) DropAborted(markers []int64) {
	if len(markers) == 0 {
		return
	}
	out := make([]AbortedTxn, 0, len(p.Aborted)) // a new array: published copies keep theirs
	for _, a := range p.Aborted {
		if !slices.Contains(markers, a.Last) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		out = nil
	}
	p.Aborted = out
}

// LastStable is the last stable offset: the first offset of the earliest open transaction, or
// the partition's end. read_committed consumers read below it.
func (p *Partition) LastStable() int64 {
	if fu := p.producers.FirstUnstable(); fu >= 0 {
		return fu
	}
	return p.Next
}

// ConsumerLastStable is the last stable offset as consumers are told it: LastStable, but never
// below the log start (as Kafka raises its first unstable offset to the log start when
// DeleteRecords or retention passes an open transaction's first offset). LastStable itself is
// what the image's aborted transactions record.
func (p *Partition) ConsumerLastStable() int64 {
	return max(p.LastStable(), p.Start)
}

// AbortedIn returns the aborted transactions with records in [from, upto) (upto: a last stable
// offset), oldest first, as a read_committed fetch from offset from returns them.
func (p *Partition) AbortedIn(from, upto int64) []AbortedTxn {
	i := sort.Search(len(p.Aborted), func(i int) bool { return p.Aborted[i].Last >= from })
	var out []AbortedTxn
	for _, a := range p.Aborted[i:] { // markers in offset order: every Last from here is >= from
		if a.First < upto {
			out = append(out, a)
		}
		if a.Stable >= upto {
			break // every transaction aborted later began at or after a.Stable
		}
	}
	return out
}

// OpenTransaction returns the producer's open transaction on the partition: its first offset and
// the producer epoch of its records, or ok=false.
func (p *Partition) OpenTransaction(producerID int64) (first int64, epoch int16, ok bool) {
	first, _, epoch, ok = p.producers.Open(producerID)
	return first, epoch, ok
}

// ExpireProducers forgets the idempotent producers whose last batch is older than
// expirationMs at nowMs (producer.id.expiration.ms, as a local partition's producers expire),
// with the sequence ranges their lazily committed batches left, and returns how many it forgot.
// A producer with an open transaction is kept. Without it the partition would remember every
// producer that ever wrote to it (a client instance is a producer), in the controller's image.
func (p *Partition) ExpireProducers(nowMs, expirationMs int64) int {
	ids := p.producers.ExpireIDs(nowMs, expirationMs)
	for _, id := range ids {
		delete(p.lazy, id) // a partition being changed has its own map (Clone copies it)
	}
	return len(ids)
}

// ProducersExpirable reports whether ExpireProducers would forget a producer.
func (p *Partition) ProducersExpirable(nowMs, expirationMs int64) bool {
	return p.producers.Expirable(nowMs, expirationMs)
}

// OpenTransactions returns the producers with an open transaction on the partition, each with
// its first offset.
func (p *Partition) OpenTransactions() map[int64]int64 { return p.producers.OpenTransactions() }

// Producers returns the state of every producer the partition remembers (DescribeProducers).
func (p *Partition) Producers() []txn.Producer { return p.producers.Producers() }

// Find returns the extents holding offsets at or after offset that are not below the log start,
// the first one containing offset (or the next one after a gap left by refused batches).
func (p *Partition) Find(offset int64) []Extent {
	offset = max(offset, p.Start)
	i := sort.Search(len(p.Extents), func(i int) bool { return p.Extents[i].Last >= offset })
	return p.Extents[i:]
}

// Trim moves the log start to start (retention, DeleteRecords) and drops the extents wholly
// below it; it returns the files of the dropped extents, which the garbage collector deletes
// once no extent references them.
func (p *Partition) Trim(start int64) ([]string, error) {
	if start > p.Next {
		return nil, fmt.Errorf("%w: log start %d past the end %d", kerr.OffsetOutOfRange, start, p.Next)
	}
	if start <= p.Start {
		return nil, nil
	}
	p.Start = start
	i := sort.Search(len(p.Extents), func(i int) bool { return p.Extents[i].Last >= start })
	var dropped []string
	for _, e := range p.Extents[:i] {
		if e.File != "" {
			dropped = append(dropped, e.File)
		}
	}
	p.Extents = append([]Extent(nil), p.Extents[i:]...)
	j := sort.Search(len(p.Aborted), func(j int) bool { return p.Aborted[j].Last >= start })
	p.Aborted = append([]AbortedTxn(nil), p.Aborted[j:]...)
	if len(p.Aborted) == 0 {
		p.Aborted = nil
	}
	return dropped, nil
}

// Clone returns a copy to modify; p must not be modified afterwards (it stays in a published
// image). The copy shares the extents' and aborted transactions' backing arrays: it only appends
// beyond p's lengths, which p never reads, and Trim copies. The producer state is copied.
func (p *Partition) Clone() *Partition {
	c := *p
	c.producers = p.producers.Clone()
	c.lazy = maps.Clone(p.lazy) // the entries are replaced, never modified
	return &c
}

// partitionJSON is a partition's form in the controller's snapshots: the producer state as a
// producer snapshot (package txn's format) at the partition's next offset.
type partitionJSON struct {
	Start     int64                   `json:"start"`
	Next      int64                   `json:"next"`
	Extents   []Extent                `json:"extents,omitempty"`
	Producers []byte                  `json:"producers"`
	Lazy      map[int64]*lazyProducer `json:"lazy,omitempty"`
	Aborted   []AbortedTxn            `json:"aborted,omitempty"`
}

// MarshalJSON encodes the partition.
func (p *Partition) MarshalJSON() ([]byte, error) {
	return json.Marshal(partitionJSON{Start: p.Start, Next: p.Next, Extents: p.Extents, Producers: p.producers.AppendSnapshot(nil, p.Next), Lazy: p.lazy, Aborted: p.Aborted})
}

// UnmarshalJSON decodes a partition MarshalJSON encoded.
func (p *Partition) UnmarshalJSON(b []byte) error {
	var j partitionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	off, st, err := txn.ParseSnapshot(j.Producers)
	if err != nil {
		return err
	}
	if off != j.Next || j.Start > j.Next {
		return fmt.Errorf("objtopic: partition state with start %d, next %d, producers at %d", j.Start, j.Next, off)
	}
	*p = Partition{Start: j.Start, Next: j.Next, Extents: j.Extents, producers: st, lazy: j.Lazy, Aborted: j.Aborted}
	return nil
}

// AgeMs is what retention and the compaction lags age the extent by: its newest record
// timestamp, or, when none of its batches carries one (a producer sent NO_TIMESTAMP, -1), the
// time its file was written if its key tells it (a writer's file, "runs/<run>/<unix ns>", as
// objects.RunKey names it), as Kafka falls back to a segment's modification time; else
// math.MaxInt64: such an extent is never old by time (retention.bytes still applies). Taken as
// -1, such records were older than any retention and deleted at the next pass.
func (e Extent) AgeMs() int64 {
	if e.MaxTimestamp >= 0 {
		return e.MaxTimestamp
	}
	if rest, ok := strings.CutPrefix(e.File, "runs/"); ok {
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			if ns, err := strconv.ParseInt(rest[i+1:], 10, 64); err == nil && ns > 0 {
				return ns / int64(time.Millisecond)
			}
		}
	}
	return math.MaxInt64
}

// RetentionStart returns the log start that retention gives the partition: whole extents are
// dropped from the oldest on while their newest record is older than retentionMs (-1: no time
// limit; AgeMs) or while the partition stays at or above retentionBytes without them (-1: no size
// limit), as Kafka deletes whole segments. It returns Start if nothing is due.
func (p *Partition) RetentionStart(nowMs, retentionMs, retentionBytes int64) int64 {
	var size int64
	for _, e := range p.Extents {
		size += int64(e.Length)
	}
	start := p.Start
	for _, e := range p.Extents {
		expired := retentionMs >= 0 && e.AgeMs() < nowMs-retentionMs
		oversize := retentionBytes >= 0 && size-int64(e.Length) >= retentionBytes
		if !expired && !oversize {
			break
		}
		size -= int64(e.Length)
		start = max(start, e.Last+1)
	}
	return start
}

// ErrMergeStale refuses a merge whose extents changed since it was planned (trimmed, or
// merged by another merge, or rewritten by a compaction pass).
var ErrMergeStale = errors.New("objtopic: the merged extents changed")

// BetweenDigest identifies the extents of a run strictly between its first and last (by file,
// section offset and length, and offsets): a Replace given it is refused if any of them
// changed since the run was planned. Deterministic: every replica computes it alike.
func BetweenDigest(run []Extent) string {
	h := sha256.New()
	var buf [8]byte
	put := func(v uint64) {
		binary.BigEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	if len(run) > 2 {
		for _, e := range run[1 : len(run)-1] {
			put(uint64(len(e.File)))
			h.Write([]byte(e.File))
			put(e.Offset)
			put(uint64(e.Length))
			put(uint64(e.Base))
			put(uint64(e.Last))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Replace puts merged in the place of the consecutive extents of p from first to last: merged
// must cover exactly their offsets; nil drops them (compaction kept none of their records;
// their offsets stay a gap). The extents are matched by file, section offset and offsets (and,
// if between is not empty, those between them by their BetweenDigest), so a merge planned on
// an older state is refused (ErrMergeStale) rather than applied to different data. It returns
// the files of the replaced extents.
func (p *Partition) Replace(first, last Extent, between string, merged *Extent) ([]string, error) {
	same := func(x Extent) func(Extent) bool { // inline extents share file "" and offset 0
		return func(e Extent) bool {
			return e.File == x.File && e.Offset == x.Offset && e.Base == x.Base && e.Last == x.Last
		}
	}
	i := slices.IndexFunc(p.Extents, same(first))
	j := slices.IndexFunc(p.Extents, same(last))
	if i < 0 || j < i ||
		merged != nil && (merged.Base != first.Base || merged.Last != last.Last || len(merged.Skip) != 0) ||
		between != "" && BetweenDigest(p.Extents[i:j+1]) != between {
		return nil, ErrMergeStale
	}
	var replaced []string
	for _, e := range p.Extents[i : j+1] {
		if e.File != "" {
			replaced = append(replaced, e.File)
		}
	}
	out := make([]Extent, 0, len(p.Extents)-(j-i))
	out = append(out, p.Extents[:i]...)
	if merged != nil {
		out = append(out, *merged)
	}
	out = append(out, p.Extents[j+1:]...)
	p.Extents = out // a new array: published copies keep theirs
	return replaced, nil
}
