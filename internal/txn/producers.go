// Package txn holds the idempotent-producer rules: the state a partition keeps per producer id,
// the checks a produced batch must pass, and the durable producer-id allocator. It does no I/O:
// the partition log feeds it appended batches and stores its snapshots; the allocator persists
// through a function its owner supplies.
//
// The rules are Kafka's (ProducerStateManager, ProducerAppendInfo):
//
//   - A partition remembers, per producer id, its epoch and its last 5 batches (first and last
//     sequence, first and last offset, max timestamp).
//   - A batch whose epoch and sequence range equal a remembered batch is a duplicate: it is not
//     written again and is answered with the original offsets and no error. This check comes
//     before every other, so a retry is never answered OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - A batch with an older epoch than the producer's gets INVALID_PRODUCER_EPOCH.
//   - A batch with a newer epoch must start at sequence 0 (KIP-360: an idempotent producer bumps
//     its own epoch and restarts its sequences), unless the producer is unknown.
//   - With the same epoch, the batch must start right after the last one (sequences wrap from
//     MaxInt32 to 0); anything else is OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - An unknown producer (new, expired, or whose state was lost) is accepted at any sequence.
//
// And for transactions (Kafka's ProducerStateManager again):
//
//   - A transactional batch opens the producer's transaction on the partition if none is open:
//     its first offset bounds the last stable offset until a marker closes it.
//   - A non-transactional batch from a producer with an open transaction is INVALID_TXN_STATE.
//   - A marker (COMMIT or ABORT control batch, written by the coordinator) of an older epoch than
//     the producer's is INVALID_PRODUCER_EPOCH, of an older coordinator epoch
//     TRANSACTION_COORDINATOR_FENCED. A marker of a newer epoch (transaction version 2 bumps the
//     epoch at every commit) moves the producer to it. An ABORT that closes a transaction yields
//     the aborted range for the partition's aborted-transaction index.
package txn

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/batch"
)

// MaxBatches is how many recent batches a partition remembers per producer: the most a
// producer may have in flight with idempotence on (max.in.flight.requests.per.connection <= 5).
const MaxBatches = 5

// BatchMeta describes an appended producer batch.
type BatchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	MaxTimestamp            int64 // ms; what a duplicate's LogAppendTime answer carries
}

// Producer is the state of one producer id on one partition.
type Producer struct {
	ID    int64
	Epoch int16
	// Batches are the last appended batches of Epoch, oldest first, at most MaxBatches.
	Batches []BatchMeta
	// LastTimestamp is the max timestamp (ms) of the producer's last batch; expiry counts from it.
	LastTimestamp int64
	// TxnFirstOffset is the first offset of the producer's open transaction on the partition, or
	// -1; TxnLeaderEpoch is the leader epoch that offset was written in.
	TxnFirstOffset int64
	TxnLeaderEpoch int32
	// TxnEpoch is the producer epoch the open transaction's records were written with.
	TxnEpoch int16
	// CoordinatorEpoch is the coordinator epoch of the last marker, or -1.
	CoordinatorEpoch int32
}

// Aborted is a transaction an ABORT marker closed: the producer's records in [First, Last] are
// not to be delivered to read_committed consumers. Last is the marker's offset.
type Aborted struct {
	ProducerID  int64
	First, Last int64
}

func newProducer(id int64, epoch int16) *Producer {
	return &Producer{ID: id, Epoch: epoch, TxnFirstOffset: -1, CoordinatorEpoch: -1}
}

// LastSeq is the last sequence the producer appended, or -1 if none is remembered.
func (p *Producer) LastSeq() int32 {
	if len(p.Batches) == 0 {
		return -1
	}
	return p.Batches[len(p.Batches)-1].LastSeq
}

// Partition is the producer state of one partition. It is not safe for concurrent use: the log
// calls it under its append lock.
type Partition struct {
	producers map[int64]*Producer
	open      map[int64]int64 // producer id -> first offset of its open transaction
}

// NewPartition returns an empty producer state.
func NewPartition() *Partition {
	return &Partition{producers: map[int64]*Producer{}, open: map[int64]int64{}}
}

