package controller

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// cluster3 returns an image with nodes 1-3 registered (incarnations 1-3) and topic "t" with
// two partitions replicated on all three, led by 1 and 2.
func cluster3(t testing.TB) *Image {
	t.Helper()
	im := NewImage()
	idx := uint64(0)
	apply := func(c *Command) Result {
		idx++
		return Apply(im, idx, c)
	}
	apply(&Command{Op: OpBootstrap, Bootstrap: &Bootstrap{ClusterID: "c1"}})
	for n := int32(1); n <= 3; n++ {
		apply(&Command{Op: OpRegister, Register: &Register{Node: n, KafkaHost: "h", KafkaPort: 9000 + n, ClusterAddr: "a"}})
	}
	res := apply(&Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "t", ID: TopicID{1},
		Assignments: [][]int32{{1, 2, 3}, {2, 3, 1}}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return im
}

func TestRegisterGivesIncarnationAndDropsLeaderships(t *testing.T) {
	im := cluster3(t)
	_, p0, _ := im.Partition(TopicID{1}, 0)
	if p0.Leader != 1 || p0.LeaderEpoch != 0 {
		t.Fatalf("new partition 0: leader %d epoch %d; want 1, 0", p0.Leader, p0.LeaderEpoch)
	}
	res := Apply(im, 100, &Command{Op: OpRegister, Register: &Register{Node: 1, ClusterAddr: "a"}})
	if res.Value != 100 || im.Nodes[1].Incarnation != 100 {
		t.Fatalf("register at 100: result %d, incarnation %d; want 100", res.Value, im.Nodes[1].Incarnation)
	}
	_, p0, _ = im.Partition(TopicID{1}, 0)
	if p0.Leader != -1 || p0.LeaderEpoch != 1 {
		t.Fatalf("after node 1 restarts, partition 0: leader %d epoch %d; want -1, 1", p0.Leader, p0.LeaderEpoch)
	}
	if slices.Contains(p0.ISR, 1) {
		t.Errorf("restarted node 1 still in the ISR %v", p0.ISR)
	}
	_, p1, _ := im.Partition(TopicID{1}, 1)
	if p1.Leader != 2 || p1.LeaderEpoch != 0 {
		t.Errorf("partition 1 (led by 2) changed: leader %d epoch %d", p1.Leader, p1.LeaderEpoch)
	}
}

// TestRegisterLossIndex: a registration moves the node's loss index unless its process holds
// every write of the run the image names (KeptFrom, the boot mark), or is that run.
func TestRegisterLossIndex(t *testing.T) {
	im := NewImage()
	reg := func(index uint64, run, keptFrom string) uint64 {
		t.Helper()
		Apply(im, index, &Command{Op: OpRegister, Register: &Register{Node: 1, ClusterAddr: "a", Run: run, KeptFrom: keptFrom}})
		if n := im.Nodes[1]; n.Incarnation != index || n.Run != run {
			t.Fatalf("register at %d: incarnation %d, run %q", index, n.Incarnation, n.Run)
		}
		return im.Nodes[1].LossSince()
	}
	if got := reg(10, "r1", "r0"); got != 10 {
		t.Fatalf("first registration, naming a run the image never had: loss since %d; want 10", got)
	}
	if got := reg(20, "r2", "r1"); got != 10 {
		t.Errorf("restart keeping r1's writes: loss since %d; want 10", got)
	}
	if got := reg(30, "r2", "r2"); got != 10 {
		t.Errorf("r2 registering again: loss since %d; want 10", got)
	}
	if got := reg(40, "r3", ""); got != 40 {
		t.Errorf("restart without the boot mark: loss since %d; want 40", got)
	}
	if got := reg(50, "r4", "r1"); got != 50 {
		t.Errorf("restart keeping an older run's writes (a restored copy): loss since %d; want 50", got)
	}
	if got := reg(60, "r4", ""); got != 60 {
		t.Errorf("r4 registering again after a failed log: loss since %d; want 60", got)
	}
	// An image of an older version has no loss index: the latest registration counts.
	im.Nodes[1].LossIndex = 0
	if got := im.Nodes[1].LossSince(); got != 60 {
		t.Errorf("no loss index: loss since %d; want the incarnation 60", got)
	}
	if got := reg(70, "r5", "r4"); got != 60 {
		t.Errorf("a kept restart on an image without loss index: loss since %d; want its incarnation 60", got)
	}
	// Runs that died before registering: r6 kept r5's writes, r7 kept r6's.
	regAlso := func(index uint64, run, keptFrom string, also ...string) uint64 {
		t.Helper()
		Apply(im, index, &Command{Op: OpRegister, Register: &Register{Node: 1, ClusterAddr: "a", Run: run, KeptFrom: keptFrom, KeptAlso: also}})
		return im.Nodes[1].LossSince()
	}
	if got := regAlso(80, "r7", "r6", "r5"); got != 60 {
		t.Errorf("restart keeping the writes of a run that kept r5's: loss since %d; want 60", got)
	}
	if got := regAlso(90, "r9", "r8", "r5", "r4"); got != 90 {
		t.Errorf("a chain that misses the last registration (r7): loss since %d; want 90", got)
	}
	if got := regAlso(100, "r10", "", "r9"); got != 100 {
		t.Errorf("a list without a kept run: loss since %d; want 100", got)
	}
}

func TestFenceOnlyTheNamedIncarnation(t *testing.T) {
	im := cluster3(t)
	inc := im.Nodes[2].Incarnation
	Apply(im, 50, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: inc + 1}})
	if im.Nodes[2].Fenced {
		t.Fatal("fence of another incarnation fenced node 2")
	}
	Apply(im, 51, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: inc}})
	if !im.Nodes[2].Fenced || im.Live(2) {
		t.Fatal("node 2 not fenced")
	}
	_, p1, _ := im.Partition(TopicID{1}, 1)
	if p1.Leader != -1 || p1.LeaderEpoch != 1 {
		t.Fatalf("partition 1 after its leader is fenced: leader %d epoch %d; want -1, 1", p1.Leader, p1.LeaderEpoch)
	}
	Apply(im, 52, &Command{Op: OpUnfence, Fence: &Fence{Node: 2, Incarnation: inc}})
	if im.Nodes[2].Fenced {
		t.Fatal("unfence did not unfence")
	}
	if _, p1, _ = im.Partition(TopicID{1}, 1); p1.Leader != -1 {
		t.Fatal("unfence gave the leadership back without an election")
	}
}

