package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"github.com/runnel-dev/runnel/internal/vfs"
)

// The boot mark: what lets a node that restarts say it lost nothing (docs/cluster.md §4.9).
//
// A record is acknowledged once a quorum appended it, in the page cache, fsynced or not (write
// caching). A process that dies leaves what it wrote in the page cache, and the kernel writes it
// back; only the machine's crash (a new boot) or a writeback error loses it. So a process that
// restarts on the same boot, after a run whose logs did not fail, holds every write of that run,
// and the registration it makes says so (Register.KeptFrom): the transaction rules then need
// not count the restart as a replica that may have lost what it acknowledged.
//
// The mark is the data dir's file boot.mark: the boot id and run id of the process that wrote
// it. A process writes it when it starts, once it has checked the previous one's, and removes it
// when one of its logs fails. At start the previous run's writes count as kept when:
//   - the mark names this boot (a power loss or reboot makes a new boot id);
//   - it is there (no log of that run failed, or the run could not remove it: see the syncfs);
//   - a syncfs of the data dir's file system succeeds: since Linux 5.8 it reports a writeback
//     error of any file of the file system that no syncfs has reported yet, so also a failure
//     the previous process never saw (the kernel's own writeback after it died), and it makes
//     those writes durable;
//   - and the controller's image has that run as the node's last registration (checked by the
//     controller): a data dir restored from a copy holds the mark of an older run.
const bootMarkName = "boot.mark"

type bootMark struct {
	Boot string `json:"boot"`
	Run  string `json:"run"`
}

// bootMarks keeps a node's boot mark and answers whether its process holds every write of the
// run its last registration names.
type bootMarks struct {
	fs      vfs.FS
	dir     string
	run     string
	logger  *slog.Logger
	mu      sync.Mutex
	kept    string // the run whose writes this process holds; "" none
	lost    bool   // a log of this process failed
	written bool   // this process's mark is on disk
}

// openBootMark checks the mark the previous process left in dir and leaves this run's.
func openBootMark(fsys vfs.FS, dir, run string, logger *slog.Logger) *bootMarks {
	m := &bootMarks{fs: fsys, dir: dir, run: run, logger: logger}
	booter, ok := fsys.(vfs.Booter)
	if !ok {
		return m
	}
	boot, err := booter.BootID()
	if err != nil {
		logger.Warn("cluster: no boot id: a restart of this node counts as one that may have lost writes", "err", err)
		return m
	}
	prev, err := m.read()
	switch {
	case err != nil:
		logger.Warn("cluster: reading the boot mark", "err", err)
	case prev.Boot == boot && prev.Run != "":
		if err := m.syncFS(); err != nil {
			logger.Warn("cluster: a write of the previous run may be lost (syncfs of the data dir failed)", "run", prev.Run, "err", err)
		} else {
			m.kept = prev.Run
		}
	}
	b, _ := json.Marshal(bootMark{Boot: boot, Run: run})
	if err := vfs.WriteFileAtomic(fsys, dir, bootMarkName, b); err != nil {
		logger.Warn("cluster: writing the boot mark: the next restart counts as one that may have lost writes", "err", err)
		return m
	}
	m.written = true
	return m
}

// read returns the mark in the data dir (zero if there is none).
func (m *bootMarks) read() (bootMark, error) {
	var mark bootMark
	b, err := vfs.ReadFile(m.fs, m.dir+"/"+bootMarkName)
	if errors.Is(err, fs.ErrNotExist) {
		return mark, nil
	}
	if err != nil {
		return mark, err
	}
	if err := json.Unmarshal(b, &mark); err != nil {
		return bootMark{}, fmt.Errorf("%s: %w", bootMarkName, err)
	}
	return mark, nil
}

// syncFS syncs the data dir's file system, reporting a writeback error not reported yet.
func (m *bootMarks) syncFS() error {
	syncer, ok := m.fs.(vfs.FSSyncer)
	if !ok {
		return errors.New("the file system has no syncfs")
	}
	f, err := m.fs.Open(m.dir + "/" + bootMarkName)
	if err != nil {
		return err
	}
	defer f.Close()
	return syncer.SyncFS(f)
}

// keptFrom is what a registration says (Register.KeptFrom): the run whose writes this process
// holds. After a registration succeeds, that is this process's own run.
func (m *bootMarks) keptFrom() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost {
		return ""
	}
	return m.kept
}

// registered records that the image now names this process's run.
func (m *bootMarks) registered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kept = m.run
}

// logFailed withdraws the mark: a log of this process failed a write or a sync, so its unsynced
// writes may be lost, and neither this process nor the next one may say it holds them.
func (m *bootMarks) logFailed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost {
		return
	}
	m.lost = true
	m.logger.Warn("cluster: a log failed: this node's next registration counts as one that may have lost writes", "err", err)
	if !m.written {
		return
	}
	if rerr := m.fs.Remove(m.dir + "/" + bootMarkName); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		m.logger.Error("cluster: removing the boot mark after a log failure", "err", rerr)
		return
	}
	if serr := m.fs.SyncDir(m.dir); serr != nil {
		m.logger.Error("cluster: removing the boot mark after a log failure", "err", serr)
	}
}
