package chaos

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Net is a private network of Linux network namespaces for a cluster's nodes: a hub namespace
// holds a bridge; every node gets a namespace of its own, joined to the bridge by a veth pair,
// with the address 10.213.K.<node id>; and a veth pair from the namespace the test runs in (its
// end 10.213.K.254) lets clients reach every node. Faults are made with iproute2 alone:
// blackhole routes in a node's namespace drop what it sends to chosen peers (a network
// partition, silent as a real one: no refusal, no reset), and taking the node's port on the
// bridge down cuts it off from everyone, clients included. Loss short of a cut is made with
// nftables in the hub namespace (Lossy: the bridge drops a random share of the frames a node's
// port carries; needs nft). Only namespaces and links the Net created are touched; Close
// deletes them (the kernel removes the veths and the hub's nftables table with them).
type Net struct {
	tag    string // names' prefix: unique per process and Net
	hub    string // the hub namespace
	host   string // our end of the clients' veth pair
	subnet string // "10.213.K"

	mu      sync.Mutex
	nodes   map[int32]string // node → its namespace
	blocked map[[2]int32]bool
	lossy   map[int32]int // node → per mille of its port's frames dropped, each way
}

// ErrNoNetns: this machine (or user) cannot make network namespaces.
var ErrNoNetns = errors.New("chaos: network namespaces need root and iproute2")

// ErrNoNft: Lossy needs nftables' command line (Debian: apt-get install nftables).
var ErrNoNft = errors.New("chaos: packet loss needs nft (apt-get install nftables)")

var netSeq atomic.Int32

