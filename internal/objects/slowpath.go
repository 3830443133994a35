package objects

import (
	"cmp"
	"context"
	"fmt"
	"maps"
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
			if run := MarkerRun(o.Key); run != "" && !slices.Contains(m.announced, run) {
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
	w := runWriter(img, run)
	held := false // a file was left for its age: the ones after it wait too
	_, err = m.uncommitted(ctx, run, w, slowPathPages, func(seq uint64, o objstore.Object) error {
		backlog++
		if held {
			return nil
		}
		// A file young enough that its writer is most likely committing it now is left; so
		// is, while its writer is live (it commits its own files, deferred ones too, once the
		// controller answers it again), one not long overdue, so the slow path neither fails a
		// slow commit's eager batches nor races a writer draining its backlog. The run's later
		// files are left with it: a store's write times need not follow the files' order
		// (writes run concurrently), and one process's files commit in its order.
		age := now.Sub(o.Modified)
		if age < m.cfg.SlowPathGrace || writerLive(img, run) && age < liveWriterGrace {
			held = true
			return nil
		}
		cmd, err := m.slowCommit(ctx, run, w.Node, seq, o)
		if err != nil {
			m.cfg.Logger.Error("objects: the slow path cannot read a journal file; it will try again", "key", o.Key, "err", err)
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = m.cfg.Propose(cctx, &controller.Command{Op: controller.OpCommitFile, CommitFile: cmd})
		cancel()
		if err != nil {
			return fmt.Errorf("committing %s: %w", o.Key, err) // later files wait for the next round
		}
		m.cfg.Metrics.SlowCommit()
		committed++
		backlog--
		return nil
	})
	return committed, backlog, err
}

// runWriter is the image's record of a writer run (an empty one for a run it does not know).
func runWriter(img *controller.Image, run string) *controller.ObjWriter {
	if w := img.Writer(run); w != nil {
		return w
	}
	return &controller.ObjWriter{Node: runNode(run)}
}

// uncommitted calls fn with each journal file of run after w's committed prefix that w has not
// committed, in order, listing at most pages pages (more: the journal goes on); it stops at
// fn's first error. A listing that reaches a run of committed files goes on after it: the
// pages are spent on uncommitted files, so a hole (a number never written: a flush refused, a
// write that failed) does not keep every round listing the same committed files behind it.
func (m *Maintainer) uncommitted(ctx context.Context, run string, w *controller.ObjWriter, pages int, fn func(seq uint64, o objstore.Object) error) (more bool, err error) {
	startAfter := ""
	if end := w.Committed.End(1); end >= 1 {
		startAfter = JournalKey(run, uint64(end))
	}
	for range pages {
		objs, err := m.quick.List(ctx, "journal/"+run+"/", startAfter, slowPathPage)
		if err != nil {
			return false, err
		}
		for _, o := range objs {
			_, seq, ok := ParseJournalKey(o.Key)
			if !ok || w.Committed.Covers(int64(seq), int64(seq)) {
				continue
			}
			if err := fn(seq, o); err != nil {
				return false, err
			}
		}
		if len(objs) < slowPathPage {
			return false, nil
		}
		startAfter = objs[len(objs)-1].Key
		if _, seq, ok := ParseJournalKey(startAfter); ok {
			if end := w.Committed.End(int64(seq) + 1); end > int64(seq) {
				startAfter = JournalKey(run, uint64(end))
			}
		}
	}
	return true, nil
}

// RunBacklog is one writer run's journal files not yet committed: acknowledged lazy data that
// readers do not see yet, and eager batches whose producers still wait.
type RunBacklog struct {
	Run        string
	Node       int32
	Live       bool  // the run is its node's current, unfenced run (else the slow path commits its files)
	SlowPath   int32 // the process whose slow path looks after the run
	Files      int
	Bytes      int64
	Oldest     time.Time // the oldest file's write time (zero: none)
	Incomplete bool      // the listing stopped at its page limit: there are more
}

// Backlog lists every writer run's uncommitted journal files: the runs the image knows and
// those that announced themselves in the store (Ripcord). It reads the store (one listing per
// run at least), for a status page, not a hot path.
func (m *Maintainer) Backlog(ctx context.Context) ([]RunBacklog, error) {
	img := m.cfg.Image()
	runs := map[string]bool{}
	for run := range img.ObjWriters {
		runs[run] = true
	}
	announced, err := m.quick.List(ctx, "runs/", "", 0)
	if err != nil {
		return nil, err
	}
	for _, o := range announced {
		if run := MarkerRun(o.Key); run != "" {
			runs[run] = true
		}
	}
	live := img.LiveNodes()
	var out []RunBacklog
	for _, run := range slices.Sorted(maps.Keys(runs)) {
		w := runWriter(img, run)
		b := RunBacklog{Run: run, Node: w.Node, Live: writerLive(img, run), SlowPath: SlowPathOwner(run, live)}
		more, err := m.uncommitted(ctx, run, w, 10, func(_ uint64, o objstore.Object) error {
			b.Files++
			b.Bytes += o.Size
			if b.Oldest.IsZero() || o.Modified.Before(b.Oldest) {
				b.Oldest = o.Modified
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("listing the journal of run %s: %w", run, err)
		}
		b.Incomplete = more
		out = append(out, b)
	}
	return out, nil
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
