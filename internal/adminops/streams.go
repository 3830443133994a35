package adminops

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsGroup describes group with StreamsGroupDescribe (KIP-1071) at its coordinator, if it
// is a streams group (ok). kadm does not wrap the request, nor does kgo route it.
func streamsGroup(ctx context.Context, cl *kgo.Client, adm *kadm.Client, group string) (kmsg.StreamsGroupDescribeResponseGroup, bool, error) {
	var none kmsg.StreamsGroupDescribeResponseGroup
	co, ok := adm.FindGroupCoordinators(ctx, group)[group]
	if !ok || co.Err != nil {
		return none, false, nil // the other describes said what there is to say
	}
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl.Broker(int(co.NodeID)))
	switch {
	case err != nil && tooOld(err):
		return none, false, nil // a cluster without streams groups
	case err != nil:
		return none, false, err
	case len(resp.Groups) != 1:
		return none, false, fmt.Errorf("streams group %s: %d groups in the answer", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return none, false, nil
		}
		return none, false, fmt.Errorf("streams group %s: %w", group, err)
	}
	return g, g.State != "Dead", nil
}

// describeStreamsGroup describes group if it is a streams group (ok): its members with the
// input partitions of their active tasks (a task is a subtopology's partition: that partition
// of each of the subtopology's source and repartition topics), and its committed offsets with
// their lag and the member whose task reads them.
func describeStreamsGroup(ctx context.Context, cl *kgo.Client, adm *kadm.Client, group string) (Group, bool, error) {
	sg, ok, err := streamsGroup(ctx, cl, adm, group)
	if !ok || err != nil {
		return Group{}, ok, err
	}
	sources := map[string][]string{} // subtopology → the topics its tasks read
	if sg.Topology != nil {
		for _, s := range sg.Topology.Subtopologies {
			sources[s.SubtopologyID] = append(sources[s.SubtopologyID], s.SourceTopics...)
			for _, r := range s.RepartitionSourceTopics {
				sources[s.SubtopologyID] = append(sources[s.SubtopologyID], r.Topic)
			}
		}
	}
	d := Group{Group: group, State: sg.State, Protocol: "streams", Members: []GroupMember{}, Partitions: []GroupPartition{}}
	owner := map[string]kmsg.StreamsGroupDescribeResponseGroupMember{} // "topic/partition" → member
	for _, m := range sg.Members {
		gm := GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []string{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		for _, task := range m.Assignment.ActiveTasks {
			for _, p := range task.Partitions {
				for _, t := range sources[task.SubtopologyID] {
					name := fmt.Sprintf("%s/%d", t, p)
					gm.Assigned = append(gm.Assigned, name)
					owner[name] = m
				}
			}
		}
		sort.Strings(gm.Assigned)
		d.Members = append(d.Members, gm)
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return Group{}, true, err
	}
	var ends kadm.ListedOffsets
	var topics []string
	for t := range offsets {
		topics = append(topics, t)
	}
	if len(topics) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return Group{}, true, err
		}
	}
	offsets.Each(func(o kadm.OffsetResponse) {
		gp := GroupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.At, End: -1, Lag: -1}
		if e, ok := ends.Lookup(o.Topic, o.Partition); ok && e.Err == nil {
			gp.End = e.Offset
			if o.At >= 0 {
				gp.Lag = max(e.Offset-o.At, 0)
			}
		}
		if m, ok := owner[fmt.Sprintf("%s/%d", o.Topic, o.Partition)]; ok {
			gp.Member, gp.ClientID, gp.Host = m.MemberID, m.ClientID, m.ClientHost
		}
		d.Partitions = append(d.Partitions, gp)
	})
	sortPartitions(d.Partitions)
	return d, true, nil
}
