package replica

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/vfs"
)

func TestDivergence(t *testing.T) {
	e := func(pairs ...int64) []EpochEntry {
		var out []EpochEntry
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, EpochEntry{int32(pairs[i]), pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		l            []EpochEntry
		lEnd, lStart int64
		f            []EpochEntry
		fEnd         int64
		to           int64
		common       int32
		reset        bool
	}{
		{"follower behind in the same epoch", e(0, 0, 2, 50), 100, 0, e(0, 0, 2, 50), 70, 70, 2, false},
		{"follower ahead in an epoch the leader ended", e(0, 0, 2, 50, 4, 80), 100, 0, e(0, 0, 2, 50), 90, 80, 2, false},
		{"follower's newer epoch diverged", e(0, 0, 2, 50, 5, 80), 100, 0, e(0, 0, 2, 50, 3, 60), 90, 60, 2, false},
		{"follower marker of an epoch the leader never saw", e(0, 0, 2, 50), 60, 0, e(0, 0, 2, 50, 3, 60), 60, 60, 2, false},
		{"follower has only an unknown epoch", e(1, 0), 10, 0, e(0, 0), 5, 0, -1, true},
		{"empty follower, empty leader", nil, 0, 0, nil, 0, 0, -1, false},
		{"empty follower, leader trimmed by retention", e(3, 500), 900, 500, nil, 0, 500, -1, true},
		{"follower ends before the leader's log start", e(0, 1000, 2, 5000), 6000, 1000, e(0, 0), 100, 1000, -1, true},
		{"identical logs", e(0, 0, 1, 10), 20, 0, e(0, 0, 1, 10), 20, 20, 1, false},
		{"follower with the current epoch, longer", e(0, 0, 6, 40), 45, 0, e(0, 0, 6, 40), 60, 45, 6, false},
	} {
		to, common, reset := Divergence(tc.l, tc.lEnd, tc.lStart, tc.f, tc.fEnd)
		if to != tc.to || common != tc.common || reset != tc.reset {
			t.Errorf("%s: Divergence = %d, %d, %v; want %d, %d, %v", tc.name, to, common, reset, tc.to, tc.common, tc.reset)
		}
	}
}

func TestEpochCachePersistsAndTruncates(t *testing.T) {
	fsys := vfs.NewMem()
	fsys.MkdirAll("/p", 0o755)
	c, err := LoadEpochCache(fsys, "/p", 0, 0)
	if err != nil || len(c.Entries()) != 0 {
		t.Fatalf("new empty log: %v, %v", c.Entries(), err)
	}
	for _, en := range []EpochEntry{{1, 0}, {3, 40}, {4, 40}, {7, 90}} {
		if err := c.Add(en.Epoch, en.Start); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Add(2, 100); err == nil {
		t.Fatal("an older epoch was accepted after epoch 7")
	}
	if ep, end := c.EndOffsetFor(3, 120); ep != 3 || end != 40 {
		t.Errorf("EndOffsetFor(3) = %d, %d; want 3, 40 (epoch 4 starts there)", ep, end)
	}
	if ep, end := c.EndOffsetFor(5, 120); ep != 4 || end != 90 {
		t.Errorf("EndOffsetFor(5) = %d, %d; want 4, 90", ep, end)
	}
	if ep, end := c.EndOffsetFor(7, 120); ep != 7 || end != 120 {
		t.Errorf("EndOffsetFor(7) = %d, %d; want 7, 120 (the latest epoch ends at the log end)", ep, end)
	}
	if ep, end := c.EndOffsetFor(9, 120); ep != -1 || end != -1 {
		t.Errorf("EndOffsetFor(9) = %d, %d; want -1, -1 (above every epoch)", ep, end)
	}
	if ep, end := c.EndOffsetFor(0, 120); ep != 0 || end != 0 {
		t.Errorf("EndOffsetFor(0) = %d, %d; want 0, 0 (below every epoch: where the first starts)", ep, end)
	}
	// Epoch 3 is a marker at 40: the batch there is epoch 4's.
	for off, want := range map[int64]int32{0: 1, 39: 1, 40: 4, 89: 4, 90: 7, 500: 7} {
		if got := c.EpochOf(off); got != want {
			t.Errorf("EpochOf(%d) = %d; want %d", off, got, want)
		}
	}
	// A crash cut the log to 60: the entry at 90 is dropped on load.
	c2, err := LoadEpochCache(fsys.Crash(vfs.CrashOptions{}), "/p", 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{1, 0}, {3, 40}, {4, 40}}; !slices.Equal(c2.Entries(), want) {
		t.Fatalf("after a crash to 60: %v; want %v", c2.Entries(), want)
	}
	if err := c2.Truncate(40, 3); err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{1, 0}, {3, 40}}; !slices.Equal(c2.Entries(), want) {
		t.Fatalf("truncated to 40 keeping epoch 3: %v; want %v", c2.Entries(), want)
	}
}

func TestEpochCacheUpgradedLog(t *testing.T) {
	fsys := vfs.NewMem()
	c, err := LoadEpochCache(fsys, "/none", 10, 500)
	if err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{0, 10}}; !slices.Equal(c.Entries(), want) {
		t.Fatalf("a one-node log without the file: %v; want %v", c.Entries(), want)
	}
}

