package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The sequencer group's Raft log holds entries as JSON (EncodeEntry), and its snapshots the
// state as JSON (State.Encode). Both are checked on the way in: an entry or a snapshot that
// does not describe a possible state is an error, never a panic later.

// ErrBadEntry is a log entry or snapshot that does not decode to a valid one.
var ErrBadEntry = errors.New("order: bad sequencer entry")

// EncodeEntry is an entry's form in the sequencer's log.
func EncodeEntry(e Entry) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("order: encoding an entry: %v", err))
	}
	return b
}

// DecodeEntry reads an entry EncodeEntry wrote.
func DecodeEntry(b []byte) (Entry, error) {
	var e Entry
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	set := 0
	for _, p := range []bool{e.Cut != nil, e.Table != nil, e.Fail != nil, e.Join != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return Entry{}, fmt.Errorf("%w: %d kinds in one entry", ErrBadEntry, set)
	}
	if e.Cut != nil && e.Cut.Cut < 0 {
		return Entry{}, fmt.Errorf("%w: cut %d", ErrBadEntry, e.Cut.Cut)
	}
	if e.Table != nil {
		if err := e.Table.check(); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// check reports a table that cannot be laid out: shards not ascending, lengths that differ,
// negative quotas or slot bases, sums that overflow.
func (t *Table) check() error {
	if len(t.Quotas) != len(t.Shards) || len(t.SlotBase) != len(t.Shards) {
		return fmt.Errorf("%w: table of %d shards, %d quotas, %d slot bases", ErrBadEntry, len(t.Shards), len(t.Quotas), len(t.SlotBase))
	}
	if !slices.IsSorted(t.Shards) || len(slices.Compact(slices.Clone(t.Shards))) != len(t.Shards) {
		return fmt.Errorf("%w: table shards %v not ascending", ErrBadEntry, t.Shards)
	}
	if t.Groups < 0 || t.Groups > len(t.Shards)+1 {
		return fmt.Errorf("%w: %d groups", ErrBadEntry, t.Groups)
	}
	var sum uint64
	for i, q := range t.Quotas {
		if q < 0 || q > MaxQuota || t.SlotBase[i] < 0 || t.SlotBase[i] > math.MaxInt64/2 {
			return fmt.Errorf("%w: shard %d with quota %d, slot base %d", ErrBadEntry, t.Shards[i], q, t.SlotBase[i])
		}
		sum += uint64(q)
	}
	if t.Start > math.MaxUint64/4 || sum > math.MaxUint32 {
		return fmt.Errorf("%w: table starting at %d, %d positions per cut", ErrBadEntry, t.Start, sum)
	}
	return nil
}

// Encode is the state's form in the sequencer's snapshots.
func (s *State) Encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("order: encoding the sequencer state: %v", err))
	}
	return b
}

// DecodeState reads a state Encode wrote, for cfg.
func DecodeState(cfg Config, b []byte) (*State, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	s := &State{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrBadEntry, err)
	}
	s.cfg = cfg
	if s.Tables == nil || s.Tables[s.Last.next(cfg.W).Window] == nil {
		return nil, fmt.Errorf("%w: snapshot without the current window's table", ErrBadEntry)
	}
	for _, t := range s.Tables {
		if err := t.check(); err != nil {
			return nil, err
		}
	}
	for _, m := range []*map[int32]bool{&s.Out, &s.Joining} {
		if *m == nil {
			*m = map[int32]bool{}
		}
	}
	if s.Failed == nil {
		s.Failed = map[int32]CutID{}
	}
	if s.Slots == nil {
		s.Slots = map[int32]int64{}
	}
	if s.Benched == nil {
		s.Benched = map[int32]uint64{}
	}
	return s, nil
}
