package cluster

import (
	"errors"
	"path/filepath"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// JoiningFile marks a data dir that was empty when a node started, until the cluster has taken
// the node's registration. Starting writes files (the controller's boot snapshot, the boot
// mark), so without it a node refused once (its id known: lost data; its flags naming it a
// voter the cluster does not have) would find its data dir no longer empty when started again
// (by a supervisor, or an operator told to try again) and skip the checks.
const JoiningFile = "JOINING"

// joiningMarked reports whether dir holds the mark of a start on an empty data dir whose
// registration was never taken.
func joiningMarked(fsys vfs.FS, dir string) bool {
	_, err := fsys.Stat(filepath.Join(dir, JoiningFile))
	return err == nil
}

// markJoining leaves the mark, durably, before anything else is written to dir.
func markJoining(fsys vfs.FS, dir string) error {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := fsys.Create(filepath.Join(dir, JoiningFile))
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// clearJoining removes the mark once the cluster took the registration of this process.
func (n *Node) clearJoining() {
	if n.cfg.Agent || n.cfg.DataDir == "" {
		return
	}
	err := n.cfg.FS.Remove(filepath.Join(n.cfg.DataDir, JoiningFile))
	if errors.Is(err, vfs.ErrNotExist) {
		return
	}
	if err == nil {
		err = n.cfg.FS.SyncDir(n.cfg.DataDir)
	}
	if err != nil {
		// The next start then asks the voters again, and is refused as a node that lost its data.
		n.logger.Error("cluster: removing the mark of a start on an empty data dir", "err", err)
	}
}
