package replica

import (
	"slices"
	"time"
)

// Leader is a partition leader's view of its replicas in one epoch: what each has appended and
// fsynced, and the high watermark that follows from it. It does no I/O.
//
// The commit offset of a replica set S is the Q-th highest of the counted replicas' ends, with
// Q = max(majority of S, min.insync.replicas) (capped at |S|); the ends are the fsynced ones,
// or with write caching the appended ones. The leader counts itself once its epoch marker is
// durable, and a follower once it acknowledged an end at or past epochStart (it writes the marker
// on reaching it). The high watermark moves to the commit offset only once that is at least
// epochStart, and never back.
//
// During a reassignment (two sets: the current replicas, then the target) the target set first
// learns: commits need the current set only, so replicas the move adds catch up without holding
// the high watermark back (as Kafka's adding replicas stay out of the ISR until they catch up).
// Once a quorum of the target set has caught up, both sets must commit (joint consensus), and
// once the target set also holds every batch committed before that (TargetSynced), the move
// may finish: from then on every committed batch is on a quorum of the target set.
type Leader struct {
	Self         int32
	Epoch        int32
	EpochStart   int64
	WriteCaching bool
	MinISR       int
	LagMax       time.Duration // replica.lag.time.max.ms: a follower behind longer leaves the ISR

	sets      [][]int32
	followers map[int32]*Progress
	selfEnd   int64
	selfDur   int64
	selfReady bool // the leader's own epoch marker is durable
	hw        int64
	started   time.Time
	// joint: the target set counts for commits (see the type's comment); jointMark: every
	// batch committed before it did is below this offset.
	joint     bool
	jointMark int64
}

// Progress is what the leader knows of one follower in its epoch.
type Progress struct {
	Node int32
	// Streaming: the follower joined the epoch (Follow answered) and is sent batches from Next.
	Streaming bool
	Gen       uint64 // bumped by every join, so a send of an older join is not mistaken for one
	JoinNext  int64  // where the follower's log ends after the join's truncation
	JoinSeq   int32  // the sequence number of the follower's Follow this join answered
	Next      int64  // next offset to send
	// HWSent is the high watermark last sent to the follower (Replica.tick sends it one that
	// moved since, when nothing else is on the way).
	HWSent int64
	// Appended and Durable are the ends the follower last acknowledged in this join (-1: none).
	Appended, Durable int64
	Connected         bool
	// LastCaughtUp: the last time the follower had the leader's whole log (it acknowledged
	// the log end, or a send that reached the log end as it was then).
	LastCaughtUp time.Time
	// CaughtUp: the follower had the leader's whole log since it joined. A replica a
	// reassignment adds is in sync only once it has (inSync), and replication quotas count on
	// caught-up followers only (Throttleable).
	CaughtUp bool
	Inflight []inflight
}

type inflight struct {
	end   int64
	bytes int
	// whole: the send took the follower to the leader's log end as of at; acknowledged, the
	// follower was caught up then (as Kafka's lastCaughtUpTime counts a fetch that reached
	// the log end of the previous one), however much the leader appended meanwhile.
	whole bool
	at    time.Time
}

// InflightBytes is what was sent and not yet acknowledged.
func (p *Progress) InflightBytes() int {
	n := 0
	for _, f := range p.Inflight {
		n += f.bytes
	}
	return n
}

// NewLeader starts an epoch: the leader's log ends at epochStart, and hw is the high watermark
// it knew before (it only grows from there). sets are the replica sets (two during a
// reassignment); every member other than self is a follower.
func NewLeader(self, epoch int32, epochStart, hw int64, sets [][]int32, writeCaching bool, minISR int, lagMax time.Duration, now time.Time) *Leader {
	l := &Leader{Self: self, Epoch: epoch, EpochStart: epochStart, WriteCaching: writeCaching, MinISR: minISR,
		LagMax: lagMax, followers: map[int32]*Progress{}, selfEnd: epochStart, hw: min(hw, epochStart), started: now}
	l.SetSets(sets, now)
	return l
}

