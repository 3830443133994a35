package replica

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/batch"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/transport"
	"github.com/runnel-dev/runnel/internal/vfs"
)

var (
	simSeeds = flag.Int("sim.seeds", 12, "seeds of the randomized replication simulation")
	simFirst = flag.Int("sim.first", 0, "first seed of the randomized replication simulation")
)

// The simulation runs three replicas of one partition on five nodes with real logs on
// in-memory file systems, a network that loses and delays frames (in order per direction, as
// TCP is), crashes (a power loss without write caching: everything unsynced is gone; a process
// kill with it), restarts, isolation of a node (its frames are dropped both ways and it hears no
// metadata), elections run as the controller runs them, and reassignments to another three of
// the five nodes, finished as the controller finishes them (on the leader's reports) or
// cancelled; a node a move removes loses its copy. It checks that every acknowledged batch
// stays at its offset in every later leader's log, that the current leader's high watermark
// never goes back, and that all replicas end with the same log.
func TestSimulation(t *testing.T) {
	runSims(t, 1500, mixFaults, "acknowledged nothing", func(s *sim) bool { return len(s.committed) == 0 })
}

// TestSimulationMoves is TestSimulation with reassignments one after another and fewer faults:
// a move's target set learns while the current set commits, then commits jointly, and the move
// finishes only once the target set holds every committed batch.
func TestSimulationMoves(t *testing.T) {
	runSims(t, 5000, mixMoves, "acknowledged nothing or finished no move", func(s *sim) bool {
		return s.moves == 0 || len(s.committed) == 0
	})
}

// runSims runs the seeds, each with and without write caching, for steps of mix, then heals
// and verifies. Faults at random can keep a run from doing anything (idle says whether it
// did), but not a quarter of the runs.
func runSims(t *testing.T, steps int, mix simMix, idleWhat string, idle func(*sim) bool) {
	idled := 0
	for seed := *simFirst; seed < *simFirst+*simSeeds; seed++ {
		for _, wc := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/writecaching=%v", seed, wc), func(t *testing.T) {
				s := newSim(t, uint64(seed), wc)
				defer s.close()
				s.run(steps, mix)
				s.settle()
				s.verify()
				if idle(s) {
					idled++
				}
			})
		}
	}
	if runs := 2 * *simSeeds; idled > runs/4 {
		t.Errorf("%d of %d runs %s", idled, runs, idleWhat)
	}
}

type simNode struct {
	id       int32
	fs       *vfs.MemFS
	flusher  *logstore.Flusher
	m        *Manager
	log      *logstore.Log
	up       bool
	isolated bool
	gen      int // bumped at each crash: frames of an older process are dropped
}

type simFrame struct {
	kind transport.Kind
	body []byte
	gen  int
}

type pending struct {
	node  int32
	epoch int32
	first int64
	end   int64
	val   string
}

type sim struct {
	logger *slog.Logger
	t      *testing.T
	rng    *rand.Rand
	wc     bool

	mu    sync.Mutex
	links map[[2]int32][]simFrame

	nodes     map[int32]*simNode
	now       time.Time
	ref       controller.PartitionRef
	epoch     int32
	leader    int32
	nextVal   int
	pending   []pending
	committed map[int64]string
	maxHW     int64
	sets      [][]int32 // the replicas, and the target during a reassignment
	// What the controller's image holds of the current epoch's reports.
	isr    []int32
	synced bool
	// pepoch is the partition epoch: bumped by every change of the sets, the ISR or the leader;
	// a report computed from another is skipped, as set-isr at LevelISRPartitionEpoch does.
	pepoch int32
	since  uint64 // ReplicasSince: bumped by every change of the sets
	moves  int    // reassignments finished
}

const simNodes = 5

const simDir = "/p"

