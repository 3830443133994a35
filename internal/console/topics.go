package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TopicRow is one line of the topics page.
type TopicRow struct {
	Name         string
	Partitions   int
	Replication  int
	Internal     bool
	Size         int64
	RecordsPerS  float64
	Retention    string
	Storage      string // local, object
	Sequencing   string // eager, lazy
	Ordering     string // partition, total
	WriteCaching bool
}

// badges are the configs the topics page shows, with their defaults.
var badges = []string{"runnel.storage", "runnel.sequencing", "runnel.ordering", "write.caching", "retention.ms"}

// StageRow is one stage of a produce request on the overview: p50 and p99 in the last interval.
type StageRow struct {
	Stage    string
	P50, P99 float64
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	var o struct {
		Overview
		Stages, ObjectStages []StageRow
	}
	if c.cfg.Overview != nil {
		o.Overview = c.cfg.Overview()
	}
	if last, ok := c.lastSample(); ok {
		o.Stages, o.ObjectStages = stageRows(ProduceStages, last.Stages), stageRows(ObjectStages, last.ObjectStages)
	}
	c.render(w, r, "overview", page{Title: "Overview", Nav: "overview", Data: o})
}

// lastSample is the sampler's latest sample, if it has one.
func (c *Console) lastSample() (sample, bool) {
	if c.sampler == nil {
		return sample{}, false
	}
	return c.sampler.last()
}

// stageRows are the stages of q that had observations, in the order of names.
func stageRows(names []string, q map[string][2]float64) []StageRow {
	var rows []StageRow
	for _, st := range names {
		if v, ok := q[st]; ok {
			rows = append(rows, StageRow{st, v[0], v[1]})
		}
	}
	return rows
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	rows, err := c.topicRows(r)
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q != "" {
		rows = slices.DeleteFunc(rows, func(t TopicRow) bool { return !strings.Contains(t.Name, q) })
	}
	c.render(w, r, "topics", page{Title: "Topics", Nav: "topics", Data: map[string]any{"Topics": rows, "Q": q}, Error: errText(err)})
}

func (c *Console) topicRows(r *http.Request) ([]TopicRow, error) {
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err != nil {
		return nil, err
	}
	details, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, err
	}
	names := details.Names()
	configs := map[string]map[string]string{}
	if len(names) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err == nil {
			for _, rc := range rcs {
				m := map[string]string{}
				for _, cfg := range rc.Configs {
					if cfg.Value != nil {
						m[cfg.Key] = *cfg.Value
					}
				}
				configs[rc.Name] = m
			}
		}
	}
	sizes := map[string]int64{}
	if dirs, err := adm.DescribeAllLogDirs(ctx, nil); err == nil {
		dirs.Each(func(d kadm.DescribedLogDir) {
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) { sizes[p.Topic] += p.Size })
		})
	}
	last, _ := c.lastSample()
	rates := last.topicRates
	var rows []TopicRow
	for _, name := range names {
		d := details[name]
		m := configs[name]
		row := TopicRow{Name: name, Partitions: len(d.Partitions), Replication: d.Partitions.NumReplicas(), Internal: d.IsInternal,
			Size: sizes[name], RecordsPerS: rates[name], Storage: or(m["runnel.storage"], "local"), Sequencing: or(m["runnel.sequencing"], "eager"),
			Ordering: or(m["runnel.ordering"], "partition"), WriteCaching: m["write.caching"] == "true", Retention: retention(m["retention.ms"])}
		rows = append(rows, row)
	}
	return rows, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func retention(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	switch {
	case err != nil || ms == "":
		return "—"
	case n < 0:
		return "forever"
	case n%(24*3600*1000) == 0:
		return fmt.Sprintf("%dd", n/(24*3600*1000))
	case n%(3600*1000) == 0:
		return fmt.Sprintf("%dh", n/(3600*1000))
	}
	return fmt.Sprintf("%dms", n)
}

// parseConfigs reads "key=value" lines.
func parseConfigs(text string) (map[string]*string, error) {
	out := map[string]*string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("line %d, %q: a config is key=value", i+1, line)
		}
		v = strings.TrimSpace(v)
		out[strings.TrimSpace(k)] = &v
	}
	return out, nil
}

