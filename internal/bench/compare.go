package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Pair is one fairness pairing: the topic configs each broker gets on top of the workload's.
type Pair struct {
	Name   string            `json:"name"`
	About  string            `json:"about"`
	Runnel map[string]string `json:"runnel_topic_configs"`
	Kafka  map[string]string `json:"kafka_topic_configs"`
}

// StandardPairs are the two durability levels compared (docs/bench.md, "Fairness"). Kafka does
// not fsync before acknowledging by default; Runnel does unless write.caching is true.
func StandardPairs() []Pair {
	return []Pair{
		{Name: "no-fsync", About: "acks after the page cache: Runnel write.caching=true vs Kafka's default",
			Runnel: map[string]string{"write.caching": "true"}, Kafka: map[string]string{}},
		{Name: "fsync", About: "acks after fsync: Runnel write.caching=false vs Kafka flush.messages=1",
			Runnel: map[string]string{"write.caching": "false"}, Kafka: map[string]string{"flush.messages": "1"}},
	}
}

// PairNamed returns the standard pair of that name.
func PairNamed(name string) (Pair, bool) {
	for _, p := range StandardPairs() {
		if p.Name == name {
			return p, true
		}
	}
	return Pair{}, false
}

// CompareOptions say where the two brokers are and how to alternate between them.
type CompareOptions struct {
	Runnel, Kafka []string // bootstrap addresses
	Rounds        int      // runs per broker and pair; default 1
	Pairs         []Pair   // default StandardPairs
	// RunnelConfigs and KafkaConfigs are topic configs for one broker only, in every pair; a
	// pair's own configs win over them.
	RunnelConfigs, KafkaConfigs map[string]string
	// Run is the template of every run's options; Bootstrap and Label are set per run.
	Run Options
}

// Comparison is the outcome of Compare.
type Comparison struct {
	Workload Workload     `json:"workload"`
	Rounds   int          `json:"rounds"`
	Pairs    []PairResult `json:"pairs"`
}

// PairResult holds one pair's results, each merged over the rounds.
type PairResult struct {
	Pair   Pair    `json:"pair"`
	Runnel *Result `json:"runnel"`
	Kafka  *Result `json:"kafka"`
}

// Compare runs w against Runnel and Kafka for each pair, alternating the brokers: in rounds
// 1, 3, 5... Runnel goes first, in rounds 2, 4... Kafka, so slow drift (page cache, disk,
// thermal) does not always favour the same one. Before each run the machine's dirty pages are
// written back (sync(2)): a run that does not fsync leaves hundreds of MB of them, and their
// writeback would otherwise land in the next run, stalling its fsyncs (a fsync-pair run after
// a no-fsync one had a p99.9 of 112 ms against 3 ms alone). Each run uses fresh topics, and
// every run's topics are deleted only once the comparison is over (unless opts.Run.KeepTopics):
// a broker deleting a topic during another's run frees its blocks there, and on a file system
// that discards freed blocks (ext4 -o discard) the journal commit that carries the discard
// stalls every fsync behind it (Kafka removing its previous run's 250 MB, ~10 s later,
// stretched a Runnel fsync-pair run's p99.9 from 8 ms to 82 ms). It stops at the first run
// that could not take place.
func Compare(ctx context.Context, w Workload, opts CompareOptions) (_ *Comparison, err error) {
	if opts.Rounds <= 0 {
		opts.Rounds = 1
	}
	if len(opts.Pairs) == 0 {
		opts.Pairs = StandardPairs()
	}
	var created []*Result // every run's, whose topics are deleted at the end
	if !opts.Run.KeepTopics {
		defer func() {
			for _, res := range created {
				if derr := DeleteTopics(strings.Split(res.Bootstrap, ","), opts.Run.ClientOpts, res.Topics); derr != nil {
					err = errors.Join(err, fmt.Errorf("%s: %w", res.Label, derr))
				}
			}
		}()
	}
	cmp := &Comparison{Workload: w, Rounds: opts.Rounds}
	for _, pair := range opts.Pairs {
		var runnel, kafka []*Result
		for round := range opts.Rounds {
			order := []string{"runnel", "kafka"}
			if round%2 == 1 {
				order = []string{"kafka", "runnel"}
			}
			for _, target := range order {
				pw := w
				ro := opts.Run
				ro.Label = fmt.Sprintf("%s/%s round %d", target, pair.Name, round+1)
				ro.KeepTopics = true // until the comparison is over
				if target == "runnel" {
					ro.Bootstrap = opts.Runnel
					pw.TopicConfigs = mergeConfigs(w.TopicConfigs, opts.RunnelConfigs, pair.Runnel)
				} else {
					ro.Bootstrap = opts.Kafka
					pw.TopicConfigs = mergeConfigs(w.TopicConfigs, opts.KafkaConfigs, pair.Kafka)
				}
				if d := flushPageCache(); d > time.Second && opts.Run.Progress != nil {
					fmt.Fprintf(opts.Run.Progress, "  wrote the page cache back before %s in %v\n", ro.Label, d.Round(time.Millisecond))
				}
				res, err := Run(ctx, pw, ro)
				if err != nil {
					return nil, fmt.Errorf("%s, pair %s, round %d: %w", target, pair.Name, round+1, err)
				}
				created = append(created, res)
				res.Label = target
				if target == "runnel" {
					runnel = append(runnel, res)
				} else {
					kafka = append(kafka, res)
				}
			}
		}
		cmp.Pairs = append(cmp.Pairs, PairResult{Pair: pair, Runnel: MergeResults(runnel), Kafka: MergeResults(kafka)})
	}
	return cmp, nil
}

