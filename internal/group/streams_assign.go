package group

import (
	"maps"
	"slices"
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
// server-side assignor of streams groups), after Kafka's StickyTaskAssignor. Tasks go back to
// their holders in the order (partition, subtopology), and the free ones are dealt in the order
// (subtopology, partition), so each member's share spreads over the subtopologies.
//
// Active tasks: a member's share is the tasks left over the members left, ceil'd, recomputed
// each time a member fills its share (4 tasks over 3 members: 2, 1, 1). A task goes back to the
// member that had it while that member is under its share; then to one that kept it as a
// standby (its state is there), the least loaded; then to the least loaded process — its load
// counted per member, a process weighing as many as its stream threads — and its least loaded
// member.
//
// Standby tasks (only for stateful tasks: subtopologies with a changelog), standbys per task,
// each on a process that holds the task in no role (so never where its active runs): the
// task's previous active owner if its process is balanced (fewer tasks than members, or no
// process less loaded; its state is freshest), else the least loaded previous standby holder
// if balanced, else the least loaded process's least loaded member; with too few
// processes a task gets fewer standbys, as in Kafka. Deterministic: members, processes and
// tasks are taken in sorted order.
func assignStreams(members []*streamsMember, tasks map[string]int32, stateful map[string]bool, standbys int, prev map[string]streamsTarget) map[string]streamsTarget {
	out := make(map[string]streamsTarget, len(members))
	if len(members) == 0 {
		return out
	}
	var all []streamsTask
	for _, s := range slices.Sorted(maps.Keys(tasks)) {
		for p := int32(0); p < tasks[s]; p++ {
			all = append(all, streamsTask{s, p})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].part < all[j].part })
	procSize := map[string]int{}
	prevActive, prevStandby := map[streamsTask]*streamsMember{}, map[streamsTask][]*streamsMember{}
	for _, m := range members {
		out[m.ID] = streamsTarget{Active: streamsTasks{}, Standby: streamsTasks{}}
		procSize[m.ProcessID]++
	}
	for _, m := range members {
		for s, ps := range prev[m.ID].Active {
			for _, p := range ps {
				prevActive[streamsTask{s, p}] = m
			}
		}
		for s, ps := range prev[m.ID].Standby {
			for _, p := range ps {
				t := streamsTask{s, p}
				prevStandby[t] = append(prevStandby[t], m)
			}
		}
	}
	count := map[string]int{}     // member → tasks (active, then active and standby)
	procCount := map[string]int{} // process → tasks
	holds := map[streamsTask]map[string]bool{}
	place := func(m *streamsMember, t streamsTask, active bool) {
		if active {
			out[m.ID].Active.add(t.sub, t.part)
		} else {
			out[m.ID].Standby.add(t.sub, t.part)
		}
		if holds[t] == nil {
			holds[t] = map[string]bool{}
		}
		holds[t][m.ProcessID] = true
		count[m.ID]++
		procCount[m.ProcessID]++
	}
	// lighter orders members by their process's load (per member), then their own, then id.
	lighter := func(a, b *streamsMember) bool {
		if x, y := procCount[a.ProcessID]*procSize[b.ProcessID], procCount[b.ProcessID]*procSize[a.ProcessID]; x != y {
			return x < y
		}
		if count[a.ID] != count[b.ID] {
			return count[a.ID] < count[b.ID]
		}
		return a.ID < b.ID
	}
	lightest := func(ok func(*streamsMember) bool) *streamsMember {
		var best *streamsMember
		for _, m := range members {
			if ok(m) && (best == nil || lighter(m, best)) {
				best = m
			}
		}
		return best
	}
	left, capacity := len(all), len(members)
	share := (left + capacity - 1) / capacity
	under := func(m *streamsMember) bool { return count[m.ID] < share }
	give := func(m *streamsMember, t streamsTask) {
		place(m, t, true)
		if count[m.ID] == share && capacity > 1 { // m is full: the others share what is left
			capacity--
			left -= share
			share = (left + capacity - 1) / capacity
		}
	}
	done := map[streamsTask]bool{}
	for _, t := range all { // back to the previous owner
		if m := prevActive[t]; m != nil && under(m) {
			give(m, t)
			done[t] = true
		}
	}
	for _, t := range all { // to a member that kept it warm
		if done[t] {
			continue
		}
		if m := lightest(func(m *streamsMember) bool { return under(m) && slices.Contains(prevStandby[t], m) }); m != nil {
			give(m, t)
			done[t] = true
		}
	}
	// To the least loaded, in (subtopology, partition) order as Kafka's step 3: dealt round the
	// members, each subtopology spreads over them.
	rest := slices.DeleteFunc(slices.Clone(all), func(t streamsTask) bool { return done[t] })
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].sub < rest[j].sub })
	for _, t := range rest {
		give(lightest(func(*streamsMember) bool { return true }), t)
	}
	if standbys <= 0 {
		return out
	}
	var statefulTasks []streamsTask
	for _, t := range all {
		if stateful[t.sub] {
			statefulTasks = append(statefulTasks, t)
		}
	}
	// balanced: m's process has fewer tasks than members, or no process is less loaded (Kafka's
	// isLoadBalanced).
	balanced := func(m *streamsMember) bool {
		if procCount[m.ProcessID] < procSize[m.ProcessID] {
			return true
		}
		for p, n := range procSize {
			if procCount[p]*procSize[m.ProcessID] < procCount[m.ProcessID]*n {
				return false
			}
		}
		return true
	}
	for _, t := range statefulTasks {
		for range standbys {
			free := func(m *streamsMember) bool { return !holds[t][m.ProcessID] }
			var m *streamsMember
			if p := prevActive[t]; p != nil && free(p) && balanced(p) {
				m = p
			}
			if m == nil {
				if p := lightest(func(m *streamsMember) bool { return free(m) && slices.Contains(prevStandby[t], m) }); p != nil && balanced(p) {
					m = p
				}
			}
			if m == nil {
				m = lightest(free)
			}
			if m == nil {
				break // fewer processes than replicas
			}
			place(m, t, false)
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