// Batch is what the rules need of a produced batch.
type Batch struct {
	ProducerID      int64
	Epoch           int16
	FirstSeq        int32
	LastOffsetDelta int32
	Transactional   bool
	// NoSequence marks a transactional batch a coordinator wrote for the producer (offsets of
	// TxnOffsetCommit): it carries no sequence, only the producer's epoch is checked, and it is
	// not remembered for deduplication.
	NoSequence bool
}

// LastSeq is the sequence of the batch's last record, wrapping past MaxInt32 to 0 as Kafka does.
func (b Batch) LastSeq() int32 { return IncrementSequence(b.FirstSeq, b.LastOffsetDelta) }

// IncrementSequence returns seq + n, wrapping past MaxInt32 to 0.
func IncrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// Check decides whether a produced batch may be appended. It returns the remembered batch if b
// is a duplicate of it (append nothing; answer with its offsets), or an error wrapping Kafka's
// error for a batch that breaks the rules. A nil, nil answer means append b, then Apply it.
func (s *Partition) Check(b Batch) (*BatchMeta, error) {
	if b.ProducerID < 0 {
		if b.Transactional {
			return nil, fmt.Errorf("%w: a transactional batch without a producer id", kerr.InvalidRecord)
		}
		return nil, nil
	}
	if b.NoSequence {
		if p := s.producers[b.ProducerID]; p != nil && b.Epoch < p.Epoch {
			return nil, fmt.Errorf("%w: producer %d epoch %d is older than its current epoch %d", kerr.InvalidProducerEpoch, b.ProducerID, b.Epoch, p.Epoch)
		}
		return nil, nil
	}
	if b.Epoch < 0 || b.FirstSeq < 0 {
		return nil, fmt.Errorf("%w: producer %d sent epoch %d sequence %d", kerr.InvalidRecord, b.ProducerID, b.Epoch, b.FirstSeq)
	}
	p := s.producers[b.ProducerID]
	if p == nil {
		return nil, nil // unknown producer: any sequence (Kafka since KIP-360)
	}
	if b.Epoch == p.Epoch {
		last := b.LastSeq()
		for i := range p.Batches {
			if m := &p.Batches[i]; m.FirstSeq == b.FirstSeq && m.LastSeq == last {
				dup := *m
				return &dup, nil
			}
		}
	}
	switch {
	case b.Epoch < p.Epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than its current epoch %d", kerr.InvalidProducerEpoch, b.ProducerID, b.Epoch, p.Epoch)
	case !b.Transactional && p.TxnFirstOffset >= 0:
		return nil, fmt.Errorf("%w: producer %d wrote a non-transactional batch while its transaction from offset %d is open", kerr.InvalidTxnState, b.ProducerID, p.TxnFirstOffset)
	case b.Epoch > p.Epoch:
		if b.FirstSeq != 0 {
			return nil, fmt.Errorf("%w: producer %d starts new epoch %d at sequence %d, not 0", kerr.OutOfOrderSequenceNumber, b.ProducerID, b.Epoch, b.FirstSeq)
		}
	default:
		last := p.LastSeq()
		if last < 0 && b.FirstSeq != 0 {
			// The epoch came from a marker (transaction version 2 bumps it at each end) or a
			// coordinator's batch: the producer's sequence starts again at 0 (Kafka's rule).
			return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d as its epoch's first, not 0", kerr.OutOfOrderSequenceNumber, b.ProducerID, b.Epoch, b.FirstSeq)
		}
		if last >= 0 && b.FirstSeq != IncrementSequence(last, 1) {
			return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d after %d", kerr.OutOfOrderSequenceNumber, b.ProducerID, b.Epoch, b.FirstSeq, last)
		}
	}
	return nil, nil
}