// NewNet makes the hub and the clients' link.
func NewNet() (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNoNetns
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, ErrNoNetns
	}
	sweepDeadNets()
	routes, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("chaos: ip route: %w", err)
	}
	// A /24 no route of this namespace names yet (another run's Net, or anything else).
	seq := netSeq.Add(1)
	k := -1
	for d := range 256 {
		c := (os.Getpid() + int(seq)*37 + d) % 256
		if !strings.Contains(string(routes), fmt.Sprintf("10.213.%d.", c)) {
			k = c
			break
		}
	}
	if k < 0 {
		return nil, errors.New("chaos: no free subnet in 10.213.0.0/16")
	}
	n := &Net{tag: fmt.Sprintf("rn%dx%d", os.Getpid(), seq), subnet: fmt.Sprintf("10.213.%d", k),
		nodes: map[int32]string{}, blocked: map[[2]int32]bool{}, lossy: map[int32]int{}}
	n.hub, n.host = n.tag+"-hub", n.tag+"h"
	if len(n.host) > 15 { // IFNAMSIZ
		n.host = fmt.Sprintf("rn%dh", (os.Getpid()*100+int(seq))%1_000_000_000)
	}
	steps := [][]string{
		{"netns", "add", n.hub},
		{"-n", n.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", n.hub, "link", "set", "br0", "up"},
		{"link", "add", n.host, "type", "veth", "peer", "name", "up0", "netns", n.hub},
		{"-n", n.hub, "link", "set", "up0", "master", "br0", "up"},
		{"addr", "add", n.subnet + ".254/24", "dev", n.host},
		{"link", "set", n.host, "up"},
	}
	if err := n.ip(steps...); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// deadNet matches the namespaces a Net names (rn<pid>x<seq>-hub, rn<pid>x<seq>-<node>).
var deadNet = regexp.MustCompile(`^rn([0-9]+)x[0-9]+-(hub|[0-9]+)$`)

// sweepDeadNets deletes the namespaces of Nets whose process is gone: a test binary killed
// (a timeout's panic skips cleanups, kill -9 everything) leaves them, and with the hub its
// veth and a route to its subnet. Deleting a hub deletes those with it. A pid reused by
// another process keeps its namespaces until that process is gone too.
func sweepDeadNets() {
	names, err := os.ReadDir("/var/run/netns")
	if err != nil {
		return
	}
	for _, e := range names {
		m := deadNet.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		exec.Command("ip", "netns", "del", e.Name()).Run()
	}
}

// ip runs iproute2 commands in order, stopping at the first that fails.
func (n *Net) ip(steps ...[]string) error {
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: ip %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Addr is node i's address in the network.
func (n *Net) Addr(i int32) string { return fmt.Sprintf("%s.%d", n.subnet, i) }

// Add makes node i's namespace and plugs it into the bridge.
func (n *Net) Add(i int32) error {
	if i < 1 || i > 253 {
		return fmt.Errorf("chaos: node id %d has no address in a Net (1..253)", i)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[i]; ok {
		return nil
	}
	ns := fmt.Sprintf("%s-%d", n.tag, i)
	port := fmt.Sprintf("n%d", i)
	err := n.ip(
		[]string{"netns", "add", ns},
		[]string{"-n", ns, "link", "set", "lo", "up"},
		[]string{"-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", n.hub},
		[]string{"-n", n.hub, "link", "set", port, "master", "br0", "up"},
		[]string{"-n", ns, "addr", "add", n.Addr(i) + "/24", "dev", "eth0"},
		[]string{"-n", ns, "link", "set", "eth0", "up"},
	)
	n.nodes[i] = ns // deleted by Close even when half made
	return err
}

// Command is bin args run in node i's namespace: `ip netns exec` execs in place, so the
// process's pid is the command's.
func (n *Net) Command(i int32, bin string, args ...string) *exec.Cmd {
	n.mu.Lock()
	ns := n.nodes[i]
	n.mu.Unlock()
	return exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
}

// Block drops everything from sends to to (one way; a TCP connection needs both ways, so
// connections between them stall, silently).
func (n *Net) Block(from, to int32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.blocked[[2]int32{from, to}] {
		return nil
	}
	if err := n.ip([]string{"-n", n.nodes[from], "route", "add", "blackhole", n.Addr(to) + "/32"}); err != nil {
		return err
	}
	n.blocked[[2]int32{from, to}] = true
	return nil
}

// Partition blocks every pair across the two sides, both ways. Clients still reach every node.
func (n *Net) Partition(a, b []int32) error {
	for _, x := range a {
		for _, y := range b {
			if err := n.Block(x, y); err != nil {
				return err
			}
			if err := n.Block(y, x); err != nil {
				return err
			}
		}
	}
	return nil
}

// Unplug takes node i's port on the bridge down: nothing reaches it or leaves it, clients'
// traffic included. Plug undoes it.
func (n *Net) Unplug(i int32) error {
	return n.ip([]string{"-n", n.hub, "link", "set", fmt.Sprintf("n%d", i), "down"})
}

// Plug puts node i's port back up.
func (n *Net) Plug(i int32) error {
	return n.ip([]string{"-n", n.hub, "link", "set", fmt.Sprintf("n%d", i), "up"})
}

// lossTable is the hub's nftables table that drops frames (bridge family: it sees every frame
// the bridge forwards between two ports, node to node and node to clients).
const lossTable = "runnel_chaos_loss"

// Lossy makes the bridge drop each frame node i's port carries, to the node or from it, with
// probability perMille/1000 (nftables' numgen random, drawn per frame and rule: a frame between
// two lossy nodes passes two such rules). The frames vanish in the network, as on a bad link:
// neither end is told, TCP retransmits. perMille 0 makes the port lossless again.
func (n *Net) Lossy(i int32, perMille int) error {
	if perMille < 0 || perMille > 1000 {
		return fmt.Errorf("chaos: loss of %d per mille", perMille)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return ErrNoNft
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[i]; !ok {
		return fmt.Errorf("chaos: node %d is not in the network", i)
	}
	next := maps.Clone(n.lossy)
	if perMille == 0 {
		delete(next, i)
	} else {
		next[i] = perMille
	}
	if err := n.nft(lossRules(next)); err != nil {
		return err
	}
	n.lossy = next
	return nil
}

// lossRules is an nftables script that replaces the loss table by one dropping what lossy says
// (adding the table first makes deleting it work whether or not it exists, in one transaction).
func lossRules(lossy map[int32]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add table bridge %s\ndelete table bridge %s\n", lossTable, lossTable)
	if len(lossy) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "table bridge %s {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n", lossTable)
	for _, i := range slices.Sorted(maps.Keys(lossy)) {
		for _, dir := range []string{"iifname", "oifname"} {
			fmt.Fprintf(&b, "\t\t%s \"n%d\" numgen random mod 1000 < %d drop\n", dir, i, lossy[i])
		}
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// nft runs an nftables script in the hub namespace.
func (n *Net) nft(script string) error {
	cmd := exec.Command("ip", "netns", "exec", n.hub, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: nft: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Heal removes every block and every loss and plugs every node back in.
func (n *Net) Heal() error {
	n.mu.Lock()
	var errs []error
	if len(n.lossy) > 0 {
		if err := n.nft(lossRules(nil)); err != nil {
			errs = append(errs, err)
		} else {
			n.lossy = map[int32]int{}
		}
	}
	for k := range n.blocked {
		if err := n.ip([]string{"-n", n.nodes[k[0]], "route", "del", "blackhole", n.Addr(k[1]) + "/32"}); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(n.blocked, k)
	}
	ids := make([]int32, 0, len(n.nodes))
	for i := range n.nodes {
		ids = append(ids, i)
	}
	n.mu.Unlock()
	slices.Sort(ids)
	for _, i := range ids {
		if err := n.Plug(i); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close deletes the namespaces (and with them every link the Net made). The processes in them
// must have ended first.
func (n *Net) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ns := range n.nodes {
		exec.Command("ip", "netns", "del", ns).Run()
	}
	n.nodes = map[int32]string{}
	exec.Command("ip", "netns", "del", n.hub).Run()
	exec.Command("ip", "link", "del", n.host).Run() // gone with the hub already, unless the hub was never made
}
