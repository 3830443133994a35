package controller

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/objtopic"
)

var objTopic = TopicID{9}

// withObjectTopic adds object topic "o" with two partitions to cluster3's image.
func withObjectTopic(t testing.TB) *Image {
	t.Helper()
	im := cluster3(t)
	res := Apply(im, 10, &Command{Op: OpCreateTopic, CreateTopic: &CreateTopic{Name: "o", ID: objTopic,
		Configs: map[string]string{StorageConfig: StorageObject}, Assignments: [][]int32{{}, {}}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return im
}

func commitCmd(writer string, seq, floor uint64, sections ...CommitSection) *Command {
	return &Command{Op: OpCommitFile, CommitFile: &CommitFile{Writer: writer, Node: 1, Incarnation: 2, Seq: seq, Floor: floor,
		Key: "journal/" + writer + "/" + string(rune('0'+seq)), Sections: sections}}
}

func section(partition int32, batches ...objtopic.BatchMeta) CommitSection {
	return CommitSection{PartitionRef: PartitionRef{Topic: objTopic, Partition: partition}, Length: 100, Batches: batches}
}

// TestCommitFileAssignsOffsetsOnce: a file's sections get offsets in every partition at once; a
// commit retried (its answer lost) gets the first answer and assigns nothing again; answers
// below the writer's floor are forgotten; an unknown partition's batches get an error.
func TestCommitFileAssignsOffsetsOnce(t *testing.T) {
	im := withObjectTopic(t)
	run := objtopic.BatchMeta{Records: 10, Batches: 3, ProducerID: -1, MaxTimestamp: 5}
	c1 := commitCmd("w1", 1, 1, section(0, run), section(1, run, run))
	r := Apply(im, 11, c1)
	if r.Err != nil || r.Commit[0][0].Base != 0 || r.Commit[1][0].Base != 0 || r.Commit[1][1].Base != 10 {
		t.Fatalf("first commit: %+v", r)
	}
	again := Apply(im, 12, c1)
	if again.Commit[1][1].Base != 10 || im.Topics["o"].Object(1).Next != 20 {
		t.Fatalf("retried commit: %+v, partition 1 next %d; want the first answer and nothing assigned", again, im.Topics["o"].Object(1).Next)
	}
	r = Apply(im, 13, commitCmd("w1", 2, 2, section(0, run), CommitSection{PartitionRef: PartitionRef{Topic: objTopic, Partition: 7},
		Batches: []objtopic.BatchMeta{run}}))
	if r.Commit[0][0].Base != 10 || r.Commit[1][0].Code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("second commit: %+v", r)
	}
	if w := im.ObjWriters["w1"]; w.Floor != 2 || len(w.Done) != 1 {
		t.Fatalf("writer after floor 2: %+v; want only file 2's answer kept", w)
	}
	if r := Apply(im, 14, c1); r.Err != nil || !r.AlreadyCommitted || im.Topics["o"].Object(1).Next != 20 {
		t.Fatalf("a commit whose answer is forgotten: %+v; want AlreadyCommitted and nothing assigned", r)
	}
	// The node's next process run forgets this one's answers (not which files it committed),
	// and the old run's commits are refused.
	Apply(im, 15, &Command{Op: OpRegister, Register: &Register{Node: 1, ClusterAddr: "a", Run: "w2"}})
	if w := im.ObjWriters["w1"]; w == nil || w.Done != nil || !w.Committed.Covers(1, 2) {
		t.Fatalf("a restarted node's earlier writer: %+v; want no answers, files 1-2 committed", w)
	}
	if im.ObjWriters["w2"] == nil {
		t.Fatal("the new run is not recorded at registration")
	}
	if r := Apply(im, 16, commitCmd("w1", 3, 3, section(0, run))); !errors.Is(r.Err, ErrStaleWriter) {
		t.Fatalf("a commit of the node's earlier incarnation: %+v; want ErrStaleWriter", r)
	}
}

// TestObjectPartitionsCopyOnWrite: a published image never sees later commits.
func TestObjectPartitionsCopyOnWrite(t *testing.T) {
	im := withObjectTopic(t)
	b := objtopic.BatchMeta{Records: 1, ProducerID: -1}
	Apply(im, 11, commitCmd("w", 1, 0, section(0, b)))
	pub := im.Clone()
	Apply(im, 12, commitCmd("w", 2, 0, section(0, b)))
	Apply(im, 13, commitCmd("w", 3, 0, section(0, b)))
	if got := pub.Topics["o"].Object(0); got.Next != 1 || len(got.Extents) != 1 {
		t.Fatalf("published image changed: next %d, %d extents", got.Next, len(got.Extents))
	}
	if got := im.Topics["o"].Object(0); got.Next != 3 || len(got.Extents) != 3 {
		t.Fatalf("working image: next %d, %d extents; want 3, 3", got.Next, len(got.Extents))
	}
	pub2 := im.Clone()
	Apply(im, 14, &Command{Op: OpTrimObjects, TrimObjects: &TrimObjects{Items: []TrimItem{{PartitionRef: PartitionRef{Topic: objTopic}, Start: 2}}}})
	if got := pub2.Topics["o"].Object(0); got.Start != 0 || len(got.Extents) != 3 {
		t.Fatalf("trim changed a published image: start %d, %d extents", got.Start, len(got.Extents))
	}
	if got := im.Topics["o"].Object(0); got.Start != 2 || len(got.Extents) != 1 || got.Extents[0].Base != 2 {
		t.Fatalf("after trim to 2: %+v", got)
	}
	// A trim past the end changes nothing.
	Apply(im, 15, &Command{Op: OpTrimObjects, TrimObjects: &TrimObjects{Items: []TrimItem{{PartitionRef: PartitionRef{Topic: objTopic}, Start: 9}}}})
	if got := im.Topics["o"].Object(0); got.Start != 2 {
		t.Fatalf("trim past the end moved the start to %d", got.Start)
	}
}

// TestExpireProducersCommand: expire-producers forgets the idle producers of the named object
// partitions at the command's time, on the working image only; a topic that is not an object
// one, an unknown partition or no expiration changes nothing.
func TestExpireProducersCommand(t *testing.T) {
	im := withObjectTopic(t)
	Apply(im, 11, commitCmd("w", 1, 0, section(0, objtopic.BatchMeta{Records: 1, ProducerID: 3, MaxTimestamp: 1_000}),
		section(1, objtopic.BatchMeta{Records: 1, ProducerID: 3, MaxTimestamp: 1_000})))
	pub := im.Clone()
	Apply(im, 12, &Command{Op: OpExpireProducers, ExpireProducers: &ExpireProducers{NowMs: 5_000, Items: []ExpireProducersItem{
		{PartitionRef: PartitionRef{Topic: objTopic, Partition: 0}, ExpirationMs: 1_000},
		{PartitionRef: PartitionRef{Topic: objTopic, Partition: 1}, ExpirationMs: 0},
		{PartitionRef: PartitionRef{Topic: objTopic, Partition: 9}, ExpirationMs: 1_000},
		{PartitionRef: PartitionRef{Topic: TopicID{1}, Partition: 0}, ExpirationMs: 1_000},
	}}})
	if im.Topics["o"].Object(0).ProducersExpirable(5_000, 1_000) {
		t.Fatal("partition 0's producer not forgotten")
	}
	if !im.Topics["o"].Object(1).ProducersExpirable(5_000, 1_000) {
		t.Fatal("partition 1's producer forgotten with no expiration given")
	}
	if !pub.Topics["o"].Object(0).ProducersExpirable(5_000, 1_000) {
		t.Fatal("the expiry changed a published image")
	}
	// Every replica applies it alike: the same after a snapshot and replay.
	js, err := json.Marshal(im)
	if err != nil {
		t.Fatal(err)
	}
	var back Image
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Topics["o"].Object(0).ProducersExpirable(5_000, 1_000) || !back.Topics["o"].Object(1).ProducersExpirable(5_000, 1_000) {
		t.Fatal("the snapshot differs from the image it was taken of")
	}
}

// TestObjectTopicSnapshotAndElections: object topics survive a snapshot, keep their storage
// through set-topic-configs, grow with create-partitions, and no election touches them.
func TestObjectTopicSnapshotAndElections(t *testing.T) {
	im := withObjectTopic(t)
	Apply(im, 11, commitCmd("w", 1, 0, section(1, objtopic.BatchMeta{Records: 4, ProducerID: 3, FirstSeq: 0, MaxTimestamp: 7})))
	Apply(im, 12, &Command{Op: OpSetTopicConfigs, SetTopicConfigs: &SetTopicConfigs{ID: objTopic, Configs: map[string]string{"retention.ms": "5"}}})
	if !im.Topics["o"].IsObject() {
		t.Fatal("set-topic-configs made the object topic a local one")
	}
	if r := Apply(im, 13, &Command{Op: OpCreatePartitions, CreatePartitions: &CreatePartitions{ID: objTopic, Assignments: [][]int32{{}}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	b, err := json.Marshal(im)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decodeImage(b)
	if err != nil {
		t.Fatal(err)
	}
	o := dec.Topics["o"]
	if len(o.Objects) != 3 || o.Object(1).Next != 4 || len(o.Object(1).Extents) != 1 {
		t.Fatalf("decoded object topic: %d partitions, partition 1 %+v", len(o.Objects), o.Object(1))
	}
	// The decoded producer state still recognizes the batch as a duplicate.
	r := Apply(dec, 14, commitCmd("w", 2, 0, section(1, objtopic.BatchMeta{Records: 4, ProducerID: 3, FirstSeq: 0})))
	if r.Commit[0][0].Base != 0 || dec.Topics["o"].Object(1).Next != 4 {
		t.Fatalf("duplicate after a snapshot: %+v", r.Commit)
	}
	n := 0
	dec.EachPartition(func(t *Topic, _ int32, _ *Partition) {
		if t.IsObject() {
			n++
		}
	})
	if n != 0 {
		t.Fatalf("EachPartition visited %d object partitions", n)
	}
	Apply(dec, 15, &Command{Op: OpFence, Fence: &Fence{Node: 1, Incarnation: dec.Nodes[1].Incarnation}})
	if p := dec.Topics["o"].Partitions[0]; p.Leader != -1 || p.LeaderEpoch != 0 {
		t.Fatalf("fencing a node changed an object partition: %+v", p)
	}
}

// TestSlowCommit: the slow path commits a file its writer did not (lazy sections, no
// incarnation check, no answer kept); the writer's own late commit of it is AlreadyCommitted;
// forget-writer drops the run.
func TestSlowCommit(t *testing.T) {
	im := withObjectTopic(t)
	lazy := section(0, objtopic.BatchMeta{Records: 3, ProducerID: 8, Epoch: 0, FirstSeq: 0})
	lazy.Lazy = true
	slow := commitCmd("dead", 4, 0, lazy)
	slow.CommitFile.Slow, slow.CommitFile.Incarnation = true, 999 // the writer's registration is long gone
	if r := Apply(im, 11, slow); r.Err != nil || r.Commit[0][0].Base != 0 {
		t.Fatalf("slow commit: %+v", r)
	}
	if r := Apply(im, 12, slow); !r.AlreadyCommitted {
		t.Fatalf("the slow commit again: %+v; want AlreadyCommitted", r)
	}
	own := commitCmd("dead", 4, 4, lazy)
	own.CommitFile.Incarnation = 999
	if r := Apply(im, 13, own); !r.AlreadyCommitted || im.Topics["o"].Object(0).Next != 3 {
		t.Fatalf("the writer's own late commit: %+v; want AlreadyCommitted, nothing assigned", r)
	}
	// The same batch journaled again in another file is a duplicate (answered with its offset).
	again := commitCmd("dead", 5, 0, lazy)
	again.CommitFile.Slow = true
	if r := Apply(im, 14, again); r.Commit[0][0].Base != 0 || r.Commit[0][0].Code != 0 || im.Topics["o"].Object(0).Next != 3 {
		t.Fatalf("a batch journaled twice: %+v, next %d", r, im.Topics["o"].Object(0).Next)
	}
	Apply(im, 15, &Command{Op: OpForgetWriter, ForgetWriter: &ForgetWriter{Writer: "dead"}})
	if _, ok := im.ObjWriters["dead"]; ok {
		t.Fatal("forget-writer kept the run")
	}
}

// TestObjectMarker: a transaction's records committed in a file, then its marker: the marker
// takes the next offset and closes the transaction, in the working image only (copy on write);
// a marker the producer state refuses answers its Kafka error and changes nothing; a repeated
// request is answered with the first offset.
func TestObjectMarker(t *testing.T) {
	im := withObjectTopic(t)
	Apply(im, 11, commitCmd("w", 1, 0, section(0, objtopic.BatchMeta{Records: 2, ProducerID: 5, Epoch: 1, Transactional: true})))
	published := im.Clone()
	marker := func(epoch int16, coord int32, req uint64) *Command {
		return &Command{Op: OpObjectMarker, Req: &Request{Run: "r", Seq: req}, ObjectMarker: &ObjectMarker{PartitionRef: PartitionRef{Topic: objTopic},
			ProducerID: 5, Epoch: epoch, Commit: true, CoordinatorEpoch: coord, Timestamp: 7}}
	}
	r := Apply(im, 12, marker(1, 4, 1))
	p := im.Topics["o"].Object(0)
	if r.Err != nil || r.Value != 2 || p.Next != 3 || p.LastStable() != 3 {
		t.Fatalf("marker: %+v, next %d, last stable %d; want offset 2, 3, 3", r, p.Next, p.LastStable())
	}
	if q := published.Topics["o"].Object(0); q.Next != 2 || q.LastStable() != 0 {
		t.Fatalf("the published image moved: next %d, last stable %d", q.Next, q.LastStable())
	}
	if r := Apply(im, 13, marker(1, 4, 1)); r.Value != 2 || im.Topics["o"].Object(0).Next != 3 {
		t.Fatalf("a repeated request: %+v, next %d; want the first answer", r, im.Topics["o"].Object(0).Next)
	}
	if r := Apply(im, 14, marker(0, 4, 2)); !errors.Is(r.Err, kerr.InvalidProducerEpoch) || im.Topics["o"].Object(0).Next != 3 {
		t.Fatalf("an older epoch's marker: %+v", r)
	}
	if r := Apply(im, 15, marker(1, 3, 3)); !errors.Is(r.Err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("a fenced coordinator's marker: %+v", r)
	}
	// The partition's own abort of epoch 1's transaction, once that one is closed and epoch 2's
	// is open: nothing is written, epoch 2's stays open.
	Apply(im, 17, commitCmd("w", 2, 0, section(0, objtopic.BatchMeta{Records: 1, ProducerID: 5, Epoch: 2, Transactional: true})))
	own := marker(1, -1, 5)
	own.ObjectMarker.Commit = false
	if r := Apply(im, 18, own); r.Err != nil || r.Value != -1 || im.Topics["o"].Object(0).LastStable() != 3 {
		t.Fatalf("a stale own abort: %+v, last stable %d; want nothing written, 3", r, im.Topics["o"].Object(0).LastStable())
	}
	own = marker(2, -1, 6)
	own.ObjectMarker.Commit = false
	if r := Apply(im, 19, own); r.Err != nil || r.Value != 4 || im.Topics["o"].Object(0).LastStable() != 5 {
		t.Fatalf("the own abort of the open transaction: %+v, last stable %d; want offset 4, 5", r, im.Topics["o"].Object(0).LastStable())
	}
	bad := marker(1, 4, 4)
	bad.ObjectMarker.Partition = 9
	if r := Apply(im, 16, bad); !errors.Is(r.Err, ErrUnknownTopic) {
		t.Fatalf("an unknown partition's marker: %+v", r)
	}
}

// TestForgottenWriter: a writer run garbage collection forgot keeps which files it committed
// for ForgottenWriterTTL: a commit its process retries of such a file (its first attempt
// applied, the answer lost) is AlreadyCommitted and assigns nothing again, in the fast or the
// slow form and across a snapshot; a commit of a new file makes the run a writer again. A
// forget-writer without a clock (an older proposer) keeps nothing.
func TestForgottenWriter(t *testing.T) {
	im := withObjectTopic(t)
	run := objtopic.BatchMeta{Records: 4, ProducerID: -1}
	first := commitCmd("cut-off", 1, 0, section(0, run))
	first.CommitFile.Slow = true
	if r := Apply(im, 11, first); r.Err != nil || r.Commit[0][0].Base != 0 {
		t.Fatalf("first commit: %+v", r)
	}
	const at = int64(1_000_000)
	Apply(im, 12, &Command{Op: OpForgetWriter, ForgetWriter: &ForgetWriter{Writer: "cut-off", NowMs: at}})
	if im.ObjWriters["cut-off"] != nil {
		t.Fatal("forget-writer kept the run a writer")
	}
	if f := im.ForgottenWriters["cut-off"]; f == nil || f.AtMs != at || !f.Committed.Covers(1, 1) || f.Node != 1 {
		t.Fatalf("forgotten writer: %+v; want file 1 committed, forgotten at %d", f, at)
	}
	im, err := DecodeImage(EncodeImage(im))
	if err != nil {
		t.Fatal(err)
	}
	published := im.Clone()
	for _, retry := range []bool{true, false} { // the slow form, then the writer's own (its incarnation is current)
		c := commitCmd("cut-off", 1, 0, section(0, run))
		c.CommitFile.Slow = retry
		if r := Apply(im, 13, c); r.Err != nil || !r.AlreadyCommitted || im.Topics["o"].Object(0).Next != 4 {
			t.Fatalf("retried commit (slow %v) of a forgotten run: %+v, next %d; want AlreadyCommitted, next 4", retry, r, im.Topics["o"].Object(0).Next)
		}
	}
	if r := Apply(im, 14, commitCmd("cut-off", 2, 2, section(0, run))); r.Err != nil || r.Commit[0][0].Base != 4 {
		t.Fatalf("a new file of the forgotten run: %+v; want base 4", r)
	}
	if w := im.ObjWriters["cut-off"]; w == nil || !w.Committed.Covers(1, 2) || im.ForgottenWriters["cut-off"] != nil {
		t.Fatalf("the run after a new file: writer %+v, forgotten %+v; want a writer of files 1-2", w, im.ForgottenWriters["cut-off"])
	}
	if f := published.ForgottenWriters["cut-off"]; f == nil || !f.Committed.Covers(1, 1) || f.Committed.Covers(2, 2) || published.ObjWriters["cut-off"] != nil {
		t.Fatal("a published image changed")
	}
	// Forgotten again, then dropped by a later forget past the TTL; an unclocked forget keeps nothing.
	Apply(im, 15, &Command{Op: OpForgetWriter, ForgetWriter: &ForgetWriter{Writer: "cut-off", NowMs: at}})
	if f := im.ForgottenWriters["cut-off"]; f == nil || !f.Committed.Covers(1, 2) {
		t.Fatalf("forgotten again: %+v", f)
	}
	other := commitCmd("other", 1, 0, section(1, run))
	other.CommitFile.Slow = true
	Apply(im, 16, other)
	Apply(im, 17, &Command{Op: OpForgetWriter, ForgetWriter: &ForgetWriter{Writer: "other", NowMs: at + ForgottenWriterTTL.Milliseconds()}})
	if im.ForgottenWriters["cut-off"] == nil || im.ForgottenWriters["other"] == nil {
		t.Fatal("a forgotten writer dropped at its TTL, not after it")
	}
	Apply(im, 18, &Command{Op: OpForgetWriter, ForgetWriter: &ForgetWriter{Writer: "none", NowMs: at + ForgottenWriterTTL.Milliseconds() + 1}})
	if im.ForgottenWriters["cut-off"] != nil || im.ForgottenWriters["other"] == nil {
		t.Fatalf("after the TTL: %+v; want only the younger run kept", im.ForgottenWriters)
	}
	// A forgotten run's process registers again as the same run (an agent whose registration
	// lapsed): it is a writer again with what it had committed, and its retry assigns nothing.
	next := im.Topics["o"].Object(1).Next
	Apply(im, 19, &Command{Op: OpRegister, Register: &Register{Node: 1, ClusterAddr: "a", Run: "other"}})
	if w := im.ObjWriters["other"]; w == nil || !w.Committed.Covers(1, 1) || im.ForgottenWriters["other"] != nil {
		t.Fatalf("a forgotten run registered again: writer %+v, forgotten %+v; want a writer of file 1", w, im.ForgottenWriters["other"])
	}
	if r := Apply(im, 20, other); !r.AlreadyCommitted || im.Topics["o"].Object(1).Next != next {
		t.Fatalf("its retried commit: %+v, next %d; want AlreadyCommitted, next %d", r, im.Topics["o"].Object(1).Next, next)
	}
	Apply(im, 21, &Command{Op: OpForgetWriter, ForgetWriter: &ForgetWriter{Writer: "other"}})
	if im.ObjWriters["other"] != nil || im.ForgottenWriters["other"] != nil {
		t.Fatalf("an unclocked forget: writer %+v, forgotten %+v; want neither", im.ObjWriters["other"], im.ForgottenWriters["other"])
	}
	// An image that kept a run both as a writer and forgotten (one version registered a
	// forgotten run as a new writer): the first change of the writer folds the two together.
	im.ObjWriters["both"] = &ObjWriter{Node: 1}
	im.ForgottenWriters["both"] = &ForgottenWriter{Node: 1, Committed: objtopic.Ranges{}.Add(1, 1), AtMs: at}
	im, err = DecodeImage(EncodeImage(im))
	if err != nil {
		t.Fatal(err)
	}
	next = im.Topics["o"].Object(1).Next
	both := commitCmd("both", 1, 0, section(1, run))
	both.CommitFile.Slow = true
	if r := Apply(im, 22, both); !r.AlreadyCommitted || im.Topics["o"].Object(1).Next != next || im.ForgottenWriters["both"] != nil {
		t.Fatalf("a retried commit of a run both writer and forgotten: %+v, next %d, forgotten %+v; want AlreadyCommitted, next %d, folded",
			r, im.Topics["o"].Object(1).Next, im.ForgottenWriters["both"], next)
	}
}