func TestBadEpochFile(t *testing.T) {
	fsys := vfs.NewMem()
	fsys.MkdirAll("/p", 0o755)
	b := encodeEpochs([]EpochEntry{{1, 0}, {2, 5}})
	b[10] ^= 1
	vfs.WriteFileAtomic(fsys, "/p", epochsFile, b)
	if _, err := LoadEpochCache(fsys, "/p", 0, 10); err == nil {
		t.Fatal("a corrupt leader-epochs file loaded")
	}
}

var now0 = time.Unix(1_700_000_000, 0)

func TestLeaderCommitFsyncQuorum(t *testing.T) {
	l := NewLeader(1, 3, 100, 90, [][]int32{{1, 2, 3}}, false, 1, 10*time.Second, now0)
	l.SetLocal(150, 120, true)
	if l.HW() != 90 {
		t.Fatalf("HW before any follower joined = %d; want 90 (the known one)", l.HW())
	}
	l.Join(2, 100)
	l.Ack(2, 150, 99, now0) // appended past the epoch start, fsynced below it
	if l.HW() != 90 {
		t.Fatalf("HW with the follower's durable end 99 < epoch start = %d; want 90", l.HW())
	}
	l.Ack(2, 150, 140, now0)
	if l.HW() != 120 {
		t.Fatalf("HW = %d; want 120 (the 2nd highest durable end of {120, 140, -})", l.HW())
	}
	l.Join(3, 100)
	l.Ack(3, 150, 150, now0)
	if l.HW() != 140 {
		t.Fatalf("HW = %d; want 140: the leader's own slow fsync (120) is not waited for", l.HW())
	}
	l.Ack(2, 150, 130, now0) // an end that went down (it rejoined elsewhere): HW never goes back
	if l.HW() != 140 {
		t.Fatalf("HW went back to %d", l.HW())
	}
}

func TestLeaderCommitWriteCaching(t *testing.T) {
	l := NewLeader(1, 3, 100, 100, [][]int32{{1, 2, 3}}, true, 1, 10*time.Second, now0)
	l.SetLocal(160, 0, true)
	l.Join(2, 100)
	l.Ack(2, 150, 0, now0)
	if l.HW() != 150 {
		t.Fatalf("write caching HW = %d; want 150 (appended by two of three)", l.HW())
	}
}