// TestLiveIndex: the index of the latest change of the live nodes moves with every change of
// who is live (a registration, a fence, an unfence), and only then, so that an object
// partition's share owner, chosen among the live nodes, is one per index.
func TestLiveIndex(t *testing.T) {
	im := cluster3(t)
	step := func(index uint64, c *Command, moves bool) {
		t.Helper()
		before := im.LiveIndex
		Apply(im, index, c)
		want := before
		if moves {
			want = index
		}
		if im.LiveIndex != want {
			t.Fatalf("%s at %d: live index %d -> %d; want %d", c.Op, index, before, im.LiveIndex, want)
		}
	}
	inc := im.Nodes[2].Incarnation
	step(50, &Command{Op: OpUnfence, Fence: &Fence{Node: 2, Incarnation: inc}}, false)   // live already
	step(51, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: inc + 1}}, false) // another incarnation
	step(52, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: inc}}, true)
	step(53, &Command{Op: OpFence, Fence: &Fence{Node: 2, Incarnation: inc}}, false) // fenced already
	step(54, &Command{Op: OpUnfence, Fence: &Fence{Node: 2, Incarnation: inc}}, true)
	step(55, &Command{Op: OpRegister, Register: &Register{Node: 2, ClusterAddr: "b", Run: "r2"}}, true) // a new process
	step(56, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "d", Run: "r4"}}, true)
	if c := im.Clone(); c.LiveIndex != 56 {
		t.Fatalf("a clone's live index %d; want 56", c.LiveIndex)
	}
}

func TestElectAppliesOnlyInItsEpoch(t *testing.T) {
	im := cluster3(t)
	Apply(im, 50, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{PartitionRef{TopicID{1}, 0}, 0}}}})
	ref := PartitionRef{TopicID{1}, 0}
	Apply(im, 51, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 0, Leader: 3}}}}) // stale epoch
	if _, p, _ := im.Partition(ref.Topic, 0); p.Leader != -1 {
		t.Fatalf("an elect for epoch 0 applied in epoch 1: leader %d", p.Leader)
	}
	Apply(im, 52, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 1, Leader: 3}}}})
	Apply(im, 53, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 1, Leader: 2}}}}) // a second winner
	if _, p, _ := im.Partition(ref.Topic, 0); p.Leader != 3 || p.LeaderEpoch != 1 {
		t.Fatalf("leader %d epoch %d; want 3 in epoch 1 (the first elect wins)", p.Leader, p.LeaderEpoch)
	}
}

