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

// pendingOffsets are one producer's pending offsets: group -> partition -> offset.
type pendingOffsets map[string]map[TopicPartition]Offset

// TxnOffsetCommit handles a TxnOffsetCommit request. It returns the response and the offset
// records to append as the producer's transactional batch; the offsets are pending from now on.
func (c *Coordinator) TxnOffsetCommit(now time.Time, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, []Record) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	code := int16(0)
	if req.Version >= 3 && (req.Generation >= 0 || req.MemberID != "") {
		// KIP-447: the producer's consumer must still be a member of the group's generation.
		code = c.checkCommit(now, &kmsg.OffsetCommitRequest{Version: 9, Group: req.Group, Generation: req.Generation,
			MemberID: req.MemberID, InstanceID: req.InstanceID})
	} else if req.Group == "" {
		code = kerr.InvalidGroupID.Code
	}
	var records []Record
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
					c.addPending(req.ProducerID, req.Group, tp, o)
					records = append(records, offsetRecord(req.Group, tp, &o))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, records
}

func (c *Coordinator) addPending(pid int64, group string, tp TopicPartition, o Offset) {
	if c.pending == nil {
		c.pending = map[int64]pendingOffsets{}
	}
	p := c.pending[pid]
	if p == nil {
		p = pendingOffsets{}
		c.pending[pid] = p
	}
	if p[group] == nil {
		p[group] = map[TopicPartition]Offset{}
	}
	p[group][tp] = o
}

// RemovePending drops offsets that were recorded pending but could not be written.
func (c *Coordinator) RemovePending(pid int64, records []Record) {
	p := c.pending[pid]
	for _, r := range records {
		var k kmsg.OffsetCommitKey
		if k.ReadFrom(r.Key) == nil && p != nil {
			delete(p[k.Group], TopicPartition{k.Topic, k.Partition})
		}
	}
}

// LoadTxn applies a transactional offset record read back from the partition: pending until
// its marker.
func (c *Coordinator) LoadTxn(pid int64, key, value []byte) error {
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
	c.addPending(pid, k.Group, TopicPartition{k.Topic, k.Partition},
		Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTime: v.CommitTimestamp})
	return nil
}

// CompleteTxn applies a marker of the producer's transaction: COMMIT makes its pending offsets
// committed, ABORT drops them.
func (c *Coordinator) CompleteTxn(now time.Time, pid int64, commit bool) {
	p := c.pending[pid]
	delete(c.pending, pid)
	if !commit {
		return
	}
	for group, offsets := range p {
		g := c.loadGroup(group, now)
		for tp, o := range offsets {
			g.offsets[tp] = o
		}
	}
}

// hasPending reports whether a transactional commit of the group's partition is pending.
func (c *Coordinator) hasPending(group string, tp TopicPartition) bool {
	for _, p := range c.pending {
		if _, ok := p[group][tp]; ok {
			return true
		}
	}
	return false
}
