package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/internal/console"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/speclog/service"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// The node's side of the web console (internal/console): what it shows that the Kafka protocol
// does not carry.

// consoleBootstrap is the address the console reaches its own node's Kafka API on: the first
// PLAINTEXT listener ("" if there is none: the console then says so; its login is not built).
func (s *Server) consoleBootstrap() []string {
	for i, l := range s.cfg.Listeners {
		if l.Protocol != security.Plaintext {
			continue
		}
		if i == 0 {
			if addr := s.admin.kafkaAddr.Load(); addr != nil {
				return []string{*addr}
			}
			return []string{l.Addr}
		}
		return []string{s.listenerAddrs[l.Name]}
	}
	return []string{"the console needs a PLAINTEXT listener:1"}
}

// consoleHosts are the host names the console is served under (docs/console.md, Security): the
// admin listener's, the Kafka listeners' and their advertised ones, the machine's host name and
// --console-hosts. An IP address and localhost need no naming.
func (s *Server) consoleHosts() []string {
	hosts := append([]string{s.cfg.AdminAddr, s.cfg.AdvertisedKafkaAddr}, s.cfg.ConsoleHosts...)
	for _, l := range s.cfg.Listeners {
		hosts = append(hosts, l.Addr, l.Advertised)
	}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	return hosts
}

// consoleOverview is the overview page's data, from the status.
func (s *Server) consoleOverview() console.Overview {
	st := s.Status()
	o := console.Overview{NodeID: st.NodeID, ClusterID: st.ClusterID, State: st.State, Uptime: time.Duration(st.UptimeSeconds * float64(time.Second)),
		ControllerID: -1, Version: buildVersion()}
	if c := st.Cluster; c != nil {
		o.ControllerID, o.Partitions, o.UnderReplicated, o.Offline = c.ControllerID, c.Partitions, c.UnderReplicated, c.Offline
		for _, n := range c.Nodes {
			o.Nodes = append(o.Nodes, console.Node{ID: n.ID, KafkaAddr: n.KafkaAddr, State: n.State, Leaders: n.Leaders, Replicas: n.Replicas})
		}
	}
	return o
}

// buildVersion is the module version the binary was built from ("dev" for a local build).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// consoleLogin is the console's login (docs/console.md): with a SASL listener, users log in with
// their SASL credentials on it (SASL_PLAINTEXT preferred: the connection stays in the node);
// nil without one.
func (s *Server) consoleLogin() *console.Login {
	pick := -1
	for i, l := range s.cfg.Listeners {
		if l.Protocol == security.SASLPlaintext || l.Protocol == security.SASLSSL && pick < 0 {
			pick = i
		}
		if l.Protocol == security.SASLPlaintext {
			break
		}
	}
	if pick < 0 {
		return nil
	}
	l := s.cfg.Listeners[pick]
	login := &console.Login{
		Bootstrap: func() []string {
			if pick == 0 {
				if addr := s.admin.kafkaAddr.Load(); addr != nil {
					return []string{*addr}
				}
				return []string{l.Addr}
			}
			return []string{s.listenerAddrs[l.Name]}
		},
		Mechanisms: func(user string) []string {
			enabled := s.cfg.SASLMechanisms
			if enabled == nil {
				enabled = []string{string(security.ScramSHA256), string(security.ScramSHA512)}
			}
			var out []string
			for _, m := range []security.Mechanism{security.ScramSHA512, security.ScramSHA256} {
				if s.node == nil {
					break
				}
				if _, ok := s.node.Image().ScramCredential(user, m); ok && slices.Contains(enabled, string(m)) {
					out = append(out, string(m))
				}
			}
			if len(out) == 0 && len(enabled) > 0 { // an unknown user: the broker refuses (and counts) it
				out = enabled[:1]
			}
			return out
		},
	}
	if l.Protocol.TLS() {
		host, _, _ := net.SplitHostPort(l.Advertised)
		login.TLS = s.tls.ClientConfigFor(host)
	}
	return login
}

