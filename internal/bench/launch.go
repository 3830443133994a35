package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a broker that `runnel bench compare` started; Stop ends exactly that process.
type Process struct {
	stop func() error
}

// Stop ends the process and waits for it to exit.
func (p *Process) Stop() error { return p.stop() }

// startupTimeout bounds how long a started broker may take to accept connections.
const startupTimeout = 60 * time.Second

// StartRunnel runs `bin serve` on addr (loopback) with its data in dataDir, sending its output
// to logOut, and waits until addr accepts connections.
func StartRunnel(ctx context.Context, bin, dataDir, addr string, logOut io.Writer) (*Process, error) {
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--kafka-addr", addr,
		"--admin-addr", "127.0.0.1:0", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logOut, logOut
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting runnel serve: %w", err)
	}
	exited := make(chan struct{})                 // closed once the process has exited
	go func() { _ = cmd.Wait(); close(exited) }() // the only Wait
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return nil
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("bench: runnel serve (pid %d) ignored SIGTERM for 20 s; killed it", cmd.Process.Pid)
		}
	}
	if err := waitForPort(ctx, addr, exited); err != nil {
		_ = stop()
		return nil, fmt.Errorf("bench: runnel serve on %s: %w", addr, err)
	}
	return &Process{stop: stop}, nil
}

// StartKafka runs `script start` (scripts/kafka.sh) for a Kafka on addr's port, with extra
// broker properties (k=v), and `script stop` to stop it. The script owns the process.
func StartKafka(ctx context.Context, script, addr string, props []string, logOut io.Writer) (*Process, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("bench: kafka address %q: %w", addr, err)
	}
	run := func(ctx context.Context, args ...string) error {
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Env = append(os.Environ(), "RUNNEL_KAFKA_PORT="+port)
		cmd.Stdout, cmd.Stderr = logOut, logOut
		return cmd.Run()
	}
	if err := run(ctx, "install"); err != nil {
		return nil, fmt.Errorf("bench: %s install: %w", script, err)
	}
	if err := run(ctx, append([]string{"start"}, props...)...); err != nil {
		return nil, fmt.Errorf("bench: %s start: %w", script, err)
	}
	stop := func() error { return run(context.Background(), "stop") }
	return &Process{stop: stop}, nil
}

// waitForPort waits until addr accepts a TCP connection, the process exits, or time runs out.
func waitForPort(ctx context.Context, addr string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("not accepting connections: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
