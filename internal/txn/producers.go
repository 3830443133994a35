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
package txn

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
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
}

// NewPartition returns an empty producer state.
func NewPartition() *Partition { return &Partition{producers: map[int64]*Producer{}} }

// Batch is what the rules need of a produced batch.
type Batch struct {
	ProducerID      int64
	Epoch           int16
	FirstSeq        int32
	LastOffsetDelta int32
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
	case b.Epoch > p.Epoch:
		if b.FirstSeq != 0 {
			return nil, fmt.Errorf("%w: producer %d starts new epoch %d at sequence %d, not 0", kerr.OutOfOrderSequenceNumber, b.ProducerID, b.Epoch, b.FirstSeq)
		}
	default:
		if last := p.LastSeq(); last >= 0 && b.FirstSeq != IncrementSequence(last, 1) {
			return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d after %d", kerr.OutOfOrderSequenceNumber, b.ProducerID, b.Epoch, b.FirstSeq, last)
		}
	}
	return nil, nil
}

// Apply records an appended batch: one that Check allowed, or one read back from the log when
// rebuilding the state (which must not be checked: the log is the truth). Batches of a producer
// must be applied in offset order.
func (s *Partition) Apply(b Batch, firstOffset, maxTimestamp int64) {
	if b.ProducerID < 0 {
		return
	}
	p := s.producers[b.ProducerID]
	if p == nil {
		p = &Producer{ID: b.ProducerID, Epoch: b.Epoch}
		s.producers[b.ProducerID] = p
	}
	if b.Epoch != p.Epoch {
		p.Epoch, p.Batches = b.Epoch, p.Batches[:0]
	}
	if len(p.Batches) == MaxBatches {
		p.Batches = append(p.Batches[:0], p.Batches[1:]...)
	}
	p.Batches = append(p.Batches, BatchMeta{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq(), FirstOffset: firstOffset,
		LastOffset: firstOffset + int64(b.LastOffsetDelta), MaxTimestamp: maxTimestamp})
	p.LastTimestamp = maxTimestamp
}

// Expire forgets the producers whose last batch is older than expiration at nowMs, as Kafka's
// producer.id.expiration.ms does, and returns how many it forgot.
func (s *Partition) Expire(nowMs int64, expirationMs int64) int {
	n := 0
	for id, p := range s.producers {
		if nowMs-p.LastTimestamp >= expirationMs {
			delete(s.producers, id)
			n++
		}
	}
	return n
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
