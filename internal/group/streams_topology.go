package group

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A streams group's topology (KIP-1071) and its configuration against the cluster's topics
// (docs/streams-groups.md §3): how many tasks each subtopology has, how many partitions its
// repartition and changelog topics need, which of them are missing, and what is wrong.

// streamsTopology is the topology the group's members run, as the first member of its epoch
// sent it.
type streamsTopology struct {
	Epoch         int32                `json:"epoch"`
	Subtopologies []streamsSubtopology `json:"subtopologies"` // sorted by ID
}

type streamsSubtopology struct {
	ID                 string                 `json:"id"`
	Sources            []string               `json:"sources,omitempty"`
	Changelogs         []streamsInternalTopic `json:"changelogs,omitempty"`
	RepartitionSinks   []string               `json:"repartition_sinks,omitempty"`
	RepartitionSources []streamsInternalTopic `json:"repartition_sources,omitempty"`
	Copartition        []streamsCopartition   `json:"copartition,omitempty"`
}

// streamsInternalTopic is an internal topic the group's coordinator creates if it is missing.
type streamsInternalTopic struct {
	Name        string      `json:"name"`
	Partitions  int32       `json:"partitions,omitempty"`  // 0: derived from the topology
	Replication int16       `json:"replication,omitempty"` // 0: the cluster's default
	Configs     [][2]string `json:"configs,omitempty"`
}

// streamsCopartition is a copartition group: indexes into its subtopology's Sources and
// RepartitionSources, as sent.
type streamsCopartition struct {
	Sources            []int16 `json:"sources,omitempty"`
	RepartitionSources []int16 `json:"repartition_sources,omitempty"`
}

// maxStreamsTopicPartitions bounds an internal topic's explicit partition count.
const maxStreamsTopicPartitions = 1 << 20

// newStreamsTopology takes a heartbeat's topology, checking it as Kafka's
// throwIfStreamsGroupHeartbeatRequestIsInvalid and StreamsTopology do; the error is the
// message of STREAMS_INVALID_TOPOLOGY.
func newStreamsTopology(t *kmsg.StreamsGroupHeartbeatRequestTopology) (*streamsTopology, error) {
	out := &streamsTopology{Epoch: t.Epoch}
	if t.Epoch < 0 {
		return nil, fmt.Errorf("Topology epoch must be non-negative.")
	}
	ids := map[string]bool{}
	internal := map[string]bool{}
	for _, s := range t.Subtopologies {
		if s.SubtopologyID == "" {
			return nil, fmt.Errorf("Subtopology ids must not be empty.")
		}
		if ids[s.SubtopologyID] {
			return nil, fmt.Errorf("Subtopology id %s is used twice.", s.SubtopologyID)
		}
		ids[s.SubtopologyID] = true
		st := streamsSubtopology{ID: s.SubtopologyID, Sources: slices.Clone(s.SourceTopics), RepartitionSinks: slices.Clone(s.RepartitionSinkTopics)}
		if len(s.SourceTopics) == 0 && len(s.RepartitionSourceTopics) == 0 {
			return nil, fmt.Errorf("No source topics found for subtopology %s", s.SubtopologyID)
		}
		conv := func(ts []kmsg.TopicInfo, kind string) ([]streamsInternalTopic, error) {
			var out []streamsInternalTopic
			for _, ti := range ts {
				switch {
				case ti.Topic == "":
					return nil, fmt.Errorf("Subtopology %s has a %s topic without a name.", s.SubtopologyID, kind)
				case ti.NumPartitions < 0 || ti.NumPartitions > maxStreamsTopicPartitions:
					return nil, fmt.Errorf("Internal topic %s has an invalid number of partitions %d.", ti.Topic, ti.NumPartitions)
				case ti.ReplicationFactor < -1:
					return nil, fmt.Errorf("Internal topic %s has an invalid replication factor %d.", ti.Topic, ti.ReplicationFactor)
				case kind == "changelog" && slices.Contains(s.SourceTopics, ti.Topic):
					// A source topic serving as its table's changelog (reuse.ktable.source.topics):
					// the user's topic, never created nor sized here.
				case internal[ti.Topic] && kind == "changelog":
					return nil, fmt.Errorf("Internal topic %s is declared twice.", ti.Topic)
				default:
					internal[ti.Topic] = true
				}
				it := streamsInternalTopic{Name: ti.Topic, Partitions: ti.NumPartitions, Replication: max(ti.ReplicationFactor, 0)}
				for _, c := range ti.Configs {
					it.Configs = append(it.Configs, [2]string{c.Key, c.Value})
				}
				out = append(out, it)
			}
			return out, nil
		}
		for _, c := range s.StateChangelogTopics {
			if c.NumPartitions != 0 {
				return nil, fmt.Errorf("Changelog topic %s must have an undefined partition count, but it is set to %d.", c.Topic, c.NumPartitions)
			}
		}
		var err error
		if st.Changelogs, err = conv(s.StateChangelogTopics, "changelog"); err != nil {
			return nil, err
		}
		if st.RepartitionSources, err = conv(s.RepartitionSourceTopics, "repartition"); err != nil {
			return nil, err
		}
		for _, cg := range s.CopartitionGroups {
			st.Copartition = append(st.Copartition, streamsCopartition{Sources: slices.Clone(cg.SourceTopics),
				RepartitionSources: slices.Clone(cg.RepartitionSourceTopics)})
		}
		if err := st.checkCopartition(); err != nil {
			return nil, err
		}
		out.Subtopologies = append(out.Subtopologies, st)
	}
	// A repartition sink no subtopology reads is taken, as Kafka's: its topic is not created
	// (only repartition sources are), and the subtopology's task writes to it as to any topic.
	sort.Slice(out.Subtopologies, func(i, j int) bool { return out.Subtopologies[i].ID < out.Subtopologies[j].ID })
	return out, nil
}

