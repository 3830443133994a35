package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel-dev/runnel/internal/server"
)

// maxStatusBytes bounds the status document read: ~200 bytes a partition.
const maxStatusBytes = 64 << 20

func newStatusCommand() *cobra.Command {
	var (
		addr    string
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print a node's status: state, uptime and its partitions (from the admin endpoint)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			raw, err := fetchStatus(ctx, addr)
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(raw)
				return err
			}
			var st server.Status
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("status from %s: %w", addr, err)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&addr, "admin-addr", "127.0.0.1:9644", "host:port (or URL) of the node's admin HTTP server")
	flags.BoolVar(&asJSON, "json", false, "print the status document as the node sends it")
	flags.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the node")
	return cmd
}

// fetchStatus GETs /v1/status from the admin server at addr and returns the body.
func fetchStatus(ctx context.Context, addr string) ([]byte, error) {
	base := addr
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/status", nil)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: is runnel serve running with --admin-addr %s? %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if err != nil {
		return nil, fmt.Errorf("status from %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status from %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// printStatus writes st as a summary line for the node and a table of its partitions.
func printStatus(w io.Writer, st server.Status) {
	uptime := time.Duration(st.UptimeSeconds * float64(time.Second)).Round(time.Second)
	ready := "not ready"
	if st.Ready {
		ready = "ready"
	}
	fmt.Fprintf(w, "node %d", st.NodeID)
	if st.ClusterID != "" {
		fmt.Fprintf(w, " of cluster %s", st.ClusterID)
	}
	fmt.Fprintf(w, ": %s (%s), up %s\n", st.State, ready, uptime)
	fmt.Fprintf(w, "kafka %s (advertised %s), admin %s, data %s\n", st.KafkaAddr, st.AdvertisedKafkaAddr, st.AdminAddr, st.DataDir)
	if c := st.Cluster; c != nil {
		held := ""
		if c.CommandLevelHeld {
			held = ", held"
		}
		fmt.Fprintf(w, "\ncontroller %d (voters %v, command level %d%s); %d partitions, %d offline, %d under-replicated\n", c.ControllerID, c.Voters,
			c.CommandLevel, held, c.Partitions, c.Offline, c.UnderReplicated)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE	STATE	KAFKA	CLUSTER	LEADERS	REPLICAS")
		for _, n := range c.Nodes {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\n", n.ID, n.State, n.KafkaAddr, n.ClusterAddr, n.Leaders, n.Replicas)
		}
		tw.Flush()
	}
	if len(st.Topics) == 0 {
		fmt.Fprintln(w, "no topics")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tROLE\tEPOCH\tREPLICAS\tISR\tSTART\tEND\tHIGH WATERMARK\tSIZE\tFLUSH LAG")
	for _, t := range st.Topics {
		for _, p := range t.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", t.Name, p.Partition, p.Role, p.LeaderEpoch,
				formatIDs(p.Replicas), formatIDs(p.ISR), p.StartOffset, p.EndOffset,
				p.HighWatermark, formatBytes(p.SizeBytes), formatFlushLag(p))
		}
	}
	tw.Flush()
}

// formatIDs is a node list as 1,2,3.
func formatIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// formatFlushLag is a partition's not-yet-durable data, or "-" if there is none.
func formatFlushLag(p server.PartitionStatus) string {
	if p.FlushLagBytes == 0 && p.FlushLagRecords == 0 {
		return "-"
	}
	return fmt.Sprintf("%d rec, %s, %dms", p.FlushLagRecords, formatBytes(p.FlushLagBytes), p.FlushLagMillis)
}

// formatBytes is n in B, KiB, MiB, GiB or TiB, with one decimal above bytes.
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB"} {
		v /= 1024
		if v < 1024 {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	return fmt.Sprintf("%.1f TiB", v/1024)
}
