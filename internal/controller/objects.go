package controller

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/runnel-dev/runnel/internal/objtopic"
	"github.com/runnel-dev/runnel/internal/txn"
)

// Object-storage topics in the image (docs/object-topics.md §2.2). A topic created with
// runnel.storage=object has, beside its Partitions (placeholders without replicas, which no
// election or reassignment touches), one objtopic.Partition per partition in Objects: its
// offsets, the extents of the files holding its records and its idempotent producers.
//
// Publishing the image must not cost the whole history of every object partition, so object
// partitions are copied on write: Image.Clone shares them, and the first change of one after a
// Clone replaces it, in the working image only, by a copy (objtopic.Partition.Clone shares the
// extents' backing array).

// StorageConfig is the topic config that makes a topic an object-storage topic.
const (
	StorageConfig = "runnel.storage"
	StorageObject = "object"
	// SequencingConfig lazy: an object topic's produce is acknowledged once its file is
	// written, before the commit assigns offsets (docs/object-topics.md §9).
	SequencingConfig = "runnel.sequencing"
	SequencingLazy   = "lazy"
	// OrderingConfig total makes a topic's partitions the shards of one totally ordered log
	// (docs/speclog.md; internal/speclog/shard runs them).
	OrderingConfig = "runnel.ordering"
	OrderingTotal  = "total"
)

// Ops of object topics.
const (
	OpCommitFile  = "commit-file"
	OpTrimObjects = "trim-objects"
	// OpReplaceExtents puts a merged object in the place of a partition's consecutive extents.
	OpReplaceExtents = "replace-extents"
	// OpForgetWriter forgets a writer run whose files are all gone (garbage collection).
	OpForgetWriter = "forget-writer"
	// OpObjectMarker writes a transaction marker to an object partition (its offset: the
	// result's Value).
	OpObjectMarker = "object-marker"
	// OpExpireProducers forgets object partitions' idle idempotent producers.
	OpExpireProducers = "expire-producers"
)

// ExpireProducers forgets the idempotent producers of object partitions whose last batch is
// older than the item's ExpirationMs (producer.id.expiration.ms) at NowMs, the proposer's
// clock: applied the same on every replica.
type ExpireProducers struct {
	NowMs int64                 `json:"now_ms"`
	Items []ExpireProducersItem `json:"items"`
}

// ExpireProducersItem is one partition's expiration.
type ExpireProducersItem struct {
	PartitionRef
	ExpirationMs int64 `json:"expiration_ms"`
}

// ObjectMarker is a transaction marker for an object partition (docs/object-topics.md §10):
// the transaction coordinator's COMMIT or ABORT, or the partition's own abort (coordinator
// epoch -1: written only if the producer's open transaction is still of Epoch). It is kept in
// the image as an inline extent until a merge or compaction writes it into an object.
type ObjectMarker struct {
	PartitionRef
	ProducerID       int64 `json:"pid"`
	Epoch            int16 `json:"epoch"`
	Commit           bool  `json:"commit,omitempty"`
	CoordinatorEpoch int32 `json:"coordinator_epoch"`
	Timestamp        int64 `json:"ts"` // ms, the proposer's clock: the marker batch's timestamp
}

func applyObjectMarker(im *Image, c *ObjectMarker) Result {
	t, ok := im.byID[c.Topic]
	if !ok || !t.IsObject() || c.Partition < 0 || int(c.Partition) >= len(t.Objects) {
		return Result{Err: ErrUnknownTopic}
	}
	// An abort with coordinator epoch -1 is taken for the partition's own, as when the command
	// was written (replayed the same way by every version).
	m := txn.Marker{ProducerID: c.ProducerID, Epoch: c.Epoch, Commit: c.Commit, CoordinatorEpoch: c.CoordinatorEpoch, Own: c.CoordinatorEpoch == -1 && !c.Commit}
	if m.Own {
		// The partition's own abort of the transaction of epoch c.Epoch, decided on an image
		// that may be older than this one: if that transaction is closed by now, another may
		// be open, which is not the one found stale. Nothing is written (Value -1).
		if _, epoch, open := t.Objects[c.Partition].OpenTransaction(c.ProducerID); !open || epoch != c.Epoch {
			return Result{Value: -1}
		}
	}
	if err := t.Objects[c.Partition].CheckMarker(m); err != nil { // check first: no copy for a refused marker
		return Result{Err: err}
	}
	off, err := im.objectForWrite(t, c.Partition).AppendMarker(m, c.Timestamp)
	return Result{Err: err, Value: off}
}