// checkCopartition checks that the copartition groups' indexes name the subtopology's topics.
func (s *streamsSubtopology) checkCopartition() error {
	for _, cg := range s.Copartition {
		for _, pair := range []struct {
			idx []int16
			n   int
		}{{cg.Sources, len(s.Sources)}, {cg.RepartitionSources, len(s.RepartitionSources)}} {
			for _, i := range pair.idx {
				if i < 0 || int(i) >= pair.n {
					return fmt.Errorf("Subtopology %s has a copartition group with an invalid index %d.", s.ID, i)
				}
			}
		}
	}
	return nil
}

// InternalTopic is an internal topic of a streams group that its coordinator wants created
// (the driver creates it; the group assigns no task until it exists).
type InternalTopic struct {
	Name        string
	Partitions  int32
	Replication int16 // 0: the cluster's default
	Configs     [][2]string
}

// Streams statuses (StreamsGroupHeartbeatResponse.Status.StatusCode), as Kafka numbers them.
const (
	streamsStaleTopology       int8 = 0
	streamsMissingSources      int8 = 1
	streamsIncorrectPartitions int8 = 2
	streamsMissingInternal     int8 = 3
	streamsShutdownApplication int8 = 4
	streamsAssignmentDelayed   int8 = 5
)

// configuredTopology is a topology configured against the topics as they are: ready (tasks
// can be assigned) when every source and internal topic exists with the partitions it needs.
type configuredTopology struct {
	tasks       map[string]int32    // subtopology → its number of tasks
	partitions  map[string]int32    // topic (source or internal) → its partition count
	sources     map[string][]string // subtopology → its source topics (repartition topics included), sorted
	changelogs  map[string][]string // subtopology → its changelog topics
	create      []InternalTopic     // missing internal topics, by name
	status      []streamsStatus     // why it is not ready; nil if ready
	invalidText string              // a configuration error (no tasks)
}

type streamsStatus struct {
	code   int8
	detail string
}

func (ct *configuredTopology) ready() bool { return ct != nil && len(ct.status) == 0 }

