package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `runnel group`: consumer groups through the Kafka admin APIs (kadm), so it works against any
// Kafka-compatible cluster.

func newGroupCommand() *cobra.Command {
	var f topicFlags
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, reset and delete consumer groups",
	}
	f.register(cmd.PersistentFlags())
	cmd.AddCommand(newGroupListCommand(&f), newGroupDescribeCommand(&f), newGroupResetCommand(&f), newGroupDeleteCommand(&f))
	return cmd
}

func newGroupListCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups with their state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			listed, err := adm.ListGroups(ctx)
			if err != nil {
				return err
			}
			sorted := listed.Sorted()
			return f.output(cmd.OutOrStdout(), sorted, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL TYPE")
				for _, g := range sorted {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
				}
				tw.Flush()
			})
		},
	}
}

// groupPartition is one row of `group describe`: a partition's commit, end and lag.
type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: nothing committed
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	Member    string `json:"member,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Host      string `json:"host,omitempty"`
}

type groupDescription struct {
	Group      string           `json:"group"`
	State      string           `json:"state"`
	Protocol   string           `json:"protocol"`
	Members    []groupMember    `json:"members"`
	Partitions []groupPartition `json:"partitions"`
}

type groupMember struct {
	ID         string   `json:"id"`
	InstanceID string   `json:"instance_id,omitempty"`
	ClientID   string   `json:"client_id"`
	Host       string   `json:"host"`
	Assigned   []string `json:"assigned"`
}

func newGroupDescribeCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, assignments, committed offsets and lag per partition",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			lags, err := adm.Lag(ctx, args[0])
			if err != nil {
				return err
			}
			l, ok := lags[args[0]]
			if !ok {
				return fmt.Errorf("group %s: no answer", args[0])
			}
			if err := l.Error(); err != nil {
				return fmt.Errorf("group %s: %w", args[0], err)
			}
			d := describeGroup(l)
			return f.output(cmd.OutOrStdout(), d, func(w io.Writer) { printGroup(w, d) })
		},
	}
}

func describeGroup(l kadm.DescribedGroupLag) groupDescription {
	d := groupDescription{Group: l.Group, State: l.State, Protocol: l.Protocol, Members: []groupMember{}, Partitions: []groupPartition{}}
	for _, m := range l.Members {
		gm := groupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []string{}}
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
		gp := groupPartition{Topic: pl.Topic, Partition: pl.Partition, Committed: pl.Commit.At, End: pl.End.Offset, Lag: pl.Lag}
		if pl.Member != nil {
			gp.Member, gp.ClientID, gp.Host = pl.Member.MemberID, pl.Member.ClientID, pl.Member.ClientHost
		}
		d.Partitions = append(d.Partitions, gp)
	}
	return d
}

func printGroup(w io.Writer, d groupDescription) {
	fmt.Fprintf(w, "group %s: %s, protocol %q, %d members\n", d.Group, d.State, d.Protocol, len(d.Members))
	if len(d.Members) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nMEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNED")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, orDash(m.InstanceID), m.ClientID, m.Host, strings.Join(m.Assigned, ","))
		}
		tw.Flush()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER")
	for _, p := range d.Partitions {
		committed := fmt.Sprint(p.Committed)
		if p.Committed < 0 {
			committed = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", p.Topic, p.Partition, committed, p.End, p.Lag, orDash(p.Member))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newGroupResetCommand(f *topicFlags) *cobra.Command {
	var topic string
	var partitions []int32
	var toEarliest, toLatest bool
	var toOffset int64
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-offset N)",
		Short: "Set a group's committed offsets for a topic (the group must have no members)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			chosen := 0
			for _, b := range []bool{toEarliest, toLatest, cmd.Flags().Changed("to-offset")} {
				if b {
					chosen++
				}
			}
			if chosen != 1 || topic == "" {
				return errors.New("give --topic and exactly one of --to-earliest, --to-latest, --to-offset")
			}
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeGroups(ctx, args[0])
			if err != nil {
				return err
			}
			if g, ok := described[args[0]]; ok && g.Err == nil && len(g.Members) > 0 {
				return fmt.Errorf("group %s has %d members (state %s); stop them first, as Kafka requires", args[0], len(g.Members), g.State)
			}
			var listed kadm.ListedOffsets
			switch {
			case toEarliest:
				listed, err = adm.ListStartOffsets(ctx, topic)
			default:
				listed, err = adm.ListEndOffsets(ctx, topic)
			}
			if err != nil {
				return err
			}
			if err := listed.Error(); err != nil {
				return err
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
				if cmd.Flags().Changed("to-offset") {
					at = toOffset
				}
				offsets.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: at, LeaderEpoch: -1})
			})
			if len(offsets) == 0 {
				return fmt.Errorf("topic %s: no such partitions", topic)
			}
			resp, err := adm.CommitOffsets(ctx, args[0], offsets)
			if err != nil {
				return err
			}
			if err := resp.Error(); err != nil {
				return err
			}
			var rows []groupPartition
			resp.Each(func(o kadm.OffsetResponse) {
				rows = append(rows, groupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.At})
			})
			sort.Slice(rows, func(i, j int) bool { return rows[i].Partition < rows[j].Partition })
			return f.output(cmd.OutOrStdout(), rows, func(w io.Writer) {
				for _, r := range rows {
					fmt.Fprintf(w, "%s %s/%d -> %d\n", args[0], r.Topic, r.Partition, r.Committed)
				}
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic whose offsets to reset")
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "only these partitions (default: all)")
	cmd.Flags().BoolVar(&toEarliest, "to-earliest", false, "reset to each partition's log start offset")
	cmd.Flags().BoolVar(&toLatest, "to-latest", false, "reset to each partition's end (high watermark)")
	cmd.Flags().Int64Var(&toOffset, "to-offset", 0, "reset to this offset")
	return cmd
}

func newGroupDeleteCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete consumer groups and their committed offsets (they must have no members)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := adm.DeleteGroups(ctx, args...)
			if err != nil {
				return err
			}
			var errs []error
			for _, g := range args {
				if r, ok := resp[g]; ok && r.Err != nil {
					errs = append(errs, fmt.Errorf("group %s: %w", g, r.Err))
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", g)
				}
			}
			return errors.Join(errs...)
		},
	}
}
