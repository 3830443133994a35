package main

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeStopsOnSIGTERM builds the binary, runs `runnel serve`, waits until it reports that the
// data dir is open, and checks that SIGTERM makes it exit 0.
func TestServeStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "runnel")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	dataDir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--kafka-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--speclog-addr", "127.0.0.1:0")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()

	ready, scanned := make(chan struct{}), make(chan struct{})
	defer func() { <-scanned }() // no t.Log after the test returns
	defer cmd.Process.Kill()
	go func() {
		defer close(scanned)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			t.Log(s.Text())
			if strings.Contains(s.Text(), "serving Kafka on") {
				close(ready)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("runnel serve exited before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("runnel serve did not print the not-implemented notice within 30s")
	}

	// A second server must not share the data dir.
	out, err := exec.Command(bin, "serve", "--data-dir", dataDir, "--kafka-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--speclog-addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "data dir is locked") {
		t.Errorf("second runnel serve on the same data dir = %v, output %q; want a locked error", err, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("runnel serve after SIGTERM: %v; want exit code 0", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("runnel serve did not exit within 5s of SIGTERM")
	}
}