// TestLeaderReplicatedAndDurable: what transactional appends (a quorum's memory) and a
// transaction's prepare and markers (a quorum's fsync, even with write caching) wait for.
func TestLeaderReplicatedAndDurable(t *testing.T) {
	for _, wc := range []bool{false, true} {
		l := NewLeader(1, 3, 100, 100, [][]int32{{1, 2, 3}}, wc, 1, 10*time.Second, now0)
		l.SetLocal(160, 110, true)
		l.Join(2, 100)
		l.Ack(2, 150, 120, now0)
		l.Join(3, 100)
		l.Ack(3, 130, 130, now0)
		if got := l.Replicated(); got != 150 {
			t.Errorf("write caching %v: Replicated = %d; want 150 (appended by two of three)", wc, got)
		}
		if got := l.Durable(); got != 120 {
			t.Errorf("write caching %v: Durable = %d; want 120 (fsynced by two of three)", wc, got)
		}
	}
}

func TestLeaderMinISRRaisesTheQuorum(t *testing.T) {
	l := NewLeader(1, 0, 0, 0, [][]int32{{1, 2, 3}}, true, 3, 10*time.Second, now0)
	l.SetLocal(10, 10, true)
	l.Join(2, 0)
	l.Ack(2, 10, 10, now0)
	if l.HW() != 0 {
		t.Fatalf("min.insync.replicas=3 and two replicas hold it: HW = %d; want 0", l.HW())
	}
	if need := l.NeedForAcks(); need != 3 {
		t.Fatalf("NeedForAcks = %d; want 3", need)
	}
	l.Join(3, 0)
	l.Ack(3, 10, 10, now0)
	if l.HW() != 10 {
		t.Fatalf("HW = %d; want 10", l.HW())
	}

	// Above the replication factor it counts as the replication factor (Kafka's
	// effectiveMinIsr): one replica with min.insync.replicas=2 takes acks=all alone.
	one := NewLeader(1, 0, 0, 0, [][]int32{{1}}, true, 2, 10*time.Second, now0)
	one.SetLocal(10, 10, true)
	if need := one.NeedForAcks(); need != 1 || one.HW() != 10 {
		t.Fatalf("one replica, min.insync.replicas=2: NeedForAcks = %d, HW = %d; want 1, 10", need, one.HW())
	}
	two := NewLeader(1, 0, 0, 0, [][]int32{{1, 2}}, true, 3, 10*time.Second, now0)
	if need := two.NeedForAcks(); need != 2 {
		t.Fatalf("two replicas, min.insync.replicas=3: NeedForAcks = %d; want 2", need)
	}
}

