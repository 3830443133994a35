package chaos

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestScenariosShort runs a short version of the fault scenarios against real processes: the
// runnel binary is built from this tree. RUNNEL_CHAOS=full runs every scenario at full length
// (as `runnel chaos` does).
func TestScenariosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters of real processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "runnel")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/runnel")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := Config{Binary: bin, Dir: filepath.Join(dir, "clusters"), Rate: 1000, Rounds: 2, Hold: 3 * time.Second}
	scenarios := []string{"kill-leader", "pause-leader", "isolate-leader"}
	if os.Getenv("RUNNEL_CHAOS") == "full" {
		cfg = Config{Binary: bin, Dir: filepath.Join(dir, "clusters")}
		scenarios = Scenarios
	}
	for _, s := range scenarios {
		t.Run(s, func(t *testing.T) {
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
		})
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
