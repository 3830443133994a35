package objects

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/objstore"
	"github.com/runnel-dev/runnel/internal/objtopic"
)

// SlowPath commits the journal files their writers did not commit (docs/object-topics.md §9): a
// writer that died after acknowledging lazy batches, or whose commits kept failing. For each
// writer run the image knows, it lists the journal from the run's first uncommitted file and
// commits every uncommitted file older than the grace period: its lazy sections (acknowledged,
// so they must become visible) and none of its eager ones (never acknowledged). Commits are
// idempotent by (run, file number), so the slow path and a late fast path race safely. It
// returns how many files it committed, and sets the journal backlog gauge.
func (m *Maintainer) SlowPath(ctx context.Context, now time.Time) (int, error) {
	img := m.cfg.Image()
	runs := make([]string, 0, len(img.ObjWriters))
	for run := range img.ObjWriters {
		runs = append(runs, run)
	}
	// Runs the image does not know announced themselves in the store (Ripcord: started and
	// maybe died while the controller was away).
	announced, err := m.cfg.Store.List(ctx, "runs/", "", 0)
	if err != nil {
		return 0, err
	}
	for _, o := range announced {
		if run := strings.TrimPrefix(o.Key, "runs/"); img.ObjWriters[run] == nil && run != "" {
			runs = append(runs, run)
		}
	}
	slices.Sort(runs)
	committed, backlog := 0, 0
	var firstErr error
	for _, run := range runs {
		w := img.ObjWriters[run]
		if w == nil {
			w = &controller.ObjWriter{Node: runNode(run)}
		}
		startAfter := ""
		if end := w.Committed.Prefix(1); end >= 1 {
			startAfter = JournalKey(run, uint64(end))
		}
		objs, err := m.cfg.Store.List(ctx, "journal/"+run+"/", startAfter, 1000)
		if err != nil {
			firstErr = cmp.Or(firstErr, err) // the other runs go on: one run's trouble must not starve them
			continue
		}
		for _, o := range objs {
			_, seq, ok := ParseJournalKey(o.Key)
			if !ok || w.Committed.Covers(int64(seq), int64(seq)) {
				continue
			}
			backlog++
			age := now.Sub(o.Modified)
			if age < m.cfg.SlowPathGrace {
				continue // its writer is most likely committing it now
			}
			// A live writer commits its own files (deferred ones too, once the controller
			// answers it again): the slow path takes them only when long overdue, so it does
			// not fail a slow commit's eager batches, nor race a writer draining its backlog.
			if writerLive(img, run) && age < liveWriterGrace {
				continue
			}
			cmd, err := m.slowCommit(ctx, run, w.Node, seq, o)
			if err != nil {
				m.cfg.Logger.Error("objects: the slow path cannot read a journal file; it will try again", "key", o.Key, "err", err)
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = m.cfg.Propose(cctx, &controller.Command{Op: controller.OpCommitFile, CommitFile: cmd})
			cancel()
			if err != nil {
				firstErr = cmp.Or(firstErr, fmt.Errorf("committing %s: %w", o.Key, err))
				break // this run's later files wait for the next round
			}
			m.cfg.Metrics.SlowCommit()
			committed++
			backlog--
		}
	}
	m.cfg.Metrics.Backlog(backlog)
	return committed, firstErr
}

// liveWriterGrace: how overdue a live writer's file with eager sections must be before the
// slow path commits it anyway.
const liveWriterGrace = 30 * time.Second

// writerLive reports whether a run is the current run of a registered, unfenced node.
func writerLive(img *controller.Image, run string) bool {
	n := img.Nodes[runNode(run)]
	return n != nil && !n.Fenced && n.Run == run
}

// runNode is the node id a run id ("<node>-<random>") starts with (-1 if none).
func runNode(run string) int32 {
	id, _, ok := strings.Cut(run, "-")
	n, err := strconv.ParseInt(id, 10, 32)
	if !ok || err != nil {
		return -1
	}
	return int32(n)
}

// slowCommit reads a journal file and builds the commit of its lazy sections.
func (m *Maintainer) slowCommit(ctx context.Context, run string, node int32, seq uint64, o objstore.Object) (*controller.CommitFile, error) {
	data, err := m.cfg.Store.Get(ctx, o.Key)
	if err != nil {
		return nil, err
	}
	h, err := objtopic.ParseHeader(data, int64(len(data)))
	if err != nil {
		return nil, err
	}
	cmd := &controller.CommitFile{Writer: run, Node: node, Seq: seq, Key: o.Key, Size: int64(len(data)), Slow: true}
	for _, e := range h.Index {
		if e.Flags&objtopic.SectionLazy == 0 {
			continue
		}
		bs, err := objtopic.SectionBatches(e, data[e.Offset:e.Offset+uint64(e.Length)])
		if err != nil {
			return nil, err
		}
		heads := make([]batch.Header, len(bs))
		for i, b := range bs {
			if heads[i], err = batch.ParseHeader(b); err != nil {
				return nil, err
			}
		}
		cs := controller.CommitSection{PartitionRef: controller.PartitionRef{Topic: e.TopicID, Partition: e.Partition},
			Offset: e.Offset, Length: e.Length, Lazy: true}
		for _, mt := range batchMetas(heads) {
			cs.Batches = append(cs.Batches, mt.m)
		}
		cmd.Sections = append(cmd.Sections, cs)
	}
	return cmd, nil
}
