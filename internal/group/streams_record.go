package group

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// A streams (KIP-1071) group's state is one record in __consumer_offsets, rewritten whenever a
// heartbeat or a timeout changes it (members, epochs, topology, assignments; not mere session
// refreshes), so a restarted coordinator carries the group on: members keep their ids, epochs
// and tasks and only need to heartbeat within their session timeout. Kafka splits this state
// over record types of its own (key versions 15-21, which kmsg does not define); Runnel uses
// one record with a key version of its own, which Kafka's tools skip as unknown:
//
//	key:   version int16 = 1003 | group string
//	value: version int16 = 0 | a JSON document: streamsRecord below
//
// The JSON document's fields are named by the struct tags of streamsRecord, streamsMember,
// streamsTopology and streamsTarget; tasks are objects of subtopology id → sorted partitions.
// A nil value is a tombstone (the group is gone).

const streamsKeyVersion = 1003

func streamsKey(group string) []byte {
	b := binary.BigEndian.AppendUint16(nil, streamsKeyVersion)
	return kbin.AppendString(b, group)
}

type streamsRecord struct {
	Epoch           int32                    `json:"epoch"`
	AssignmentEpoch int32                    `json:"assignment_epoch"`
	EndpointEpoch   int32                    `json:"endpoint_epoch"`
	Since           int64                    `json:"since_ms"` // the group state's timestamp
	Topology        *streamsTopology         `json:"topology,omitempty"`
	MetaSig         string                   `json:"metadata_signature,omitempty"`
	Members         []*streamsMember         `json:"members,omitempty"` // sorted by id
	Targets         map[string]streamsTarget `json:"targets,omitempty"`
	Shutdown        string                   `json:"shutdown,omitempty"` // the member that asked
	Standbys        int                      `json:"standbys,omitempty"`
	Validated       bool                     `json:"validated,omitempty"` // the topology was ready
}

// streamsStateValue is the encoded state of a streams group, or nil if there is none.
func (c *Coordinator) streamsStateValue(group string) []byte {
	g := c.groups[group]
	if g == nil || g.streams == nil {
		return nil
	}
	st := g.streams
	rec := streamsRecord{Epoch: st.epoch, AssignmentEpoch: st.assignmentEpoch, EndpointEpoch: st.endpointEpoch,
		Since: g.StateSince.UnixMilli(), Topology: st.topology, MetaSig: st.metaSig, Members: sortedStreamsMembers(st.members),
		Targets: st.target, Shutdown: st.shutdown, Standbys: st.standbys, Validated: st.validated}
	body, err := json.Marshal(&rec)
	if err != nil {
		panic(fmt.Sprintf("group: encoding a streams group: %v", err)) // plain data: cannot fail
	}
	return append(binary.BigEndian.AppendUint16(nil, 0), body...)
}

// recordStreamsChange appends the group's streams state record to out if the state differs
// from its last record's (one encoding per call: the last record's value is kept).
func (c *Coordinator) recordStreamsChange(group string, out *Output) {
	g := c.groups[group]
	if g == nil || g.streams == nil {
		return // not a streams group (its removal writes its own tombstone)
	}
	if after := c.streamsStateValue(group); !bytes.Equal(g.streams.recorded, after) {
		out.Records = append(out.Records, Record{Group: group, Key: streamsKey(group), Value: after})
		g.streams.recorded = after
	}
}

func (c *Coordinator) loadStreams(now time.Time, key, value []byte) error {
	r := kbin.Reader{Src: key[2:]}
	id := r.String()
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: streams group key: %v", ErrBadRecord, err)
	}
	if value == nil {
		if g := c.groups[id]; g != nil && g.streams != nil {
			if len(g.offsets) == 0 {
				delete(c.groups, id)
			} else {
				g.streams, g.ProtocolType = nil, ""
				g.transition(Empty, now)
			}
		}
		return nil
	}
	if len(value) < 2 || binary.BigEndian.Uint16(value) != 0 {
		return fmt.Errorf("%w: streams group value version", ErrBadRecord)
	}
	var rec streamsRecord
	dec := json.NewDecoder(bytes.NewReader(value[2:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return fmt.Errorf("%w: streams group value: %v", ErrBadRecord, err)
	}
	if err := rec.Topology.check(); err != nil || (rec.Topology == nil && len(rec.Members) > 0) {
		return fmt.Errorf("%w: streams group %s: a bad topology (%v)", ErrBadRecord, id, err)
	}
	st := newStreamsState()
	st.recorded = value
	st.epoch, st.assignmentEpoch, st.endpointEpoch = rec.Epoch, rec.AssignmentEpoch, rec.EndpointEpoch
	st.topology, st.metaSig, st.shutdown, st.standbys, st.validated = rec.Topology, rec.MetaSig, rec.Shutdown, rec.Standbys, rec.Validated
	for _, m := range rec.Members {
		if m == nil || m.ID == "" || st.members[m.ID] != nil {
			return fmt.Errorf("%w: streams group %s: a member without an id or twice", ErrBadRecord, id)
		}
		m.normalize()
		m.deadline = now.Add(c.cfg.groupSettings(id).StreamsSessionTimeout)
		if m.Revoking.size() > 0 {
			m.revokeDeadline = now.Add(m.rebalanceTimeout())
		}
		st.members[m.ID] = m
	}
	for mid, t := range rec.Targets {
		t.normalize()
		st.target[mid] = t
	}
	g := c.loadGroup(id, now)
	g.consumer, g.share, g.streams, g.ProtocolType = nil, nil, st, TypeStreams
	g.members, g.order, g.pending = map[string]*Member{}, nil, map[string]time.Time{}
	g.State, g.StateSince = Empty, time.UnixMilli(rec.Since)
	if len(st.members) > 0 {
		g.State = Stable
	}
	return nil
}

// check validates a decoded topology as far as the coordinator relies on it: subtopologies
// sorted by distinct ids, named internal topics, copartition indexes in range.
func (t *streamsTopology) check() error {
	if t == nil {
		return nil
	}
	for i, s := range t.Subtopologies {
		if s.ID == "" || (i > 0 && t.Subtopologies[i-1].ID >= s.ID) {
			return fmt.Errorf("subtopology ids not sorted and distinct")
		}
		for _, it := range append(slices.Clone(s.Changelogs), s.RepartitionSources...) {
			if it.Name == "" || it.Partitions < 0 || it.Partitions > maxStreamsTopicPartitions {
				return fmt.Errorf("a bad internal topic")
			}
		}
		if err := s.checkCopartition(); err != nil {
			return err
		}
	}
	return nil
}

// normalize gives a decoded member non-nil task sets, sorted (the record may come from
// anywhere: Load must not trust it).
func (m *streamsMember) normalize() {
	for _, ts := range []*streamsTasks{&m.Active, &m.Standby, &m.Warmup, &m.Revoking, &m.RevokingStandby} {
		*ts = normalTasks(*ts)
	}
	// What is given up is a standby only where the record says so; anything else counts as an
	// active task being given up, which blocks its grant to another member.
	m.RevokingStandby = m.RevokingStandby.intersect(m.Revoking)
	m.RevokingActive = m.Revoking.minus(m.RevokingStandby)
	m.pruneActiveSince()
}

func (t *streamsTarget) normalize() {
	t.Active, t.Standby = normalTasks(t.Active), normalTasks(t.Standby)
}

func normalTasks(ts streamsTasks) streamsTasks {
	out := streamsTasks{}
	for s, ps := range ts {
		for _, p := range ps {
			if p >= 0 {
				out.add(s, p)
			}
		}
	}
	return out
}
