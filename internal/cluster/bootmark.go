package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// The boot mark: what lets a node that restarts say it lost nothing (docs/cluster.md §4.9).
//
// A record is acknowledged once a quorum appended it, in the page cache, fsynced or not (write
// caching). A process that dies leaves what it wrote in the page cache, and the kernel writes it
// back; a crash of the machine (a new boot), an unmount, or a writeback error loses it. So a
// process that restarts on the same boot and mount, after a run whose logs did not fail, holds
// every write of that run, and the registration it makes says so (Register.KeptFrom): the
// transaction rules then need not count the restart as a replica that may have lost what it
// acknowledged.
//
// The mark is the data dir's file boot.mark: the boot and mount ids, the run id of the process
// that wrote it, and the mark file's own device, inode and birth time. A process writes it when it starts,
// once it has checked the previous one's, and removes it, before any waiter hears of the
// failure, when one of its logs fails. At start the previous run's writes count as kept when:
//   - the mark is there (no log of that run failed) and is that very file, not a copy (a data
//     dir restored from a copy holds a file born later);
//   - it names this boot and the mount the data dir is on now;
//   - the data dir and every topic and partition directory in it are on one file system;
//   - a syncfs of it succeeds: since Linux 5.8 it reports a writeback error of any of its files
//     that no syncfs has reported yet, so also a failure the previous process never saw (the
//     kernel's own writeback after it died), and it makes those writes durable;
//   - and the controller's image has that run as the node's last registration, or one whose
//     writes that run held when it started (checked by the controller).
//
// The last point lets a run that never registered (it died first: the controller quorum was
// down, or the process was restarted in a loop) pass on what it held: it opened no log, so it
// wrote nothing the next run could miss, and its mark lists the runs whose writes it kept.
const bootMarkName = "boot.mark"

type bootMark struct {
	Boot string `json:"boot"`           // vfs.Booter's boot and mount id
	Run  string `json:"run"`            // the run that wrote it
	File string `json:"file,omitempty"` // its own device, inode and birth time (vfs.FileID)
	// Also: the runs whose writes Run held when it started, the newest first (the previous
	// mark's run and its Also), at most maxKeptAlso.
	Also []string `json:"also,omitempty"`
}

// maxKeptAlso bounds a mark's Also: a chain of runs that never registered longer than this
// counts as a loss.
const maxKeptAlso = 16

// bootMarks keeps a node's boot mark and answers whether its process holds every write of the
// run its last registration names.
type bootMarks struct {
	fs      vfs.FS
	dir     string
	run     string
	logger  *slog.Logger
	mu      sync.Mutex
	kept    string   // the run whose writes this process holds; "" none
	also    []string // runs whose writes kept's run held at its start (bootMark.Also)
	lost    bool     // a log of this process failed
	written bool     // this process's mark is on disk
	// claimed: the latest registration of this process in the image said it kept writes.
	claimed bool
	// unsaid: a log's recovery failed while the image holds such a claim (a retry may open that
	// log, which may have lost writes; a poisoned log is never opened again by this process);
	// the node registers again, saying nothing is kept, before it opens more logs.
	unsaid bool
}

// openBootMark checks the mark the previous process left in dir and leaves this run's.
func openBootMark(fsys vfs.FS, dir, run string, logger *slog.Logger) *bootMarks {
	m := &bootMarks{fs: fsys, dir: dir, run: run, logger: logger}
	booter, ok := fsys.(vfs.Booter)
	if !ok {
		m.remove()
		return m
	}
	boot, err := booter.BootID(dir)
	if err != nil {
		logger.Warn("cluster: a restart of this node counts as one that may have lost writes", "err", err)
		m.remove()
		return m
	}
	if prev, why := m.check(boot); why != "" {
		logger.Info("cluster: this process does not hold every write of the previous run", "run", prev.Run, "why", why)
	} else {
		m.kept, m.also = prev.Run, prev.Also
	}
	mark := bootMark{Boot: boot, Run: run}
	if m.kept != "" {
		mark.Also = append([]string{m.kept}, m.also...)[:min(1+len(m.also), maxKeptAlso)]
	}
	if err := m.write(mark); err != nil {
		// The file system may be failing (read-only after an error): claim nothing.
		logger.Warn("cluster: writing the boot mark: this start and the next count as ones that may have lost writes", "err", err)
		m.kept, m.also = "", nil
		m.remove()
		return m
	}
	m.written = true
	return m
}

// check reads the previous run's mark and says why its writes may not all be here ("" if they
// are).
func (m *bootMarks) check(boot string) (bootMark, string) {
	name := m.dir + "/" + bootMarkName
	b, err := vfs.ReadFile(m.fs, name)
	if errors.Is(err, fs.ErrNotExist) {
		return bootMark{}, "no boot mark (a new data dir, or a log of the previous run failed)"
	}
	if err != nil {
		return bootMark{}, fmt.Sprintf("reading the boot mark: %v", err)
	}
	var prev bootMark
	if err := json.Unmarshal(b, &prev); err != nil || prev.Run == "" {
		return bootMark{}, fmt.Sprintf("a malformed boot mark (%v)", err)
	}
	if prev.Boot != boot {
		return prev, "the machine booted or the data dir's file system was mounted again since"
	}
	if id := fileID(m.fs, name); id == "" || id != prev.File {
		return prev, "the boot mark is a copy: the data dir was restored or copied"
	}
	if why := m.oneFileSystem(); why != "" {
		return prev, why
	}
	if err := m.syncFS(); err != nil {
		return prev, fmt.Sprintf("a write may have failed: syncfs of the data dir: %v", err)
	}
	return prev, ""
}

