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
// writer run the image assigns to this process (SlowPathOwner), it lists the journal after the
// run's committed prefix and commits every uncommitted file older than the grace period: its
// lazy sections (acknowledged, so they must become visible) and none of its eager ones (never
// acknowledged). Commits are idempotent by (run, file number), so the slow path and a late
// fast path race safely. A run is listed again next round while it has a backlog or as soon as
// its writer stops being live, and otherwise every few seconds (listing every run every second
// would cost more requests than the writes). It returns how many files it committed, and sets
// the journal backlog gauge (of the runs this process looks after).
func (m *Maintainer) SlowPath(ctx context.Context, now time.Time) (int, error) {
	img := m.cfg.Image()
	runs := make([]string, 0, len(img.ObjWriters))
	for run := range img.ObjWriters {
		runs = append(runs, run)
	}
	// Runs the image does not know announced themselves in the store (Ripcord: started and
	// maybe died while the controller was away).
	if !now.Before(m.markersNext) {
		announced, err := m.quick.List(ctx, "runs/", "", 0)
		if err != nil {
			return 0, err
		}
		m.announced = m.announced[:0]
		for _, o := range announced {
			if run := strings.TrimPrefix(o.Key, "runs/"); run != "" {
				m.announced = append(m.announced, run)
			}
		}
		m.markersNext = now.Add(slowPathQuiet)
	}
	for _, run := range m.announced {
		if img.ObjWriters[run] == nil {
			runs = append(runs, run)
		}
	}
	slices.Sort(runs)
	live := img.LiveNodes()
	runs = slices.DeleteFunc(runs, func(run string) bool { return SlowPathOwner(run, live) != m.cfg.Node })
	committed, backlog := 0, 0
	var firstErr error
	seen := make(map[string]bool, len(runs))
	for _, run := range runs {
		seen[run] = true
		st, alive := m.sched[run], writerLive(img, run)
		if now.Before(st.next) && st.live == alive {
			backlog += st.backlog
			continue
		}
		c, b, err := m.slowPathRun(ctx, img, run, now)
		committed, backlog = committed+c, backlog+b
		firstErr = cmp.Or(firstErr, err) // the other runs go on: one run's trouble must not starve them
		st = runSchedule{next: now.Add(slowPathQuiet), live: alive, backlog: b}
		if b > 0 || err != nil {
			st.next = now // next round
		} else if alive {
			st.next = now.Add(liveWriterGrace / 2)
		}
		m.sched[run] = st
	}
	for run := range m.sched {
		if !seen[run] {
			delete(m.sched, run)
		}
	}
	m.cfg.Metrics.Backlog(backlog)
	return committed, firstErr
}

// runSchedule is when the slow path lists a run's journal next.
type runSchedule struct {
	next    time.Time
	live    bool // its writer was live at the last listing: a change lists it at once
	backlog int  // uncommitted files at the last listing
}

// slowPathQuiet: how often the slow path lists a dead writer's journal that had nothing left
// to commit (a writer cut off from the controller may write on, in Ripcord mode), and the
// announced runs.
const slowPathQuiet = 5 * time.Second

// slowPathPage and slowPathPages: the slow path lists a run's journal this many keys at a time,
// and at most this many pages per round (a run's backlog beyond them waits for the next round).
var (
	slowPathPage  = 1000 // a variable for tests
	slowPathPages = 100
)

// slowPathRun commits what it may of one run's uncommitted journal files. It pages through
// the whole journal after the run's committed prefix, so a file that never got committed (its
// writer failed and moved on) hides none behind it.
func (m *Maintainer) slowPathRun(ctx context.Context, img *controller.Image, run string, now time.Time) (committed, backlog int, err error) {
	w := img.ObjWriters[run]
	if w == nil {
		w = &controller.ObjWriter{Node: runNode(run)}
	}
	startAfter := ""
	if end := w.Committed.Prefix(1); end >= 1 {
		startAfter = JournalKey(run, uint64(end))
	}
	for range slowPathPages {
		objs, err := m.quick.List(ctx, "journal/"+run+"/", startAfter, slowPathPage)
		if err != nil {
			return committed, backlog, err
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
				return committed, backlog, fmt.Errorf("committing %s: %w", o.Key, err) // later files wait for the next round
			}
			m.cfg.Metrics.SlowCommit()
			committed++
			backlog--
		}
		if len(objs) < slowPathPage {
			break
		}
		startAfter = objs[len(objs)-1].Key
	}
	return committed, backlog, nil
}

// SlowPathOwner is the process that runs the slow path for a writer run: the controller's
// schedule is its image, whose live processes (nodes and agents) share the runs by rendezvous
// hashing. A process that joins or leaves moves only its share; every process computes the same
// owner from the same image, and for a moment around an image change two may both work on a
// run, which is harmless (commits are idempotent by file).
func SlowPathOwner(run string, live []int32) int32 { return Rendezvous([]byte("slow-path/"+run), live) }

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
	data, err := m.quick.Get(ctx, o.Key)
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