// SetSets changes the replica sets (a reassignment began or ended). A new target set learns
// first.
func (l *Leader) SetSets(sets [][]int32, now time.Time) {
	if !slices.EqualFunc(sets, l.sets, slices.Equal) {
		l.joint = false
	}
	l.sets = nil
	for _, s := range sets {
		l.sets = append(l.sets, slices.Clone(s))
	}
	keep := map[int32]bool{}
	for _, s := range sets {
		for _, n := range s {
			if n == l.Self {
				continue
			}
			keep[n] = true
			if l.followers[n] == nil {
				l.followers[n] = &Progress{Node: n, Appended: -1, Durable: -1, Connected: true, LastCaughtUp: now}
			}
		}
	}
	for n := range l.followers {
		if !keep[n] {
			delete(l.followers, n)
		}
	}
}

// Follower returns a follower's progress (nil if n is not one).
func (l *Leader) Follower(n int32) *Progress { return l.followers[n] }

// Followers lists the followers' ids, ascending.
func (l *Leader) Followers() []int32 {
	out := make([]int32, 0, len(l.followers))
	for n := range l.followers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// HW is the high watermark.
func (l *Leader) HW() int64 { return l.hw }

// Ready reports whether the high watermark has reached the epoch's start: every batch the
// leader had when elected is committed, and the high watermark can be shown to readers.
func (l *Leader) Ready() bool { return l.hw >= l.EpochStart }

// SetLocal records the leader's own log end and durable end; selfReady says its epoch marker is
// durable. It reports whether the high watermark moved.
func (l *Leader) SetLocal(end, durable int64, selfReady bool) bool {
	l.selfEnd, l.selfDur, l.selfReady = end, durable, selfReady
	return l.advance()
}

// Join starts streaming to a follower from next (where its log will end after truncating);
// what it acknowledged before no longer counts.
func (l *Leader) Join(n int32, next int64) *Progress {
	p := l.followers[n]
	if p == nil {
		return nil
	}
	p.Streaming, p.Gen, p.Next, p.JoinNext = true, p.Gen+1, next, next
	p.Appended, p.Durable, p.Inflight, p.Connected, p.CaughtUp, p.HWSent = -1, -1, nil, true, false, -1
	return p
}

// Restart forgets what a follower acknowledged and stops streaming to it until it joins again
// (Replica.restartTargetsLocked), and the target set learns again; it reports whether the
// follower was streaming.
func (l *Leader) Restart(n int32) bool {
	p := l.followers[n]
	if p == nil {
		return false
	}
	streaming := p.Streaming
	p.Streaming, p.Inflight, p.Appended, p.Durable, p.CaughtUp = false, nil, -1, -1, false
	l.joint = false
	return streaming
}

// Stop stops streaming to a follower until it joins again (a mismatch, a lost connection).
func (l *Leader) Stop(n int32, disconnected bool) {
	if p := l.followers[n]; p != nil {
		p.Streaming, p.Inflight = false, nil
		if disconnected {
			p.Connected = false
		}
	}
}

// Rewind makes the next send start again after what the follower last acknowledged (a send or
// its acknowledgement was lost). If the follower has it already, it answers with a mismatch and
// joins again.
func (l *Leader) Rewind(n int32) {
	if p := l.followers[n]; p != nil && p.Streaming {
		p.Next, p.Inflight = p.JoinNext, nil
		if p.Appended >= 0 {
			p.Next = p.Appended
		}
	}
}

// Sent records that batches up to end (bytes of them) went to a follower of join gen at now;
// whole says end was the leader's log end. It returns false if the follower rejoined
// meanwhile (the send is void).
func (l *Leader) Sent(n int32, gen uint64, end int64, bytes int, whole bool, now time.Time) bool {
	p := l.followers[n]
	if p == nil || !p.Streaming || p.Gen != gen {
		return false
	}
	p.Next = end
	p.Inflight = append(p.Inflight, inflight{end: end, bytes: bytes, whole: whole, at: now})
	return true
}

// Ack records a follower's acknowledgement; it reports whether the high watermark moved.
func (l *Leader) Ack(n int32, appended, durable int64, now time.Time) bool {
	p := l.followers[n]
	if p == nil || !p.Streaming {
		return false
	}
	p.Appended, p.Durable, p.Connected = appended, durable, true
	i := 0
	for ; i < len(p.Inflight) && p.Inflight[i].end <= appended; i++ {
		if f := p.Inflight[i]; f.whole {
			p.CaughtUp = true
			if f.at.After(p.LastCaughtUp) {
				p.LastCaughtUp = f.at
			}
		}
	}
	p.Inflight = p.Inflight[i:]
	if appended >= l.selfEnd {
		p.LastCaughtUp, p.CaughtUp = now, true
	}
	return l.advance()
}

// end is what replica n counts for: its appended end if memory (write caching), else its
// fsynced end; -1 if it does not count yet.
func (l *Leader) end(n int32, memory bool) int64 {
	if n == l.Self {
		if !l.selfReady {
			return -1
		}
		if memory {
			return l.selfEnd
		}
		return l.selfDur
	}
	p := l.followers[n]
	if p == nil || !p.Streaming || p.Appended < l.EpochStart {
		return -1
	}
	if memory {
		return p.Appended
	}
	return p.Durable
}

// Quorum is how many replicas of a set of size n must hold a batch: a majority, or
// min.insync.replicas if that is more, but never more than n.
func Quorum(n, minISR int) int {
	return min(max(n/2+1, minISR), n)
}

// Commit is the offset below which every batch is held by a quorum of every replica set.
func (l *Leader) Commit() int64 { return l.quorumEnd(l.WriteCaching) }

// Replicated is the offset below which every batch is in the memory of a quorum of every
// replica set, fsynced or not: what a transactional append waits for (its transaction's
// commit makes it durable).
func (l *Leader) Replicated() int64 { return l.quorumEnd(true) }

// Durable is the offset below which every batch is fsynced by a quorum of every replica set,
// whatever the topic's write caching: what a transaction's prepare and markers wait for.
func (l *Leader) Durable() int64 { return l.quorumEnd(false) }

// commitSets are the sets whose quorums commit: the current one, and the target once it is joint.
func (l *Leader) commitSets() [][]int32 {
	if len(l.sets) > 1 && !l.joint {
		return l.sets[:1]
	}
	return l.sets
}

func (l *Leader) quorumEnd(memory bool) int64 {
	commit := int64(-1)
	for i, s := range l.commitSets() {
		if c := l.setEnd(s, memory); i == 0 || c < commit {
			commit = c
		}
	}
	return commit
}

// setEnd is the offset below which every batch is held by a quorum of set s.
func (l *Leader) setEnd(s []int32, memory bool) int64 {
	ends := make([]int64, 0, len(s))
	for _, n := range s {
		ends = append(ends, l.end(n, memory))
	}
	slices.SortFunc(ends, func(a, b int64) int { return int(min(max(b-a, -1), 1)) })
	return ends[Quorum(len(s), l.MinISR)-1]
}

// TargetSynced reports whether a reassignment's target set holds every committed batch on a
// quorum, and will hold every later one (it commits jointly): the move may finish.
func (l *Leader) TargetSynced() bool {
	return len(l.sets) > 1 && l.joint && l.setEnd(l.sets[1], l.WriteCaching) >= l.jointMark
}

// join makes a learning target set joint once a quorum of it has caught up (the leader, if a
// member, counts once its epoch marker is durable). Every batch committed so far, by this
// epoch or an earlier one, is below max(hw, EpochStart): the target set must reach that mark
// before the move may finish.
func (l *Leader) join() {
	if len(l.sets) < 2 || l.joint {
		return
	}
	t := l.sets[1]
	up := 0
	for _, n := range t {
		if n == l.Self {
			if l.selfReady {
				up++
			}
		} else if p := l.followers[n]; p != nil && p.Streaming && p.CaughtUp {
			up++
		}
	}
	if up >= Quorum(len(t), l.MinISR) {
		l.joint, l.jointMark = true, max(l.hw, l.EpochStart)
	}
}

func (l *Leader) advance() bool {
	l.join()
	c := l.Commit()
	if c >= l.EpochStart && c > l.hw {
		l.hw = c
		return true
	}
	return false
}

// InSync lists the replicas in sync (Kafka's ISR): the leader, and every follower that joined
// the epoch, is connected, and has the leader's whole log or had it within LagMax. Ascending.
func (l *Leader) InSync(now time.Time) []int32 {
	out := []int32{l.Self}
	for n, p := range l.followers {
		if l.inSync(p, now) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// solid: in sync, and caught up since it joined (so it keeps up: the quorum can rely on it).
func (l *Leader) solid(p *Progress, now time.Time) bool { return p.CaughtUp && l.inSync(p, now) }

// inSync: joined the epoch, connected, and has the leader's whole log or had it within LagMax.
// A replica a reassignment adds (in the target set only) is in sync only once it has caught up,
// as Kafka's adding replicas join the ISR: until then it lacks the partition's data, and the
// reassignment must not finish on it.
func (l *Leader) inSync(p *Progress, now time.Time) bool {
	if !p.CaughtUp && l.adding(p.Node) {
		return false
	}
	return p.Streaming && p.Connected && p.Appended >= l.EpochStart && (p.Appended >= l.selfEnd || now.Sub(p.LastCaughtUp) <= l.LagMax)
}

// adding: n is a replica a reassignment adds (in the target set only).
func (l *Leader) adding(n int32) bool { return len(l.sets) > 1 && !slices.Contains(l.sets[0], n) }

// Throttleable reports whether sends to follower n may be held back by a replication quota
// (throttle.go): it is out of sync (or never caught up since it joined), and every replica set
// it belongs to that commits (a learning target set does not) has a quorum of in-sync members
// without it, so the high watermark does not wait for it.
func (l *Leader) Throttleable(n int32, now time.Time) bool {
	p := l.followers[n]
	if p == nil || l.solid(p, now) {
		return false
	}
	for _, s := range l.commitSets() {
		if !slices.Contains(s, n) {
			continue
		}
		in := 0
		for _, m := range s {
			if m == l.Self {
				in++
			} else if q := l.followers[m]; q != nil && m != n && l.solid(q, now) {
				in++
			}
		}
		if in < Quorum(len(s), l.MinISR) {
			return false
		}
	}
	return true
}

// RetentionBound is the offset retention may not delete at or past, Kafka's deletableSegments
// rule with Kafka's high watermark: the smallest end among the replicas in sync (the leader's
// own log end if it is alone). So a record goes only once
// every in-sync follower holds it (a lagging follower inside replica.lag.time.max.ms would
// otherwise be reset past records it never had, and an acks=all produce acknowledged on a
// quorum that lacks them), while a partition whose followers are gone keeps deleting, as
// Kafka's with an ISR shrunk to the leader (Runnel's quorum high watermark would stop
// retention there, and the disk would fill with acks=1 writes). During the first grace of the
// epoch a follower still joining holds the bound at the high watermark, as Live counts it.
func (l *Leader) RetentionBound(now time.Time, grace time.Duration) int64 {
	bound := l.selfEnd
	for _, p := range l.followers {
		switch {
		case l.inSync(p, now):
			bound = min(bound, p.Appended)
		case l.joining(p, now, grace):
			bound = min(bound, l.hw)
		}
	}
	return bound
}

// Live counts the replicas that can take part in a commit now: the leader, followers in sync,
// and, during the first grace of the epoch, followers still joining (so that a new leader does
// not refuse produce while its followers handshake). Fenced followers are not counted: the
// controller keeps them out of the ISR, as Kafka's acks=all counts its ISR.
func (l *Leader) Live(now time.Time, grace time.Duration, fenced []int32) int {
	n := 0
	for _, id := range l.InSync(now) {
		if id == l.Self || !slices.Contains(fenced, id) {
			n++
		}
	}
	for id, p := range l.followers {
		if l.joining(p, now, grace) && !slices.Contains(fenced, id) {
			n++
		}
	}
	return n
}

// joining: during the first grace of the epoch, a connected follower that has not joined it
// yet (Live counts it, and it holds the retention bound at the high watermark).
func (l *Leader) joining(p *Progress, now time.Time, grace time.Duration) bool {
	return now.Sub(l.started) < grace && p.Connected && (!p.Streaming || p.Appended < l.EpochStart)
}

// NeedForAcks is how many live replicas acks=all needs: the quorum of the largest set that
// commits, and at least min.insync.replicas capped at the number of replicas (a moving
// partition's, in either set), as Kafka's Partition.effectiveMinIsr caps it at its replicas: a
// one-replica topic with min.insync.replicas=2 takes acks=all writes, and a partition moving
// from one replica to four does not before a second is in sync.
func (l *Leader) NeedForAcks() int {
	need := 0
	for _, s := range l.commitSets() {
		need = max(need, Quorum(len(s), l.MinISR))
	}
	replicas := len(l.followers) + 1 // every replica of either set (SetSets), and the leader
	return max(need, min(l.MinISR, replicas))
}
