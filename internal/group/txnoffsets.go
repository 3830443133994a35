package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98/447): the offsets are written to
// __consumer_offsets as a transactional batch of the producer and stay pending until the
// transaction's marker lands on that partition: COMMIT makes them the group's committed offsets,
// ABORT drops them. OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
// partition with a pending commit.
//
// Pending offsets are kept by producer id and producer epoch, and a marker settles only its own
// transaction's: the offsets written with the marker's epoch (transaction version 1, and a
// partition's own abort) or the epoch before it (version 2 and fencing aborts bump the epoch
// once), as the log closes a transaction (txn.Partition.ApplyMarker). A version-2 producer may
// begin its next transaction while the previous one's markers are written, and the marker is
// applied here only after its append: the next transaction's offsets can be pending by then. A
// marker applied to every pending offset of the producer committed an aborted transaction's
// offsets with its predecessor's COMMIT, and the consumer skipped that transaction's input.

// pendingOffsets are one transaction's pending offsets: group -> partition -> offset.
//
// A COMMIT makes a pending offset the committed one only if its record is newer in the log
// than the committed offset's (Offset.record), whoever wrote that: a plain commit or another
// producer's transaction that committed first. An offset tombstone (OffsetDelete,
// DeleteGroups) drops the partition's pending offsets. Both are Kafka's rules
// (OffsetMetadataManager.replayEndTransactionMarker and replay of a tombstone), and both keep
// the live coordinator in step with one that reloads the log after compaction has kept only
// the newest record of each partition.
type pendingOffsets map[string]map[TopicPartition]Offset

// TxnOffsetCommit handles a TxnOffsetCommit request. It returns the response and the offset
// records to append as the producer's transactional batch; the offsets are pending from now on.
// undo takes them back if the records cannot be written, restoring what each replaced (an
// earlier commit of the same partition in the transaction, which is in the log), as Kafka
// reverts a failed append to the state before it; it must run before the coordinator changes
// otherwise.
func (c *Coordinator) TxnOffsetCommit(now time.Time, req *kmsg.TxnOffsetCommitRequest) (resp *kmsg.TxnOffsetCommitResponse, records []Record, undo func()) {
	resp = req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var undos []func()
	undo = func() {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
	}
	code := int16(0)
	var topics []kmsg.OffsetCommitRequestTopic // the partitions, for a previous epoch's check
	for _, t := range req.Topics {
		ct := kmsg.OffsetCommitRequestTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			ct.Partitions = append(ct.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p.Partition})
		}
		topics = append(topics, ct)
	}
	if req.Version >= 3 && (req.Generation >= 0 || req.MemberID != "") {
		// KIP-447: the producer's consumer must still be a member of the group's generation.
		check := &kmsg.OffsetCommitRequest{Version: 9, Group: req.Group, Generation: req.Generation,
			MemberID: req.MemberID, InstanceID: req.InstanceID, Topics: topics}
		code = c.checkCommit(now, check, true)
		if code == kerr.StaleMemberEpoch.Code {
			// Kafka's answer to a transactional commit of an old epoch: producers abort the
			// transaction on it (CommitFailedException), where STALE_MEMBER_EPOCH is fatal.
			code = kerr.IllegalGeneration.Code
		}
	} else if req.Group == "" {
		code = kerr.InvalidGroupID.Code
	} else {
		// As Kafka's validateTransactionalOffsetCommit: a commit without a generation creates
		// the group it names, so a later one naming a member is checked against it.
		c.simpleGroupFor(now, req.Group, topics)
	}
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			if code == 0 {
				var o Offset
				if sp.ErrorCode, o = c.partitionCommit(now, rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata); sp.ErrorCode == 0 {
					tp := TopicPartition{rt.Topic, rp.Partition}
					o.record = c.nextRecord()
					undos = append(undos, c.addPending(req.ProducerID, req.ProducerEpoch, req.Group, tp, o))
					records = append(records, offsetRecord(req.Group, tp, &o))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, records, undo
}

// addPending records a pending transactional offset; undo puts back what it replaced.
func (c *Coordinator) addPending(pid int64, epoch int16, group string, tp TopicPartition, o Offset) (undo func()) {
	if c.pending == nil {
		c.pending = map[int64]map[int16]pendingOffsets{}
	}
	if c.pending[pid] == nil {
		c.pending[pid] = map[int16]pendingOffsets{}
	}
	p := c.pending[pid][epoch]
	if p == nil {
		p = pendingOffsets{}
		c.pending[pid][epoch] = p
	}
	if p[group] == nil {
		p[group] = map[TopicPartition]Offset{}
	}
	prev, had := p[group][tp]
	p[group][tp] = o
	return func() {
		switch cur := c.pending[pid][epoch]; {
		case cur == nil || cur[group] == nil:
		case had:
			cur[group][tp] = prev
		default:
			c.removePending(pid, epoch, group, tp)
		}
	}
}

// removePending forgets one pending offset, and the maps it leaves empty.
func (c *Coordinator) removePending(pid int64, epoch int16, group string, tp TopicPartition) {
	p := c.pending[pid][epoch]
	delete(p[group], tp)
	if len(p[group]) == 0 {
		delete(p, group)
	}
	if len(p) == 0 {
		delete(c.pending[pid], epoch)
		if len(c.pending[pid]) == 0 {
			delete(c.pending, pid)
		}
	}
}

// dropPending removes the pending transactional offsets of the group's partition at its offset
// tombstone, written or read back, as Kafka's replay of a tombstone does ("Remove all the
// pending offset commits related to the tombstone"): the partition is stable at once, and the
// transactions' COMMIT markers find nothing of it to commit.
func (c *Coordinator) dropPending(group string, tp TopicPartition) {
	for pid, byEpoch := range c.pending {
		for epoch, p := range byEpoch {
			if _, ok := p[group][tp]; ok {
				c.removePending(pid, epoch, group, tp)
			}
		}
	}
}

// nextRecord numbers an offset record written or read back: its place in the log.
func (c *Coordinator) nextRecord() uint64 {
	c.records++
	return c.records
}

// LoadTxn applies a transactional offset record read back from the partition (written by the
// producer at epoch): pending until its marker.
func (c *Coordinator) LoadTxn(pid int64, epoch int16, key, value []byte) error {
	if len(key) < 2 || int16(binary.BigEndian.Uint16(key)) > 1 {
		return fmt.Errorf("%w: a transactional record that is not an offset commit", ErrBadRecord)
	}
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil {
		return fmt.Errorf("%w: offset key: %v", ErrBadRecord, err)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: offset value: %v", ErrBadRecord, err)
	}
	c.addPending(pid, epoch, k.Group, TopicPartition{k.Topic, k.Partition},
		Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTime: v.CommitTimestamp, record: c.nextRecord()})
	return nil
}

