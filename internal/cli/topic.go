package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicFlags are the flags every `runnel topic` subcommand shares.
type topicFlags struct {
	brokers string
	json    bool
	timeout time.Duration
	conn    clientSecurity
}

func (f *topicFlags) register(flags *pflag.FlagSet) {
	flags.StringVar(&f.brokers, "brokers", "127.0.0.1:9092", "comma-separated host:port of Kafka brokers to bootstrap from")
	flags.BoolVar(&f.json, "json", false, "print JSON instead of tables")
	flags.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster before giving up")
	f.conn.register(flags)
}

// seeds splits --brokers into addresses, dropping empty entries.
func (f *topicFlags) seeds() ([]string, error) {
	return splitAddrs("brokers", f.brokers)
}

// admin connects an admin client to the cluster and returns a context bounded by --timeout;
// call the returned function when done.
func (f *topicFlags) admin(ctx context.Context) (*kadm.Client, context.Context, func(), error) {
	cl, ctx, done, err := f.client(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return kadm.NewClient(cl), ctx, done, nil
}

// client is admin's client, for requests kadm does not wrap.
func (f *topicFlags) client(ctx context.Context) (*kgo.Client, context.Context, func(), error) {
	seeds, err := f.seeds()
	if err != nil {
		return nil, nil, nil, err
	}
	opts, err := f.conn.opts()
	if err != nil {
		return nil, nil, nil, err
	}
	// Retriable failures (a dial that timed out, a leader moving) are retried within --timeout,
	// as Kafka's admin tools retry within default.api.timeout.ms.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("runnel-cli"), kgo.RetryTimeout(f.timeout)}, opts...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}

// output prints v as indented JSON if --json was given, else calls text.
func (f *topicFlags) output(w io.Writer, v any, text func(io.Writer)) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(w)
	return nil
}

func newTopicCommand() *cobra.Command {
	var f topicFlags
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, configure and delete topics on any Kafka-compatible cluster",
		Args:  cobra.NoArgs,
	}
	f.register(cmd.PersistentFlags())
	cmd.AddCommand(newTopicCreateCommand(&f), newTopicListCommand(&f), newTopicDescribeCommand(&f),
		newTopicReassignCommand(&f), newTopicElectLeadersCommand(&f),
		newTopicAlterConfigCommand(&f), newTopicDeleteCommand(&f))
	return cmd
}

