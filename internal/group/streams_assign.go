package group

import (
	"maps"
	"sort"
)

// streamsTasks is a set of tasks: subtopology id → partitions, ascending (a task is a
// subtopology's partition, as an assignment's entry is a topic's).
type streamsTasks = assignment

// intersect is the entries of both.
func (a assignment) intersect(b assignment) assignment {
	out := assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				out.add(t, p)
			}
		}
	}
	return out
}

// streamsTarget is a member's target assignment.
type streamsTarget struct {
	Active  streamsTasks `json:"active,omitempty"`
	Standby streamsTasks `json:"standby,omitempty"`
}

type streamsTask struct {
	sub  string
	part int32
}

// assignStreams is the streams groups' sticky task assignor (Kafka's "sticky", the one
// server-side assignor of streams groups): every task of the configured topology goes to one
// member as active and, with standbys > 0, to that many members of other processes as
// standby (stateful tasks only: those of subtopologies with a changelog). Balance counts per process, a process weighing as many as its members (stream
// threads): an active task stays with the member that had it as long as the member is under
// its share (ceil(tasks/members)), a free one goes preferably to a member that kept it as a
// standby (its state is there), else to the least loaded process's least loaded member. A
// standby never lands on the process of the task's active or of another of its standbys; it
// stays where it was when it can. Deterministic: members and tasks in sorted order.
func assignStreams(members []*streamsMember, tasks map[string]int32, stateful map[string]bool, standbys int, prev map[string]streamsTarget) map[string]streamsTarget {
	out := make(map[string]streamsTarget, len(members))
	if len(members) == 0 {
		return out
	}
	var all []streamsTask
	for _, s := range sortedKeys(tasks) {
		for p := int32(0); p < tasks[s]; p++ {
			all = append(all, streamsTask{s, p})
		}
	}
	exists := func(t streamsTask) bool { n, ok := tasks[t.sub]; return ok && t.part < n }
	procSize := map[string]int{}
	for _, m := range members {
		out[m.ID] = streamsTarget{Active: streamsTasks{}, Standby: streamsTasks{}}
		procSize[m.ProcessID]++
	}
	activeOf := map[streamsTask]*streamsMember{}
	count := map[string]int{}     // member → active tasks
	procCount := map[string]int{} // process → active tasks
	give := func(m *streamsMember, t streamsTask) {
		out[m.ID].Active.add(t.sub, t.part)
		activeOf[t] = m
		count[m.ID]++
		procCount[m.ProcessID]++
	}
	quota := (len(all) + len(members) - 1) / len(members)
	for _, m := range members { // stickiness
		for _, s := range sortedKeys(prev[m.ID].Active) {
			for _, p := range prev[m.ID].Active[s] {
				t := streamsTask{s, p}
				if exists(t) && activeOf[t] == nil && count[m.ID] < quota {
					give(m, t)
				}
			}
		}
	}
	less := func(a, b *streamsMember, load func(*streamsMember) (int, int)) bool {
		pa, ma := load(a)
		pb, mb := load(b)
		// Compare process loads as fractions of their sizes, then the members' own loads.
		if x, y := pa*procSize[b.ProcessID], pb*procSize[a.ProcessID]; x != y {
			return x < y
		}
		if ma != mb {
			return ma < mb
		}
		return a.ID < b.ID
	}
	activeLoad := func(m *streamsMember) (int, int) { return procCount[m.ProcessID], count[m.ID] }
	for _, t := range all {
		if activeOf[t] != nil {
			continue
		}
		var best *streamsMember
		for _, m := range members { // a member that kept the task as a standby, under its share
			if prev[m.ID].Standby.has(t.sub, t.part) && count[m.ID] < quota && (best == nil || less(m, best, activeLoad)) {
				best = m
			}
		}
		if best == nil {
			for _, m := range members {
				if best == nil || less(m, best, activeLoad) {
					best = m
				}
			}
		}
		give(best, t)
	}
	if standbys <= 0 {
		return out
	}
	total := maps.Clone(count) // member → active + standby tasks
	procTotal := maps.Clone(procCount)
	totalLoad := func(m *streamsMember) (int, int) { return procTotal[m.ProcessID], total[m.ID] }
	for _, t := range all {
		if !stateful[t.sub] {
			continue // a stateless task has no state to keep warm
		}
		holds := map[string]bool{activeOf[t].ProcessID: true} // processes that have the task
		for r := 0; r < standbys; r++ {
			var best *streamsMember
			for _, m := range members {
				if !holds[m.ProcessID] && prev[m.ID].Standby.has(t.sub, t.part) && (best == nil || less(m, best, totalLoad)) {
					best = m
				}
			}
			if best == nil {
				for _, m := range members {
					if !holds[m.ProcessID] && (best == nil || less(m, best, totalLoad)) {
						best = m
					}
				}
			}
			if best == nil {
				break // fewer processes than replicas: as Kafka, fewer standbys
			}
			out[best.ID].Standby.add(t.sub, t.part)
			holds[best.ProcessID] = true
			total[best.ID]++
			procTotal[best.ProcessID]++
		}
	}
	return out
}

// sortedStreamsMembers is the members sorted by id.
func sortedStreamsMembers(ms map[string]*streamsMember) []*streamsMember {
	out := make([]*streamsMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