// CompleteTxn applies a marker of the producer written with epoch: COMMIT makes the pending
// offsets of the transaction it closes committed where no newer record of the partition was
// committed meanwhile, ABORT drops them. Offsets pending from another epoch belong to another
// transaction and stay pending.
func (c *Coordinator) CompleteTxn(now time.Time, pid int64, epoch int16, commit bool) {
	byEpoch := c.pending[pid]
	for _, e := range []int16{epoch - 1, epoch} { // records' epoch + 1, then the same epoch
		p, ok := byEpoch[e]
		if !ok || e < 0 {
			continue
		}
		delete(byEpoch, e)
		if !commit {
			continue
		}
		for group, offsets := range p {
			for tp, o := range offsets {
				// The newest record wins, as after compaction: a plain commit, or another
				// producer's transaction, written after this one's offset stays.
				g := c.loadGroup(group, now)
				if cur, ok := g.offsets[tp]; !ok || o.record > cur.record {
					g.offsets[tp] = o
				}
			}
		}
	}
	if len(byEpoch) == 0 {
		delete(c.pending, pid)
	}
}

// pendingPartitions lists the group's partitions with a transactional commit pending.
func (c *Coordinator) pendingPartitions(group string) []TopicPartition {
	seen := map[TopicPartition]bool{}
	for _, byEpoch := range c.pending {
		for _, p := range byEpoch {
			for tp := range p[group] {
				seen[tp] = true
			}
		}
	}
	return sortedPartitions(seen)
}

// hasPending reports whether a transactional commit of the group's partition is pending.
func (c *Coordinator) hasPending(group string, tp TopicPartition) bool {
	for _, byEpoch := range c.pending {
		for _, p := range byEpoch {
			if _, ok := p[group][tp]; ok {
				return true
			}
		}
	}
	return false
}
