package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/bench"
	"github.com/runnel-dev/runnel/internal/testclients"
)

// TestScenariosShort runs a short version of the fault scenarios against real processes: the
// runnel binary is built from this tree. RUNNEL_CHAOS=full runs every scenario at full length
// (as `runnel chaos` does).
func TestScenariosShort(t *testing.T) {
	bin := runnelBinary(t)
	dir := t.TempDir()
	cfg := Config{Binary: bin, Dir: filepath.Join(dir, "clusters"), Rate: 1000, Rounds: 2, Hold: 3 * time.Second}
	scenarios := []string{"kill-leader", "pause-leader", "isolate-leader", "net-partition-leader", "net-unplug-leader", "net-bridge",
		"net-lossy", "net-lossy-leader", "rolling-restart"}
	if os.Getenv("RUNNEL_CHAOS") == "full" {
		cfg = Config{Binary: bin, Dir: filepath.Join(dir, "clusters")}
		scenarios = Scenarios
	}
	for _, s := range scenarios {
		t.Run(s, func(t *testing.T) {
			if netScenario(s) {
				needNetns(t)
			}
			var out bytes.Buffer
			cfg.Out = &out
			res := Run(context.Background(), cfg, s)
			t.Logf("%s\n%+v", out.String(), res)
			if !res.OK() {
				for _, n := range []string{"node-1.log", "node-2.log", "node-3.log"} {
					if b, err := os.ReadFile(filepath.Join(cfg.Dir, s, n)); err == nil {
						t.Logf("%s:\n%s", n, tail(b, 4000))
					}
				}
				t.Fatalf("%s: %+v", s, res)
			}
			for _, d := range res.Recovery {
				if s == "kill-leader" && d > 5*time.Second {
					t.Errorf("kill-leader: acknowledgements resumed only after %v", d)
				}
			}
			if s == "rolling-restart" {
				// A controlled shutdown: the controller's Raft leadership is handed on, so its
				// successor takes over well before an election timeout (0.5-1 s) would let one be
				// elected, and no produce fails.
				if res.ControllerMoved <= 0 || res.ControllerMoved > 400*time.Millisecond {
					t.Errorf("rolling-restart: a new active controller was named %v after the old one's SIGTERM; want it within 400ms", res.ControllerMoved)
				}
				if res.Unacked > 0 {
					t.Errorf("rolling-restart: %d produce calls failed", res.Unacked)
				}
				for i, g := range res.RestartGaps {
					if g > 2*time.Second {
						t.Errorf("rolling-restart: restart %d: a partition went %v without an acknowledgement", i+1, g)
					}
				}
				for i, d := range res.Stops { // the moves end as soon as nothing is left to move
					if d > 5*time.Second {
						t.Errorf("rolling-restart: node %d of the order took %v to stop", i+1, d)
					}
				}
			}
		})
	}
}

// needNetns skips a test that needs network namespaces where none can be made (not root), unless
// RUNNEL_REQUIRE_NETNS is set (CI sets it: there the test must run).
func needNetns(t *testing.T) {
	t.Helper()
	n, err := NewNet()
	if err == nil {
		n.Close()
		return
	}
	if os.Getenv("RUNNEL_REQUIRE_NETNS") != "" {
		t.Fatalf("RUNNEL_REQUIRE_NETNS is set: %v", err)
	}
	t.Skipf("no network namespaces here: %v", err)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// startObjectCluster starts three nodes sharing a file:// object store, in a temporary
// directory, each in its own namespace of net (nil: loopback); they stop when the test ends.
func startObjectCluster(t *testing.T, ctx context.Context, bin string, net *Net) *Cluster {
	t.Helper()
	dir := t.TempDir()
	c, err := StartClusterOn(ctx, net, bin, filepath.Join(dir, "cluster"), 3, "--log-level", "warn",
		"--object-store", "file://"+filepath.Join(dir, "store"), "--object-batch-timeout", "20ms")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	return c
}

// runnelBinary builds the runnel binary from this tree once per test process.
func runnelBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts clusters of real processes")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "runnel-chaos-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "runnel")
		if out, err := exec.Command("go", "build", "-o", builtBin, "../../cmd/runnel").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// TestFailoverBench runs `runnel bench failover`'s measurement against a cluster of real