func TestElectRefusesFencedOrForeignNodes(t *testing.T) {
	im := cluster3(t)
	Apply(im, 40, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a"}})
	ref := PartitionRef{TopicID{1}, 0}
	Apply(im, 50, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{ref, 0}}}})
	Apply(im, 51, &Command{Op: OpFence, Fence: &Fence{Node: 3, Incarnation: im.Nodes[3].Incarnation}})
	Apply(im, 52, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: 1, Leader: 3}, {PartitionRef: ref, Epoch: 1, Leader: 4}}}})
	if _, p, _ := im.Partition(ref.Topic, 0); p.Leader != -1 {
		t.Fatalf("leader %d; want none (3 is fenced, 4 holds no replica)", p.Leader)
	}
}

func TestCreateTopicChecks(t *testing.T) {
	im := cluster3(t)
	for _, tc := range []struct {
		c    CreateTopic
		want error
	}{
		{CreateTopic{Name: "t", ID: TopicID{9}, Assignments: [][]int32{{1}}}, ErrTopicExists},
		{CreateTopic{Name: "u", ID: TopicID{1}, Assignments: [][]int32{{1}}}, ErrTopicExists},
		{CreateTopic{Name: "u", ID: TopicID{2}, Assignments: [][]int32{{1, 1}}}, ErrBadAssignment},
		{CreateTopic{Name: "u", ID: TopicID{2}, Assignments: [][]int32{{7}}}, ErrBadAssignment},
		{CreateTopic{Name: "u", ID: TopicID{2}}, ErrBadAssignment},
	} {
		if res := Apply(im, 60, &Command{Op: OpCreateTopic, CreateTopic: &tc.c}); !errors.Is(res.Err, tc.want) {
			t.Errorf("create %+v = %v; want %v", tc.c, res.Err, tc.want)
		}
	}
	Apply(im, 61, &Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
	Apply(im, 62, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "v", ID: TopicID{3}, Assignments: [][]int32{{1, 2}}}})
	if p := im.Topics["v"].Partitions[0]; p.Leader != 2 {
		t.Errorf("a new partition whose first replica is fenced: leader %d; want 2", p.Leader)
	}
}

func TestProducerIDBlocksNeverOverlap(t *testing.T) {
	im := cluster3(t)
	Apply(im, 70, &Command{Op: OpBootstrap, Bootstrap: &Bootstrap{ClusterID: "other", NextProducerID: 5000}})
	if im.ClusterID != "c1" || im.NextProducerID != 0 {
		t.Fatalf("a second bootstrap applied: cluster %q next id %d", im.ClusterID, im.NextProducerID)
	}
	a := Apply(im, 71, &Command{Op: OpAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Node: 1, Count: 1000}})
	b := Apply(im, 72, &Command{Op: OpAllocProducerIDs, AllocProducerIDs: &AllocProducerIDs{Node: 2, Count: 1000}})
	if a.Value != 0 || b.Value != 1000 || im.NextProducerID != 2000 {
		t.Fatalf("blocks at %d and %d, next %d; want 0, 1000, 2000", a.Value, b.Value, im.NextProducerID)
	}
}

