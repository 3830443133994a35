// Package chaos runs fault scenarios against a real cluster of `runnel serve` processes on
// loopback under acks=all idempotent load from a real client (franz-go), then checks with
// readers what a Jepsen-style checker checks: every acknowledged record is present exactly
// once, at the offset it was acknowledged with; every reader sees the same record at each
// offset; records of a partition are in the order they were produced; the high watermark a
// client sees never goes back. `runnel chaos` runs it; docs/cluster-faults.md has the results.
package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one `runnel serve` process of the cluster.
type proc struct {
	id                    int32
	dir                   string
	kafka, cluster, admin string
	speclog               string // "": loopback, any port
	cmd                   *exec.Cmd
	done                  chan struct{}
	paused                bool
	agent                 []string // a `runnel agent`, with these flags; nil: a serve node
}

// Cluster is a cluster of runnel processes started by the chaos run. It only ever signals the
// processes it started.
type Cluster struct {
	bin    string
	dir    string
	args   []string
	voters string
	nodes  map[int32]*proc
	net    *Net // nil: every node on loopback
}

// freePort returns a loopback port that is free now, below the kernel's ephemeral range
// (32768 and up on Linux): a port the kernel handed out and took back can go to any process's
// next outgoing connection before the node binds it (CI saw a node exit on that), while ports
// below the range are never given to outgoing connections. It never returns a port twice in one
// test process: a port picked for one node is free until that node binds it, so without the
// memory a second node could be given the same port (CI saw that too).
func freePort() (string, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		port := 20000 + mrand.IntN(12000)
		if portsGiven[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		ln.Close()
		portsGiven[port] = true
		return addr, nil
	}
	return "", errors.New("chaos: no free port in 20000-32000")
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{} // ports freePort returned, never returned again
)

// StartCluster starts n voters in dir (data and logs), each with extra serve flags args.
func StartCluster(ctx context.Context, bin, dir string, n int, args ...string) (*Cluster, error) {
	return StartClusterOn(ctx, nil, bin, dir, n, args...)
}

// StartClusterOn is StartCluster with every node in its own namespace of net (nil: loopback).
// The Cluster does not close net.
func StartClusterOn(ctx context.Context, net *Net, bin, dir string, n int, args ...string) (*Cluster, error) {
	if err := os.RemoveAll(dir); err != nil { // a fresh cluster
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, args: args, nodes: map[int32]*proc{}, net: net}
	var voters []string
	for i := int32(1); i <= int32(n); i++ {
		p := &proc{id: i, dir: filepath.Join(dir, fmt.Sprintf("node-%d", i))}
		if err := c.addresses(p); err != nil {
			return nil, err
		}
		c.nodes[i] = p
		voters = append(voters, fmt.Sprintf("%d@%s", i, p.cluster))
	}
	c.voters = strings.Join(voters, ",")
	c.args = append(c.args, "--controller-voters", c.voters)
	for i := int32(1); i <= int32(n); i++ {
		if err := c.Start(i); err != nil {
			c.StopAll()
			return nil, err
		}
	}
	for i := int32(1); i <= int32(n); i++ {
		if err := c.WaitReady(ctx, i, 60*time.Second); err != nil {
			c.StopAll()
			return nil, err
		}
	}
	return c, nil
}

// Brokers is the bootstrap list: the serve nodes.
func (c *Cluster) Brokers() []string {
	var out []string
	for _, i := range c.Nodes() {
		out = append(out, c.nodes[i].kafka)
	}
	return out
}

