package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// A consumer (KIP-848) group's state is one record in __consumer_offsets, rewritten whenever a
// heartbeat or a timeout changes it (members, epochs, subscriptions, assignments; not mere
// session refreshes), so a restarted coordinator carries the group on: members keep their ids,
// epochs and partitions and only need to heartbeat within their session timeout.
//
// Kafka splits this state over several record types (key versions 3-8) that kmsg does not
// define; Runnel uses one record with a key version of its own, which Kafka's tools skip as
// unknown:
//
//	key:   version int16 = 1000 | group string
//	value: version int16 = 1 or 2 | epoch int32 | assignment epoch int32 |
//	       metadata signature string | state since (unix ms) int64 | members int32, each:
//	         id, instance id, client id, client host, rack string | epoch, previous epoch int32 |
//	         rebalance timeout (ms) int32 | topics (int32 count, strings) | regex string |
//	         assignor string | assigned, revoking assignment |
//	         classic int8 (1: a classic-protocol member, migrate.go), if 1: session timeout (ms)
//	         int32 | protocols int32, each: name string, metadata bytes (int32 length) |
//	         version 2: resolved (int32 count, strings: the topics its regex resolves to)
//	       | targets int32, each: member id string, assignment
//	assignment: topics int32, each: topic string | partitions int32 count, int32 each
//
// Version 0 (before online migration) has no classic field. Version 1 has no regex
// resolutions: a reloaded member's regex matches every topic until it heartbeats. Version 2 is
// written only for a group with a regex subscription, so that a group without one stays
// readable by a Runnel that predates it.
//
// Strings are Kafka strings (int16 length). A nil value is a tombstone (the group is gone or
// became classic).

const consumerKeyVersion = 1000

func consumerKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, consumerKeyVersion)
	return kbin.AppendString(b, group)
}

// consumerStateValue is the encoded state of a consumer group, or nil if there is none.
func (c *Coordinator) consumerStateValue(group string) []byte {
	g := c.groups[group]
	if g == nil || g.consumer == nil {
		return nil
	}
	return g.consumer.appendTo(nil, g.StateSince)
}

// recordConsumerChange appends the group's consumer state record to out if it differs from
// before (a tombstone if the consumer group is gone).
func (c *Coordinator) recordConsumerChange(group string, before []byte, out *Output) {
	if after := c.consumerStateValue(group); !bytes.Equal(before, after) {
		c.recordConsumerState(group, after, out)
	}
}

// recordConsumerState appends the group's consumer state record (value, or a tombstone). A
// group that became classic again wrote its records as it did (maybeDowngrade).
func (c *Coordinator) recordConsumerState(group string, value []byte, out *Output) {
	if g := c.groups[group]; value == nil && g != nil && len(g.members) > 0 {
		return
	}
	out.Records = append(out.Records, Record{Group: group, Key: consumerKey(group), Value: value})
}

func (cs *consumerState) appendTo(b []byte, since time.Time) []byte {
	version := int16(1)
	for _, m := range cs.members {
		if m.regex != nil {
			version = 2
		}
	}
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, cs.epoch)
	b = kbin.AppendInt32(b, cs.assignmentEpoch)
	b = kbin.AppendString(b, cs.metaSig)
	b = kbin.AppendInt64(b, since.UnixMilli())
	members := sortedMembers(cs)
	b = kbin.AppendInt32(b, int32(len(members)))
	for _, m := range members {
		for _, s := range []string{m.id, m.instanceID, m.clientID, m.clientHost, m.rackID} {
			b = kbin.AppendString(b, s)
		}
		b = kbin.AppendInt32(b, m.epoch)
		b = kbin.AppendInt32(b, m.prevEpoch)
		b = kbin.AppendInt32(b, int32(m.rebalanceTimeout.Milliseconds()))
		b = kbin.AppendInt32(b, int32(len(m.topics)))
		for _, t := range m.topics {
			b = kbin.AppendString(b, t)
		}
		regex := ""
		if m.regex != nil {
			regex = m.regex.String()
		}
		b = kbin.AppendString(b, regex)
		b = kbin.AppendString(b, m.assignor)
		b = appendAssignment(b, m.assigned)
		b = appendAssignment(b, m.revoking)
		if m.classic == nil {
			b = kbin.AppendInt8(b, 0)
		} else {
			b = kbin.AppendInt8(b, 1)
			b = kbin.AppendInt32(b, int32(m.classic.sessionTimeout.Milliseconds()))
			b = kbin.AppendInt32(b, int32(len(m.classic.protocols)))
			for _, p := range m.classic.protocols {
				b = kbin.AppendString(b, p.Name)
				b = kbin.AppendBytes(b, p.Metadata)
			}
		}
		if version >= 2 {
			b = kbin.AppendInt32(b, int32(len(m.resolved)))
			for _, t := range m.resolved {
				b = kbin.AppendString(b, t)
			}
		}
	}
	ids := make([]string, 0, len(cs.target))
	for id := range cs.target {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	b = kbin.AppendInt32(b, int32(len(ids)))
	for _, id := range ids {
		b = kbin.AppendString(b, id)
		b = appendAssignment(b, cs.target[id])
	}
	return b
}