// oneFileSystem says which directory of the data dir's logs is on another file system than the
// data dir ("" if none): its syncfs would not cover it.
func (m *bootMarks) oneFileSystem() string {
	root, err := m.fs.Stat(m.dir)
	if err != nil {
		return err.Error()
	}
	dev, ok := vfs.Device(root)
	if !ok {
		return ""
	}
	var walk func(dir string, depth int) string
	walk = func(dir string, depth int) string {
		names, err := m.fs.List(dir)
		if err != nil {
			return err.Error()
		}
		for _, name := range names {
			fi, err := m.fs.Stat(dir + "/" + name)
			if err != nil {
				return err.Error()
			}
			if !fi.IsDir() {
				continue
			}
			if d, _ := vfs.Device(fi); d != dev {
				return dir + "/" + name + " is on another file system than the data dir"
			}
			if depth > 0 {
				if why := walk(dir+"/"+name, depth-1); why != "" {
					return why
				}
			}
		}
		return ""
	}
	return walk(m.dir, 2) // the data dir's directories, topics/<topic>/<partition>
}

// write leaves mark, naming its own file, atomically and durably.
func (m *bootMarks) write(mark bootMark) error {
	tmp := m.dir + "/" + bootMarkName + ".tmp"
	f, err := m.fs.Create(tmp)
	if err != nil {
		return err
	}
	mark.File = fileID(m.fs, tmp) // a rename keeps the inode and its birth time
	b, _ := json.Marshal(mark)
	if _, err = f.WriteAt(b, 0); err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := m.fs.Rename(tmp, m.dir+"/"+bootMarkName); err != nil {
		return err
	}
	return m.fs.SyncDir(m.dir)
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

// claim is what a registration says: the run whose writes this process holds
// (Register.KeptFrom; after a registration succeeds, this process's own run), and the runs
// whose writes that run held when it started (Register.KeptAlso; nil after this process's first
// registration). Both are read at once, so a log failure cannot fall between them.
func (m *bootMarks) claim() (from string, also []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost || m.kept == "" {
		return "", nil
	}
	return m.kept, slices.Clone(m.also)
}

func (m *bootMarks) keptFrom() string { from, _ := m.claim(); return from }

func (m *bootMarks) keptAlso() []string { _, also := m.claim(); return also }

// registered records that the image now holds a registration of this process's run that said
// keptFrom.
func (m *bootMarks) registered(keptFrom string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claimed = keptFrom != ""
	switch {
	case !m.claimed:
		m.unsaid = false
	case m.lost: // said before the failure, applied after it
		m.unsaid = true
	}
	if !m.lost {
		m.kept, m.also = m.run, nil
	}
}

// lossUnsaid reports whether a log's recovery failed while the image holds a registration of
// this process that said it kept its writes, and no registration has said otherwise since:
// until one does, the image may let a transaction be vouched for by a replica that lost part of
// it, so the node registers again and opens no log meanwhile (a recovery that failed may
// succeed when retried, the kernel reporting a writeback error once).
func (m *bootMarks) lossUnsaid() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unsaid
}

// logFailed withdraws the mark: a log of this process failed a write or a sync (err wraps
// logstore.ErrPoisoned) or its recovery, so its unsynced writes may be lost, and neither this
// process nor the next one may say it holds them. It runs before the failure is reported to
// anyone waiting on the log (a syncfs that failed has used up the error: the next process's
// would not see it), with the log's lock held.
func (m *bootMarks) logFailed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !errors.Is(err, logstore.ErrPoisoned) && m.claimed {
		m.unsaid = true
	}
	if m.lost {
		return
	}
	m.lost = true
	m.logger.Warn("cluster: a log failed: this node's registrations count as ones that may have lost writes", "err", err)
	m.remove()
}

// remove unlinks the mark. The unlink needs no directory sync: a process on this boot and mount
// sees it, and a crash makes a new boot, whose mark is refused anyway.
func (m *bootMarks) remove() {
	if m.fs == nil {
		return // an agent's: none
	}
	if err := m.fs.Remove(m.dir + "/" + bootMarkName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.logger.Error("cluster: removing the boot mark: if this process dies now, the next one on this boot "+
			"may count writes as kept that a failed write lost; remove "+bootMarkName+" from the data dir by hand", "err", err)
	}
}

// fileID is fsys's name for the named file ("" if it has none).
func fileID(fsys vfs.FS, name string) string {
	if ider, ok := fsys.(vfs.FileIdentifier); ok {
		return ider.FileID(name)
	}
	return ""
}