// configure resolves a topology against topics (name → metadata), as Kafka's
// InternalTopicManager.configureTopics: source topics must exist; a repartition topic without
// a fixed partition count takes the largest partition count of the sources of the
// subtopologies writing to it; copartitioned topics must have equal counts (repartition topics
// without a fixed count take the group's); a subtopology has as many tasks as its largest
// source; a changelog topic has one partition per task.
func configure(t *streamsTopology, topics map[string]TopicMeta) *configuredTopology {
	ct := &configuredTopology{tasks: map[string]int32{}, partitions: map[string]int32{}, sources: map[string][]string{}, changelogs: map[string][]string{}}
	repart := map[string]*streamsInternalTopic{} // repartition topics by name
	for i := range t.Subtopologies {
		for j := range t.Subtopologies[i].RepartitionSources {
			r := &t.Subtopologies[i].RepartitionSources[j]
			repart[r.Name] = r
		}
	}
	// Resolve the source topics; explicit ones must exist.
	var missing []string
	for _, s := range t.Subtopologies {
		var srcs []string
		for _, name := range s.Sources {
			if _, ok := topics[name]; !ok {
				missing = append(missing, name)
			}
			srcs = append(srcs, name)
		}
		for _, r := range s.RepartitionSources {
			srcs = append(srcs, r.Name)
		}
		sort.Strings(srcs)
		ct.sources[s.ID] = slices.Compact(srcs)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		missing = slices.Compact(missing)
		ct.status = append(ct.status, streamsStatus{streamsMissingSources, fmt.Sprintf("Source topics %s are missing.", strings.Join(missing, ", "))})
		return ct
	}
	// Repartition topics' partition counts: fixed ones, then derived from their writers,
	// repeated until nothing changes (a writer may itself read a repartition topic).
	parts := map[string]int32{} // repartition topic → its count, once known
	for name, r := range repart {
		if r.Partitions > 0 {
			parts[name] = r.Partitions
		}
	}
	external := func(name string) int32 {
		if _, ok := repart[name]; ok {
			return parts[name]
		}
		return topics[name].Partitions
	}
	for changed := true; changed; {
		changed = false
		for _, s := range t.Subtopologies {
			var most int32
			known := true
			for _, src := range ct.sources[s.ID] {
				n := external(src)
				if n == 0 {
					known = false
				}
				most = max(most, n)
			}
			if !known && most == 0 {
				continue
			}
			for _, sink := range s.RepartitionSinks {
				if r := repart[sink]; r != nil && r.Partitions == 0 && most > parts[sink] {
					parts[sink], changed = most, true
				}
			}
		}
	}
	// Copartition groups.
	for _, s := range t.Subtopologies {
		for _, cg := range s.Copartition {
			var names, floating []string
			for _, i := range cg.Sources {
				names = append(names, s.Sources[i])
			}
			for _, i := range cg.RepartitionSources {
				r := s.RepartitionSources[i]
				if r.Partitions > 0 {
					names = append(names, r.Name)
				} else {
					floating = append(floating, r.Name)
				}
			}
			var want int32
			for _, n := range names {
				p := external(n)
				if want != 0 && p != want {
					counts := make([]string, 0, len(names))
					for _, n := range slices.Sorted(slices.Values(names)) {
						counts = append(counts, fmt.Sprintf("%s=%d", n, external(n)))
					}
					ct.status = append(ct.status, streamsStatus{streamsIncorrectPartitions,
						fmt.Sprintf("Following topics do not have the same number of partitions: [{%s}]", strings.Join(counts, ", "))})
					return ct
				}
				want = p
			}
			if want == 0 { // only derived repartition topics: the largest of them
				for _, n := range floating {
					want = max(want, parts[n])
				}
			}
			for _, n := range floating {
				parts[n] = want
			}
		}
	}
	for name := range repart {
		if parts[name] == 0 {
			ct.invalidText = fmt.Sprintf("The number of partitions of repartition topic %s cannot be derived from the topology.", name)
			ct.status = append(ct.status, streamsStatus{streamsIncorrectPartitions, ct.invalidText})
			return ct
		}
	}
	// Tasks, changelogs, and which internal topics are missing or wrong.
	var bad []string
	want := map[string]InternalTopic{}
	for _, s := range t.Subtopologies {
		var n int32
		for _, src := range ct.sources[s.ID] {
			n = max(n, external(src))
		}
		ct.tasks[s.ID] = n
		for _, src := range ct.sources[s.ID] {
			ct.partitions[src] = external(src)
		}
		for _, r := range s.RepartitionSources {
			want[r.Name] = InternalTopic{Name: r.Name, Partitions: parts[r.Name], Replication: r.Replication, Configs: r.Configs}
		}
		for _, c := range s.Changelogs {
			ct.changelogs[s.ID] = append(ct.changelogs[s.ID], c.Name)
			if slices.Contains(s.Sources, c.Name) {
				continue // a source topic as its table's changelog: the user's topic
			}
			want[c.Name] = InternalTopic{Name: c.Name, Partitions: n, Replication: c.Replication, Configs: c.Configs}
			ct.partitions[c.Name] = n
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		it := want[name]
		meta, ok := topics[name]
		switch {
		case !ok:
			ct.create = append(ct.create, it)
		case meta.Partitions != it.Partitions:
			bad = append(bad, fmt.Sprintf("Existing topic %s has different number of partitions: expected %d, found %d", name, it.Partitions, meta.Partitions))
		}
	}
	if len(bad) > 0 { // the first, as Kafka's InternalTopicManager stops at it
		ct.status = append(ct.status, streamsStatus{streamsIncorrectPartitions, bad[0]})
	}
	if len(ct.create) > 0 {
		var names []string
		for _, it := range ct.create {
			names = append(names, it.Name)
		}
		ct.status = append(ct.status, streamsStatus{streamsMissingInternal, "Internal topics are missing: " + summarizeTopics(names)})
	}
	return ct
}

// summarizeTopics names up to three topics, then how many more, as Kafka's InternalTopicManager
// words its statuses.
func summarizeTopics(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d additional topics", strings.Join(names[:3], ", "), len(names)-3)
}

// topicCount is a source or internal topic's partition count as configured (ct may be nil).
func (ct *configuredTopology) topicCount(topic string) (int32, bool) {
	if ct == nil {
		return 0, false
	}
	n, ok := ct.partitions[topic] // sources and internal topics, created or still to create
	return n, ok
}

// topicPartitions is the sorted, distinct partitions of ps that topic has.
func (ct *configuredTopology) topicPartitions(topic string, ps []int32) []int32 {
	out := slices.Compact(slices.Sorted(slices.Values(ps)))
	return slices.DeleteFunc(out, func(p int32) bool { return p >= ct.partitions[topic] })
}

// equal reports whether two topologies are the same (as sent: Kafka compares its records).
func (t *streamsTopology) equal(o *streamsTopology) bool {
	a, _ := json.Marshal(t)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}