func newSim(t *testing.T, seed uint64, wc bool) *sim {
	logger := slog.New(slog.DiscardHandler)
	if *simTrace {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := &sim{logger: logger, t: t, rng: rand.New(rand.NewPCG(seed, 99)), wc: wc, links: map[[2]int32][]simFrame{},
		nodes: map[int32]*simNode{}, now: now0, ref: controller.PartitionRef{Topic: controller.TopicID{9}},
		leader: -1, committed: map[int64]string{}, sets: [][]int32{{1, 2, 3}}}
	for id := int32(1); id <= simNodes; id++ {
		n := &simNode{id: id, fs: vfs.NewMem()}
		s.nodes[id] = n
		s.start(n)
	}
	s.elect()
	return s
}

// ordered returns the nodes by id: map order would make runs differ.
func (s *sim) ordered() []*simNode {
	out := make([]*simNode, 0, simNodes)
	for id := int32(1); id <= simNodes; id++ {
		out = append(out, s.nodes[id])
	}
	return out
}

// hosts are the nodes with a replica: the replicas, and the target during a reassignment.
func (s *sim) hosts() []int32 {
	p := controller.Partition{Replicas: s.sets[0]}
	if len(s.sets) > 1 {
		p.Target = s.sets[1]
	}
	return p.Hosts()
}

func (s *sim) randomNode() *simNode { return s.nodes[int32(1+s.rng.IntN(simNodes))] }

func (s *sim) close() {
	for _, n := range s.ordered() {
		if n.up {
			n.m.Close()
			n.log.Close()
			n.flusher.Close()
		}
	}
}

func (s *sim) start(n *simNode) {
	s.mu.Lock()
	n.up = true
	s.mu.Unlock()
	n.flusher = logstore.NewFlusher(4)
	cfg := logstore.DefaultConfig()
	cfg.WriteCaching = s.wc
	cfg.Preallocate = false
	cfg.FlushInterval, cfg.FlushBytes = 0, 0 // syncs only when the simulation asks: deterministic with write caching
	cfg.SegmentBytes = 4 << 10               // rolls, so truncation crosses segments
	l, err := logstore.Open(logstore.Options{FS: n.fs, Dir: simDir, Config: cfg, Flusher: n.flusher, Logger: s.logger})
	if err != nil {
		s.t.Fatalf("node %d: open: %v", n.id, err)
	}
	n.log = l
	gen := n.gen
	id := n.id
	n.m = NewManager(Config{NodeID: id, TickInterval: -1, Now: func() time.Time { return s.now }, Logger: s.logger,
		Send:      func(to int32, kind transport.Kind, body []byte) { s.send(id, gen, to, kind, body) },
		ReportISR: func(items []controller.ISRItem) { s.report(id, gen, items) }})
	if _, err := n.m.Add(s.ref, "t", l, n.fs, simDir); err != nil {
		s.t.Fatalf("node %d: add: %v", n.id, err)
	}
	s.assign(n)
}

func (s *sim) send(from int32, gen int, to int32, kind transport.Kind, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, dst := s.nodes[from], s.nodes[to]
	if !src.up || src.gen != gen || src.isolated || dst.isolated {
		return
	}
	k := [2]int32{from, to}
	s.links[k] = append(s.links[k], simFrame{kind, bytes.Clone(body), gen})
}

// assign tells a node what the controller says now (a node hears it unless isolated or down).
func (s *sim) assign(n *simNode) {
	if !n.up || n.isolated {
		return
	}
	a := Assignment{Role: RoleNone, Epoch: s.epoch, Leader: s.leader, Sets: s.sets, ISR: s.isr, TargetSynced: s.synced,
		PartitionEpoch: s.pepoch, ReplicasSince: s.since, WriteCaching: s.wc, MinISR: 1}
	switch {
	case !slices.Contains(s.hosts(), n.id):
	case s.leader == n.id:
		a.Role = RoleLeader
	case s.leader >= 0:
		a.Role = RoleFollower
	}
	n.m.Assign(s.ref, a)
}

// report records a leader's ISR report as the controller applies set-isr: for the current
// epoch, from its leader, and the target synced only if it is the current target.
func (s *sim) report(from int32, gen int, items []controller.ISRItem) {
	n := s.nodes[from]
	if !n.up || n.gen != gen || n.isolated {
		return
	}
	for _, it := range items {
		if it.Epoch != s.epoch || s.leader != from || !slices.Contains(it.ISR, from) {
			continue
		}
		if it.PartitionEpoch == nil || *it.PartitionEpoch != s.pepoch {
			s.tracef("epoch %d: leader %d's report from partition epoch %v skipped (now %d)", s.epoch, from, it.PartitionEpoch, s.pepoch)
			continue
		}
		if !slices.Equal(s.isr, it.ISR) {
			s.pepoch++
		}
		s.isr = slices.Clone(it.ISR)
		s.synced = len(s.sets) > 1 && slices.Equal(it.Target, s.sets[1])
		s.tracef("epoch %d: leader %d reports ISR %v, target synced %v", s.epoch, from, s.isr, s.synced)
	}
	for _, o := range s.ordered() {
		s.assign(o)
	}
}

// reassign starts a move to three random nodes, or cancels the move under way.
func (s *sim) reassign() {
	if len(s.sets) > 1 {
		s.tracef("cancel the move to %v", s.sets[1])
		s.setSets([][]int32{s.sets[0]})
		return
	}
	target := s.rng.Perm(simNodes)[:3]
	t := make([]int32, 3)
	for i, v := range target {
		t[i] = int32(v + 1)
	}
	if slices.Equal(t, s.sets[0]) {
		return
	}
	s.tracef("move %v to %v", s.sets[0], t)
	s.setSets([][]int32{s.sets[0], t})
}

// finish ends a move as the controller does: once the leader reported every target replica in
// sync and the target set synced; if the leader is not in the target set, leadership moves to
// a target replica first (an election the target replicas can win).
func (s *sim) finish() {
	if len(s.sets) < 2 || s.leader < 0 || !s.synced {
		return
	}
	t := s.sets[1]
	for _, n := range t {
		if !slices.Contains(s.isr, n) {
			return
		}
	}
	if !slices.Contains(t, s.leader) {
		// The controller's leadership transfer: the leader stops appending until a target
		// replica has its whole log, which then wins the election as the hint.
		lead := s.nodes[s.leader]
		if !lead.up || lead.isolated {
			return
		}
		end := lead.log.EndOffset()
		for _, n := range t {
			if o := s.nodes[n]; o.up && !o.isolated && o.log.EndOffset() == end {
				s.electHint(n)
				return
			}
		}
		return
	}
	s.tracef("finish the move to %v (leader %d, epoch %d)", t, s.leader, s.epoch)
	s.moves++
	s.setSets([][]int32{t})
}

// setSets changes the replica sets; a node that no longer hosts the partition loses its copy
// (the real node deletes it), and a leader outside the sets loses its leadership.
func (s *sim) setSets(sets [][]int32) {
	old := s.hosts()
	s.sets, s.synced = sets, false
	s.pepoch++
	s.since++
	for _, id := range old {
		if !slices.Contains(s.hosts(), id) {
			s.wipe(s.nodes[id])
		}
	}
	if s.leader >= 0 && !slices.Contains(s.hosts(), s.leader) {
		s.elect()
		return
	}
	for _, n := range s.ordered() {
		s.assign(n)
	}
}

// wipe deletes a node's copy of the partition.
func (s *sim) wipe(n *simNode) {
	s.tracef("node %d deletes its copy", n.id)
	up := n.up
	if up {
		s.crash(n)
	}
	n.fs = vfs.NewMem()
	if up {
		s.start(n)
	}
}

// elect starts a new epoch and elects its leader from the votes of the reachable nodes.
func (s *sim) elect() { s.electHint(-1) }

// electHint elects, preferring hint among the most up-to-date voters.
func (s *sim) electHint(hint int32) {
	s.epoch++
	s.pepoch++
	s.leader = -1
	prev := s.isr
	s.isr, s.synced = nil, false
	for _, n := range s.ordered() {
		s.assign(n)
	}
	hosts := s.hosts()
	votes := map[int32]controller.Vote{}
	for _, n := range s.ordered() {
		id := n.id
		if n.up && !n.isolated && slices.Contains(hosts, id) {
			votes[id] = n.m.Vote([]controller.EpochRef{{PartitionRef: s.ref, Epoch: s.epoch}})[0]
		}
	}
	ok := func(id int32) bool { v, has := votes[id]; return has && v.OK }
	count := 0
	for _, id := range s.sets[0] { // a majority of the replicas; a move's target set is not needed
		if ok(id) {
			count++
		}
	}
	if count < len(s.sets[0])/2+1 {
		return // no majority: the partition stays without a leader until one returns
	}
	preferred := s.sets[len(s.sets)-1][0]
	s.leader = controller.ChooseLeader(hosts, votes, hint, preferred, ok)
	// As the controller from level 12: the ISR's other live members stay (a crashed node is
	// fenced; an isolated one is live to the controller).
	s.isr = []int32{s.leader}
	for _, n := range prev {
		if n != s.leader && s.nodes[n].up && slices.Contains(hosts, n) {
			s.isr = append(s.isr, n)
		}
	}
	slices.Sort(s.isr)
	s.pepoch++
	for id, v := range votes {
		s.tracef("epoch %d: node %d votes ok=%v last epoch %d log end %d %s", s.epoch, id, v.OK, v.LastEpoch, v.LogEnd, v.Reason)
	}
	s.tracef("epoch %d: leader %d", s.epoch, s.leader)
	for _, n := range s.ordered() {
		s.assign(n)
	}
}

func (s *sim) crash(n *simNode) {
	s.tracef("crash node %d (leader %d)", n.id, s.leader)
	s.mu.Lock()
	n.up = false
	n.gen++
	for k := range s.links {
		if k[0] == n.id || k[1] == n.id {
			delete(s.links, k)
		}
	}
	s.mu.Unlock()
	n.m.Close()
	n.flusher.Close() // the killed process's flusher; its log is abandoned, not closed
	if !s.wc {
		n.fs = n.fs.Crash(vfs.CrashOptions{Tear: true, Rand: s.rng}) // power loss
	} // with write caching: a process kill, the page cache survives
	// The old process's log and flusher are abandoned, as a killed process's are.
	for _, o := range s.nodes {
		if o.up {
			o.m.PeerDown(n.id)
		}
	}
}

func (s *sim) restart(n *simNode) {
	wasLeader := s.leader == n.id
	s.tracef("restart node %d (leader %d)", n.id, s.leader)
	s.start(n)
	if wasLeader { // a restarted leader is a new incarnation: its epoch ends
		s.elect()
	}
}

func (s *sim) deliverOne() {
	s.mu.Lock()
	var keys [][2]int32
	for k, q := range s.links {
		if len(q) > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		s.mu.Unlock()
		return
	}
	slices.SortFunc(keys, func(a, b [2]int32) int { return int(a[0]*10+a[1]) - int(b[0]*10+b[1]) })
	k := keys[s.rng.IntN(len(keys))]
	f := s.links[k][0]
	s.links[k] = s.links[k][1:]
	dst := s.nodes[k[1]]
	drop := s.rng.IntN(100) < 3 || !dst.up || dst.isolated || s.nodes[k[0]].gen != f.gen
	s.mu.Unlock()
	if !drop {
		dst.m.Handle(k[0], f.kind, f.body)
	}
}

func (s *sim) produce() {
	n := s.randomNode()
	if s.leader >= 0 && s.rng.IntN(4) > 0 { // clients mostly know the leader
		n = s.nodes[s.leader]
	}
	if !n.up {
		return
	}
	r := n.m.Get(s.ref)
	s.nextVal++
	val := fmt.Sprintf("v%d", s.nextVal)
	recs := batch.AppendRecord(nil, 0, 0, nil, []byte(val), 0, nil)
	b := batch.AppendBatch(nil, batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
		BaseTimestamp: 1, MaxTimestamp: 1}, recs)
	res, epoch, err := r.Append(b)
	if err != nil {
		return
	}
	if !s.wc {
		n.log.SyncSoon()
	}
	s.pending = append(s.pending, pending{n.id, epoch, res.First, res.Last + 1, val})
	s.tracef("node %d appended %s at %d in epoch %d", n.id, val, res.First, epoch)
}