// mergeConfigs layers config maps; later ones win. The result is a new map.
func mergeConfigs(layers ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		maps.Copy(out, l)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// label pads a row label so that it reads left-aligned in a right-aligned table.
func label(s string) string { return fmt.Sprintf("%-14s", s) }

// ratio is a/b as text, "-" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// WriteText writes each pair's results side by side with the ratio Runnel/Kafka.
func (c *Comparison) WriteText(out io.Writer) {
	fmt.Fprintf(out, "workload %s, %d round(s) per broker and pair\n  %s\n", c.Workload.Name, c.Rounds, c.Workload.Describe())
	fmt.Fprintf(out, "  ratio = runnel/kafka: below 1 Runnel's latency is lower; above 1 its throughput is higher\n")
	for _, p := range c.Pairs {
		r, k := p.Runnel, p.Kafka
		fmt.Fprintf(out, "\npair %s: %s\n", p.Pair.Name, p.Pair.About)
		fmt.Fprintf(out, "  runnel %s topic configs: %s\n", r.Bootstrap, formatConfigs(r.Workload.TopicConfigs))
		fmt.Fprintf(out, "  kafka  %s topic configs: %s\n", k.Bootstrap, formatConfigs(k.Workload.TopicConfigs))
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\trunnel\tkafka\tratio\t\n", label(""))
		lat := func(name string, rs, ks LatencySummary) {
			for _, q := range []struct {
				name   string
				rv, kv float64
			}{{"p50", rs.P50Ms, ks.P50Ms}, {"p90", rs.P90Ms, ks.P90Ms}, {"p99", rs.P99Ms, ks.P99Ms},
				{"p99.9", rs.P999Ms, ks.P999Ms}, {"max", rs.MaxMs, ks.MaxMs}} {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", label(name+" "+q.name), formatMs(q.rv), formatMs(q.kv), ratio(q.rv, q.kv))
			}
		}
		lat("produce", r.Produce, k.Produce)
		if r.E2E.Count > 0 || k.E2E.Count > 0 { // no consumers: no end-to-end rows of zeros
			lat("e2e", r.E2E, k.E2E)
		}
		rt, kt := r.Throughput, k.Throughput
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", label("produce rec/s"), formatRate(rt.ProduceRecordsPerSec), formatRate(kt.ProduceRecordsPerSec), ratio(rt.ProduceRecordsPerSec, kt.ProduceRecordsPerSec))
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t\n", label("produce MB/s"), rt.ProduceMBPerSec, kt.ProduceMBPerSec, ratio(rt.ProduceMBPerSec, kt.ProduceMBPerSec))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", label("consume rec/s"), formatRate(rt.ConsumeRecordsPerSec), formatRate(kt.ConsumeRecordsPerSec), ratio(rt.ConsumeRecordsPerSec, kt.ConsumeRecordsPerSec))
		fmt.Fprintf(tw, "%s\t%s\t%s\t\t\n", label("send lag p99"), formatMs(r.SendLag.P99Ms), formatMs(k.SendLag.P99Ms))
		fmt.Fprintf(tw, "%s\t%d\t%d\t\t\n", label("errors"), r.Records.ProduceErrors+r.Records.FetchErrors, k.Records.ProduceErrors+k.Records.FetchErrors)
		tw.Flush()
		for _, res := range []*Result{r, k} {
			for _, e := range res.Errors {
				fmt.Fprintf(out, "  %s error (%dx): %s\n", res.Label, e.Count, e.Error)
			}
			for _, n := range res.Notes {
				fmt.Fprintf(out, "  %s note: %s\n", res.Label, n)
			}
		}
	}
}