// processes: one round must kill the partition's leader, see acknowledgements resume, and
// restart the node. It checks that the bench measured something sane, not how fast.
func TestFailoverBench(t *testing.T) {
	bin := runnelBinary(t)
	ctx := context.Background()
	c, err := StartCluster(ctx, bin, filepath.Join(t.TempDir(), "cluster"), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StopAll()
	var out bytes.Buffer
	res, err := bench.Failover(ctx, bench.FailoverOptions{
		Bootstrap: c.Brokers(), Label: "runnel", Rounds: 1, Rate: 200, Settle: time.Second, Progress: &out,
		Kill: func(_ context.Context, n int32) error { c.Kill(n); return nil },
		Restart: func(ctx context.Context, n int32) error {
			if err := c.Start(n); err != nil {
				return err
			}
			return c.WaitReady(ctx, n, time.Minute)
		},
	})
	t.Logf("%s%+v", out.String(), res)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 1 || res.Rounds[0] <= 0 || res.Rounds[0] > 30*time.Second || res.Acked < 200 {
		t.Fatalf("failover result %+v: want one round, a positive recovery time and acknowledged records", res)
	}
	if c.nodes[res.Killed[0]].cmd == nil {
		t.Errorf("node %d was not restarted", res.Killed[0])
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestObjectScenarios runs the object-storage topics' fault scenarios against real processes
// (three serve nodes and an agent) sharing a real S3-compatible server (versitygw), and the lazy
// and Ripcord ones on a shared local directory too: every acknowledged record is read back
// exactly once (at its acknowledged offset, in order, where an offset is acknowledged). 32
// partitions: a process's share of partition "leaders" comes from hashing its (random, for an
// agent) node id, and a scenario that kills the agent at its next file needs it to have
// traffic; with 8 partitions over 4 processes it had none one time in ten. The short version
// (CI) runs every scenario on S3 and two on the directory, at a lower rate, with fewer rounds
// and shorter faults; RUNNEL_CHAOS=full runs the longer ones, and every lazy one on both.
func TestObjectScenarios(t *testing.T) {
	bin := runnelBinary(t)
	endpoint := testclients.S3(t)
	dir := t.TempDir()
	cfg := Config{Binary: bin, Partitions: 32, Rate: 1000, Rounds: 2, Hold: 3 * time.Second}
	onDir := []string{"lazy-kill-after-put", "ripcord-kill-controllers"}
	if os.Getenv("RUNNEL_CHAOS") == "full" {
		cfg.Rate, cfg.Rounds, cfg.Hold = 2000, 4, 5*time.Second
		onDir = lazyScenarios
	}
	for _, store := range []struct{ name, url string }{
		{"s3", "s3://runnel/chaos?endpoint=" + endpoint},
		{"dir", "file://" + filepath.Join(dir, "store")},
	} {
		for _, s := range ObjectScenarios {
			if store.name == "dir" && !slices.Contains(onDir, s) {
				continue
			}
			t.Run(store.name+"/"+s, func(t *testing.T) {
				cfg := cfg
				cfg.Dir, cfg.ObjectStore = filepath.Join(dir, store.name), store.url
				var out bytes.Buffer
				cfg.Out = &out
				res := Run(context.Background(), cfg, s)
				t.Logf("%s\n%+v", out.String(), res)
				if !res.OK() {
					for _, n := range []string{"node-1.log", "node-2.log", "node-3.log", "node-101.log", "node-102.log"} {
						if b, err := os.ReadFile(filepath.Join(cfg.Dir, s, n)); err == nil {
							t.Logf("%s:\n%s", n, tail(b, 4000))
						}
					}
					t.Fatalf("%s: %+v", s, res)
				}
				if s == "object-rolling-restart" && res.Unacked != 0 {
					t.Errorf("%s: %d produce calls failed; a rolling restart must fail none", s, res.Unacked)
				}
			})
		}
	}
}

// TestNewNetSweepsDeadNets: namespaces left by a Net whose process is gone (a test binary
// killed before its cleanups) are deleted by the next NewNet; a live process's are kept.
func TestNewNetSweepsDeadNets(t *testing.T) {
	needNetns(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("rn%dx1-hub", gone.Process.Pid)
	live := fmt.Sprintf("rn%dx999-2", os.Getppid()) // go test's own process, alive throughout
	for _, ns := range []string{dead, live} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	n, err := NewNet()
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if _, err := os.Stat("/var/run/netns/" + dead); !os.IsNotExist(err) {
		t.Errorf("%s (pid %d is gone) was not swept: %v", dead, gone.Process.Pid, err)
	}
	if _, err := os.Stat("/var/run/netns/" + live); err != nil {
		t.Errorf("%s (a live pid) was swept: %v", live, err)
	}
}
