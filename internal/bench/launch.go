package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
		"--admin-addr", "127.0.0.1:0", "--speclog-addr", "127.0.0.1:0", "--log-level", "warn")
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
// broker properties (k=v), on a fresh data dir as Runnel gets, and `script clean` to stop it
// and delete its data. The script owns the process. A data dir kept from an earlier run holds
// the topics that run deleted, whose files a Kafka removes a minute after it starts
// (file.delete.delay.ms): in the middle of the comparison, where the freed blocks' discards
// stalled the other broker's fsyncs.
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
	if run(ctx, "status") == nil {
		return nil, fmt.Errorf("bench: a Kafka started by %s already runs on port %s (stop it, or compare against it without --start-kafka)", script, port)
	}
	if err := run(ctx, "clean"); err != nil {
		return nil, fmt.Errorf("bench: %s clean: %w", script, err)
	}
	stop := func() error { return run(context.Background(), "clean") }
	if err := run(ctx, append([]string{"start"}, props...)...); err != nil {
		return nil, errors.Join(fmt.Errorf("bench: %s start: %w", script, err), stop())
	}
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

// clusterBase is the port base of scripts/cluster.sh and scripts/kafka.sh clusters whose node 1
// listens for Kafka on addr: node I listens on base + 100*I + 2.
func clusterBase(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("bench: address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1024+102 || port+100*8 > 65535 {
		return 0, fmt.Errorf("bench: %q: a cluster's first node needs a port from 1126 to 64735", addr)
	}
	return port - 102, nil
}

// clusterAddrs are the Kafka addresses of nodes 1..n of a cluster with port base base.
func clusterAddrs(base, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("127.0.0.1:%d", base+100*(i+1)+2)
	}
	return out
}

// runScript runs script with args and extra environment, its output going to logOut.
func runScript(ctx context.Context, logOut io.Writer, env []string, script string, args ...string) error {
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logOut, logOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: %s %s: %w", script, strings.Join(args, " "), err)
	}
	return nil
}

// StartRunnelCluster starts an n-node Runnel cluster with script (scripts/cluster.sh) in dir,
// node 1 listening for Kafka on first and node I 100*(I-1) ports above it. It returns the
// bootstrap list once every node is ready and every broker is in the cluster's metadata; Stop
// stops the nodes (and, with removeDir, deletes dir).
func StartRunnelCluster(ctx context.Context, script, bin, dir, first string, n int, removeDir bool, logOut io.Writer) (*Process, []string, error) {
	base, err := clusterBase(first)
	if err != nil {
		return nil, nil, err
	}
	env := []string{"RUNNEL_CLUSTER_DIR=" + dir, "RUNNEL_CLUSTER_BASE=" + strconv.Itoa(base), "RUNNEL_BIN=" + bin,
		"RUNNEL_SERVE_ARGS=--log-level warn"}
	stop := func() error {
		cmd := "stop"
		if removeDir {
			cmd = "clean"
		}
		return runScript(context.Background(), logOut, env, script, cmd)
	}
	addrs := clusterAddrs(base, n)
	if err := runScript(ctx, logOut, env, script, "start", strconv.Itoa(n)); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	if err := waitBrokers(ctx, addrs, n); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("bench: runnel cluster: %w", err), stop())
	}
	return &Process{stop: stop}, addrs, nil
}

// StartKafkaCluster starts an n-node Apache Kafka KRaft cluster with script (scripts/kafka.sh
// cluster-start, on fresh data), node 1 listening on first, with extra broker properties (k=v).
// Stop stops it and deletes its data.
func StartKafkaCluster(ctx context.Context, script, first string, n int, props []string, logOut io.Writer) (*Process, []string, error) {
	base, err := clusterBase(first)
	if err != nil {
		return nil, nil, err
	}
	env := []string{"RUNNEL_KAFKA_CLUSTER_BASE=" + strconv.Itoa(base)}
	stop := func() error { return runScript(context.Background(), logOut, env, script, "cluster-clean") }
	if err := runScript(ctx, logOut, env, script, "install"); err != nil {
		return nil, nil, err
	}
	if err := runScript(ctx, logOut, env, script, "cluster-clean"); err != nil {
		return nil, nil, err
	}
	addrs := clusterAddrs(base, n)
	if err := runScript(ctx, logOut, env, script, append([]string{"cluster-start", strconv.Itoa(n)}, props...)...); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	if err := waitBrokers(ctx, addrs, n); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("bench: kafka cluster: %w", err), stop())
	}
	return &Process{stop: stop}, addrs, nil
}

// waitBrokers waits until the cluster at addrs lists n brokers in its metadata (a replicated
// topic cannot be created before its nodes have registered).
func waitBrokers(ctx context.Context, addrs []string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	var last error
	for {
		md, err := adm.BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) >= n {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%d of %d brokers registered", len(md.Brokers), n)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
