package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/console"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/speclog/service"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// bindListeners binds the Kafka listeners after the first (Run or Serve binds the first) and
// returns every listener's advertised endpoint; an advertised port 0 is the bound port. host and
// port are the first listener's advertised address.
func (s *Server) bindListeners(host string, port int32) ([]security.Endpoint, error) {
	ls := s.cfg.Listeners
	endpoints := []security.Endpoint{{Name: ls[0].Name, Host: host, Port: port}}
	for _, l := range ls[1:] {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return nil, fmt.Errorf("server: kafka listener %s: %w", l.Name, err)
		}
		s.kafkaLns = append(s.kafkaLns, ln)
		if s.listenerAddrs == nil {
			s.listenerAddrs = map[string]string{}
		}
		s.listenerAddrs[l.Name] = ln.Addr().String()
		h, p, _ := net.SplitHostPort(l.Advertised)
		pn, _ := strconv.Atoi(p)
		if pn == 0 {
			pn = ln.Addr().(*net.TCPAddr).Port
		}
		endpoints = append(endpoints, security.Endpoint{Name: l.Name, Host: h, Port: int32(pn)})
	}
	return endpoints, nil
}

// brokerListener is how the broker secures listener i.
func (s *Server) brokerListener(i int) broker.Listener {
	l := s.cfg.Listeners[i]
	bl := broker.Listener{Name: l.Name, Protocol: l.Protocol}
	if l.Protocol.TLS() {
		bl.TLS = s.tls.ServerConfig()
	}
	return bl
}

// ListenerAddrs returns the bound addresses of the Kafka listeners after the first, by name.
func (s *Server) ListenerAddrs() map[string]string { return s.listenerAddrs }

// warnInsecure warns, once per listener, about listeners that bind beyond loopback without
// authentication, and about SASL listeners beyond loopback without an authorizer.
func (s *Server) warnInsecure(bound []string) {
	for i, l := range s.cfg.Listeners {
		if security.Loopback(bound[i]) {
			continue
		}
		switch {
		case l.Protocol == security.Plaintext,
			l.Protocol == security.SSL && (s.cfg.TLSClientCAFile == "" || strings.EqualFold(s.cfg.TLSClientAuth, "none") || strings.EqualFold(s.cfg.TLSClientAuth, "requested")):
			s.logger.Warn("listener without authentication is reachable beyond loopback: anyone who can connect may read and write every topic",
				"listener", l.Name, "protocol", l.Protocol, "addr", bound[i])
			fmt.Fprintf(s.cfg.Console, "runnel: WARNING: listener %s (%s) on %s has no authentication and is reachable beyond loopback\n", l.Name, l.Protocol, bound[i])
		case l.Protocol.SASL() && s.cfg.Authorizer != "acl":
			s.logger.Warn("SASL listener reachable beyond loopback without an authorizer: every authenticated user may do everything (--authorizer acl)",
				"listener", l.Name, "addr", bound[i])
		}
	}
}

// addBootstrapUser adds the bootstrap user if the cluster has no user of that name, retrying
// until the controller applies it or ctx ends.
func (s *Server) addBootstrapUser(ctx context.Context) {
	name, pass, _ := strings.Cut(s.cfg.BootstrapUser, ":")
	for {
		if _, ok := s.node.Image().Users[name]; ok {
			return
		}
		cmd := &controller.AlterScram{}
		for _, m := range security.Mechanisms {
			c, err := security.CredentialFromPassword(m, pass, security.RandomSalt(), 8192)
			if err != nil {
				s.logger.Error("server: bootstrap user", "err", err)
				return
			}
			cmd.Upserts = append(cmd.Upserts, controller.ScramUpsert{User: name, Mechanism: m, Credential: c})
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.node.Propose(pctx, &controller.Command{Op: controller.OpAlterScram, AlterScram: cmd})
		cancel()
		if err == nil {
			s.logger.Info("server: bootstrap user added", "user", name)
			return
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return
		}
		s.logger.Warn("server: adding the bootstrap user; retrying", "user", name, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// authorizer is the broker's authorizer (nil: --authorizer none).
func authorizer(cfg Config) *security.Authorizer {
	if cfg.Authorizer != "acl" {
		return nil
	}
	super, _ := security.ParseSuperUsers(cfg.SuperUsers) // checked by Validate
	return &security.Authorizer{SuperUsers: super, AllowIfNoACL: cfg.AllowEveryoneIfNoACL}
}

// speclogSecurity is the SpecLog API's authentication and authorization (the Kafka listeners'
// users and ACLs), its server options (TLS with --speclog-tls) and the options of its
// connections to other nodes.
func (s *Server) speclogSecurity() (*service.Auth, []grpc.ServerOption, []grpc.DialOption) {
	node := s.node
	auth := &service.Auth{Authorizer: authorizer(s.cfg), Logger: s.logger,
		ACLs: func() *security.ACLIndex {
			img := node.Image()
			return s.speclogACLs.Index(img.ACLVersion, img.ACLs)
		},
		Credential: func(user string, m security.Mechanism) (security.Credential, bool) {
			return node.Image().ScramCredential(user, m)
		},
		Failures: security.NewFailureLimiter(100*time.Millisecond, 5*time.Second, time.Minute)}
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(auth.Unary), grpc.StreamInterceptor(auth.Stream)}
	var dial []grpc.DialOption
	if s.cfg.SpecLogTLS {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls.ServerConfig())))
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(s.tls.ClientConfig())))
	}
	return auth, opts, dial
}

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
		cfg := s.tls.ClientConfig()
		cfg.ServerName, _, _ = net.SplitHostPort(l.Advertised)
		login.TLS = cfg
	}
	return login
}

// consoleFlushLag is, for the console's topic page, what each partition of the topic hosted
// here has not flushed to disk yet.
func (s *Server) consoleFlushLag(topic string) map[int32]console.FlushLag {
	out := map[int32]console.FlushLag{}
	for _, p := range s.partitionStats(nil) {
		if p.Topic == topic {
			out[p.Partition] = console.FlushLag{Bytes: p.FlushLag.Bytes, Records: p.FlushLag.Records, Age: p.FlushLag.Age}
		}
	}
	return out
}

// consoleTotalOrder describes a total-order topic for the console through the SpecLog service's
// own Describe (without its authentication: the console checked the user may describe the
// topic through Kafka's Metadata first).
func (s *Server) consoleTotalOrder(ctx context.Context, topic string) (*console.TotalOrder, error) {
	if s.node == nil || !s.recovered() {
		return nil, errors.New("the node is starting")
	}
	svc := service.New(service.Config{Node: s.node, Registry: s.topics, Logger: s.logger, Addr: s.node.SpecLogAddr})
	d, err := svc.Describe(ctx, &pb.DescribeRequest{Topic: topic})
	if err != nil {
		return nil, err
	}
	out := &console.TotalOrder{Confirmed: d.GetConfirmed(), View: d.GetView(), Trimmed: d.GetTrimmed(), Window: d.GetWindow(),
		WindowCuts: int(d.GetWindowCuts()), Interval: time.Duration(d.GetIntervalUs()) * time.Microsecond, SequencerLeader: d.GetSequencerLeader()}
	for _, sh := range d.GetShards() {
		out.Shards = append(out.Shards, console.TotalOrderShard{Shard: sh.GetShard(), Leader: sh.GetLeader(), Quota: sh.GetQuota(), Failed: sh.GetFailed()})
	}
	return out, nil
}