// Apply records an appended batch: one that Check allowed, or one read back from the log when
// rebuilding the state (which must not be checked: the log is the truth). Batches of a producer
// must be applied in offset order. leaderEpoch is the epoch the batch was written in.
func (s *Partition) Apply(b Batch, firstOffset, maxTimestamp int64, leaderEpoch int32) {
	if b.ProducerID < 0 {
		return
	}
	p := s.producers[b.ProducerID]
	if p == nil {
		p = newProducer(b.ProducerID, b.Epoch)
		s.producers[b.ProducerID] = p
	}
	if b.Transactional && p.TxnFirstOffset < 0 {
		p.TxnFirstOffset, p.TxnLeaderEpoch, p.TxnEpoch = firstOffset, leaderEpoch, b.Epoch
		s.open[p.ID] = firstOffset
	}
	if b.Epoch != p.Epoch {
		p.Epoch, p.Batches = b.Epoch, p.Batches[:0]
	}
	if b.NoSequence {
		p.LastTimestamp = maxTimestamp
		return
	}
	if len(p.Batches) == MaxBatches {
		p.Batches = append(p.Batches[:0], p.Batches[1:]...)
	}
	p.Batches = append(p.Batches, BatchMeta{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq(), FirstOffset: firstOffset,
		LastOffset: firstOffset + int64(b.LastOffsetDelta), MaxTimestamp: maxTimestamp})
	p.LastTimestamp = maxTimestamp
}

// Marker is what the rules need of a COMMIT or ABORT control batch.
type Marker struct {
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	// Own marks the partition's own abort of its open transaction (written with coordinator
	// epoch -1), which no epoch fences. In memory only: the log keeps coordinator epoch -1, and
	// a marker read back from it is applied unchecked. A client's marker with coordinator epoch
	// -1 (an operator's abort, KIP-664) is not Own: it is checked as any other.
	Own bool
}

// AppendBatch appends the marker's control batch (batch.AppendControl: base offset 0, stamped
// timestampMs) to dst, as a partition stores it.
func (m Marker) AppendBatch(dst []byte, timestampMs int64) []byte {
	typ := batch.ControlAbort
	if m.Commit {
		typ = batch.ControlCommit
	}
	return batch.AppendControl(dst, m.ProducerID, m.Epoch, batch.Control{Type: typ, CoordinatorEpoch: m.CoordinatorEpoch}, timestampMs)
}

// CheckMarker decides whether a marker may be appended: not from an older producer epoch or an
// older coordinator epoch than the producer's last marker (Kafka's
// ProducerAppendInfo.appendEndTxnMarker: checkProducerEpoch, checkCoordinatorEpoch), an
// operator's abort with coordinator epoch -1 included. The partition's own abort of its open
// transaction (Own), which no coordinator can commit, is not fenced by epochs, and it always
// closes the open transaction.
func (s *Partition) CheckMarker(m Marker) error {
	if m.ProducerID < 0 || m.Epoch < 0 {
		return fmt.Errorf("%w: marker for producer %d epoch %d", kerr.InvalidRecord, m.ProducerID, m.Epoch)
	}
	p := s.producers[m.ProducerID]
	if p == nil || m.Own {
		return nil
	}
	if m.Epoch < p.Epoch {
		return fmt.Errorf("%w: marker of producer %d epoch %d is older than its epoch %d", kerr.InvalidProducerEpoch, m.ProducerID, m.Epoch, p.Epoch)
	}
	if m.CoordinatorEpoch < p.CoordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d after %d", kerr.TransactionCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, p.CoordinatorEpoch)
	}
	return nil
}

