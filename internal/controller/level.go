package controller

import (
	"errors"
	"fmt"
	"time"
)

// Command levels: Kafka's metadata.version, finalized without an operator. Every node applies
// the controller's log itself, so a command whose meaning a version changed (or that an older
// version does not know, and ignores) must not be proposed while a node of an older version
// may apply it: their images would differ from then on. Each node registers with the level its
// code applies (Register.Level; none from versions before levels: 0); the active controller
// raises the cluster's level (Image.Level) to the lowest level of the registered nodes once
// every one of them is past it, and a node below the cluster's level is refused registration,
// so it never follows the log. The level is never lowered: a cluster is not downgraded past
// it (Kafka refuses a metadata.version downgrade without --unsafe too).
const (
	// Level is the level this version applies.
	Level = 1
	// LevelForgottenWriters (1): forget-writer keeps what the run committed (ForgetWriter.NowMs),
	// and expire-producers forgets object partitions' idle producers.
	LevelForgottenWriters = 1
)

// OpFinalizeLevel raises the cluster's command level.
const OpFinalizeLevel = "finalize-level"

// FinalizeLevel raises Image.Level to Level, if every registered node applies it.
type FinalizeLevel struct {
	Level int `json:"level"`
}

// ErrLevel refuses the registration of a node whose version applies less than the cluster's
// command level.
var ErrLevel = errors.New("controller: the node's version is older than the cluster's command level")

// NodesLevel is the lowest command level of the registered nodes (0 with none).
func (im *Image) NodesLevel() int {
	lvl := -1
	for _, n := range im.Nodes {
		if lvl < 0 || n.Level < lvl {
			lvl = n.Level
		}
	}
	return max(lvl, 0)
}

func applyFinalizeLevel(im *Image, c *FinalizeLevel) {
	if c.Level > im.Level && len(im.Nodes) > 0 && im.NodesLevel() >= c.Level {
		im.Level = c.Level
	}
}

// checkLevel refuses a registration below the cluster's level.
func checkLevel(im *Image, r *Register) error {
	if r.Level < im.Level {
		return fmt.Errorf("%w: node %d applies level %d, the cluster is at level %d; run this version or a newer one on it",
			ErrLevel, r.Node, r.Level, im.Level)
	}
	return nil
}

// finalizeLevel proposes raising the cluster's level once every registered node applies a
// higher one (at most this version's: the active controller proposes nothing it cannot apply),
// asking again after VoteRetry while the image does not have it.
func (a *Active) finalizeLevel(now time.Time, eff *Effects) {
	lvl := min(a.img.NodesLevel(), Level)
	if lvl <= a.img.Level || len(a.img.Nodes) == 0 || now.Sub(a.levelAsked) < a.cfg.VoteRetry {
		return
	}
	a.levelAsked = now
	eff.propose(&Command{Op: OpFinalizeLevel, FinalizeLevel: &FinalizeLevel{Level: lvl}})
}
