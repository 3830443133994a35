// Package adminops holds the admin operations that take more than one Kafka call, shared by the
// CLI (`runnel group`) and the console, so both do the same thing: a group's description with
// its lag, and resetting a group's offsets. They speak only the Kafka protocol (kadm), so they
// work against any Kafka-compatible cluster.
package adminops

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

// GroupPartition is one partition of a group: its commit, end and lag.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: nothing committed
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	Member    string `json:"member,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Host      string `json:"host,omitempty"`
}

// Group is a group's description with its lag.
type Group struct {
	Group      string           `json:"group"`
	State      string           `json:"state"`
	Protocol   string           `json:"protocol"`
	Members    []GroupMember    `json:"members"`
	Partitions []GroupPartition `json:"partitions"`
}

// TotalLag is the sum of the partitions' lag.
func (g Group) TotalLag() int64 {
	var n int64
	for _, p := range g.Partitions {
		n += max(p.Lag, 0)
	}
	return n
}

// GroupMember is one member of a group.
type GroupMember struct {
	ID         string   `json:"id"`
	InstanceID string   `json:"instance_id,omitempty"`
	ClientID   string   `json:"client_id"`
	Host       string   `json:"host"`
	Assigned   []string `json:"assigned"` // topic/partition
}

// DescribeGroup describes a group with its members, assignments and lag per partition.
func DescribeGroup(ctx context.Context, adm *kadm.Client, group string) (Group, error) {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return Group{}, err
	}
	l, ok := lags[group]
	if !ok {
		return Group{}, fmt.Errorf("group %s: no answer", group)
	}
	if err := l.Error(); err != nil {
		return Group{}, fmt.Errorf("group %s: %w", group, err)
	}
	d := Group{Group: l.Group, State: l.State, Protocol: l.Protocol, Members: []GroupMember{}, Partitions: []GroupPartition{}}
	for _, m := range l.Members {
		gm := GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []string{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				for _, p := range t.Partitions {
					gm.Assigned = append(gm.Assigned, fmt.Sprintf("%s/%d", t.Topic, p))
				}
			}
		}
		sort.Strings(gm.Assigned)
		d.Members = append(d.Members, gm)
	}
	for _, pl := range l.Lag.Sorted() {
		gp := GroupPartition{Topic: pl.Topic, Partition: pl.Partition, Committed: pl.Commit.At, End: pl.End.Offset, Lag: pl.Lag}
		if pl.Member != nil {
			gp.Member, gp.ClientID, gp.Host = pl.Member.MemberID, pl.Member.ClientID, pl.Member.ClientHost
		}
		d.Partitions = append(d.Partitions, gp)
	}
	return d, nil
}

// ResetTarget is where ResetOffsets moves a group: exactly one of its fields is set.
type ResetTarget struct {
	Earliest, Latest bool
	Offset           *int64 // this offset
	TimestampMs      *int64 // the first offset at or after this time (the end if none)
}

// ResetOffsets sets a group's committed offsets of a topic (all partitions, or those named) to
// the target, as kafka-consumer-groups --reset-offsets does; the group must have no members.
func ResetOffsets(ctx context.Context, adm *kadm.Client, group, topic string, partitions []int32, to ResetTarget) ([]GroupPartition, error) {
	chosen := 0
	for _, b := range []bool{to.Earliest, to.Latest, to.Offset != nil, to.TimestampMs != nil} {
		if b {
			chosen++
		}
	}
	if chosen != 1 || topic == "" {
		return nil, fmt.Errorf("give a topic and exactly one target: earliest, latest, an offset or a timestamp")
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	if g, ok := described[group]; ok && g.Err == nil && len(g.Members) > 0 {
		return nil, fmt.Errorf("group %s has %d members (state %s); stop them first, as Kafka requires", group, len(g.Members), g.State)
	}
	var listed kadm.ListedOffsets
	switch {
	case to.Earliest:
		listed, err = adm.ListStartOffsets(ctx, topic)
	case to.TimestampMs != nil:
		listed, err = adm.ListOffsetsAfterMilli(ctx, *to.TimestampMs, topic)
	default:
		listed, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	if err := listed.Error(); err != nil {
		return nil, err
	}
	want := map[int32]bool{}
	for _, p := range partitions {
		want[p] = true
	}
	offsets := kadm.Offsets{}
	listed.Each(func(o kadm.ListedOffset) {
		if len(want) > 0 && !want[o.Partition] {
			return
		}
		at := o.Offset
		if to.Offset != nil {
			at = *to.Offset
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
	})
	if len(offsets) == 0 {
		return nil, fmt.Errorf("topic %s: no such partitions", topic)
	}
	resp, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	var rows []GroupPartition
	resp.Each(func(o kadm.OffsetResponse) {
		rows = append(rows, GroupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.At})
	})
	sort.Slice(rows, func(i, j int) bool { return rows[i].Partition < rows[j].Partition })
	return rows, nil
}
