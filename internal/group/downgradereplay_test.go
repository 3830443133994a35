package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDowngradeReplayMakesMembersRejoin: a classic group (a: t 0-2, b: t 3-5) is upgraded by
// consumer-protocol member c, which takes its share of t once a and b release it. c then
// leaves: the group is classic again and prepares a rebalance (live, a's heartbeat is answered
// REBALANCE_IN_PROGRESS and c's partitions are handed out again). A coordinator that loads the
// log before the rebalance completes (a failover), in full or compacted, goes on with that
// rebalance: a's heartbeat is answered REBALANCE_IN_PROGRESS there too, and a's and b's joins
// complete it. (Unlike a classic rebalance, the members are not in a JoinGroup they would
// resend to the new coordinator: only a heartbeat answer can tell them to rejoin. A Stable
// group of their generation, what Kafka's reload of its downgrade record gives, answers OK,
// and c's partitions stay assigned to no member.)
func TestDowngradeReplayMakesMembersRejoin(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, _ := classicGroupOnT(h)
	g, _ := h.c.Group("g")
	rc := h.hb("c", 0, []string{"t"}, map[string][]int32{}, "")
	if rc.ErrorCode != 0 || g.Type() != TypeConsumer {
		t.Fatalf("upgrade: %v", kerr.ErrorForCode(rc.ErrorCode))
	}
	ja := h.joined(h.joinMD(a, []string{"t"}, nil)) // eager: releases everything
	h.syncAssignment(a, ja.Generation, nil)
	jb := h.joined(h.joinMD(b, []string{"t"}, nil))
	h.syncAssignment(b, jb.Generation, nil)
	rc = h.hb("c", rc.MemberEpoch, nil, map[string][]int32{}, "")
	cParts := assigned(rc)["t"]
	if len(cParts) == 0 {
		t.Fatalf("setup: c got nothing (%v)", kerr.ErrorForCode(rc.ErrorCode))
	}
	genA := g.consumer.members[a].epoch
	if r := h.hb("c", -1, nil, nil, ""); r.ErrorCode != 0 {
		t.Fatalf("c's leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	g, _ = h.c.Group("g")
	if g.Type() != TypeClassic || g.State != PreparingRebalance {
		t.Fatalf("setup: after c left: type %s, state %v", g.Type(), g.State)
	}
	wantCode(t, "live: a's heartbeat after the downgrade", h.heartbeat(a, genA), kerr.RebalanceInProgress)

	// Failover now: a new coordinator loads the log, in full or compacted.
	for name, c := range map[string]*Coordinator{"full": replayFull(t, h.records, h), "compacted": replayCompacted(t, h.records, h.now)} {
		h2 := newConsumerHarness(t)
		h2.c = c
		g2, _ := h2.c.Group("g")
		if g2 == nil || g2.Type() != TypeClassic || len(g2.Members()) != 2 {
			t.Fatalf("%s replay: group %v", name, g2)
		}
		held := map[int32]bool{}
		for _, m := range g2.Members() {
			var as kmsg.ConsumerMemberAssignment
			if err := as.ReadFrom(m.Assignment); err == nil {
				for _, tp := range as.Topics {
					for _, p := range tp.Partitions {
						held[p] = true
					}
				}
			}
		}
		code := h2.heartbeat(a, genA)
		if code != kerr.RebalanceInProgress.Code {
			t.Fatalf("%s replay: state %v, generation %d, partitions held %v; a's heartbeat: %v, want REBALANCE_IN_PROGRESS (a must rejoin: t partitions %v, c's, are assigned to no member)",
				name, g2.State, g2.Generation, held, kerr.ErrorForCode(code), cParts)
		}
		j1, j2 := h2.joinMD(a, []string{"t"}, nil), h2.joinMD(b, []string{"t"}, nil)
		r1, r2 := h2.joined(j1), h2.joined(j2)
		if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.Generation != genA+1 || r2.Generation != r1.Generation {
			t.Fatalf("%s replay: rejoins: %v (generation %d), %v (generation %d); want both in generation %d",
				name, kerr.ErrorForCode(r1.ErrorCode), r1.Generation, kerr.ErrorForCode(r2.ErrorCode), r2.Generation, genA+1)
		}
	}
}