// ApplyMarker records an appended marker at offset and closes the producer's open transaction,
// returning its range if the marker aborted one. Like Apply, it also takes markers read back
// from the log unchecked.
func (s *Partition) ApplyMarker(m Marker, offset, timestamp int64) *Aborted {
	p := s.producers[m.ProducerID]
	if p == nil {
		p = newProducer(m.ProducerID, m.Epoch)
		s.producers[m.ProducerID] = p
	}
	if m.Epoch > p.Epoch {
		p.Epoch, p.Batches = m.Epoch, p.Batches[:0]
	}
	p.CoordinatorEpoch = max(p.CoordinatorEpoch, m.CoordinatorEpoch)
	p.LastTimestamp = max(p.LastTimestamp, timestamp)
	// A marker closes the open transaction only if it is that transaction's: written with the
	// records' epoch (transaction version 1) or the one after (version 2 and fencing aborts bump
	// it once). A marker of a later transaction of the producer (whose own records could not be
	// taken here while this one was open) leaves it open for its own marker, or for the
	// partition's check with the coordinator.
	if p.TxnFirstOffset < 0 || (m.Epoch > p.TxnEpoch+1 && m.CoordinatorEpoch != -1) {
		return nil
	}
	var ab *Aborted
	if !m.Commit {
		ab = &Aborted{ProducerID: p.ID, First: p.TxnFirstOffset, Last: offset}
	}
	p.TxnFirstOffset, p.TxnLeaderEpoch, p.TxnEpoch = -1, 0, 0
	delete(s.open, p.ID)
	return ab
}

// FirstUnstable is the first offset of the earliest open transaction, or -1 if none is open:
// read_committed consumers may read only below it (and below the high watermark).
func (s *Partition) FirstUnstable() int64 {
	first := int64(-1)
	for _, off := range s.open {
		if first < 0 || off < first {
			first = off
		}
	}
	return first
}

// OpenTransactions returns the producers with an open transaction, each with its first offset.
// The caller owns the map.
func (s *Partition) OpenTransactions() map[int64]int64 { return maps.Clone(s.open) }

// Open returns the producer's open transaction: its first offset, the leader epoch it began in
// and the producer epoch of its records, or ok=false.
func (s *Partition) Open(producerID int64) (first int64, leaderEpoch int32, epoch int16, ok bool) {
	p := s.producers[producerID]
	if p == nil || p.TxnFirstOffset < 0 {
		return 0, 0, 0, false
	}
	return p.TxnFirstOffset, p.TxnLeaderEpoch, p.TxnEpoch, true
}

// Sequence returns a producer's current epoch and the last sequence number it appended in it
// (-1 if none), or ok=false for a producer the partition does not know.
func (s *Partition) Sequence(producerID int64) (epoch int16, last int32, ok bool) {
	p := s.producers[producerID]
	if p == nil {
		return 0, 0, false
	}
	return p.Epoch, p.LastSeq(), true
}

// Expire forgets the producers whose last batch is older than expiration at nowMs, as Kafka's
// producer.id.expiration.ms does, and returns how many it forgot. A producer with an open
// transaction is kept: its marker must still find it.
func (s *Partition) Expire(nowMs int64, expirationMs int64) int {
	return len(s.ExpireIDs(nowMs, expirationMs))
}

// ExpireIDs is Expire returning the ids of the producers it forgot.
func (s *Partition) ExpireIDs(nowMs int64, expirationMs int64) []int64 {
	var ids []int64
	for id, p := range s.producers {
		if expired(p, nowMs, expirationMs) {
			delete(s.producers, id)
			ids = append(ids, id)
		}
	}
	return ids
}

// Expirable reports whether Expire would forget a producer.
func (s *Partition) Expirable(nowMs int64, expirationMs int64) bool {
	for _, p := range s.producers {
		if expired(p, nowMs, expirationMs) {
			return true
		}
	}
	return false
}

func expired(p *Producer, nowMs, expirationMs int64) bool {
	return p.TxnFirstOffset < 0 && nowMs-p.LastTimestamp >= expirationMs
}

// Len is the number of producers remembered.
func (s *Partition) Len() int { return len(s.producers) }

// Producers returns a copy of every producer's state, by id. The caller owns the result.
func (s *Partition) Producers() []Producer {
	out := make([]Producer, 0, len(s.producers))
	for _, p := range s.producers {
		cp := *p
		cp.Batches = slices.Clone(p.Batches)
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b Producer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Clone returns an independent copy of the state.
func (s *Partition) Clone() *Partition {
	c := &Partition{producers: make(map[int64]*Producer, len(s.producers)), open: maps.Clone(s.open)}
	for id, p := range s.producers {
		cp := *p
		cp.Batches = slices.Clone(p.Batches)
		c.producers[id] = &cp
	}
	return c
}