// topicID formats a topic id as Kafka does (URL-safe base64 without padding); "" if zero.
func topicID(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// kafkaErr describes err and the broker's extra message, if any.
// A broker's message replaces the generic description of a Kafka error code.
func kafkaErr(err error, msg string) string {
	var ke *kerr.Error
	switch {
	case msg == "" || strings.Contains(err.Error(), msg):
		return err.Error()
	case errors.As(err, &ke):
		return ke.Message + ": " + msg
	}
	return err.Error() + ": " + msg
}

// requestErr wraps the error of a whole request; api names the Kafka API it used.
func requestErr(what, api string, err error) error {
	if strings.Contains(err.Error(), "broker is too old") {
		return fmt.Errorf("%s: the broker does not support the %s API: %w", what, api, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// parseConfigs turns repeated k=v flags into a config map; a key may appear once.
func parseConfigs(kvs []string) (map[string]*string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	configs := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config %q is not key=value", kv)
		}
		if _, dup := configs[k]; dup {
			return nil, fmt.Errorf("config %q given twice", k)
		}
		configs[k] = &v
	}
	return configs, nil
}

// --- create

type createFlags struct {
	partitions        int32
	replicationFactor int16
	configs           []string
	validateOnly      bool
}

func (c *createFlags) register(flags *pflag.FlagSet) {
	flags.Int32Var(&c.partitions, "partitions", 1, "number of partitions")
	flags.Int16Var(&c.replicationFactor, "replication-factor", -1, "replicas per partition (-1: the broker's default)")
	flags.StringArrayVar(&c.configs, "config", nil, "topic config key=value (repeatable)")
	flags.BoolVar(&c.validateOnly, "validate-only", false, "only check that the topic could be created")
}

// createdTopic is one line of `topic create` output.
type createdTopic struct {
	Name              string `json:"name"`
	ID                string `json:"id,omitempty"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	ValidateOnly      bool   `json:"validate_only,omitempty"`
	Error             string `json:"error,omitempty"`
}

func printCreated(w io.Writer, topics []createdTopic) {
	for _, t := range topics {
		switch {
		case t.Error != "":
			fmt.Fprintf(w, "failed to create topic %s: %s\n", t.Name, t.Error)
		case t.ValidateOnly:
			fmt.Fprintf(w, "topic %s is valid: %d partitions, replication factor %d (validate only, not created)\n", t.Name, t.Partitions, t.ReplicationFactor)
		default:
			fmt.Fprintf(w, "created topic %s: %d partitions, replication factor %d, id %s\n", t.Name, t.Partitions, t.ReplicationFactor, t.ID)
		}
	}
}

func newTopicCreateCommand(f *topicFlags) *cobra.Command {
	var c createFlags
	cmd := &cobra.Command{
		Use:   "create TOPIC...",
		Short: "Create topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			if c.partitions < 1 && c.partitions != -1 {
				return fmt.Errorf("--partitions %d: want at least 1", c.partitions)
			}
			configs, err := parseConfigs(c.configs)
			if err != nil {
				return err
			}
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			create := adm.CreateTopics
			if c.validateOnly {
				create = adm.ValidateCreateTopics
			}
			resps, err := create(ctx, c.partitions, c.replicationFactor, configs, names...)
			if err != nil {
				return requestErr("create topics", "CreateTopics", err)
			}
			var out []createdTopic
			var errs []error
			for _, name := range names {
				r, ok := resps[name]
				t := createdTopic{Name: name, Partitions: c.partitions, ReplicationFactor: c.replicationFactor, ValidateOnly: c.validateOnly}
				switch {
				case !ok:
					t.Error = "no answer from the cluster for this topic"
				case r.Err != nil:
					t.Error = kafkaErr(r.Err, r.ErrMessage)
				default:
					t.ID = topicID(r.ID)
					if r.NumPartitions > 0 {
						t.Partitions = r.NumPartitions
					}
					if r.ReplicationFactor > 0 {
						t.ReplicationFactor = r.ReplicationFactor
					}
				}
				if t.Error != "" {
					errs = append(errs, fmt.Errorf("create topic %s: %s", name, t.Error))
				}
				out = append(out, t)
			}
			if err := f.output(cmd.OutOrStdout(), out, func(w io.Writer) { printCreated(w, okOnly(out, func(t createdTopic) bool { return t.Error == "" })) }); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
	c.register(cmd.Flags())
	return cmd
}

// okOnly keeps the entries keep accepts; failures go to the returned error instead of stdout.
func okOnly[T any](all []T, keep func(T) bool) []T {
	var kept []T
	for _, t := range all {
		if keep(t) {
			kept = append(kept, t)
		}
	}
	return kept
}

// --- list

// listedTopic is one row of `topic list`.
type listedTopic struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	ID         string `json:"id,omitempty"`
	Internal   bool   `json:"internal,omitempty"`
}

func printList(w io.Writer, topics []listedTopic) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPARTITIONS\tID")
	for _, t := range topics {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Name, t.Partitions, t.ID)
	}
	tw.Flush()
}

func newTopicListCommand(f *topicFlags) *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			list := adm.ListTopics
			if internal {
				list = adm.ListTopicsWithInternal
			}
			details, err := list(ctx)
			if err != nil {
				return requestErr("list topics", "Metadata", err)
			}
			out := []listedTopic{}
			for _, d := range details.Sorted() {
				out = append(out, listedTopic{Name: d.Topic, Partitions: len(d.Partitions), ID: topicID(d.ID), Internal: d.IsInternal})
			}
			return f.output(cmd.OutOrStdout(), out, func(w io.Writer) { printList(w, out) })
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics")
	return cmd
}

// --- describe

// partitionInfo is one partition row of `topic describe`.
type partitionInfo struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	Error       string  `json:"error,omitempty"`
}

// topicDescription is what `topic describe` shows of one topic.
type topicDescription struct {
	Name       string            `json:"name"`
	ID         string            `json:"id,omitempty"`
	Internal   bool              `json:"internal,omitempty"`
	Partitions []partitionInfo   `json:"partitions"`
	Configs    map[string]string `json:"configs"` // the non-default ones
}

func joinInt32s(ns []int32) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(int(n))
	}
	return strings.Join(s, ",")
}

func printDescriptions(w io.Writer, topics []topicDescription) {
	for i, t := range topics {
		if i > 0 {
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "Topic:\t%s\n", t.Name)
		if t.ID != "" {
			fmt.Fprintf(tw, "ID:\t%s\n", t.ID)
		}
		if t.Internal {
			fmt.Fprintf(tw, "Internal:\ttrue\n")
		}
		fmt.Fprintf(tw, "Partitions:\t%d\n", len(t.Partitions))
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			fmt.Fprintf(tw, "Configs:\t(all defaults)\n")
		}
		for j, k := range keys {
			label := ""
			if j == 0 {
				label = "Configs:"
			}
			fmt.Fprintf(tw, "%s\t%s=%s\n", label, k, t.Configs[k])
		}
		tw.Flush()
		fmt.Fprintln(w)
		errCol := false // the ERROR column only when some partition has one
		for _, p := range t.Partitions {
			errCol = errCol || p.Error != ""
		}
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND")
		if errCol {
			fmt.Fprint(tw, "\tERROR")
		}
		fmt.Fprintln(tw)
		for _, p := range t.Partitions {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%d", p.Partition, p.Leader, p.LeaderEpoch,
				joinInt32s(p.Replicas), joinInt32s(p.ISR), p.StartOffset, p.EndOffset)
			if errCol {
				fmt.Fprintf(tw, "\t%s", p.Error)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
}

// nonDefaultConfigs keeps the configs set on the topic itself (as kafka-topics --describe does).
func nonDefaultConfigs(configs []kadm.Config) map[string]string {
	out := map[string]string{}
	for _, c := range configs {
		if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			continue
		}
		switch {
		case c.Sensitive:
			out[c.Key] = "[hidden]"
		default:
			out[c.Key] = c.MaybeValue()
		}
	}
	return out
}

func newTopicDescribeCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TOPIC...",
		Short: "Show topics' partitions, offsets and configs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			details, err := adm.ListTopics(ctx, names...)
			if err != nil {
				return requestErr("describe topics", "Metadata", err)
			}
			var errs []error
			var found []string
			for _, name := range names {
				d, ok := details[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("describe topic %s: not in the cluster's answer", name))
				case d.Err != nil:
					errs = append(errs, fmt.Errorf("describe topic %s: %v", name, d.Err))
				default:
					found = append(found, name)
				}
			}
			var out []topicDescription
			if len(found) > 0 {
				if out, err = describeTopics(ctx, adm, details, found); err != nil {
					return err
				}
			}
			if err := f.output(cmd.OutOrStdout(), out, func(w io.Writer) { printDescriptions(w, out) }); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}

// describeTopics adds offsets and configs to the metadata of topics that exist.
func describeTopics(ctx context.Context, adm *kadm.Client, details kadm.TopicDetails, names []string) ([]topicDescription, error) {
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, requestErr("list start offsets", "ListOffsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, requestErr("list end offsets", "ListOffsets", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, requestErr("describe configs", "DescribeConfigs", err)
	}
	var out []topicDescription
	for _, name := range names {
		d := details[name]
		t := topicDescription{Name: name, ID: topicID(d.ID), Internal: d.IsInternal, Partitions: []partitionInfo{}}
		for _, p := range d.Partitions.Sorted() {
			pi := partitionInfo{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), StartOffset: -1, EndOffset: -1}
			var perrs []string
			if p.Err != nil {
				perrs = append(perrs, p.Err.Error())
			}
			if o, ok := starts.Lookup(name, p.Partition); ok {
				if o.Err != nil {
					perrs = append(perrs, "start offset: "+o.Err.Error())
				} else {
					pi.StartOffset = o.Offset
				}
			}
			if o, ok := ends.Lookup(name, p.Partition); ok {
				if o.Err != nil {
					perrs = append(perrs, "end offset: "+o.Err.Error())
				} else {
					pi.EndOffset = o.Offset
				}
			}
			pi.Error = strings.Join(perrs, "; ")
			t.Partitions = append(t.Partitions, pi)
		}
		rc, err := configs.On(name, nil)
		switch {
		case err != nil:
			return nil, fmt.Errorf("describe configs of %s: no answer from the cluster", name)
		case rc.Err != nil:
			return nil, fmt.Errorf("describe configs of %s: %s", name, kafkaErr(rc.Err, rc.ErrMessage))
		}
		t.Configs = nonDefaultConfigs(rc.Configs)
		out = append(out, t)
	}
	return out, nil
}

func nonNil(ns []int32) []int32 {
	if ns == nil {
		return []int32{}
	}
	return ns
}

// --- alter-config

type alterFlags struct {
	set    []string
	delete []string
}

// ops turns --set and --delete into incremental alter operations.
func (a *alterFlags) ops() ([]kadm.AlterConfig, error) {
	sets, err := parseConfigs(a.set)
	if err != nil {
		return nil, err
	}
	var ops []kadm.AlterConfig
	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: sets[k]})
	}
	deleted := map[string]bool{}
	for _, k := range a.delete {
		k = strings.TrimSpace(k)
		switch {
		case k == "" || strings.Contains(k, "="):
			return nil, fmt.Errorf("--delete %q: want a config name", k)
		case sets[k] != nil:
			return nil, fmt.Errorf("config %q is both set and deleted", k)
		case deleted[k]:
			return nil, fmt.Errorf("config %q deleted twice", k)
		}
		deleted[k] = true
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(ops) == 0 {
		return nil, errors.New("nothing to alter: give --set key=value or --delete key")
	}
	return ops, nil
}

// alteredTopic is one line of `topic alter-config` output.
type alteredTopic struct {
	Name    string            `json:"name"`
	Set     map[string]string `json:"set,omitempty"`
	Deleted []string          `json:"deleted,omitempty"`
	Error   string            `json:"error,omitempty"`
}

func printAltered(w io.Writer, topics []alteredTopic) {
	for _, t := range topics {
		var parts []string
		keys := make([]string, 0, len(t.Set))
		for k := range t.Set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, "set "+k+"="+t.Set[k])
		}
		for _, k := range t.Deleted {
			parts = append(parts, "deleted "+k)
		}
		fmt.Fprintf(w, "altered topic %s: %s\n", t.Name, strings.Join(parts, ", "))
	}
}

func newTopicAlterConfigCommand(f *topicFlags) *cobra.Command {
	var a alterFlags
	cmd := &cobra.Command{
		Use:   "alter-config TOPIC... (--set key=value | --delete key)...",
		Short: "Set or delete topic configs (IncrementalAlterConfigs)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			ops, err := a.ops()
			if err != nil {
				return err
			}
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.AlterTopicConfigs(ctx, ops, names...)
			if err != nil {
				return requestErr("alter configs", "IncrementalAlterConfigs", err)
			}
			var out []alteredTopic
			var errs []error
			for _, name := range names {
				t := alteredTopic{Name: name}
				for _, op := range ops {
					if op.Op == kadm.SetConfig {
						if t.Set == nil {
							t.Set = map[string]string{}
						}
						t.Set[op.Name] = *op.Value
					} else {
						t.Deleted = append(t.Deleted, op.Name)
					}
				}
				r, err := resps.On(name, nil)
				switch {
				case err != nil:
					t.Error = "no answer from the cluster for this topic"
				case r.Err != nil:
					t.Error = kafkaErr(r.Err, r.ErrMessage)
				}
				if t.Error != "" {
					errs = append(errs, fmt.Errorf("alter configs of topic %s: %s", name, t.Error))
				}
				out = append(out, t)
			}
			if err := f.output(cmd.OutOrStdout(), out, func(w io.Writer) { printAltered(w, okOnly(out, func(t alteredTopic) bool { return t.Error == "" })) }); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringArrayVar(&a.set, "set", nil, "config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&a.delete, "delete", nil, "config key to delete, reverting it to the default (repeatable)")
	return cmd
}

// --- delete

// deletedTopic is one line of `topic delete` output.
type deletedTopic struct {
	Name  string `json:"name"`
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
}

func printDeleted(w io.Writer, topics []deletedTopic) {
	for _, t := range topics {
		fmt.Fprintf(w, "deleted topic %s\n", t.Name)
	}
}

func newTopicDeleteCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete TOPIC...",
		Short: "Delete topics and all their data",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteTopics(ctx, names...)
			if err != nil {
				return requestErr("delete topics", "DeleteTopics", err)
			}
			var out []deletedTopic
			var errs []error
			for _, name := range names {
				t := deletedTopic{Name: name}
				r, ok := resps[name]
				switch {
				case !ok:
					t.Error = "no answer from the cluster for this topic"
				case r.Err != nil:
					t.Error = kafkaErr(r.Err, r.ErrMessage)
				default:
					t.ID = topicID(r.ID)
				}
				if t.Error != "" {
					errs = append(errs, fmt.Errorf("delete topic %s: %s", name, t.Error))
				}
				out = append(out, t)
			}
			if err := f.output(cmd.OutOrStdout(), out, func(w io.Writer) { printDeleted(w, okOnly(out, func(t deletedTopic) bool { return t.Error == "" })) }); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}