// ActiveController is the node the serve nodes name as the active controller in their admin
// status. (Not Metadata's controller id: while no controller is known, a node names itself
// there, as Kafka's brokers name a live broker, so that admin clients have a node to send
// controller requests to.)
func (c *Cluster) ActiveController(ctx context.Context) (int32, error) {
	for range 50 {
		for _, n := range c.Nodes() {
			if id := c.controllerSeenBy(ctx, n, 2*time.Second); id >= 0 {
				return id, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, errors.New("chaos: no node names an active controller")
}

// controllerMoved polls the status of the serve nodes other than old until one names an active
// controller other than old, and returns how long after t that was (0: not within limit).
func (c *Cluster) controllerMoved(ctx context.Context, old int32, t time.Time, limit time.Duration) time.Duration {
	for time.Since(t) < limit {
		for _, n := range c.Nodes() {
			if n == old {
				continue
			}
			if id := c.controllerSeenBy(ctx, n, 500*time.Millisecond); id >= 0 && id != old {
				return time.Since(t)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// controllerSeenBy is the active controller node n's admin status names: -1 if it knows none,
// or does not answer within timeout.
func (c *Cluster) controllerSeenBy(ctx context.Context, n int32, timeout time.Duration) int32 {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.nodes[n].admin+"/v1/status?topic=-", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st struct {
		Cluster *struct {
			ControllerID int32 `json:"controller_id"`
		} `json:"cluster"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil || st.Cluster == nil {
		return -1
	}
	return st.Cluster.ControllerID
}

// Nodes are the serve nodes' ids, ascending.
func (c *Cluster) Nodes() []int32 {
	var out []int32
	for i, p := range c.nodes {
		if p.agent == nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// AgentBrokers are the agents' Kafka addresses.
func (c *Cluster) AgentBrokers() []string {
	var out []string
	for _, i := range c.Agents() {
		out = append(out, c.nodes[i].kafka)
	}
	return out
}

// Agents are the agents' ids, ascending.
func (c *Cluster) Agents() []int32 {
	var out []int32
	for i, p := range c.nodes {
		if p.agent != nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// AddAgent starts a `runnel agent` (known here as i; it picks its own broker id) with the extra agent flags args (its object
// store at least), and waits until it is ready.
func (c *Cluster) AddAgent(ctx context.Context, i int32, args ...string) error {
	if _, ok := c.nodes[i]; ok {
		return fmt.Errorf("chaos: node %d exists", i)
	}
	return c.add(ctx, &proc{id: i, agent: append([]string{"--controller-voters", c.voters}, args...)})
}

// add picks p's addresses, starts it and waits until it is ready.
func (c *Cluster) add(ctx context.Context, p *proc) error {
	if err := c.addresses(p); err != nil {
		return err
	}
	c.nodes[p.id] = p
	if err := c.Start(p.id); err != nil {
		return err
	}
	return c.WaitReady(ctx, p.id, 60*time.Second)
}

// AddNode starts serve node i with the cluster's flags: it joins as a broker and follows the
// controller's log as a Raft learner (the controller voters are --controller-voters). It waits
// until the node is ready.
func (c *Cluster) AddNode(ctx context.Context, i int32) error {
	if _, ok := c.nodes[i]; ok {
		return fmt.Errorf("chaos: node %d exists", i)
	}
	return c.add(ctx, &proc{id: i, dir: filepath.Join(c.dir, fmt.Sprintf("node-%d", i))})
}

// WipeData deletes stopped node i's data dir: its disk is lost.
func (c *Cluster) WipeData(i int32) error {
	p := c.nodes[i]
	if p.cmd != nil {
		return fmt.Errorf("chaos: node %d runs", i)
	}
	return os.RemoveAll(p.dir)
}

// addresses picks p's listeners: free loopback ports, or the node's own address in the Net
// (whose namespace it makes).
func (c *Cluster) addresses(p *proc) error {
	if c.net != nil {
		if err := c.net.Add(p.id); err != nil {
			return err
		}
		ip := c.net.Addr(p.id)
		p.kafka, p.cluster, p.admin, p.speclog = ip+":9092", ip+":9093", ip+":9644", ip+":9096"
		return nil
	}
	var err error
	for _, a := range []*string{&p.kafka, &p.cluster, &p.admin} {
		if *a, err = freePort(); err != nil {
			return err
		}
	}
	return nil
}

// Start starts node i (again).
func (c *Cluster) Start(i int32) error {
	p := c.nodes[i]
	if p.cmd != nil {
		return fmt.Errorf("chaos: node %d already runs", i)
	}
	if p.agent == nil {
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			return err
		}
	}
	log, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	speclogAddr := p.speclog
	if speclogAddr == "" {
		speclogAddr = "127.0.0.1:0"
	}
	args := append([]string{"serve", "--node-id", strconv.Itoa(int(i)), "--data-dir", p.dir, "--kafka-addr", p.kafka,
		"--cluster-addr", p.cluster, "--admin-addr", p.admin, "--speclog-addr", speclogAddr, "--enable-fault-injection"}, c.args...)
	if p.agent != nil { // stateless: no data dir
		args = append([]string{"agent", "--kafka-addr", p.kafka,
			"--cluster-addr", p.cluster, "--admin-addr", p.admin, "--enable-fault-injection"}, p.agent...)
	}
	cmd := exec.Command(c.bin, args...)
	if c.net != nil {
		cmd = c.net.Command(i, c.bin, args...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// The node dies with us: a test that panics (go test's -timeout) runs no deferred StopAll,
	// and its nodes would otherwise live on, holding ports and disk. (Linux sends the signal
	// when the OS thread that started the node exits; Go's threads live as long as the process
	// unless a goroutine locked to one ends, which nothing here does.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	p.cmd, p.done, p.paused = cmd, make(chan struct{}), false
	go func() { cmd.Wait(); log.Close(); close(p.done) }()
	return nil
}

// WaitReady waits until node i answers /readyz.
func (c *Cluster) WaitReady(ctx context.Context, i int32, d time.Duration) error {
	p := c.nodes[i]
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p.cmd == nil {
			return fmt.Errorf("chaos: node %d is not running", i)
		}
		select {
		case <-p.done:
			// The log goes with the test's temporary directory: its end is in the message.
			return fmt.Errorf("chaos: node %d exited; see %s/node-%d.log, which ends:\n%s", i, c.dir, i, c.logTail(i, 30))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := http.Get("http://" + p.admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("chaos: node %d not ready after %v; see %s/node-%d.log, which ends:\n%s", i, d, c.dir, i, c.logTail(i, 30))
}

// logTail is the last n lines of node i's log.
func (c *Cluster) logTail(i int32, n int) string {
	b, err := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("node-%d.log", i)))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Kill sends SIGKILL to node i and waits for it to die.
func (c *Cluster) Kill(i int32) {
	p := c.nodes[i]
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// WaitExit waits up to d for node i's process to end by itself (a crash) and reports whether it
// did; then the node can be started again.
func (c *Cluster) WaitExit(i int32, d time.Duration) bool {
	p := c.nodes[i]
	if p.cmd == nil {
		return true
	}
	select {
	case <-p.done:
		p.cmd = nil
		return true
	case <-time.After(d):
		return false
	}
}

// Stop sends SIGTERM (after SIGCONT) and waits.
func (c *Cluster) Stop(i int32) {
	p := c.nodes[i]
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	p.cmd = nil
}

// Pause sends SIGSTOP; Resume SIGCONT.
func (c *Cluster) Pause(i int32) {
	if p := c.nodes[i]; p.cmd != nil {
		p.cmd.Process.Signal(syscall.SIGSTOP)
		p.paused = true
	}
}

// Resume sends SIGCONT.
func (c *Cluster) Resume(i int32) {
	if p := c.nodes[i]; p.cmd != nil {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

// StopNodes stops every serve node (the whole controller quorum): SIGKILL, or SIGSTOP.
func (c *Cluster) StopNodes(kill bool) {
	for _, n := range c.Nodes() {
		if kill {
			c.Kill(n)
		} else {
			c.Pause(n)
		}
	}
}

// RestartNodes undoes StopNodes: starts the killed nodes again from their data dirs, or
// resumes the paused ones.
func (c *Cluster) RestartNodes(kill bool) error {
	for _, n := range c.Nodes() {
		if !kill {
			c.Resume(n)
		} else if err := c.Start(n); err != nil {
			return err
		}
	}
	return nil
}

// StopAll stops every agent, then every node.
func (c *Cluster) StopAll() {
	for _, i := range append(c.Agents(), c.Nodes()...) {
		c.Stop(i)
	}
}

// DumpGoroutines saves every running node's goroutine stacks next to its log (for a scenario
// that failed).
func (c *Cluster) DumpGoroutines() {
	for _, i := range c.Nodes() {
		p := c.nodes[i]
		if p.cmd == nil || p.paused {
			continue
		}
		resp, err := http.Get("http://" + p.admin + "/debug/pprof/goroutine?debug=2")
		if err != nil {
			continue
		}
		f, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("node-%d.goroutines", i)))
		if err == nil {
			f.ReadFrom(resp.Body)
			f.Close()
		}
		resp.Body.Close()
	}
}

// sumMetric sums a counter's value over the running processes' /metrics, nodes and agents (0 where absent).
func (c *Cluster) sumMetric(name string) int {
	total := 0.0
	for _, i := range append(c.Nodes(), c.Agents()...) {
		p := c.nodes[i]
		if p.cmd == nil || p.paused {
			continue
		}
		resp, err := http.Get("http://" + p.admin + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				v, _ := strconv.ParseFloat(f[1], 64)
				total += v
			}
		}
	}
	return int(total)
}

// Fault posts a fault-injection request to node i's admin endpoint.
func (c *Cluster) Fault(i int32, req map[string]any) error {
	b, _ := json.Marshal(req)
	resp, err := http.Post("http://"+c.nodes[i].admin+"/v1/debug/faults", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("chaos: fault request to node %d: HTTP %d", i, resp.StatusCode)
	}
	return nil
}