// TestLeaderJointConsensus: a reassignment's target set first learns (commits need the current
// set only, so new replicas far behind do not hold the high watermark back), turns joint once a
// quorum of it has caught up, and is synced (the move may finish) once it also holds every batch
// committed before that.
func TestLeaderJointConsensus(t *testing.T) {
	// {1,2,3} → {4,5,6}, led by 1, which is not in the target set.
	l := NewLeader(1, 0, 0, 0, [][]int32{{1, 2, 3}, {4, 5, 6}}, true, 1, 10*time.Second, now0)
	l.SetLocal(10, 10, true)
	for _, n := range []int32{2, 4, 5, 6} {
		l.Join(n, 0)
	}
	l.Ack(2, 10, 10, now0)
	if l.HW() != 10 {
		t.Fatalf("HW = %d while the target set learns; want 10 (a quorum of the current set)", l.HW())
	}
	if need := l.NeedForAcks(); need != 2 {
		t.Fatalf("acks=all needs %d replicas while the target set learns; want 2", need)
	}
	l.Ack(4, 10, 10, now0) // caught up: one of the target's quorum of 2
	l.SetLocal(30, 30, true)
	l.Ack(2, 30, 30, now0)
	if l.HW() != 30 || l.TargetSynced() {
		t.Fatalf("HW = %d, synced %v with one target replica caught up; want 30, false", l.HW(), l.TargetSynced())
	}
	l.Ack(5, 30, 30, now0) // a quorum of the target caught up: joint from here, every batch below 30 must reach it
	if l.TargetSynced() {
		t.Fatal("synced while the target set's quorum holds only up to 10 of the 30 committed")
	}
	l.SetLocal(40, 40, true)
	l.Ack(2, 40, 40, now0)
	if l.HW() != 30 {
		t.Fatalf("HW = %d once joint with the target set's quorum at 10; want 30 (it holds)", l.HW())
	}
	l.Ack(4, 40, 40, now0)
	if l.HW() != 30 || !l.TargetSynced() {
		t.Fatalf("HW = %d, synced %v with the target set's quorum at 30; want 30, true", l.HW(), l.TargetSynced())
	}
	l.Ack(5, 40, 40, now0)
	if l.HW() != 40 {
		t.Fatalf("HW = %d with both sets' quorums at 40; want 40", l.HW())
	}
	// Another target set learns again.
	l.SetSets([][]int32{{1, 2, 3}, {1, 7, 8}}, now0)
	l.SetLocal(50, 50, true)
	l.Ack(2, 50, 50, now0)
	if l.HW() != 50 || l.TargetSynced() {
		t.Fatalf("HW = %d, synced %v with a new target set; want 50 (it learns), false", l.HW(), l.TargetSynced())
	}

	// {1} → {1,2,3,4} with min.insync.replicas 2: the move itself does not make acks=all
	// possible before the new replicas are in sync (as in Kafka, where they join the ISR then).
	l2 := NewLeader(1, 0, 0, 0, [][]int32{{1}, {1, 2, 3, 4}}, true, 2, 10*time.Second, now0)
	l2.SetLocal(10, 10, true)
	if need, live := l2.NeedForAcks(), l2.Live(now0.Add(time.Minute), time.Second, nil); need != 2 || live != 1 {
		t.Fatalf("acks=all needs %d, live %d; want 2 (min.insync.replicas), 1", need, live)
	}
	if l2.HW() != 10 {
		t.Fatalf("HW = %d; want 10 (the current set is the leader alone)", l2.HW())
	}
	for _, n := range []int32{2, 3} {
		l2.Join(n, 0)
		l2.Ack(n, 10, 10, now0)
	}
	if !l2.TargetSynced() || l2.NeedForAcks() != 3 {
		t.Fatalf("synced %v, acks=all needs %d with 3 of 4 target replicas caught up; want true, 3", l2.TargetSynced(), l2.NeedForAcks())
	}
}

// TestCaughtUpUnderSteadyAppends: a follower that acknowledges a send of the leader's whole
// log is caught up as of that send, even though the leader appended more before the
// acknowledgement came (under steady load it always has); one that acknowledges a partial send
// is not.
func TestCaughtUpUnderSteadyAppends(t *testing.T) {
	l := NewLeader(1, 0, 0, 0, [][]int32{{1, 2, 3}}, true, 1, 10*time.Second, now0)
	l.SetLocal(100, 100, true)
	gen := l.Join(2, 0).Gen
	l.Join(3, 0)
	l.Sent(2, gen, 60, 600, false, now0) // a partial send
	l.SetLocal(120, 120, true)
	l.Ack(2, 60, 60, now0.Add(time.Millisecond))
	if l.Follower(2).CaughtUp {
		t.Fatal("caught up on a partial send")
	}
	at := now0.Add(2 * time.Millisecond)
	l.Sent(2, gen, 120, 600, true, at) // the rest: the whole log as of at
	l.SetLocal(130, 130, true)         // appended before the acknowledgement
	l.Ack(2, 120, 120, now0.Add(3*time.Millisecond))
	if p := l.Follower(2); !p.CaughtUp || !p.LastCaughtUp.Equal(at) {
		t.Fatalf("after acknowledging the whole log as of a send: caught up %v at %v; want true at %v", p.CaughtUp, p.LastCaughtUp, at)
	}
	// In sync from then on within LagMax, though never at the log end when it acknowledges.
	if isr := l.InSync(at.Add(5 * time.Second)); !slices.Contains(isr, 2) {
		t.Fatalf("ISR %v 5 s later; want 2 in it", isr)
	}
}