func appendAssignment(b []byte, a assignment) []byte {
	topics := sortedTopics(a)
	b = kbin.AppendInt32(b, int32(len(topics)))
	for _, t := range topics {
		b = kbin.AppendString(b, t)
		b = kbin.AppendInt32(b, int32(len(a[t])))
		for _, p := range a[t] {
			b = kbin.AppendInt32(b, p)
		}
	}
	return b
}

func readAssignment(r *kbin.Reader) assignment {
	a := assignment{}
	for n := r.Int32(); n > 0 && r.Ok(); n-- {
		t := r.String()
		for k := r.Int32(); k > 0 && r.Ok(); k-- {
			a.add(t, r.Int32())
		}
	}
	return a
}

// loadConsumer replays a consumer state record: the group becomes (or stays) a consumer group
// with these members, whose sessions restart at now.
func (c *Coordinator) loadConsumer(now time.Time, key, value []byte) error {
	r := kbin.Reader{Src: key[2:]}
	group := r.String()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: consumer group key: %v", ErrBadRecord, err)
	}
	if value == nil {
		if g := c.groups[group]; g != nil {
			if g.consumer != nil { // what is left is a new classic group's offsets, as live
				g.consumer = nil
				g.ProtocolType, g.Generation, g.Protocol, g.Leader = "", 0, "", ""
			}
			// Deleted (DeleteGroups and expiry write the offsets' tombstones and the
			// GroupMetadata one before this): nothing of it is left. A group turned classic
			// again gets its classic record next, which brings it back.
			if len(g.offsets) == 0 && len(g.members) == 0 && g.share == nil && g.streams == nil {
				delete(c.groups, group)
			}
		}
		return nil
	}
	r = kbin.Reader{Src: value}
	version := r.Int16()
	if version < 0 || version > 2 {
		return fmt.Errorf("%w: consumer group value version %d", ErrBadRecord, version)
	}
	cs := &consumerState{members: map[string]*consumerMember{}, target: map[string]assignment{}}
	cs.epoch, cs.assignmentEpoch, cs.metaSig = r.Int32(), r.Int32(), r.String()
	since := time.UnixMilli(r.Int64())
	for n := r.Int32(); n > 0 && r.Ok(); n-- {
		m := &consumerMember{id: r.String(), instanceID: r.String(), clientID: r.String(), clientHost: r.String(), rackID: r.String()}
		m.epoch, m.prevEpoch = r.Int32(), r.Int32()
		m.rebalanceTimeout = time.Duration(r.Int32()) * time.Millisecond
		for k := r.Int32(); k > 0 && r.Ok(); k-- {
			m.topics = append(m.topics, r.String())
		}
		if expr := r.String(); expr != "" {
			re, err := compileSubscription(expr)
			if err != nil {
				return fmt.Errorf("%w: member %s regex: %v", ErrBadRecord, m.id, err)
			}
			m.regex = re
		}
		m.assignor = r.String()
		m.assigned, m.revoking = readAssignment(&r), readAssignment(&r)
		m.deadline = now.Add(c.cfg.groupSettings(group).ConsumerSessionTimeout)
		if version >= 1 && r.Int8() == 1 {
			m.classic = &classicMeta{sessionTimeout: time.Duration(r.Int32()) * time.Millisecond}
			for k := r.Int32(); k > 0 && r.Ok(); k-- {
				m.classic.protocols = append(m.classic.protocols, Protocol{Name: r.String(), Metadata: bytes.Clone(r.Bytes())})
			}
			m.deadline = now.Add(m.classic.sessionTimeout)
		}
		if version >= 2 {
			var resolved []string
			for k := r.Int32(); k > 0 && r.Ok(); k-- {
				resolved = append(resolved, r.String())
			}
			if m.regex != nil { // its last resolution stands until it heartbeats
				m.resolved = resolved
				m.canDescribe = func(topic string) bool { _, ok := slices.BinarySearch(resolved, topic); return ok }
			}
		}
		if m.revoking.size() > 0 {
			m.revokeDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
		}
		cs.members[m.id] = m
	}
	for n := r.Int32(); n > 0 && r.Ok(); n-- {
		id := r.String()
		cs.target[id] = readAssignment(&r)
	}
	if err := r.Complete(); err != nil || len(r.Src) != 0 {
		return fmt.Errorf("%w: consumer group %s value: %v (%d bytes left)", ErrBadRecord, group, err, len(r.Src))
	}
	g := c.loadGroup(group, now)
	g.consumer, g.share, g.ProtocolType = cs, nil, TypeConsumer
	g.members, g.order, g.static, g.pending = map[string]*Member{}, nil, map[string]string{}, map[string]time.Time{}
	g.State, g.StateSince = Empty, since
	if len(cs.members) > 0 {
		g.State = Stable
	}
	return nil
}