// ForgetWriter names a writer run to forget (none: only the expiry below). NowMs is the
// proposer's clock (0 from nodes before forgotten writers were kept): the run is kept as a
// ForgottenWriter from then, and forgotten writers older than ForgottenWriterTTL at NowMs are
// dropped.
type ForgetWriter struct {
	Writer string `json:"writer"`
	NowMs  int64  `json:"now_ms,omitempty"`
}

// ForgottenWriterTTL is how long a forgotten writer run's committed files are remembered: a
// process of that run cut off for longer could commit a file again whose first commit applied
// and whose answer it lost.
const ForgottenWriterTTL = 7 * 24 * time.Hour

// ForgottenWriter is what the image keeps of a writer run garbage collection forgot (its files
// are all gone, and it was no node's current run): which of its files were committed, and
// when it was forgotten. The process may still live (an agent cut off from the controller, in
// Ripcord): a commit it retries of a file committed before is AlreadyCommitted, not applied a
// second time, and a commit of a new file makes the run a writer again.
type ForgottenWriter struct {
	Node      int32           `json:"node"`
	Committed objtopic.Ranges `json:"committed,omitempty"`
	AtMs      int64           `json:"at_ms"`
}

func applyForgetWriter(im *Image, c *ForgetWriter) {
	if w := im.ObjWriters[c.Writer]; w != nil {
		delete(im.ObjWriters, c.Writer)
		if c.NowMs > 0 && len(w.Committed) > 0 {
			if im.ForgottenWriters == nil {
				im.ForgottenWriters = map[string]*ForgottenWriter{}
			}
			im.ForgottenWriters[c.Writer] = &ForgottenWriter{Node: w.Node, Committed: w.Committed, AtMs: c.NowMs}
		}
	}
	if c.NowMs > 0 {
		maps.DeleteFunc(im.ForgottenWriters, func(_ string, f *ForgottenWriter) bool {
			return c.NowMs-f.AtMs > ForgottenWriterTTL.Milliseconds()
		})
	}
}

// Writer is the image's record of writer run id: its ObjWriter, else what it kept of the run
// when it forgot it, else nil. It must not be modified.
func (im *Image) Writer(id string) *ObjWriter {
	if w := im.ObjWriters[id]; w != nil {
		return w
	}
	if f := im.ForgottenWriters[id]; f != nil {
		return &ObjWriter{Node: f.Node, Committed: f.Committed}
	}
	return nil
}

// ReplaceExtents replaces the consecutive extents of a partition from First to Last (matched by
// file, section offset and offsets) by Merged, which holds the same records in one object (a
// merge) or the records compaction kept of them; nil when it kept none.
type ReplaceExtents struct {
	PartitionRef
	First  objtopic.Extent  `json:"first"`
	Last   objtopic.Extent  `json:"last"`
	Merged *objtopic.Extent `json:"merged"`
	// Between is the run's objtopic.BetweenDigest: from command level 6 the extents between
	// First and Last must be those the run was planned on (a compaction pass may have
	// rewritten one meanwhile); older versions ignore it, and below level 6 so does every node.
	Between string `json:"between,omitempty"`
	// DropAborted: the offsets of ABORT markers compaction dropped with the last records of
	// their transactions; their aborted-transaction index entries go too.
	DropAborted []int64 `json:"drop_aborted,omitempty"`
}

