package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runnel-dev/runnel/internal/adminops"
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

func newGroupDescribeCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, assignments, committed offsets (a share group's start offsets) and lag per partition",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			d, err := adminops.DescribeGroup(ctx, cl, args[0])
			if err != nil {
				return err
			}
			return f.output(cmd.OutOrStdout(), d, func(w io.Writer) { printGroup(w, d) })
		},
	}
}

func printGroup(w io.Writer, d adminops.Group) {
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
	committedCol := "COMMITTED"
	if d.Protocol == "share" {
		committedCol = "START" // a share group's start offset (every record before it is done with)
	}
	fmt.Fprintf(tw, "\nTOPIC\tPARTITION\t%s\tEND\tLAG\tMEMBER\n", committedCol)
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
	var toOffset, toTimestamp int64
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-offset N | --to-timestamp MS)",
		Short: "Set a group's committed offsets for a topic (the group must have no members)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var to adminops.ResetTarget
			to.Earliest, to.Latest = toEarliest, toLatest
			if cmd.Flags().Changed("to-offset") {
				to.Offset = &toOffset
			}
			if cmd.Flags().Changed("to-timestamp") {
				to.TimestampMs = &toTimestamp
			}
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			rows, err := adminops.ResetOffsets(ctx, adm, args[0], topic, partitions, to)
			if err != nil {
				return err
			}
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
	cmd.Flags().Int64Var(&toTimestamp, "to-timestamp", 0, "reset to each partition's first offset at or after this time (Unix ms)")
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
