package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runnel-dev/runnel/internal/logstore"
	"github.com/runnel-dev/runnel/internal/vfs"
)

// TestBootMark: a process holds the previous run's writes when it starts on the same boot after
// a run whose logs did not fail, and the syncfs at start reports no writeback error; a crash (a
// new boot), a log failure, a failed syncfs or a missing mark each take that away.
func TestBootMark(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	open := func(fsys vfs.FS, run string) *bootMarks {
		m := openBootMark(fsys, "/data", run, quiet)
		if !m.written {
			t.Fatalf("run %s left no mark", run)
		}
		return m
	}
	if got := open(mem, "r1").keptFrom(); got != "" {
		t.Fatalf("first run on an empty data dir: kept from %q; want none", got)
	}
	m2 := open(mem, "r2")
	if got := m2.keptFrom(); got != "r1" {
		t.Fatalf("restart on the same boot: kept from %q; want r1", got)
	}
	m2.registered("r1")
	if got := m2.keptFrom(); got != "r2" {
		t.Fatalf("after its registration: kept from %q; want its own run r2", got)
	}

	// The power goes out: what is left is on a new boot, and the mark says another.
	crashed := mem.Crash(vfs.CrashOptions{})
	if got := open(crashed, "r3").keptFrom(); got != "" {
		t.Fatalf("restart after a crash (a new boot): kept from %q; want none", got)
	}
	if got := open(crashed, "r4").keptFrom(); got != "r3" {
		t.Fatalf("restart on the crashed machine's new boot: kept from %q; want r3", got)
	}

	// A log of r5 fails: neither r5 (registering again) nor the next run holds its writes.
	m5 := open(crashed, "r5")
	m5.registered("r4")
	if m5.lossUnsaid() {
		t.Fatal("a loss unsaid before any log failed")
	}
	m5.logFailed(fmt.Errorf("%w: fsync: input/output error", logstore.ErrPoisoned))
	if got := m5.keptFrom(); got != "" {
		t.Fatalf("after a log failure: kept from %q; want none", got)
	}
	if m5.lossUnsaid() {
		t.Fatal("a poisoned log (never opened again by this process) asks for a registration")
	}
	m5.logFailed(errors.New("logstore: recovering /data/topics/t/0: fsync: input/output error"))
	if !m5.lossUnsaid() {
		t.Fatal("a recovery failed after a registration that said r4's writes were kept: the loss is not unsaid")
	}
	m5.registered("")
	if m5.lossUnsaid() {
		t.Fatal("a registration said nothing is kept, and the loss is still unsaid")
	}
	m5.logFailed(errors.New("logstore: recovering /data/topics/t/1: fsync: input/output error"))
	if m5.lossUnsaid() {
		t.Fatal("a recovery failed after the image was told: another registration asked for")
	}
	if got := open(crashed, "r6").keptFrom(); got != "" {
		t.Fatalf("restart after a log failure: kept from %q; want none", got)
	}

	// A writeback error the previous run never saw: the syncfs at start reports it.
	failing := vfs.NewErrorFS(crashed, vfs.InjectorFunc(func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncFS {
			return vfs.ErrInjected
		}
		return nil
	}))
	if got := open(failing, "r7").keptFrom(); got != "" {
		t.Fatalf("restart whose syncfs fails: kept from %q; want none", got)
	}
	if got := open(crashed, "r8").keptFrom(); got != "r7" {
		t.Fatalf("restart after r7: kept from %q; want r7", got)
	}

	// A file system that names no boot: nothing is ever kept, and the mark is removed.
	noBoot := struct{ vfs.FS }{crashed}
	if m := openBootMark(noBoot, "/data", "r9", quiet); m.keptFrom() != "" || m.written {
		t.Fatalf("no boot id: kept from %q, mark written %v; want none, false", m.keptFrom(), m.written)
	}
	if got := open(crashed, "r10").keptFrom(); got != "" {
		t.Fatalf("restart after a run that could leave no mark: kept from %q; want none", got)
	}
}