func TestLeaderInSyncAndLive(t *testing.T) {
	l := NewLeader(1, 0, 0, 0, [][]int32{{1, 2, 3}}, true, 1, 10*time.Second, now0)
	if live := l.Live(now0, time.Second, nil); live != 3 {
		t.Fatalf("live at the epoch's start = %d; want 3 (joining followers count during the grace)", live)
	}
	if live := l.Live(now0.Add(2*time.Second), time.Second, nil); live != 1 {
		t.Fatalf("live after the grace with no follower joined = %d; want 1", live)
	}
	l.SetLocal(10, 10, true)
	l.Join(2, 0)
	l.Ack(2, 10, 10, now0.Add(time.Second))
	if isr := l.InSync(now0.Add(2 * time.Second)); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("ISR = %v; want [1 2]", isr)
	}
	// A fenced follower is not counted for acks=all, though it has the whole log
	// and is still connected, as a paused process is; joining ones neither.
	if live := l.Live(now0.Add(time.Minute), time.Second, []int32{2}); live != 1 {
		t.Fatalf("live with the in-sync follower fenced = %d; want 1", live)
	}
	if live := l.Live(now0.Add(time.Minute), time.Second, nil); live != 2 {
		t.Fatalf("live with the in-sync follower = %d; want 2", live)
	}
	if live := l.Live(now0, time.Second, []int32{3}); live != 2 {
		t.Fatalf("live at the start with the joining follower fenced = %d; want 2", live)
	}
	l.Stop(2, true)
	if isr := l.InSync(now0.Add(2 * time.Second)); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR after 2 disconnected = %v; want [1]", isr)
	}
}

func TestWireRoundTrip(t *testing.T) {
	ref := controller.PartitionRef{Topic: controller.TopicID{7}, Partition: 3}
	as := []Append{{ref, 4, 100, 90, 5, 80, []byte("batches")}, {ref, 4, 1, 2, 3, 4, nil}}
	got, err := ParseAppends(AppendAppends(nil, as))
	if err != nil || len(got) != 2 || got[0].PrevEnd != 100 || !bytes.Equal(got[0].Batches, []byte("batches")) || got[1].EpochStart != 4 {
		t.Fatalf("appends round trip: %+v, %v", got, err)
	}
	acks := []AppendAck{{ref, 4, StatusMismatch, 10, 9}}
	if back, err := ParseAcks(AppendAcks(nil, acks)); err != nil || !slices.Equal(back, acks) {
		t.Fatalf("acks round trip: %+v, %v", back, err)
	}
	f := &Follow{ref, 4, 2, 10, 0, []EpochEntry{{0, 0}, {4, 9}}}
	if back, err := ParseFollow(AppendFollow(nil, f)); err != nil || back.LogEnd != 10 || !slices.Equal(back.Epochs, f.Epochs) {
		t.Fatalf("follow round trip: %+v, %v", back, err)
	}
	fr := &FollowReply{ref, 4, 2, StatusOK, 9, 0, true, 9, 3}
	if back, err := ParseFollowReply(AppendFollowReply(nil, fr)); err != nil || *back != *fr {
		t.Fatalf("follow reply round trip: %+v, %v", back, err)
	}
}

