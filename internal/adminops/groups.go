// Package adminops holds the admin operations that take more than one Kafka call, shared by the
// CLI (`runnel group`) and the console, so both do the same thing: a group's description with
// its lag, and resetting a group's offsets. They speak only the Kafka protocol (kadm), so they
// work against any Kafka-compatible cluster.
package adminops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

// DescribeGroup describes a group with its members, assignments and lag per partition. A share
// group (KIP-932) is described by its share-partitions: Committed is a partition's start offset
// (every record before it is done with) and Lag what is left from there (-1 unknown).
//
// A streams group (KIP-1071) is described by StreamsGroupDescribe: members with the input
// partitions of their active tasks, and its committed offsets.
func DescribeGroup(ctx context.Context, cl *kgo.Client, group string) (Group, error) {
	adm := kadm.NewClient(cl)
	// A consumer group (KIP-848) first, as Kafka's admin client asks: DescribeGroups knows only
	// classic groups (Dead, GROUP_ID_NOT_FOUND for the others).
	if cg, ok, err := consumerGroup(ctx, adm, group); err != nil {
		return Group{}, err
	} else if ok {
		return describeConsumerGroup(ctx, adm, cg)
	}
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return Group{}, err
	}
	l, ok := lags[group]
	if !ok || l.Error() != nil || l.State == "Dead" {
		// DescribeGroups knows no share group (Dead, GROUP_ID_NOT_FOUND): asked only then, so
		// a consumer group costs no extra request.
		if d, ok, err := describeShareGroup(ctx, adm, group); ok || err != nil {
			return d, err
		}
		if d, ok, err := describeStreamsGroup(ctx, cl, adm, group); ok || err != nil {
			return d, err
		}
	}
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

// consumerGroup returns group's description if it is a consumer group of the KIP-848 protocol
// (ok); a group of another type, or none, or a cluster that does not know ConsumerGroupDescribe,
// is not ok, without an error.
func consumerGroup(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedConsumerGroup, bool, error) {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		var se *kadm.ShardErrors
		if errors.As(err, &se) && !se.AllFailed {
			err = nil // the group's own shard answered: its entry says how
		} else if tooOld(err) {
			return kadm.DescribedConsumerGroup{}, false, nil // a cluster without KIP-848
		} else {
			return kadm.DescribedConsumerGroup{}, false, err
		}
	}
	cg, ok := described[group]
	switch {
	case !ok || errors.Is(cg.Err, kerr.GroupIDNotFound) || errors.Is(cg.Err, kerr.UnsupportedVersion):
		return kadm.DescribedConsumerGroup{}, false, nil // another type of group, or none
	case cg.Err != nil:
		return kadm.DescribedConsumerGroup{}, false, fmt.Errorf("group %s: %w", group, cg.Err)
	}
	return cg, cg.State != "Dead", nil
}

// tooOld reports whether err says the cluster does not know a request (every shard, if it is a
// kadm.ShardErrors): kgo's "broker is too old" or UNSUPPORTED_VERSION.
func tooOld(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !tooOld(e.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	return errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old")
}

// describeConsumerGroup describes a consumer group (KIP-848): its members and their
// assignments, and the lag of every partition it committed to or is assigned.
func describeConsumerGroup(ctx context.Context, adm *kadm.Client, cg kadm.DescribedConsumerGroup) (Group, error) {
	d := Group{Group: cg.Group, State: cg.State, Protocol: "consumer", Members: []GroupMember{}, Partitions: []GroupPartition{}}
	owner := map[string]map[int32]kadm.ConsumerGroupMember{}
	for _, m := range cg.Members {
		gm := GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []string{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		gm.Assigned = assignedNames(m.Assignment)
		for t, ps := range m.Assignment {
			for p := range ps {
				if owner[t] == nil {
					owner[t] = map[int32]kadm.ConsumerGroupMember{}
				}
				owner[t][p] = m
			}
		}
		d.Members = append(d.Members, gm)
	}
	commits, err := adm.FetchOffsets(ctx, cg.Group)
	if err != nil {
		return Group{}, fmt.Errorf("group %s: %w", cg.Group, err)
	}
	parts := cg.AssignedPartitions()
	commits.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil {
			parts.Add(o.Topic, o.Partition)
		}
	})
	var starts, ends kadm.ListedOffsets
	if topics := parts.Topics(); len(topics) > 0 {
		if starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
			return Group{}, err
		}
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return Group{}, err
		}
	}
	for t, ps := range parts {
		for p := range ps {
			gp := GroupPartition{Topic: t, Partition: p, Committed: -1, End: -1, Lag: -1}
			if c, ok := commits.Lookup(t, p); ok && c.Err == nil {
				gp.Committed = c.At
			}
			if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
				gp.End = e.Offset
				from := gp.Committed
				if from < 0 { // nothing committed: the lag is all the partition holds
					from = 0
					if s, ok := starts.Lookup(t, p); ok && s.Err == nil {
						from = s.Offset
					}
				}
				gp.Lag = max(gp.End-from, 0)
			}
			if m, ok := owner[t][p]; ok {
				gp.Member, gp.ClientID, gp.Host = m.MemberID, m.ClientID, m.ClientHost
			}
			d.Partitions = append(d.Partitions, gp)
		}
	}
	sortPartitions(d.Partitions)
	return d, nil
}