func applyReplaceExtents(im *Image, c *ReplaceExtents) error {
	t, ok := im.byID[c.Topic]
	if !ok || !t.IsObject() || c.Partition < 0 || int(c.Partition) >= len(t.Objects) {
		return ErrUnknownTopic
	}
	between := c.Between
	if im.Level < LevelReplaceBetween {
		between = ""
	}
	if _, err := t.Objects[c.Partition].Clone().Replace(c.First, c.Last, between, c.Merged); err != nil { // check first: no copy for a stale merge
		return err
	}
	p := im.objectForWrite(t, c.Partition)
	if _, err := p.Replace(c.First, c.Last, between, c.Merged); err != nil {
		return err
	}
	p.DropAborted(c.DropAborted)
	return nil
}

// CommitFile commits one object file that a writer (a node's or agent's process run) has
// written: every partition section in it gets its offsets at once. Writer and Seq make it
// idempotent: a commit retried after its answer was lost gets the first one's answer.
type CommitFile struct {
	Writer string `json:"writer"` // the writing process run's id
	Node   int32  `json:"node"`   // the node the writer runs as
	// Incarnation is the node's registration when the file's first commit was tried: a retry
	// after the node was unregistered or registered again is refused, as its earlier answer may
	// be forgotten.
	Incarnation uint64 `json:"incarnation"`
	Seq         uint64 `json:"seq"` // the file's number in the writer's run, from 1
	// Floor: the writer holds no commit below it whose answer it still needs; the answers
	// below it are forgotten.
	Floor    uint64          `json:"floor"`
	Key      string          `json:"key"` // object key
	Size     int64           `json:"size"`
	Sections []CommitSection `json:"sections"`
	// Slow: a commit of the slow path (docs/object-topics.md §9), made for a writer that did
	// not commit the file itself: only the file's lazy sections, no answer kept, no
	// incarnation check (the writer's committed set makes it idempotent).
	Slow bool `json:"slow,omitempty"`
}

// CommitSection is one partition's section of a committed file.
type CommitSection struct {
	PartitionRef
	Offset  uint64               `json:"offset"`
	Length  uint32               `json:"length"`
	Batches []objtopic.BatchMeta `json:"batches"`
	// Lazy: the section's batches were acknowledged at the file's write: none is refused
	// (objtopic.Partition.CommitLazy).
	Lazy bool `json:"lazy,omitempty"`
}

// BatchOutcome is a committed batch's answer: its base offset, or a Kafka error code.
type BatchOutcome struct {
	Base int64  `json:"b"`
	Code int16  `json:"c,omitempty"`
	Msg  string `json:"m,omitempty"`
}

// TrimObjects moves object partitions' log start offsets up (DeleteRecords, retention).
type TrimObjects struct {
	Items []TrimItem `json:"items"`
}

// TrimItem is one partition's new log start offset; one at or below the current start, or
// past the partition's end, changes nothing.
type TrimItem struct {
	PartitionRef
	Start int64 `json:"start"`
}

// ObjWriter is what the image keeps of a writer run: which of its files are committed, and the
// answers of its recent commits.
type ObjWriter struct {
	Node  int32                       `json:"node"`
	Floor uint64                      `json:"floor"`
	Done  map[uint64][][]BatchOutcome `json:"done,omitempty"`
	// Committed are the numbers of the run's committed files (whose answers may be forgotten):
	// a file is committed at most once, by its writer or by the slow path.
	Committed objtopic.Ranges `json:"committed,omitempty"`
}

// ErrCommitForgotten answers a commit below its writer's floor: the writer said it no longer
// needed that answer, so the commit is a bug, not a retry.
var ErrCommitForgotten = errors.New("controller: a commit below its writer's floor")