// FuzzFrames feeds arbitrary bytes to every replication decoder: none may panic, and what
// decodes re-encodes to a frame that decodes the same.
func FuzzFrames(f *testing.F) {
	ref := controller.PartitionRef{Topic: controller.TopicID{1}, Partition: 0}
	f.Add(AppendAppends(nil, []Append{{ref, 1, 2, 3, 4, 5, []byte("x")}}))
	f.Add(AppendAcks(nil, []AppendAck{{ref, 1, 0, 2, 3}}))
	f.Add(AppendFollow(nil, &Follow{ref, 1, 1, 2, 0, []EpochEntry{{1, 2}}}))
	f.Add(AppendFollowReply(nil, &FollowReply{ref, 1, 1, 0, 2, 1, false, 2, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if as, err := ParseAppends(b); err == nil {
			if again, err := ParseAppends(AppendAppends(nil, as)); err != nil || len(again) != len(as) {
				t.Fatalf("appends re-encode: %v", err)
			}
		}
		if acks, err := ParseAcks(b); err == nil {
			if again, err := ParseAcks(AppendAcks(nil, acks)); err != nil || !slices.Equal(again, acks) {
				t.Fatalf("acks re-encode: %v", err)
			}
		}
		if fl, err := ParseFollow(b); err == nil {
			if again, err := ParseFollow(AppendFollow(nil, fl)); err != nil || !slices.Equal(again.Epochs, fl.Epochs) {
				t.Fatalf("follow re-encode: %v", err)
			}
		}
		if fr, err := ParseFollowReply(b); err == nil {
			if again, err := ParseFollowReply(AppendFollowReply(nil, fr)); err != nil || *again != *fr {
				t.Fatalf("follow reply re-encode: %v", err)
			}
		}
	})
}

func TestIdleFollowerStaysInSync(t *testing.T) {
	l := NewLeader(1, 0, 0, 0, [][]int32{{1, 2}}, true, 1, 10*time.Second, now0)
	l.SetLocal(5, 5, true)
	l.Join(2, 0)
	l.Ack(2, 5, 5, now0)
	if isr := l.InSync(now0.Add(time.Hour)); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("an hour later with nothing new: ISR %v; want [1 2] (the follower has the whole log)", isr)
	}
	l.SetLocal(6, 6, true)
	if isr := l.InSync(now0.Add(time.Hour)); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("behind for an hour: ISR %v; want [1]", isr)
	}
}

// The retention bound is Kafka's high watermark: the smallest end among the replicas in sync. A
// lagging follower still in sync holds it (retention deleting past it reset the follower past
// records it never had, and acks=all then counted it); one out of sync or gone does not, so a
// partition short of followers keeps deleting; a follower still joining holds it at the high
// watermark during the epoch's grace.
func TestLeaderRetentionBound(t *testing.T) {
	const grace = time.Second
	l := NewLeader(1, 0, 0, 0, [][]int32{{1, 2, 3}}, true, 1, 10*time.Second, now0)
	l.SetLocal(100, 100, true)
	if got := l.RetentionBound(now0, grace); got != 0 {
		t.Fatalf("bound with both followers joining, in the grace = %d; want 0 (the high watermark)", got)
	}
	if got := l.RetentionBound(now0.Add(2*grace), grace); got != 100 {
		t.Fatalf("bound with followers that never joined, after the grace = %d; want 100 (the leader's end)", got)
	}
	l.Join(2, 0)
	l.Join(3, 0)
	l.Ack(2, 100, 100, now0)
	l.Ack(3, 100, 100, now0)
	now := now0.Add(2 * grace)
	l.SetLocal(200, 200, true)
	l.Ack(2, 150, 150, now)
	if l.HW() != 150 {
		t.Fatalf("HW = %d; want 150", l.HW())
	}
	if got := l.RetentionBound(now, grace); got != 100 {
		t.Fatalf("bound with follower 3 in sync at 100 = %d; want 100", got)
	}
	now = now0.Add(11 * time.Second) // follower 3 behind for more than replica.lag.time.max.ms
	l.Ack(2, 200, 200, now)
	if got := l.RetentionBound(now, grace); got != 200 {
		t.Fatalf("bound with follower 3 out of sync = %d; want 200", got)
	}
	l.SetLocal(300, 300, true)
	l.Stop(2, true)
	if got := l.RetentionBound(now, grace); got != 300 {
		t.Fatalf("bound with the leader alone in sync = %d; want 300 (its log end)", got)
	}
}
