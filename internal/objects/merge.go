package objects

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// Merge rewrites runs of small extents as one object each (docs/object-topics.md §5): the
// metadata shrinks to one extent per run, and a reader of old data makes one GET where it made
// many. It returns how many extents it replaced.
func (m *Maintainer) Merge(ctx context.Context) (int, error) {
	img := m.cfg.Image()
	replaced := 0
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		if !t.IsObject() {
			continue
		}
		for i, p := range t.Objects {
			run := m.mergeRun(p)
			if run == nil {
				continue
			}
			ref := controller.PartitionRef{Topic: t.ID, Partition: int32(i)}
			if err := m.mergeOne(ctx, ref, run); err != nil {
				return replaced, fmt.Errorf("merging %d extents of %s[%d]: %w", len(run), name, i, err)
			}
			replaced += len(run)
		}
	}
	return replaced, nil
}

// mergeRun picks the oldest run of consecutive small extents worth merging, or nil.
func (m *Maintainer) mergeRun(p *objtopic.Partition) []objtopic.Extent {
	exts := p.Extents
	if len(exts) <= m.cfg.MergeKeepNewest {
		return nil
	}
	exts = exts[:len(exts)-m.cfg.MergeKeepNewest]
	var run []objtopic.Extent
	var size int64
	for _, e := range exts {
		if int64(e.Length) >= m.cfg.MergeSmall || size+int64(e.Length) > m.cfg.MergeTarget {
			if len(run) >= m.cfg.MergeMinRun {
				return run
			}
			run, size = nil, 0
			if int64(e.Length) >= m.cfg.MergeSmall {
				continue
			}
		}
		run = append(run, e)
		size += int64(e.Length)
	}
	if len(run) >= m.cfg.MergeMinRun {
		return run
	}
	return nil
}

// mergeOne reads a run's accepted batches, writes them as one object and has the controller
// put it in the run's place. An object whose replacement is refused is garbage (GC).
func (m *Maintainer) mergeOne(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) error {
	var batches [][]byte
	maxTs := int64(-1)
	next := run[0].Base
	for _, e := range run {
		start := time.Now()
		data, err := m.store.GetRange(ctx, e.File, int64(e.Offset), int64(e.Length))
		if err == nil {
			err = checkSection(e.File, data, e.Length)
		}
		if err != nil {
			return err
		}
		for i := 0; len(data) > 0; i++ {
			size, err := batch.Split(data)
			if err != nil {
				return err
			}
			b := data[:size]
			data = data[size:]
			if slices.Contains(e.Skip, uint32(i)) {
				continue
			}
			h, err := batch.ParseHeader(b)
			if err != nil {
				return err
			}
			next += int64(h.LastOffsetDelta) + 1
			maxTs = max(maxTs, h.MaxTimestamp)
			batches = append(batches, b)
		}
		if next != e.Last+1 {
			return fmt.Errorf("%w: %s: batches end at %d, the extent at %d", objtopic.ErrBadFile, e.File, next-1, e.Last)
		}
		// Throttle: at most MergeBytesPerSec, so merging does not compete with produce.
		if d := time.Duration(float64(e.Length)/float64(m.cfg.MergeBytesPerSec)*float64(time.Second)) - time.Since(start); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	body, index, err := objtopic.Build(-1, 0, time.Now().UnixMilli(), []objtopic.Section{{TopicID: ref.Topic, Partition: ref.Partition, Batches: batches}})
	if err != nil {
		return err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	first, last := run[0], run[len(run)-1]
	key := fmt.Sprintf("merged/%s/%d/%020d-%020d-%s", ref.Topic, ref.Partition, first.Base, last.Last, hex.EncodeToString(rnd[:]))
	if err := m.store.PutIfAbsent(ctx, key, body); err != nil {
		return err
	}
	merged := objtopic.Extent{File: key, Offset: index[0].Offset, Length: index[0].Length, Base: first.Base, Last: last.Last, MaxTimestamp: maxTs}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.cfg.Propose(cctx, &controller.Command{Op: controller.OpReplaceExtents, ReplaceExtents: &controller.ReplaceExtents{
		PartitionRef: ref, First: first, Last: last, Merged: merged}})
}
