package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newControllerCommand describes the controller quorum, changes its voters (KIP-853's
// DescribeQuorum, AddRaftVoter and RemoveRaftVoter, as kafka-metadata-quorum sends them) and
// unregisters a node taken out of service (UnregisterBroker, as kafka-cluster unregister).
func newControllerCommand() *cobra.Command {
	var f topicFlags
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Describe the controller quorum, add or remove a voter, unregister a node",
		Args:  cobra.NoArgs,
	}
	f.register(cmd.PersistentFlags())
	cmd.AddCommand(newControllerDescribeCommand(&f), newVoterCommand(&f, true), newVoterCommand(&f, false), newUnregisterCommand(&f))
	return cmd
}

func newControllerDescribeCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe",
		Short: "Show the active controller, the voters and the observers, with their log ends",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			req := kmsg.NewPtrDescribeQuorumRequest()
			t := kmsg.NewDescribeQuorumRequestTopic()
			t.Topic = "__cluster_metadata"
			t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
			req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return requestErr("describe", "DescribeQuorum", err)
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return fmt.Errorf("describe: %w", err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return fmt.Errorf("describe: an answer without the quorum's partition")
			}
			p := resp.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("describe: %w", err)
			}
			type member struct {
				Node       int32  `json:"node"`
				Role       string `json:"role"`
				LogEnd     int64  `json:"log_end"`
				Lag        int64  `json:"lag"`
				LastFetch  int64  `json:"last_fetch_ms"`
				CaughtUpAt int64  `json:"last_caught_up_ms"`
			}
			out := struct {
				Leader        int32    `json:"leader"`
				Epoch         int32    `json:"epoch"`
				HighWatermark int64    `json:"high_watermark"`
				Members       []member `json:"members"`
			}{Leader: p.LeaderID, Epoch: p.LeaderEpoch, HighWatermark: p.HighWatermark}
			add := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
				for _, r := range rs {
					lag := max(p.HighWatermark-r.LogEndOffset, 0)
					if r.LogEndOffset < 0 { // not known to the leader
						lag = -1
					}
					out.Members = append(out.Members, member{r.ReplicaID, role, r.LogEndOffset, lag, r.LastFetchTimestamp, r.LastCaughtUpTimestamp})
				}
			}
			add(p.CurrentVoters, "voter")
			add(p.Observers, "observer")
			if f.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "active controller %d, epoch %d, high watermark %d\n", out.Leader, out.Epoch, out.HighWatermark)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tROLE\tLOG END\tLAG\tLAST FETCH")
			for _, m := range out.Members {
				role := m.Role
				if m.Node == out.Leader {
					role = "voter (leader)"
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\n", m.Node, role, m.LogEnd, m.Lag, ago(m.LastFetch))
			}
			return tw.Flush()
		},
	}
}

// ago formats a unix-ms timestamp as the time since; "-" if unknown.
func ago(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.Since(time.UnixMilli(ms)).Round(time.Millisecond).String() + " ago"
}

func newVoterCommand(f *topicFlags, add bool) *cobra.Command {
	use, short, example := "remove-voter NODE", "Remove a voter from the controller quorum (it stays an observer while it runs)", "  runnel controller remove-voter 3"
	if add {
		use, short, example = "add-voter NODE", "Make a running serve node a voter of the controller quorum, once it has caught up", "  runnel controller add-voter 4"
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("node id %q: %w", args[0], err)
			}
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var code int16
			var msg *string
			what, api := "remove-voter", "RemoveRaftVoter"
			if add {
				what, api = "add-voter", "AddRaftVoter"
				req := kmsg.NewPtrAddRaftVoterRequest()
				req.VoterID, req.TimeoutMillis, req.AckWhenCommitted = int32(id), int32(f.timeout.Milliseconds()), true
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return requestErr(what, api, err)
				}
				code, msg = resp.ErrorCode, resp.ErrorMessage
			} else {
				req := kmsg.NewPtrRemoveRaftVoterRequest()
				req.VoterID = int32(id)
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return requestErr(what, api, err)
				}
				code, msg = resp.ErrorCode, resp.ErrorMessage
			}
			if err := nodeAnswerErr(what, id, code, msg); err != nil {
				return err
			}
			verb := "removed from"
			if add {
				verb = "added to"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d %s the controller voters; `runnel controller describe` shows them\n", id, verb)
			return nil
		},
	}
}

func newUnregisterCommand(f *topicFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "unregister NODE",
		Short: "Forget a node taken out of service: stopped, holding no replica, not a voter",
		Long: `Forget a node taken out of service (Kafka's UnregisterBroker): it no longer counts in the
cluster (it no longer holds the command level back), and its id may be used again, by a node
with an empty data dir too. The node must be stopped (fenced once its session expires), hold
no partition replica (move them with runnel topic reassign) and not be a controller voter
(runnel controller remove-voter).`,
		Example: "  runnel controller unregister 4",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil {
				return fmt.Errorf("node id %q: %w", args[0], err)
			}
			cl, ctx, done, err := f.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			req := kmsg.NewPtrUnregisterBrokerRequest()
			req.BrokerID = int32(id)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return requestErr("unregister", "UnregisterBroker", err)
			}
			if err := nodeAnswerErr("unregister", id, resp.ErrorCode, resp.ErrorMessage); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d unregistered\n", id)
			return nil
		},
	}
}

// nodeAnswerErr is the error of an answer about one node: its code, with its message if any.
func nodeAnswerErr(what string, id int64, code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	switch {
	case err == nil:
		return nil
	case msg != nil:
		return fmt.Errorf("%s %d: %w: %s", what, id, err, *msg)
	}
	return fmt.Errorf("%s %d: %w", what, id, err)
}
