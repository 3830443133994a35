package cluster

import (
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// JoiningFile marks a data dir that was empty when a node started, until the cluster has taken
// the node's registration. Starting writes files (the object store's and topics' directories,
// the controller's boot snapshot, the boot mark), so without it a node refused once (its id
// known: lost data; its flags naming it a voter the cluster does not have), or whose first
// start failed, would find its data dir no longer empty when started again (by a supervisor,
// or an operator told to try again) and skip the checks. It lists, a line each, the runs of
// the processes that started on the dir since: a registration by one of them is this data
// dir's own (its process may have died between the registration and the removal of the mark),
// not one that lost its data.
const JoiningFile = "JOINING"

// MarkJoining leaves the mark in dir, durably, if the dir holds nothing of a node yet: the
// server calls it before it writes anything else there.
func MarkJoining(fsys vfs.FS, dir string) error {
	if joiningMarked(fsys, dir) {
		return nil
	}
	return writeJoining(fsys, dir, nil)
}

// joiningMarked reports whether dir holds the mark.
func joiningMarked(fsys vfs.FS, dir string) bool {
	_, err := fsys.Stat(filepath.Join(dir, JoiningFile))
	return err == nil
}

// joiningRuns returns the runs the mark lists.
func joiningRuns(fsys vfs.FS, dir string) ([]string, error) {
	f, err := fsys.Open(filepath.Join(dir, JoiningFile))
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// writeJoining writes the mark listing runs, atomically and durably.
func writeJoining(fsys vfs.FS, dir string, runs []string) error {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, JoiningFile+".tmp")
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	var b []byte
	for _, r := range runs {
		b = append(append(b, r...), '\n')
	}
	_, err = f.WriteAt(b, 0)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, JoiningFile)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// markJoining adds run to the mark (making it if need be) and returns the runs it lists.
func markJoining(fsys vfs.FS, dir, run string) ([]string, error) {
	runs, err := joiningRuns(fsys, dir)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(runs, run) {
		runs = append(runs, run)
	}
	return runs, writeJoining(fsys, dir, runs)
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
		// The next start asks the voters again, and its registration names this run: taken.
		n.logger.Error("cluster: removing the mark of a start on an empty data dir", "err", err)
	}
}

// ownRegistration reports whether the image's registration of node is one of this data dir's:
// by this process, or by an earlier one that started on the dir since it was empty.
func ownRegistration(nodeRun string, runs []string) bool {
	return nodeRun != "" && slices.Contains(runs, nodeRun)
}
