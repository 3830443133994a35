package objects

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
		// A clean extent (compaction's) is left to compaction, which rewrites the clean ones
		// together: a merge with dirty extents would make its keys dirty again.
		big := int64(e.Length) >= m.cfg.MergeSmall || e.Clean
		if big || size+int64(e.Length) > m.cfg.MergeTarget {
			if len(run) >= m.cfg.MergeMinRun {
				return run
			}
			run, size = nil, 0
			if big {
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

// mergeOne has a run's accepted batches written as one object, by another node if a
// MergeWorker takes it (else, or if that node fails, here), and has the controller put it in
// the run's place. An object whose replacement is refused is garbage (GC).
func (m *Maintainer) mergeOne(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) error {
	var merged *objtopic.Extent
	var err error
	how := "local"
	if m.cfg.MergeWorker != nil {
		how = "delegated"
		merged, err = m.cfg.MergeWorker(ctx, ref, run)
		if errors.Is(err, ErrNoWorker) {
			how, err = "local", nil
		} else if err != nil {
			m.cfg.Logger.Warn("objects: the node asked to merge a run failed; merging here", "topic", ref.Topic, "partition", ref.Partition, "err", err)
			how, err = "delegation_failed", nil
		} else if merged == nil {
			// A run with no batch left (all skipped) is replaced by nothing; the worker said so.
			return m.replaceRunCounted(ctx, ref, run, nil, how)
		}
	}
	if merged == nil {
		if merged, err = m.MergeRun(ctx, ref, run); err != nil {
			return err
		}
	}
	return m.replaceRunCounted(ctx, ref, run, merged, how)
}

func (m *Maintainer) replaceRunCounted(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent, merged *objtopic.Extent, how string) error {
	if err := m.replaceRun(ctx, ref, run, merged, nil); err != nil {
		return err
	}
	m.cfg.Metrics.Merged(how)
	return nil
}

// ErrNoWorker is a MergeWorker's or CompactWorker's answer when no other node can take the
// job: the active controller does it itself.
var ErrNoWorker = errors.New("objects: no other node to do it")

// MergeRun reads a run of consecutive extents of a partition and writes their accepted batches
// as one object, returning its extent (nil if no batch is left). It changes no metadata: the
// active controller runs it, or asks another node to (docs/object-topics.md §5), and proposes
// the replacement itself.
func (m *Maintainer) MergeRun(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent) (*objtopic.Extent, error) {
	if len(run) == 0 {
		return nil, errors.New("objects: an empty run to merge")
	}
	batches, err := m.collectRun(ctx, run, func(b []byte, _ *batch.Header) ([]byte, error) { return b, nil })
	if err != nil {
		return nil, err
	}
	return m.writeRun(ctx, ref, run, batches)
}

// readSection reads an extent's section and checks it, throttled to MergeBytesPerSec so that
// merging and compaction do not compete with produce.
func (m *Maintainer) readSection(ctx context.Context, e objtopic.Extent) ([]byte, error) {
	if e.File == "" {
		return e.Inline, nil // a transaction marker, kept in the image
	}
	start := time.Now()
	data, err := m.store.GetRange(ctx, e.File, int64(e.Offset), int64(e.Length))
	if err == nil {
		err = checkSection(e.File, data, e.Length)
	}
	if err != nil {
		return nil, err
	}
	if d := time.Duration(float64(e.Length)/float64(m.cfg.MergeBytesPerSec)*float64(time.Second)) - time.Since(start); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return data, nil
}

// collectRun reads the sections of a run of consecutive extents and passes each accepted batch,
// a copy with its base offset set, through edit, which returns the batch to keep (nil: drop it).
// It returns the batches kept.
func (m *Maintainer) collectRun(ctx context.Context, run []objtopic.Extent, edit func(b []byte, h *batch.Header) ([]byte, error)) ([][]byte, error) {
	var batches [][]byte
	for _, e := range run {
		data, err := m.readSection(ctx, e)
		if err != nil {
			return nil, err
		}
		err = objtopic.EachBatch(e, data, func(b []byte, h batch.Header, base int64) error {
			b = append([]byte(nil), b...)
			batch.SetBaseOffset(b, base)
			h.BaseOffset = base
			out, err := edit(b, &h)
			if err != nil || out == nil {
				return err
			}
			if _, err := batch.ValidateStored(out); err != nil { // check right before writing
				return fmt.Errorf("objects: rewriting %s at offset %d built a bad batch: %w", e.File, base, err)
			}
			batches = append(batches, out)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return batches, nil
}

// writeRun writes the batches (with their base offsets) collected from a run of extents as one
// object, and returns its extent: Absolute, covering the run's offsets; nil if there is no batch.
func (m *Maintainer) writeRun(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent, batches [][]byte) (*objtopic.Extent, error) {
	if len(batches) == 0 {
		return nil, nil
	}
	maxTs := int64(-1)
	for _, b := range batches {
		h, _ := batch.ParseHeader(b) // checked by collectRun
		maxTs = max(maxTs, h.MaxTimestamp)
	}
	body, index, err := objtopic.Build(-1, 0, time.Now().UnixMilli(), []objtopic.Section{{TopicID: ref.Topic, Partition: ref.Partition, Batches: batches}})
	if err != nil {
		return nil, err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	first, last := run[0], run[len(run)-1]
	key := fmt.Sprintf("merged/%s/%d/%020d-%020d-%s", ref.Topic, ref.Partition, first.Base, last.Last, hex.EncodeToString(rnd[:]))
	if err := m.store.PutIfAbsent(ctx, key, body); err != nil {
		return nil, err
	}
	return &objtopic.Extent{File: key, Offset: index[0].Offset, Length: index[0].Length, Base: first.Base, Last: last.Last,
		MaxTimestamp: maxTs, Absolute: true}, nil
}

// replaceRun has the controller put merged (nil: nothing) in the place of a run of extents, and
// drop the aborted-transaction index entries of the ABORT markers at dropAborted (compaction
// dropped them).
func (m *Maintainer) replaceRun(ctx context.Context, ref controller.PartitionRef, run []objtopic.Extent, merged *objtopic.Extent, dropAborted []int64) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return m.cfg.Propose(cctx, &controller.Command{Op: controller.OpReplaceExtents, ReplaceExtents: &controller.ReplaceExtents{
		PartitionRef: ref, First: run[0], Last: run[len(run)-1], Between: objtopic.BetweenDigest(run), Merged: merged,
		DropAborted: dropAborted}})
}