func TestReassignJointThenFinish(t *testing.T) {
	im := cluster3(t)
	Apply(im, 40, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a"}})
	ref := PartitionRef{TopicID{1}, 0}
	Apply(im, 41, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}})
	_, p, _ := im.Partition(ref.Topic, 0)
	if got := p.Hosts(); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("hosts during the reassignment = %v; want [1 2 3 4]", got)
	}
	if len(p.CommitSets()) != 2 {
		t.Fatalf("commit sets = %v; want old and new", p.CommitSets())
	}
	if res := Apply(im, 42, &Command{Op: OpFinishReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}}); !errors.Is(res.Err, ErrReassignNotSynced) {
		t.Fatalf("finish with 4 out of sync = %v; want ErrReassignNotSynced", res.Err)
	}
	Apply(im, 43, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 0, ISR: []int32{1, 2, 3, 4}}}}})
	if res := Apply(im, 44, &Command{Op: OpFinishReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}}); !errors.Is(res.Err, ErrReassignNotSynced) {
		t.Fatalf("finish with 4 in the ISR but the target set not reported synced = %v; want ErrReassignNotSynced", res.Err)
	}
	Apply(im, 45, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{{PartitionRef: ref, Epoch: 0, ISR: []int32{1, 2, 3, 4}, Target: []int32{4, 2, 3}}}}})
	if _, p, _ := im.Partition(ref.Topic, 0); !p.TargetSynced {
		t.Fatal("the synced report did not mark the target synced")
	}
	if res := Apply(im, 46, &Command{Op: OpFinishReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	_, p, _ = im.Partition(ref.Topic, 0)
	if !slices.Equal(p.Replicas, []int32{4, 2, 3}) || p.Target != nil || p.Leader != -1 || p.LeaderEpoch != 1 {
		t.Fatalf("after finishing: replicas %v target %v leader %d epoch %d; want [4 2 3], none, -1 (1 left), 1",
			p.Replicas, p.Target, p.Leader, p.LeaderEpoch)
	}
}

func TestImageJSONRoundTrip(t *testing.T) {
	im := cluster3(t)
	back, err := decodeImage(encodeImage(im))
	if err != nil {
		t.Fatal(err)
	}
	if _, p, ok := back.Partition(TopicID{1}, 1); !ok || p.Leader != 2 {
		t.Fatalf("decoded image lost partition 1 or its leader")
	}
	if back.Nodes[3].KafkaPort != 9003 || back.ClusterID != "c1" {
		t.Fatalf("decoded image: %+v", back.Nodes[3])
	}
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(`{"op":"elect","elect":{"items":[{"topic":"01000000000000000000000000000000","partition":0,"epoch":1,"leader":3}]}}`))
	f.Add([]byte(`{"op":"create-topic","create_topic":{"name":"x","id":"01000000000000000000000000000000","assignments":[[1,2]]}}`))
	// Object topics' commands, against topic "o" (id 09...) of withObjectTopic.
	f.Add([]byte(`{"op":"commit-file","commit_file":{"writer":"w","node":1,"incarnation":2,"seq":1,"floor":1,"key":"k","sections":[{"topic":"09000000000000000000000000000000","partition":0,"length":10,"batches":[{"r":3,"p":-1,"t":5},{"r":2,"p":7,"s":0,"t":6}],"lazy":true}]}}`))
	f.Add([]byte(`{"op":"commit-file","commit_file":{"writer":"w","node":1,"seq":4,"slow":true,"key":"k","sections":[{"topic":"09000000000000000000000000000000","partition":1,"batches":[{"r":1,"n":3,"p":-1}]}]}}`))
	f.Add([]byte(`{"op":"trim-objects","trim_objects":{"items":[{"topic":"09000000000000000000000000000000","partition":0,"start":2}]}}`))
	f.Add([]byte(`{"op":"replace-extents","replace_extents":{"topic":"09000000000000000000000000000000","partition":0,"first":{"f":"a","b":0,"l":1},"last":{"f":"a","b":0,"l":1},"merged":{"f":"m","b":0,"l":1}}}`))
	f.Add([]byte(`{"op":"forget-writer","forget_writer":{"writer":"w"}}`))
	f.Add([]byte(`{"op":"set-isr","set_isr":{"items":[{"topic":"01000000000000000000000000000000","partition":0,"epoch":1,"isr":[3,1],"target":[1,3]}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		im := withObjectTopic(t)
		Apply(im, 99, c) // never panics, whatever the command says
		if _, err := DecodeCommand(c.Encode()); err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
	})
}

var _ = time.Second

// TestConditionalTopicConfigs: a conditional change applies only on the configs it was computed
// from (nil and empty alike), and leaves them untouched otherwise; an unconditional one always.
func TestConditionalTopicConfigs(t *testing.T) {
	im := cluster3(t)
	set := func(idx uint64, s SetTopicConfigs) error {
		s.ID = TopicID{1}
		return Apply(im, idx, &Command{Op: OpSetTopicConfigs, SetTopicConfigs: &s}).Err
	}
	if err := set(60, SetTopicConfigs{Configs: map[string]string{"a": "1"}, Conditional: true, Base: map[string]string{}}); err != nil {
		t.Fatalf("from no configs: %v", err)
	}
	if err := set(61, SetTopicConfigs{Configs: map[string]string{"b": "2"}, Conditional: true, Base: map[string]string{}}); !errors.Is(err, ErrConfigsChanged) {
		t.Fatalf("from a stale base: %v; want ErrConfigsChanged", err)
	}
	if got := im.Topics["t"].Configs; len(got) != 1 || got["a"] != "1" {
		t.Fatalf("configs after a refused change: %v", got)
	}
	if err := set(62, SetTopicConfigs{Configs: map[string]string{"a": "1", "b": "2"}, Conditional: true, Base: map[string]string{"a": "1"}}); err != nil {
		t.Fatalf("from the current base: %v", err)
	}
	if err := set(63, SetTopicConfigs{Configs: map[string]string{"c": "3"}}); err != nil {
		t.Fatalf("unconditional: %v", err)
	}
	if got := im.Topics["t"].Configs; len(got) != 1 || got["c"] != "3" {
		t.Fatalf("configs after an unconditional change: %v", got)
	}
}

// TestSetGroupConfigs: a group's configs are set as a whole, only if still the base a change was
// computed from; setting none forgets the group; the map in an image is replaced, not changed,
// and survives a snapshot.
func TestSetGroupConfigs(t *testing.T) {
	im := cluster3(t)
	set := func(idx uint64, group string, configs, base map[string]string) Result {
		return Apply(im, idx, &Command{Op: OpSetGroupConfigs, SetGroupConfigs: &SetGroupConfigs{Group: group, Configs: configs, Conditional: true, Base: base}})
	}
	if res := set(10, "g", map[string]string{"share.auto.offset.reset": "earliest"}, nil); res.Err != nil {
		t.Fatal(res.Err)
	}
	first := im.GroupConfigs["g"]
	if res := set(11, "g", map[string]string{"share.auto.offset.reset": "latest"}, nil); !errors.Is(res.Err, ErrConfigsChanged) {
		t.Fatalf("a change computed from no configs, after one was set: %v; want ErrConfigsChanged", res.Err)
	}
	if res := set(12, "g", map[string]string{"share.auto.offset.reset": "latest", "share.isolation.level": "read_committed"}, first); res.Err != nil {
		t.Fatal(res.Err)
	}
	if first["share.auto.offset.reset"] != "earliest" || len(im.GroupConfigs["g"]) != 2 {
		t.Fatalf("the earlier map %v was modified, or the new one %v is wrong", first, im.GroupConfigs["g"])
	}
	back, err := DecodeImage(EncodeImage(im))
	if err != nil || back.GroupConfigs["g"]["share.isolation.level"] != "read_committed" {
		t.Fatalf("after a snapshot: %v %v", err, back.GroupConfigs)
	}
	if res := set(13, "g", nil, im.GroupConfigs["g"]); res.Err != nil || im.GroupConfigs["g"] != nil {
		t.Fatalf("removing the configs: %v, left %v", res.Err, im.GroupConfigs)
	}
}

// TestEpochStartsAndReplicasSince: the image records the log index of the command that began
// each recent leader epoch of a partition, and of the last change of its replicas (what a
// transaction's prepare compares registrations with).
func TestEpochStartsAndReplicasSince(t *testing.T) {
	im := cluster3(t) // the topic is created at index 5
	_, p, _ := im.Partition(TopicID{1}, 0)
	if at, ok := p.EpochStartIndex(0); !ok || at != 5 || p.ReplicasSince != 5 {
		t.Fatalf("new partition: epoch 0 began at %d (%v), replicas since %d; want 5, 5", at, ok, p.ReplicasSince)
	}
	Apply(im, 20, &Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: im.Nodes[1].Incarnation}})
	_, p, _ = im.Partition(TopicID{1}, 0)
	if at, ok := p.EpochStartIndex(1); !ok || at != 20 || p.ReplicasSince != 5 {
		t.Fatalf("after its leader is fenced: epoch 1 began at %d (%v), replicas since %d; want 20, 5", at, ok, p.ReplicasSince)
	}
	if at, _ := p.EpochStartIndex(0); at != 5 {
		t.Fatalf("epoch 0's start lost: %d", at)
	}
	for i := uint64(0); i < 2*maxEpochStarts; i++ {
		Apply(im, 30+i, &Command{Op: OpBeginElection, BeginElection: &BeginElection{Items: []EpochRef{{PartitionRef: PartitionRef{TopicID{1}, 0}, Epoch: p.LeaderEpoch}}}})
		_, p, _ = im.Partition(TopicID{1}, 0)
	}
	if len(p.EpochStarts) != maxEpochStarts {
		t.Fatalf("%d epoch starts kept; want %d", len(p.EpochStarts), maxEpochStarts)
	}
	if at, ok := p.EpochStartIndex(p.LeaderEpoch); !ok || at != 30+2*maxEpochStarts-1 {
		t.Fatalf("the current epoch %d began at %d (%v)", p.LeaderEpoch, at, ok)
	}
	Apply(im, 90, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a"}})
	Apply(im, 91, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: PartitionRef{TopicID{1}, 0}, Target: []int32{4, 2, 3}}})
	if _, p, _ = im.Partition(TopicID{1}, 0); p.ReplicasSince != 91 {
		t.Fatalf("after a reassignment began: replicas since %d; want 91", p.ReplicasSince)
	}
}

// TestCreatePartitionsFromACount: at LevelPartitionCount a create-partitions applies only to
// the partition count it was computed for, so two requests for the same count, validated
// against the same image, add the partitions once (the second is refused, as Kafka refuses a
// count the topic has); below the level, From is not read and both apply, as every older
// version applies them.
func TestCreatePartitionsFromACount(t *testing.T) {
	for _, level := range []int{LevelPartitionCount - 1, LevelPartitionCount} {
		im := cluster3(t)
		im.Level = level
		two := 2
		grow := func(idx uint64) Result {
			return Apply(im, idx, &Command{Op: OpCreatePartitions, CreatePartitions: &CreatePartitions{ID: TopicID{1},
				Assignments: [][]int32{{3, 1, 2}, {1, 2, 3}}, From: &two}})
		}
		if res := grow(10); res.Err != nil {
			t.Fatalf("level %d: the first grow: %v", level, res.Err)
		}
		res := grow(11)
		want := 6
		if level >= LevelPartitionCount {
			want = 4
			if !errors.Is(res.Err, ErrPartitionsChanged) {
				t.Fatalf("level %d: the second grow from 2 partitions: %v; want ErrPartitionsChanged", level, res.Err)
			}
		}
		if got := len(im.byID[TopicID{1}].Partitions); got != want {
			t.Fatalf("level %d: %d partitions; want %d", level, got, want)
		}
	}
}

// TestSetISRFromAPartitionEpoch: at LevelISRPartitionEpoch a set-isr report applies only to the
// partition epoch it was computed from. A late report of the same leader epoch, computed before
// a move was cancelled and asked again, must not mark the new move synced (nor undo a newer
// ISR); below the level the epoch is not read.
func TestSetISRFromAPartitionEpoch(t *testing.T) {
	for _, level := range []int{LevelISRPartitionEpoch - 1, LevelISRPartitionEpoch} {
		im := cluster3(t)
		im.Level = level
		if res := Apply(im, 10, &Command{Op: OpRegister, Register: &Register{Node: 4, ClusterAddr: "a", Level: level}}); res.Err != nil {
			t.Fatal(res.Err)
		}
		ref := PartitionRef{TopicID{1}, 0}
		part := func() *Partition { _, p, _ := im.Partition(ref.Topic, 0); return p } // the image copies on write
		p := part()
		Apply(im, 11, &Command{Op: OpElect, Elect: &Elect{Items: []ElectItem{{PartitionRef: ref, Epoch: p.LeaderEpoch, Leader: 1}}}})
		if p = part(); p.Leader != 1 {
			t.Fatalf("level %d: leader %d after the election", level, p.Leader)
		}
		if res := Apply(im, 12, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}}); res.Err != nil {
			t.Fatal(res.Err)
		}
		p = part()
		late := p.PartitionEpoch // the leader computes a report: the target synced
		report := ISRItem{PartitionRef: ref, Epoch: p.LeaderEpoch, ISR: []int32{1, 2, 3, 4}, Target: []int32{4, 2, 3}, PartitionEpoch: &late}
		Apply(im, 13, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: ref}}) // cancelled
		Apply(im, 14, &Command{Op: OpReassign, Reassign: &Reassign{PartitionRef: ref, Target: []int32{4, 2, 3}}})
		Apply(im, 15, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{report}}}) // arrives late
		p = part()
		if level >= LevelISRPartitionEpoch && p.TargetSynced {
			t.Fatalf("level %d: a report from partition epoch %d marked the new move (epoch %d) synced", level, late, p.PartitionEpoch)
		}
		if level < LevelISRPartitionEpoch && !p.TargetSynced {
			t.Fatalf("level %d: below the level the report applies as before", level)
		}
		now := p.PartitionEpoch
		report.PartitionEpoch = &now
		Apply(im, 16, &Command{Op: OpSetISR, SetISR: &SetISR{Items: []ISRItem{report}}})
		p = part()
		if !p.TargetSynced || !slices.Equal(p.ISR, []int32{1, 2, 3, 4}) {
			t.Fatalf("level %d: a report from the current partition epoch: synced %v, ISR %v", level, p.TargetSynced, p.ISR)
		}
	}
}