func (c *Console) createTopic(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	fail := func(msg string) {
		rows, _ := c.topicRows(r)
		c.render(w, r, "topics", page{Title: "Topics", Nav: "topics", Data: map[string]any{"Topics": rows}, Error: msg, Form: r.PostForm, Status: http.StatusUnprocessableEntity})
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	parts, err := strconv.ParseInt(or(r.PostForm.Get("partitions"), "1"), 10, 32) // beyond: refused, not wrapped
	if err != nil || parts < 1 {
		fail("Partitions must be a whole number of at least 1.")
		return
	}
	rf, err := strconv.ParseInt(or(r.PostForm.Get("replication"), "-1"), 10, 16)
	if err != nil || rf == 0 || rf < -1 {
		fail("Replication factor must be a whole number of at least 1 (or empty: the cluster's default).")
		return
	}
	configs, err := parseConfigs(r.PostForm.Get("configs"))
	if err != nil {
		fail(err.Error())
		return
	}
	if name == "" {
		fail("A topic needs a name.")
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err == nil {
		var res kadm.CreateTopicResponse
		if res, err = adm.CreateTopic(ctx, int32(parts), int16(rf), configs, name); err == nil {
			err = res.Err
			if err != nil && res.ErrMessage != "" {
				err = fmt.Errorf("%w: %s", err, res.ErrMessage)
			}
		}
	}
	if err != nil {
		fail("Creating " + name + ": " + err.Error())
		return
	}
	redirect(w, r, "/topics/"+name, "Created topic "+name+".")
}

// TopicPage is the topic page's data.
type TopicPage struct {
	Name       string
	ID         string
	Partitions []PartitionRow
	Configs    []ConfigRow
	Badges     TopicRow
	TotalOrder *TotalOrder // a total-order topic's sequencing
	TotalErr   string
	FlushErrs  []string // nodes whose flush lag is not known
	// Stages are where this topic's produces spent their time in the last interval, and
	// ObjectStages the node's object topics' stages (for an object topic).
	Stages, ObjectStages []StageRow
}

// PartitionRow is one partition of the topic page.
type PartitionRow struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Start, End  int64
	Err         string
	FlushLag    []ReplicaFlushLag // each replica's, as far as known
}

// ConfigRow is one config of the topic page.
type ConfigRow struct {
	Key, Value, Source string
	Default            bool
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	c.renderTopic(w, r, "", nil, 0)
}

func (c *Console) renderTopic(w http.ResponseWriter, r *http.Request, errMsg string, form map[string][]string, status int) {
	name := r.PathValue("topic")
	tp, err := c.topicPage(r, name)
	if err != nil {
		errMsg = strings.TrimSpace(errMsg + " " + err.Error())
		if status == 0 {
			status = http.StatusNotFound
		}
	}
	c.render(w, r, "topic", page{Title: name, Nav: "topics", Data: tp, Error: errMsg, Form: form, Status: status})
}

func (c *Console) topicPage(r *http.Request, name string) (TopicPage, error) {
	tp := TopicPage{Name: name}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err != nil {
		return tp, err
	}
	details, err := adm.ListTopicsWithInternal(ctx, name)
	if err != nil {
		return tp, err
	}
	d, ok := details[name]
	if !ok || d.Err != nil {
		if ok {
			return tp, fmt.Errorf("topic %s: %w", name, d.Err)
		}
		return tp, fmt.Errorf("no topic %s", name)
	}
	tp.ID = d.ID.String()
	var lags map[int32][]ReplicaFlushLag
	if c.cfg.FlushLag != nil {
		lags, tp.FlushErrs = c.cfg.FlushLag(ctx, name)
	}
	starts, _ := adm.ListStartOffsets(ctx, name)
	ends, _ := adm.ListEndOffsets(ctx, name)
	for _, p := range d.Partitions.Sorted() {
		row := PartitionRow{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR, Start: -1, End: -1}
		if p.Err != nil {
			row.Err = p.Err.Error()
		}
		if o, ok := starts.Lookup(name, p.Partition); ok && o.Err == nil {
			row.Start = o.Offset
		}
		if o, ok := ends.Lookup(name, p.Partition); ok && o.Err == nil {
			row.End = o.Offset
		}
		row.FlushLag = lags[p.Partition]
		tp.Partitions = append(tp.Partitions, row)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err == nil && len(rcs) == 1 {
		m := map[string]string{}
		for _, cfg := range rcs[0].Configs {
			v := ""
			if cfg.Value != nil {
				v = *cfg.Value
			}
			m[cfg.Key] = v
			tp.Configs = append(tp.Configs, ConfigRow{Key: cfg.Key, Value: v, Source: cfg.Source.String(), Default: cfg.Source.String() == "DEFAULT_CONFIG"})
		}
		tp.Badges = TopicRow{Storage: or(m["runnel.storage"], "local"), Sequencing: or(m["runnel.sequencing"], "eager"),
			Ordering: or(m["runnel.ordering"], "partition"), WriteCaching: m["write.caching"] == "true", Retention: retention(m["retention.ms"])}
	}
	if last, ok := c.lastSample(); ok {
		tp.Stages = stageRows(ProduceStages, last.topicStages[name])
		if tp.Badges.Storage == "object" {
			tp.ObjectStages = stageRows(ObjectStages, last.ObjectStages)
		}
	}
	if tp.Badges.Ordering == "total" && c.cfg.TotalOrder != nil { // the user may describe the topic: Metadata answered
		if tp.TotalOrder, err = c.cfg.TotalOrder(ctx, name); err != nil {
			tp.TotalErr = err.Error()
		}
	}
	return tp, nil
}

func (c *Console) alterConfig(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	name := r.PathValue("topic")
	key, value := strings.TrimSpace(r.PostForm.Get("key")), r.PostForm.Get("value")
	op := kadm.SetConfig
	if r.PostForm.Get("reset") != "" {
		op = kadm.DeleteConfig
	}
	if key == "" {
		c.renderTopic(w, r, "Name the config to change.", r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err == nil {
		var res kadm.AlterConfigsResponses
		if res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: &value}}, name); err == nil {
			for _, x := range res {
				if x.Err != nil {
					err = x.Err
					if x.ErrMessage != "" {
						err = fmt.Errorf("%w: %s", x.Err, x.ErrMessage)
					}
				}
			}
		}
	}
	if err != nil {
		c.renderTopic(w, r, "Changing "+key+": "+err.Error(), r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	redirect(w, r, "/topics/"+name, "Set "+key+".")
}

func (c *Console) addPartitions(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	name := r.PathValue("topic")
	n, err := strconv.ParseInt(r.PostForm.Get("count"), 10, 32)
	if err != nil || n < 1 {
		c.renderTopic(w, r, "The total number of partitions must be a whole number.", r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err == nil {
		var res kadm.CreatePartitionsResponses
		if res, err = adm.UpdatePartitions(ctx, int(n), name); err == nil {
			if x, ok := res[name]; ok && x.Err != nil {
				err = x.Err
				if x.ErrMessage != "" {
					err = fmt.Errorf("%w: %s", x.Err, x.ErrMessage)
				}
			}
		}
	}
	if err != nil {
		c.renderTopic(w, r, "Adding partitions: "+err.Error(), r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	redirect(w, r, "/topics/"+name, fmt.Sprintf("%s now has %d partitions.", name, n))
}

func (c *Console) deleteTopic(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	name := r.PathValue("topic")
	if r.PostForm.Get("confirm") != name {
		c.renderTopic(w, r, "To delete the topic, type its name exactly: nothing was deleted.", r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	ctx, cancel := ctxTimeout(r)
	defer cancel()
	_, adm, err := c.client(r)
	if err == nil {
		var res kadm.DeleteTopicResponses
		if res, err = adm.DeleteTopics(ctx, name); err == nil {
			if x, ok := res[name]; ok && x.Err != nil {
				err = x.Err
			}
		}
	}
	if err != nil {
		c.renderTopic(w, r, "Deleting: "+err.Error(), r.PostForm, http.StatusUnprocessableEntity)
		return
	}
	redirect(w, r, "/topics", "Deleted topic "+name+".")
}
