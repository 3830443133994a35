package broker

import (
	"fmt"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/topics"
)

// Reading a coordinator's partition back, for the group and transaction coordinators' loads.

// forEachRecord calls f with the key and value of every record of a partition's log (control
// batches skipped).
func forEachRecord(p *topics.Partition, f func(key, value []byte)) error {
	return forEachBatch(p, func(h *batch.Header, b []byte) error {
		if h.IsControl() {
			return nil
		}
		return batch.EachRecord(h, b, func(rec *batch.Record) { f(rec.Key, rec.Value) })
	})
}

// forEachBatch calls f with every batch of a partition's log, in order.
func forEachBatch(p *topics.Partition, f func(h *batch.Header, b []byte) error) error {
	_, err := forEachBatchFrom(p, p.Log.StartOffset(), f)
	return err
}

// forEachBatchFrom calls f with every batch of a partition's log from offset from, in order, and
// returns the offset it read up to.
func forEachBatchFrom(p *topics.Partition, from int64, f func(h *batch.Header, b []byte) error) (int64, error) {
	off := from
	for off < p.Log.EndOffset() {
		data, err := p.Log.Read(nil, off, 1<<20)
		if err != nil {
			return off, fmt.Errorf("broker: reading %s[%d] at %d: %w", p.Topic, p.Index, off, err)
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				return off, err
			}
			b := data[:h.Size()]
			data = data[h.Size():]
			off = h.NextOffset()
			if err := f(&h, b); err != nil {
				return off, err
			}
		}
	}
	return off, nil
}
