package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel-dev/runnel/internal/chaos"
)

func newChaosCommand() *cobra.Command {
	var cfg chaos.Config
	var scenarios string
	var asJSON, keep, outageKill bool
	var outage time.Duration
	var plotFile string
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run fault scenarios against a three-node cluster of this binary and check nothing acknowledged is lost",
		Long: `chaos starts a cluster of runnel processes on loopback (in --dir), produces to it with an
idempotent acks=all producer, injects a fault, and reads everything back with two readers: every
acknowledged record must be present exactly once at its offset, both readers must agree, each
partition's records must be in production order, and the high watermark a client polls must
never go back. Scenarios: ` + strings.Join(chaos.Scenarios, ", ") + `.
With --object-store (a store every process can reach, such as an S3-compatible server) it runs
object-storage topic scenarios with an agent beside the three nodes: ` + strings.Join(chaos.ObjectScenarios, ", ") + `.`,
		Example: "  runnel chaos --scenarios kill-leader,pause-leader\n  runnel chaos --json > results.json\n" +
			"  runnel chaos --object-store 's3://runnel/chaos?endpoint=http://127.0.0.1:7070'",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Binary = bin
			if cfg.ObjectStore != "" && !cmd.Flags().Changed("partitions") {
				// A process's share of object partitions' Metadata leaders comes from hashing
				// its node id, and the kill-after scenarios need each target to have traffic:
				// with 8 partitions over 4 processes one had none a time in ten.
				cfg.Partitions = objectPartitions
			}
			if cfg.Dir == "" {
				if cfg.Dir, err = os.MkdirTemp("", "runnel-chaos-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(cfg.Dir)
				}
			}
			if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
				return err
			}
			if !asJSON {
				cfg.Out = cmd.ErrOrStderr()
			}
			if outage > 0 {
				if cfg.ObjectStore == "" {
					return fmt.Errorf("--outage needs --object-store")
				}
				res, err := chaos.Outage(cmd.Context(), chaos.OutageConfig{Binary: cfg.Binary, Dir: filepath.Join(cfg.Dir, "outage"),
					ObjectStore: cfg.ObjectStore, Rate: cfg.Rate, Partitions: cfg.Partitions, Outage: outage, Kill: outageKill, Out: cfg.Out})
				if err != nil {
					return err
				}
				if plotFile != "" {
					if err := res.WritePNG(plotFile); err != nil {
						return err
					}
				}
				if err := writeOutput(cmd.OutOrStdout(), asJSON, res, res.WriteText); err != nil {
					return err
				}
				if !res.Check.OK() || res.Check.Unacked > 0 {
					return fmt.Errorf("the outage run found anomalies")
				}
				return nil
			}
			list := chaos.Scenarios
			if cfg.ObjectStore != "" {
				list = chaos.ObjectScenarios
			}
			if scenarios != "" {
				list = strings.Split(scenarios, ",")
			}
			var results []chaos.Result
			failed := 0
			for _, s := range list {
				res := chaos.Run(cmd.Context(), cfg, strings.TrimSpace(s))
				if !res.OK() {
					failed++
				}
				results = append(results, res)
			}
			err = writeOutput(cmd.OutOrStdout(), asJSON, results, func(w io.Writer) { printChaos(w, results) })
			if err == nil && failed > 0 {
				err = fmt.Errorf("%d of %d scenarios found anomalies or failed", failed, len(results))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarios, "scenarios", "", "comma-separated scenarios (default: all)")
	f.StringVar(&cfg.Dir, "dir", "", "where the nodes' data and logs go (default: a temporary directory, removed afterwards)")
	f.BoolVar(&keep, "keep", false, "keep the temporary directory")
	f.IntVar(&cfg.Rate, "rate", 2000, "records/s produced during each scenario")
	f.Int32Var(&cfg.Partitions, "partitions", 3, fmt.Sprintf("partitions of the test topic (replication factor 3; %d with --object-store)", objectPartitions))
	f.IntVar(&cfg.Rounds, "rounds", 5, "kill-leader: how many times the leader is killed")
	f.DurationVar(&cfg.Hold, "hold", 5*time.Second, "isolate-leader, pause-leader, net-*: how long the fault lasts")
	f.StringVar(&cfg.ObjectStore, "object-store", "", "run the object-storage topic scenarios on this shared store")
	f.IntVar(&cfg.Agents, "agents", 1, "object scenarios: agents beside the three nodes")
	f.DurationVar(&outage, "outage", 0, "with --object-store: instead of the scenarios, stop every serve node this long while a ripcord agent takes --rate records/s, and record what clients see each second")
	f.BoolVar(&outageKill, "outage-kill", false, "--outage: SIGKILL the nodes (and restart them) instead of SIGSTOP")
	f.StringVar(&plotFile, "plot", "", "--outage: write a PNG plot of the run here")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func printChaos(w io.Writer, results []chaos.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tACKED\tLOST\tDUPLICATED\tMISPLACED\tREORDERED\tINCONSISTENT\tHW BACK\tUNACKED\tNEW LEADER\tRECOVERY\tDURING FAULT\tRESULT")
	for _, r := range results {
		var rec []string
		for _, d := range r.Recovery {
			rec = append(rec, d.Round(time.Millisecond).String())
		}
		elected := "-"
		if r.Elected > 0 {
			elected = r.Elected.Round(time.Millisecond).String()
		}
		during := "-"
		if r.FaultAcked > 0 || r.FaultGap > 0 {
			during = fmt.Sprintf("acked %.0f%%, max wait %v, %d leader changes", 100*r.FaultAcked, r.FaultGap.Round(time.Millisecond), r.LeaderChanges)
		}
		verdict := "ok"
		if !r.OK() {
			verdict = "FAIL " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Scenario, r.Acked, r.Lost, r.Duplicated, r.Misplaced,
			r.Reordered, r.Inconsistent, r.HWRegressed, r.Unacked, elected, strings.Join(rec, " "), during, verdict)
	}
	tw.Flush()
}

// objectPartitions is the test topic's partitions in object scenarios, unless --partitions.
const objectPartitions = 32