// ErrStaleWriter answers a commit whose node is no longer registered in the incarnation the
// commit names: its outcome may have been forgotten, so it is not applied.
var ErrStaleWriter = errors.New("controller: the committing node's registration changed")

// IsObject reports whether the topic keeps its records in object storage.
// A topic's storage is fixed at creation (set-topic-configs keeps it).
func (t *Topic) IsObject() bool { return t.Configs[StorageConfig] == StorageObject }

// UncleanConfig is the topic config, and the cluster-wide dynamic broker config of the same
// name that sets its default, that lets the active controller elect a replica outside a
// majority without an operator asking (Kafka's unclean.leader.election.enable).
const UncleanConfig = "unclean.leader.election.enable"

// UncleanEnabled reports whether the topic's partitions get an unclean election as soon as a
// majority of their replicas is not live: its unclean.leader.election.enable, else the
// cluster-wide default, else false. Never for object-storage topics (no leaders) or total-order
// topics (a shard that lost its majority is failed by a view change; an unclean shard leader
// could change confirmed positions).
func (im *Image) UncleanEnabled(t *Topic) bool {
	if t.IsObject() || t.Configs[OrderingConfig] == OrderingTotal {
		return false
	}
	v, ok := t.Configs[UncleanConfig]
	if !ok {
		v = im.ClusterConfigs[UncleanConfig]
	}
	return v == "true"
}

// Object returns an object topic's partition state (nil if the topic is not an object topic or
// has no such partition). It must not be modified.
func (t *Topic) Object(index int32) *objtopic.Partition {
	if index < 0 || int(index) >= len(t.Objects) {
		return nil
	}
	return t.Objects[index]
}

// objectForWrite returns partition index of t for the working image to modify: the first
// change after a Clone copies it.
func (im *Image) objectForWrite(t *Topic, index int32) *objtopic.Partition {
	p := t.Objects[index]
	if im.objOwned[p] {
		return p
	}
	c := p.Clone()
	t.Objects[index] = c
	if im.objOwned == nil {
		im.objOwned = map[*objtopic.Partition]bool{}
	}
	im.objOwned[c] = true
	return c
}

func applyCommitFile(im *Image, c *CommitFile) Result {
	w := writerForWrite(im, c.Writer, c.Node)
	if done, ok := w.Done[c.Seq]; ok && !c.Slow {
		return Result{Commit: done}
	}
	if w.Committed.Covers(int64(c.Seq), int64(c.Seq)) {
		return Result{AlreadyCommitted: true}
	}
	if !c.Slow {
		if n, ok := im.Nodes[c.Node]; !ok || n.Incarnation != c.Incarnation {
			return Result{Err: fmt.Errorf("%w: node %d, incarnation %d", ErrStaleWriter, c.Node, c.Incarnation)}
		}
		if c.Seq < w.Floor {
			return Result{Err: fmt.Errorf("%w: file %d of %s, floor %d", ErrCommitForgotten, c.Seq, c.Writer, w.Floor)}
		}
	}
	out := make([][]BatchOutcome, len(c.Sections))
	for i, s := range c.Sections {
		out[i] = make([]BatchOutcome, len(s.Batches))
		t, ok := im.byID[s.Topic]
		if !ok || !t.IsObject() || s.Partition < 0 || int(s.Partition) >= len(t.Objects) {
			for j := range out[i] {
				out[i][j] = BatchOutcome{Base: -1, Code: kerr.UnknownTopicOrPartition.Code, Msg: "unknown object topic or partition " + s.PartitionRef.String()}
			}
			continue
		}
		p := im.objectForWrite(t, s.Partition)
		p.EpochStartFollows = im.Level >= LevelObjectEpochStart
		p.KeepPrevEpoch = im.Level >= LevelObjectEpochs
		p.MarkerEpochAhead = im.Level >= LevelObjectEpochs
		p.TrackPrevEpoch = im.Level >= LevelObjectPrevCopies
		e := objtopic.IndexEntry{TopicID: s.Topic, Partition: s.Partition, Offset: s.Offset, Length: s.Length}
		commit := p.Commit
		if s.Lazy {
			commit = p.CommitLazy
		}
		for j, r := range commit(c.Key, e, s.Batches) {
			o := BatchOutcome{Base: r.Base}
			if r.Err != nil {
				o = BatchOutcome{Base: -1, Code: kerr.UnknownServerError.Code, Msg: r.Err.Error()}
				var ke *kerr.Error
				if errors.As(r.Err, &ke) {
					o.Code = ke.Code
				}
			}
			out[i][j] = o
		}
	}
	w.Committed = w.Committed.Add(int64(c.Seq), int64(c.Seq))
	if c.Slow {
		return Result{Commit: out}
	}
	if w.Done == nil {
		w.Done = map[uint64][][]BatchOutcome{}
	}
	w.Done[c.Seq] = out
	if c.Floor > w.Floor {
		w.Floor = c.Floor
		maps.DeleteFunc(w.Done, func(seq uint64, _ [][]BatchOutcome) bool { return seq < w.Floor })
	}
	return Result{Commit: out}
}

