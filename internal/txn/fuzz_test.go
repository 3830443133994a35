package txn

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// model is the idempotence rules written as plainly as possible, to check Partition against:
// it keeps every batch of a producer's current epoch, not just the last MaxBatches.
type model struct {
	producers map[int64]*modelProducer
}

type modelProducer struct {
	epoch   int16
	history []BatchMeta
}

// decide returns what must happen to b: append (nil, nil), a duplicate, or Kafka's error.
func (m *model) decide(b Batch) (*BatchMeta, error) {
	p := m.producers[b.ProducerID]
	if p == nil {
		return nil, nil
	}
	last := b.LastSeq()
	if b.Epoch == p.epoch {
		recent := p.history[max(0, len(p.history)-MaxBatches):]
		for i := range recent {
			if recent[i].FirstSeq == b.FirstSeq && recent[i].LastSeq == last {
				return &recent[i], nil
			}
		}
	}
	switch {
	case b.Epoch < p.epoch:
		return nil, kerr.InvalidProducerEpoch
	case b.Epoch > p.epoch && b.FirstSeq == 0:
		return nil, nil
	case b.Epoch == p.epoch && b.FirstSeq == IncrementSequence(p.history[len(p.history)-1].LastSeq, 1):
		return nil, nil
	}
	return nil, kerr.OutOfOrderSequenceNumber
}

func (m *model) apply(b Batch, first int64) {
	p := m.producers[b.ProducerID]
	if p == nil || b.Epoch != p.epoch {
		p = &modelProducer{epoch: b.Epoch}
		m.producers[b.ProducerID] = p
	}
	p.history = append(p.history, BatchMeta{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq(), FirstOffset: first,
		LastOffset: first + int64(b.LastOffsetDelta)})
}

// FuzzRules drives a Partition and the model with the same sequence of (pid, epoch, seq, count)
// appends and checks that they agree on every one. Now and then the state goes through a
// snapshot and back, as it does across a restart.
func FuzzRules(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 2, 0, 0, 2, 1})
	f.Add([]byte{1, 2, 5, 3, 1, 2, 8, 1, 1, 1, 9, 1, 1, 2, 5, 3, 255, 0, 0, 0, 1, 2, 9, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := NewPartition()
		m := &model{producers: map[int64]*modelProducer{}}
		var next int64
		for len(ops) >= 4 {
			op := ops[:4]
			ops = ops[4:]
			if op[0] == 255 { // snapshot round trip
				off, restored, err := ParseSnapshot(s.AppendSnapshot(nil, next))
				if err != nil || off != next {
					t.Fatalf("snapshot round trip: %d, %v", off, err)
				}
				s = restored
				continue
			}
			b := Batch{ProducerID: int64(op[0] % 3), Epoch: int16(op[1] % 3), FirstSeq: int32(op[2] % 16),
				LastOffsetDelta: int32(op[3] % 4)}
			wantDup, wantErr := m.decide(b)
			dup, err := s.Check(b)
			switch {
			case wantErr != nil:
				if !errors.Is(err, wantErr) {
					t.Fatalf("Check(%+v) = %+v, %v; the model says %v", b, dup, err, wantErr)
				}
			case wantDup != nil:
				if err != nil || dup == nil || dup.FirstOffset != wantDup.FirstOffset || dup.LastOffset != wantDup.LastOffset {
					t.Fatalf("Check(%+v) = %+v, %v; the model says duplicate of %+v", b, dup, err, wantDup)
				}
			default:
				if err != nil || dup != nil {
					t.Fatalf("Check(%+v) = %+v, %v; the model says append", b, dup, err)
				}
				s.Apply(b, next, 0, 0)
				m.apply(b, next)
				next += int64(b.LastOffsetDelta) + 1
			}
		}
	})
}

// FuzzParseSnapshot: arbitrary bytes never panic, and whatever parses re-encodes to the same
// bytes.
func FuzzParseSnapshot(f *testing.F) {
	s := NewPartition()
	s.Apply(Batch{ProducerID: 3, Epoch: 1, FirstSeq: 0, LastOffsetDelta: 4}, 10, 99, 0)
	f.Add(s.AppendSnapshot(nil, 15))
	f.Add([]byte("RNPS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			off, p, err := ParseSnapshot(b)
			if err != nil {
				return
			}
			again := p.AppendSnapshot(nil, off)
			if b[len(snapshotMagic)] == snapshotVersion && string(again) != string(b) {
				t.Fatalf("parsed snapshot re-encodes to %x; was %x", again, b)
			}
			// An older version re-encodes as the current one, which parses to the same state.
			off2, p2, err := ParseSnapshot(again)
			if err != nil || off2 != off || string(p2.AppendSnapshot(nil, off2)) != string(again) {
				t.Fatalf("re-encoded snapshot %x parses to %d, %v", again, off2, err)
			}
		}
		check(b)
		// With its CRC fixed up, so the fuzzer explores the decoder, not just the checksum.
		if len(b) >= 4 {
			fixed := append([]byte(nil), b...)
			binary.BigEndian.PutUint32(fixed[len(fixed)-4:], crc32.Checksum(fixed[:len(fixed)-4], castagnoli))
			check(fixed)
		}
	})
}
