package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// newTopicReassignCommand moves a partition to another set of replicas
// (AlterPartitionReassignments, as kafka-reassign-partitions does).
func newTopicReassignCommand(f *topicFlags) *cobra.Command {
	var partition int32
	var replicas string
	var cancel bool
	cmd := &cobra.Command{
		Use:     "reassign TOPIC --partition P --replicas ID,ID,...",
		Short:   "Move a partition to other replicas (the first becomes its preferred leader), or --cancel a move",
		Example: "  runnel topic reassign orders --partition 0 --replicas 4,2,3",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req kadm.AlterPartitionAssignmentsReq
			switch {
			case cancel:
				req.CancelAssign(args[0], partition)
			case replicas == "":
				return errors.New("give --replicas, or --cancel")
			default:
				var ids []int32
				for _, s := range strings.Split(replicas, ",") {
					n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
					if err != nil {
						return fmt.Errorf("--replicas %q: %w", replicas, err)
					}
					ids = append(ids, int32(n))
				}
				req.Assign(args[0], partition, ids)
			}
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.AlterPartitionAssignments(ctx, req)
			if err != nil {
				return requestErr("reassign", "AlterPartitionReassignments", err)
			}
			if err := resps.Error(); err != nil {
				return fmt.Errorf("reassign %s[%d]: %w", args[0], partition, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reassignment of %s[%d] started; `runnel topic describe %s` shows its replicas\n", args[0], partition, args[0])
			return nil
		},
	}
	cmd.Flags().Int32Var(&partition, "partition", 0, "the partition to move")
	cmd.Flags().StringVar(&replicas, "replicas", "", "the new replicas, preferred leader first")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the partition's move in progress")
	return cmd
}

// newTopicElectLeadersCommand moves leaderships back to preferred replicas (ElectLeaders, as
// kafka-leader-election --election-type preferred does).
func newTopicElectLeadersCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "elect-leaders [TOPIC...]",
		Short: "Move each partition's leadership to its preferred replica (all topics without arguments)",
		RunE: func(cmd *cobra.Command, names []string) error {
			adm, ctx, done, err := f.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var set kadm.TopicsSet
			if len(names) > 0 {
				md, err := adm.Metadata(ctx, names...)
				if err != nil {
					return requestErr("elect leaders", "Metadata", err)
				}
				set = kadm.TopicsSet{}
				for _, t := range md.Topics {
					for p := range t.Partitions {
						set.Add(t.Topic, p)
					}
				}
			}
			rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
			if err != nil {
				return requestErr("elect leaders", "ElectLeaders", err)
			}
			return f.output(cmd.OutOrStdout(), rs, func(w io.Writer) {
				moved, kept := 0, 0
				for _, ps := range rs {
					for _, r := range ps {
						switch {
						case r.Err == nil:
							moved++
						case strings.HasPrefix(r.Err.Error(), "ELECTION_NOT_NEEDED"):
							kept++
						default:
							fmt.Fprintf(w, "%s[%d]: %s\n", r.Topic, r.Partition, kafkaErr(r.Err, r.ErrMessage))
						}
					}
				}
				fmt.Fprintf(w, "%d leaderships moved to their preferred replica, %d already there\n", moved, kept)
			})
		},
	}
}