func applyExpireProducers(im *Image, c *ExpireProducers) {
	for _, it := range c.Items {
		t, ok := im.byID[it.Topic]
		if !ok || !t.IsObject() || it.Partition < 0 || int(it.Partition) >= len(t.Objects) || it.ExpirationMs <= 0 {
			continue
		}
		if t.Objects[it.Partition].ProducersExpirable(c.NowMs, it.ExpirationMs) {
			im.objectForWrite(t, it.Partition).ExpireProducers(c.NowMs, it.ExpirationMs)
		}
	}
}

func applyTrimObjects(im *Image, c *TrimObjects) {
	for _, it := range c.Items {
		t, ok := im.byID[it.Topic]
		if !ok || !t.IsObject() || it.Partition < 0 || int(it.Partition) >= len(t.Objects) {
			continue
		}
		if p := t.Objects[it.Partition]; it.Start <= p.Start || it.Start > p.Next {
			continue
		}
		im.objectForWrite(t, it.Partition).Trim(it.Start) //nolint:errcheck // checked above
	}
}

// dropWriters forgets the answers of a node's earlier process runs (at its registration, or its
// unregistration: their commits will not be retried), and records the new run (a run the slow
// path must know of even if it never committed a file). Which files are committed is kept until
// garbage collection has deleted the run's files (forget-writer).
func dropWriters(im *Image, node int32, run string) {
	for id, w := range im.ObjWriters {
		if w.Node == node && id != run {
			w.Done, w.Floor = nil, 0
		}
	}
	if run != "" {
		writerForWrite(im, run, node)
	}
}

// writerForWrite returns writer run id of the working image, made for node if the image has
// none. A run it forgot becomes a writer again with the files it had committed: its process
// lives on (it commits a file, or registers again as the same run).
func writerForWrite(im *Image, id string, node int32) *ObjWriter {
	w := im.ObjWriters[id]
	if w == nil {
		if im.ObjWriters == nil {
			im.ObjWriters = map[string]*ObjWriter{}
		}
		w = &ObjWriter{Node: node}
		im.ObjWriters[id] = w
	}
	// Also when it is a writer already: an image of 7ed530c's kept some runs as both.
	if f := im.ForgottenWriters[id]; f != nil {
		for _, r := range f.Committed {
			w.Committed = w.Committed.Add(r.From, r.To)
		}
		delete(im.ForgottenWriters, id)
	}
	return w
}

func cloneWriters(ws map[string]*ObjWriter) map[string]*ObjWriter {
	if ws == nil {
		return nil
	}
	out := make(map[string]*ObjWriter, len(ws))
	for id, w := range ws {
		wc := *w
		wc.Done = maps.Clone(w.Done) // the answers themselves are never modified
		out[id] = &wc
	}
	return out
}