// checkCommits records the batches whose acknowledgement a client would have got by now.
func (s *sim) checkCommits() {
	keep := s.pending[:0]
	for _, p := range s.pending {
		n := s.nodes[p.node]
		if !n.up {
			continue
		}
		r := n.m.Get(s.ref)
		epoch, _, leading := r.Leading()
		if !leading || epoch != p.epoch {
			continue // the client got NOT_LEADER_OR_FOLLOWER: not acknowledged
		}
		if r.HighWatermark() < p.end {
			keep = append(keep, p)
			continue
		}
		got := readValue(s.t, n.log, p.first)
		if got != p.val {
			s.t.Fatalf("acknowledged %s at %d but the leader's log holds %q there", p.val, p.first, got)
		}
		if old, ok := s.committed[p.first]; ok && old != p.val {
			s.t.Fatalf("offset %d acknowledged twice: %s and %s", p.first, old, p.val)
		}
		s.committed[p.first] = p.val
		s.tracef("acknowledged %s at %d (node %d epoch %d)", p.val, p.first, p.node, p.epoch)
	}
	s.pending = keep
	if s.leader >= 0 {
		if n := s.nodes[s.leader]; n.up && !n.isolated {
			r := n.m.Get(s.ref)
			if _, ready, leading := r.Leading(); leading && ready {
				hw := r.HighWatermark()
				if hw < s.maxHW {
					s.t.Fatalf("the leader's high watermark went back from %d to %d (epoch %d)", s.maxHW, hw, s.epoch)
				}
				s.maxHW = hw
			}
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}

var simTrace = flag.Bool("sim.trace", false, "print the simulation's events")

func (s *sim) tracef(format string, args ...any) {
	if *simTrace {
		s.t.Logf(format, args...)
	}
}

func readValue(t *testing.T, l *logstore.Log, offset int64) string {
	data, err := l.Read(nil, offset, 1<<20)
	if err != nil || len(data) == 0 {
		t.Fatalf("reading offset %d: %v", offset, err)
	}
	h, err := batch.ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != offset {
		return fmt.Sprintf("<batch at %d>", h.BaseOffset)
	}
	recs, _ := batch.Records(&h, data[:h.Size()])
	rd := batch.NewRecordReader(recs)
	var rec batch.Record
	rd.Next(&rec)
	return string(rec.Value)
}

func (s *sim) tick() {
	s.now = s.now.Add(50 * time.Millisecond)
	for _, n := range s.ordered() {
		if n.up {
			n.m.Tick(s.now)
		}
	}
	s.finish() // as the controller's tick moves reassignments on
}

// simMix is how often, per thousand, the simulation takes each step; the rest of 1000 elects a
// leader if the partition has none reachable.
// A move step during a move cancels it one time in cancel.
type simMix struct{ produce, deliver, tick, crash, restart, isolate, elect, move, fsync, cancel int }

var (
	mixFaults = simMix{produce: 250, deliver: 500, tick: 100, crash: 20, restart: 40, isolate: 20, elect: 10, move: 20, fsync: 20, cancel: 4}
	// mixMoves: reassignments one after another, with fewer faults between them.
	mixMoves = simMix{produce: 150, deliver: 620, tick: 120, crash: 3, restart: 10, elect: 3, move: 30, fsync: 20, cancel: 100}
)

func (s *sim) run(steps int, mix simMix) {
	for range steps {
		op := s.rng.IntN(1000)
		next := func(p int) bool { op -= p; return op < 0 }
		switch {
		case next(mix.produce):
			s.produce()
		case next(mix.deliver):
			s.deliverOne()
		case next(mix.tick):
			s.tick()
		case next(mix.crash):
			if n := s.randomNode(); n.up {
				s.crash(n)
			}
		case next(mix.restart):
			for _, n := range s.ordered() {
				if !n.up {
					s.restart(n)
					break
				}
			}
		case next(mix.isolate):
			n := s.randomNode()
			s.mu.Lock()
			n.isolated = !n.isolated
			s.mu.Unlock()
			s.tracef("node %d isolated=%v", n.id, n.isolated)
			if !n.isolated {
				s.assign(n)
			}
		case next(mix.elect):
			s.elect()
		case next(mix.move):
			if len(s.sets) == 1 || s.rng.IntN(mix.cancel) == 0 { // starts a move, or now and then cancels one
				s.reassign()
			}
		case next(mix.fsync):
			for _, n := range s.ordered() { // the fsyncs in flight complete
				if n.up {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					n.log.WaitDurable(ctx, n.log.EndOffset())
					cancel()
				}
			}
		default:
			if s.leader < 0 || !s.nodes[s.leader].up || s.nodes[s.leader].isolated {
				s.elect()
			}
		}
		s.checkCommits()
	}
}

// settle heals everything and runs until a move under way has finished and every replica has
// the leader's whole log.
func (s *sim) settle() {
	for _, n := range s.ordered() {
		if !n.up {
			s.restart(n)
		}
		if n.isolated {
			s.mu.Lock()
			n.isolated = false
			s.mu.Unlock()
			s.assign(n)
		}
	}
	for i := 0; ; i++ {
		if s.leader < 0 {
			s.elect()
		}
		for range 50 {
			s.deliverOne()
		}
		s.tick()
		s.checkCommits()
		if s.leader >= 0 && len(s.sets) == 1 && s.converged() {
			return
		}
		if i > 5000 {
			for _, n := range s.ordered() {
				st := n.m.Get(s.ref).State()
				s.t.Logf("node %d: %+v", n.id, st)
				if r := n.m.Get(s.ref); r.leader != nil {
					for _, f := range r.leader.Followers() {
						s.t.Logf("  follower %d: %+v", f, *r.leader.Follower(f))
					}
				}
			}
			s.t.Fatalf("the replicas did not converge (leader %d, epoch %d, sets %v, reported ISR %v, target synced %v)",
				s.leader, s.epoch, s.sets, s.isr, s.synced)
		}
		time.Sleep(100 * time.Microsecond) // let flushers run
	}
}

func (s *sim) converged() bool {
	lead := s.nodes[s.leader].m.Get(s.ref)
	if _, ready, leading := lead.Leading(); !leading || !ready {
		return false
	}
	end := lead.Log.EndOffset()
	if lead.HighWatermark() != end {
		return false
	}
	lead.mu.Lock()
	defer lead.mu.Unlock()
	for _, n := range s.ordered() {
		if n.id == s.leader || !slices.Contains(s.hosts(), n.id) {
			continue
		}
		p := lead.leader.Follower(n.id)
		if n.log.EndOffset() != end || p == nil || !p.Streaming || p.Appended != end {
			return false
		}
	}
	return true
}

func (s *sim) verify() {
	lead := s.nodes[s.leader]
	for off, val := range s.committed {
		if got := readValue(s.t, lead.log, off); got != val {
			s.t.Errorf("acknowledged %s at %d; the final leader holds %q there", val, off, got)
		}
	}
	want := readAll(s.t, lead.log)
	for _, n := range s.ordered() {
		if !slices.Contains(s.hosts(), n.id) {
			continue
		}
		if got := readAll(s.t, n.log); !bytes.Equal(got, want) {
			s.t.Errorf("node %d's log (%d bytes) differs from the leader's (%d bytes)", n.id, len(got), len(want))
			for off := n.log.StartOffset(); off < n.log.EndOffset(); off++ {
				if a, b := readValue(s.t, n.log, off), readValue(s.t, lead.log, off); a != b {
					s.t.Errorf("offset %d: node %d has %s, leader %d has %s", off, n.id, a, s.leader, b)
				}
			}
		}
	}
	s.t.Logf("epochs %d, acknowledged %d, log end %d, moves finished %d, replicas %v", s.epoch, len(s.committed), lead.log.EndOffset(), s.moves, s.sets)
}

func readAll(t *testing.T, l *logstore.Log) []byte {
	var out []byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		data, err := l.Read(nil, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			break
		}
		out = append(out, data...)
		off = lastNext(data)
	}
	return out
}