// consoleFlushLag is, for the console's topic page, what each replica of the topic's
// partitions has not flushed to disk yet: this node's from its logs, the other nodes' from
// their admin endpoints' /v1/status (registered with the controller), asked in parallel. A node
// that does not answer in time is named in the errors; its replicas are left out.
func (s *Server) consoleFlushLag(ctx context.Context, topic string) (map[int32][]console.ReplicaFlushLag, []string) {
	out := map[int32][]console.ReplicaFlushLag{}
	for _, p := range s.partitionStats(nil) {
		if p.Topic == topic {
			out[p.Partition] = append(out[p.Partition], console.ReplicaFlushLag{Node: s.cfg.NodeID,
				FlushLag: console.FlushLag{Bytes: p.FlushLag.Bytes, Records: p.FlushLag.Records, Age: p.FlushLag.Age}})
		}
	}
	if s.node == nil || !s.recovered() {
		return out, nil
	}
	img := s.node.Image()
	t := img.Topics[topic]
	if t == nil {
		return out, nil
	}
	hosts := map[int32]string{} // the other nodes with a replica of the topic
	for _, p := range t.Partitions {
		for _, r := range p.Replicas {
			if n := img.Nodes[r]; r != s.cfg.NodeID && n != nil && !n.Fenced {
				hosts[r] = n.AdminAddr
			}
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []string
	)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for id, addr := range hosts {
		wg.Go(func() {
			st, err := s.peerStatus(ctx, addr, topic)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("node %d: %v", id, err))
				return
			}
			for _, tp := range st.Topics {
				for _, p := range tp.Partitions {
					out[p.Partition] = append(out[p.Partition], console.ReplicaFlushLag{Node: id, FlushLag: console.FlushLag{
						Bytes: p.FlushLagBytes, Records: p.FlushLagRecords, Age: time.Duration(p.FlushLagMillis) * time.Millisecond}})
				}
			}
		})
	}
	wg.Wait()
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b console.ReplicaFlushLag) int { return cmp.Compare(a.Node, b.Node) })
	}
	slices.Sort(errs)
	return out, errs
}

// peerStatus asks another node's admin endpoint for its status of one topic (over HTTPS with
// the cluster's client certificate when the admin endpoints serve TLS).
func (s *Server) peerStatus(ctx context.Context, addr, topic string) (*Status, error) {
	if addr == "" {
		return nil, errors.New("no admin address registered")
	}
	client, scheme := http.DefaultClient, "http"
	if s.cfg.AdminTLS {
		// One client for every page view: its connections (and TLS sessions) to the peers are
		// kept; the certificate it presents is read at each handshake.
		s.consolePeers.once.Do(func() {
			s.consolePeers.client = &http.Client{Transport: &http.Transport{DialTLSContext: s.dialPeerTLS}}
		})
		client, scheme = s.consolePeers.client, "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/v1/status?topic="+url.QueryEscape(topic), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", addr, resp.Status)
	}
	var st Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&st); err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return &st, nil
}

// reachable is addr with an unspecified host (a wildcard bind) replaced by host, the node's
// advertised host, so that other nodes can dial it.
func reachable(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if security.WildcardHost(h) {
		return net.JoinHostPort(host, port)
	}
	return addr
}

// consoleTotalOrder describes a total-order topic for the console through the SpecLog service's
// own Describe (without its authentication: the console checked the user may describe the
// topic through Kafka's Metadata first).
func (s *Server) consoleTotalOrder(ctx context.Context, topic string) (*console.TotalOrder, error) {
	if s.node == nil || !s.recovered() {
		return nil, errors.New("the node is starting")
	}
	s.consoleSpeclog.once.Do(func() {
		_, _, peerDial := s.speclogSecurity()
		s.consoleSpeclog.svc = service.New(service.Config{Node: s.node, Registry: s.topics, Logger: s.logger, Addr: s.node.SpecLogAddr, PeerDial: peerDial})
	})
	d, err := s.consoleSpeclog.svc.Describe(ctx, &pb.DescribeRequest{Topic: topic, ShardHeads: true})
	if err != nil {
		return nil, err
	}
	out := &console.TotalOrder{Confirmed: d.GetConfirmed(), View: d.GetView(), Trimmed: d.GetTrimmed(), Window: d.GetWindow(),
		WindowCuts: int(d.GetWindowCuts()), Interval: time.Duration(d.GetIntervalUs()) * time.Microsecond, SequencerLeader: d.GetSequencerLeader()}
	for _, sh := range d.GetShards() {
		row := console.TotalOrderShard{Shard: sh.GetShard(), Leader: sh.GetLeader(), Quota: sh.GetQuota(), Failed: sh.GetFailed()}
		if sh.Delivered != nil {
			row.Head = &console.ShardHead{Delivered: sh.GetDelivered(), View: sh.GetDeliveredView(), DurableSlots: sh.GetDurableSlots()}
		}
		out.Shards = append(out.Shards, row)
	}
	return out, nil
}

// consoleJournal is object topics' journal backlog for the console.
func (s *Server) consoleJournal(ctx context.Context) ([]console.JournalRun, error) {
	if !s.recovered() {
		return nil, errors.New("the node is starting")
	}
	if s.objmaint == nil {
		return nil, errors.New("this node has no object store")
	}
	runs, err := s.objmaint.Backlog(ctx)
	out := make([]console.JournalRun, 0, len(runs))
	for _, r := range runs {
		out = append(out, console.JournalRun{Run: r.Run, Node: r.Node, Live: r.Live, SlowPath: r.SlowPath, Files: r.Files,
			Bytes: r.Bytes, Oldest: r.Oldest, Incomplete: r.Incomplete})
	}
	return out, err
}

// dialPeerTLS dials a peer's admin listener over TLS, verifying it against the CA bundle of the
// moment (security.TLSFiles.ClientConfigFor).
func (s *Server) dialPeerTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{Config: s.tls.ClientConfigFor(host)}
	return d.DialContext(ctx, network, addr)
}