// TestBootMarkOnDisk: on the operating system's file system, a restart on the same boot keeps
// the previous run's writes, but not from a data dir that is a copy (restored from a backup), nor
// from one whose logs are partly on another file system (syncfs would not cover them).
func TestBootMarkOnDisk(t *testing.T) {
	if _, err := vfs.Default.(vfs.Booter).BootID(t.TempDir()); err != nil {
		t.Skip(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "topics", "t-0", "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	openBootMark(vfs.Default, dir, "r1", quiet)
	if got := openBootMark(vfs.Default, dir, "r2", quiet).keptFrom(); got != "r1" {
		t.Fatalf("restart on the same boot: kept from %q; want r1", got)
	}
	// The data dir is replaced by a copy of itself (the mark's content is the same).
	b, err := os.ReadFile(filepath.Join(dir, bootMarkName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, bootMarkName)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, bootMarkName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := openBootMark(vfs.Default, dir, "r3", quiet).keptFrom(); got != "" {
		t.Fatalf("restart on a copied data dir: kept from %q; want none", got)
	}
	if got := openBootMark(vfs.Default, dir, "r4", quiet).keptFrom(); got != "r3" {
		t.Fatalf("restart after r3: kept from %q; want r3", got)
	}
	// A copy made with hard links (cp -al) shares the mark's inode: it is not told apart, so a
	// mark with another link is not trusted.
	if err := os.Link(filepath.Join(dir, bootMarkName), filepath.Join(t.TempDir(), "linked")); err != nil {
		t.Fatal(err)
	}
	if got := openBootMark(vfs.Default, dir, "r4b", quiet).keptFrom(); got != "" {
		t.Fatalf("restart with a hard-linked boot mark: kept from %q; want none", got)
	}
	if got := openBootMark(vfs.Default, dir, "r4c", quiet).keptFrom(); got != "r4b" {
		t.Fatalf("restart after r4b: kept from %q; want r4b", got)
	}
	// A partition directory on another file system (/dev/shm, a tmpfs).
	other, err := os.MkdirTemp("/dev/shm", "runnel-bootmark")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(other)
	if a, b := statDev(t, dir), statDev(t, other); a == b {
		t.Skipf("%s and %s are on one file system", dir, other)
	}
	if err := os.Symlink(other, filepath.Join(dir, "topics", "t-0", "1")); err != nil {
		t.Fatal(err)
	}
	if got := openBootMark(vfs.Default, dir, "r5", quiet).keptFrom(); got != "" {
		t.Fatalf("restart with a partition on another file system: kept from %q; want none", got)
	}
}

func statDev(t *testing.T, path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := vfs.Device(fi)
	return dev
}

// TestBootMarkChain: runs that die before they register pass on the writes they kept (their
// marks list those runs), up to maxKeptAlso of them; a registration ends the list, and a run
// that did not keep its predecessor's writes starts none.
func TestBootMarkChain(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	open := func(fsys vfs.FS, run string) *bootMarks { return openBootMark(fsys, "/data", run, quiet) }
	open(mem, "r1").registered("")
	open(mem, "r2") // dies before it registers
	m3 := open(mem, "r3")
	if from, also := m3.keptFrom(), m3.keptAlso(); from != "r2" || !slices.Equal(also, []string{"r1"}) {
		t.Fatalf("after a run that never registered: kept from %q, also %q; want r2, [r1]", from, also)
	}
	m3.registered("r2")
	if also := m3.keptAlso(); also != nil {
		t.Fatalf("after its registration: also %q; want none", also)
	}
	m4 := open(mem, "r4")
	if from, also := m4.keptFrom(), m4.keptAlso(); from != "r3" || !slices.Equal(also, []string{"r2", "r1"}) {
		t.Fatalf("after r3 registered: kept from %q, also %q; want r3, [r2 r1] (r3's mark, written at its start)", from, also)
	}
	for i := range maxKeptAlso + 3 { // a restart loop that never registers
		open(mem, fmt.Sprintf("loop%d", i))
	}
	m := open(mem, "last")
	if also := m.keptAlso(); len(also) != maxKeptAlso || also[0] != fmt.Sprintf("loop%d", maxKeptAlso+1) {
		t.Fatalf("after a long loop: also %q; want the newest %d runs", also, maxKeptAlso)
	}
	// A failed log: nothing is kept, so nothing is passed on either.
	m.logFailed(fmt.Errorf("%w: fsync", logstore.ErrPoisoned))
	if from, also := m.keptFrom(), m.keptAlso(); from != "" || also != nil {
		t.Fatalf("after a failed log: kept from %q, also %q; want none", from, also)
	}
	if also := open(mem, "next").keptAlso(); also != nil {
		t.Fatalf("after a run whose log failed: also %q; want none", also)
	}
	// A new boot: the list starts again.
	crashed := mem.Crash(vfs.CrashOptions{})
	if m := open(crashed, "booted"); m.keptFrom() != "" || m.keptAlso() != nil {
		t.Fatalf("after a crash: kept from %q, also %q; want none", m.keptFrom(), m.keptAlso())
	}
}