// shareGroup returns group's description if it is a share group (ok); a group of another type,
// or none, is not ok, without an error.
func shareGroup(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedShareGroup, bool, error) {
	described, err := adm.DescribeShareGroups(ctx, group)
	if err != nil {
		var ae *kadm.AuthError
		if errors.As(err, &ae) {
			return kadm.DescribedShareGroup{}, false, nil // the describe of other groups may still be allowed
		}
		return kadm.DescribedShareGroup{}, false, err
	}
	sg, ok := described[group]
	return sg, ok && sg.Err == nil && sg.GroupState != "Dead", nil
}

// describeShareGroup describes group if it is a share group (ok).
func describeShareGroup(ctx context.Context, adm *kadm.Client, group string) (Group, bool, error) {
	sg, ok, err := shareGroup(ctx, adm, group)
	if !ok || err != nil {
		return Group{}, ok, err
	}
	d := Group{Group: group, State: sg.GroupState, Protocol: "share", Members: []GroupMember{}, Partitions: []GroupPartition{}}
	for _, m := range sg.Members {
		d.Members = append(d.Members, GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: assignedNames(m.Assignment)})
	}
	offsets, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return Group{}, true, err
	}
	o := offsets[group]
	if o.Err != nil {
		return Group{}, true, fmt.Errorf("share group %s: %w", group, o.Err)
	}
	var topics []string
	for t := range o.Offsets {
		topics = append(topics, t)
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return Group{}, true, err
		}
	}
	for t, ps := range o.Offsets {
		for p, so := range ps {
			gp := GroupPartition{Topic: t, Partition: p, Committed: so.StartOffset, End: -1, Lag: so.Lag}
			if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
				gp.End = e.Offset
			}
			d.Partitions = append(d.Partitions, gp)
		}
	}
	sortPartitions(d.Partitions)
	return d, true, nil
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
	sg, isShare, err := shareGroup(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	if isShare && len(sg.Members) > 0 {
		return nil, fmt.Errorf("share group %s has %d members (state %s); stop them first, as Kafka requires", group, len(sg.Members), sg.GroupState)
	}
	cg, isConsumer, err := consumerGroup(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	if isConsumer && len(cg.Members) > 0 {
		return nil, fmt.Errorf("group %s has %d members (state %s); stop them first, as Kafka requires", group, len(cg.Members), cg.State)
	}
	if !isShare && !isConsumer {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return nil, err
		}
		if g, ok := described[group]; ok && g.Err == nil && len(g.Members) > 0 {
			return nil, fmt.Errorf("group %s has %d members (state %s); stop them first, as Kafka requires", group, len(g.Members), g.State)
		}
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
	var starts kadm.ListedOffsets // an offset asked for is kept within [start, end], as Kafka's tool
	if to.Offset != nil {
		if starts, err = adm.ListStartOffsets(ctx, topic); err != nil {
			return nil, err
		}
		if err := starts.Error(); err != nil {
			return nil, err
		}
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
			at = min(*to.Offset, o.Offset) // o: the end
			if st, ok := starts.Lookup(topic, o.Partition); ok {
				at = max(at, st.Offset)
			}
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
	})
	if len(offsets) == 0 {
		return nil, fmt.Errorf("topic %s: no such partitions", topic)
	}
	if isShare { // its start offsets (AlterShareGroupOffsets)
		resp, err := adm.AlterShareGroupOffsets(ctx, group, offsets)
		if err != nil {
			return nil, err
		}
		if err := resp.Error(); err != nil {
			return nil, err
		}
		var rows []GroupPartition
		offsets.Each(func(o kadm.Offset) {
			rows = append(rows, GroupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.At})
		})
		sort.Slice(rows, func(i, j int) bool { return rows[i].Partition < rows[j].Partition })
		return rows, nil
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

// assignedNames lists an assignment's partitions as topic/partition, sorted.
func assignedNames(a kadm.TopicsSet) []string {
	out := []string{}
	for t, ps := range a {
		for p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", t, p))
		}
	}
	sort.Strings(out)
	return out
}

// sortPartitions orders a group's partitions by topic, then partition.
func sortPartitions(ps []GroupPartition) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
}
