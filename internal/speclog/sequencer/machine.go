// Package sequencer runs the sequencing layer of total-order topics (docs/speclog.md §2): a
// Raft group of its own (the controller voters vote, every other serve node is a learner) whose
// replicated state is every total-order
// topic's order.State, whose leader runs order.Leader over the shards' reports, and whose
// applied entries reach the shards (partition leaders) on the same node, in log order.
//
// machine.go is the replicated state machine, free of I/O; group.go is the Raft loop.
package sequencer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/runnel-dev/runnel/internal/speclog/order"
)

// Command is one entry of the sequencer's Raft log: a topic created or dropped, or decisions
// of the topic's leader logic, applied in order.
type Command struct {
	Topic   string        `json:"topic"` // the topic's id (32 hex digits)
	Create  *Create       `json:"create,omitempty"`
	Drop    bool          `json:"drop,omitempty"`
	Entries []order.Entry `json:"entries,omitempty"`
	Trim    *uint64       `json:"trim,omitempty"` // positions below are trimmed
}

// Create starts a topic: its name, shards and protocol parameters (fixed for its life).
type Create struct {
	Name   string       `json:"name"`
	Shards []int32      `json:"shards"`
	Config order.Config `json:"config"`
	// MetaIndex is the index of the metadata image the topic was seen in (0 from versions
	// before it): an image older than that may lack the topic without its being deleted.
	MetaIndex uint64 `json:"meta_index,omitempty"`
}

// ErrBadCommand is a log entry that does not decode to a command.
var ErrBadCommand = errors.New("sequencer: bad command")

// EncodeCommand is a command's form in the log.
func EncodeCommand(c *Command) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("sequencer: encoding a command: %v", err))
	}
	return b
}

// DecodeCommand reads a command EncodeCommand wrote, checking every order entry in it.
func DecodeCommand(b []byte) (*Command, error) {
	var c Command
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if c.Topic == "" {
		return nil, fmt.Errorf("%w: no topic", ErrBadCommand)
	}
	for _, e := range c.Entries {
		if _, err := order.DecodeEntry(order.EncodeEntry(e)); err != nil {
			return nil, err
		}
	}
	if c.Create != nil {
		if err := c.Create.Config.Check(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCommand, err)
		}
		if len(c.Create.Shards) == 0 || !slices.IsSorted(c.Create.Shards) || len(slices.Compact(slices.Clone(c.Create.Shards))) != len(c.Create.Shards) {
			return nil, fmt.Errorf("%w: shards %v", ErrBadCommand, c.Create.Shards)
		}
	}
	return &c, nil
}

// Topic is one total-order topic's sequencer state.
type Topic struct {
	Name   string       `json:"name"`
	Config order.Config `json:"config"`
	State  *order.State `json:"-"`
	// Seq counts the order entries applied (the shards follow the topic's entries by it).
	Seq     uint64 `json:"seq"`
	Trimmed uint64 `json:"trimmed"` // positions below are trimmed
	// MetaIndex: Create.MetaIndex, kept in snapshots.
	MetaIndex uint64 `json:"meta_index,omitempty"`
	// recent: the last entries applied, from seq recentBase (not in snapshots: a shard that
	// needs older ones starts from a copy of the state).
	recent     []order.Entry
	recentBase uint64
}

// keepRecent is how many applied entries a topic keeps for shards catching up (a few seconds of
// cuts).
const keepRecent = 1 << 14

// Machine is the sequencer's replicated state: every total-order topic's.
type Machine struct {
	Topics map[string]*Topic
}

// NewMachine is an empty machine.
func NewMachine() *Machine { return &Machine{Topics: map[string]*Topic{}} }

// Apply applies a command and reports whether it changed anything. An order entry that does not
// follow from the state (a leader's decision made stale by another) is skipped, as every
// replica skips it, and returned as err.
func (m *Machine) Apply(c *Command) (changed bool, err error) {
	t := m.Topics[c.Topic]
	switch {
	case c.Create != nil:
		if t != nil {
			return false, nil // created already
		}
		first := &order.Table{Groups: 1}
		for _, s := range c.Create.Shards {
			first.Shards = append(first.Shards, s)
			first.Quotas = append(first.Quotas, c.Create.Config.InitialQuota)
			first.SlotBase = append(first.SlotBase, 0)
		}
		st, err := order.NewState(c.Create.Config, first)
		if err != nil {
			return false, err
		}
		m.Topics[c.Topic] = &Topic{Name: c.Create.Name, Config: c.Create.Config, State: st, MetaIndex: c.Create.MetaIndex}
		return true, nil
	case t == nil:
		return false, nil // a topic dropped (or never created): nothing to apply to
	case c.Drop:
		delete(m.Topics, c.Topic)
		return true, nil
	case c.Trim != nil:
		if *c.Trim > t.Trimmed && *c.Trim <= t.State.Committed() {
			t.Trimmed = *c.Trim
			t.State.History.TrimBefore(t.Config.W, *c.Trim)
			return true, nil
		}
		return false, nil
	}
	for i, e := range c.Entries {
		if err := t.State.Apply(e); err != nil {
			return i > 0, fmt.Errorf("sequencer: topic %s entry %d of %d: %w", t.Name, i, len(c.Entries), err)
		}
		t.Seq++
		t.recent = append(t.recent, e)
		changed = true
	}
	if over := len(t.recent) - keepRecent; over > keepRecent/4 {
		t.recent = slices.Delete(t.recent, 0, over)
		t.recentBase += uint64(over)
	}
	return changed, nil
}

// Since returns the topic's entries from seq on (the caller must not modify them), or false if
// they are no longer kept.
func (t *Topic) Since(seq uint64) ([]order.Entry, bool) {
	if seq < t.recentBase || seq > t.Seq {
		return nil, false
	}
	return t.recent[seq-t.recentBase:], true
}

// snapshot is the machine's form in the group's snapshots.
type snapshot struct {
	Topics map[string]snapshotTopic `json:"topics"`
}

type snapshotTopic struct {
	Topic
	State json.RawMessage `json:"state"`
}

// Encode is the machine's snapshot data.
func (m *Machine) Encode() []byte {
	s := snapshot{Topics: map[string]snapshotTopic{}}
	for _, id := range slices.Sorted(maps.Keys(m.Topics)) {
		t := m.Topics[id]
		s.Topics[id] = snapshotTopic{Topic: *t, State: t.State.Encode()}
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("sequencer: encoding a snapshot: %v", err))
	}
	return b
}

// DecodeMachine reads a snapshot Encode wrote (empty data: an empty machine).
func DecodeMachine(b []byte) (*Machine, error) {
	m := NewMachine()
	if len(b) == 0 {
		return m, nil
	}
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrBadCommand, err)
	}
	for id, st := range s.Topics {
		state, err := order.DecodeState(st.Config, st.State)
		if err != nil {
			return nil, fmt.Errorf("sequencer: snapshot of topic %s: %w", st.Name, err)
		}
		t := st.Topic
		t.State, t.recentBase = state, t.Seq
		m.Topics[id] = &t
	}
	return m, nil
}
