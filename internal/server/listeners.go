package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/controller"
	"github.com/runnel-dev/runnel/internal/security"
	"github.com/runnel-dev/runnel/internal/speclog/service"
)

// bindListeners binds the Kafka listeners after the first on port 0 (their bound port is part of
// what the node registers) and returns every listener's advertised endpoint; an advertised port
// 0 is the bound port. host and port are the first listener's advertised address. A listener on
// a fixed port is only tried here (bound and closed, so a taken port fails the start) and bound
// once an active controller answers, before the node registers (bindOwned): as Kafka's
// acceptors, it accepts no connection the node cannot answer yet, so a client finds the port
// closed and tries its next bootstrap address at once instead of waiting out its request
// timeout.
func (s *Server) bindListeners(host string, port int32) ([]security.Endpoint, error) {
	ls := s.cfg.Listeners
	endpoints := []security.Endpoint{{Name: ls[0].Name, Host: host, Port: port}}
	s.kafkaLns = make([]net.Listener, len(ls)-1)
	s.listenerAddrs = map[string]string{}
	for i, l := range ls[1:] {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			s.closeKafkaListeners()
			return nil, fmt.Errorf("server: kafka listener %s: %w", l.Name, err)
		}
		if fixedPort(l.Addr) {
			s.listenerAddrs[l.Name] = l.Addr
			ln.Close()
		} else {
			s.listenerAddrs[l.Name] = ln.Addr().String()
			s.kafkaLns[i] = ln
		}
		h, p, _ := net.SplitHostPort(l.Advertised)
		pn, _ := strconv.Atoi(p)
		if pn == 0 {
			pn = ln.Addr().(*net.TCPAddr).Port
		}
		endpoints = append(endpoints, security.Endpoint{Name: l.Name, Host: h, Port: int32(pn)})
	}
	return endpoints, nil
}

// fixedPort says whether addr names a port other than 0.
func fixedPort(addr string) bool {
	_, p, err := net.SplitHostPort(addr)
	return err == nil && p != "0" && p != ""
}

// bindOwned binds the Kafka listeners on fixed ports this server owns and has not bound yet:
// those after the first, and the first under Run. The cluster node calls it before it registers
// (cluster.Config.BeforeRegister), Run and Serve before serving.
func (s *Server) bindOwned() error {
	s.binds.Lock()
	defer s.binds.Unlock()
	return s.bindOwnedLocked()
}

// bindOwnedLocked is bindOwned with s.binds held.
func (s *Server) bindOwnedLocked() error {
	s.binds.controller = true
	if s.binds.served || s.binds.closed {
		return nil
	}
	if s.binds.run && s.binds.first == nil {
		ln, err := net.Listen("tcp", s.cfg.KafkaAddr)
		if err != nil {
			return fmt.Errorf("server: kafka listener: %w", err)
		}
		s.binds.first = ln
	}
	for i, ln := range s.kafkaLns {
		if ln != nil {
			continue
		}
		l := s.cfg.Listeners[i+1]
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("server: kafka listener %s: %w", l.Name, err)
		}
		s.kafkaLns[i] = ln
	}
	return nil
}

// closeKafkaListeners closes the Kafka listeners this server bound and did not serve, and binds
// none from then on: Run or Serve gave up, or the server closes.
func (s *Server) closeKafkaListeners() {
	s.binds.Lock()
	defer s.binds.Unlock()
	s.binds.closed = true
	for _, l := range s.kafkaLns {
		if l != nil {
			l.Close()
		}
	}
	s.kafkaLns = nil
	if s.binds.first != nil {
		s.binds.first.Close()
		s.binds.first = nil
	}
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

// ListenerAddrs returns the addresses of the Kafka listeners after the first, by name: the bound
// one of a listener on port 0, the configured one of the others.
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
	auth := &service.Auth{Authorizer: authorizer(s.cfg), Logger: s.logger, PrincipalMapper: principalMapper(s.cfg), OAuth: s.oauth,
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
		dial = append(dial, grpc.WithTransportCredentials(peerCreds{s.tls}))
	}
	return auth, opts, dial
}

// peerCreds are the SpecLog API's credentials for its calls to other nodes: TLS, verified
// against the CA bundle of the moment (security.TLSFiles.ClientConfigFor), presenting the
// certificate of the moment.
type peerCreds struct{ f *security.TLSFiles }

func (c peerCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	return credentials.NewTLS(c.f.ClientConfigFor(host)).ClientHandshake(ctx, authority, conn)
}

func (c peerCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("speclog: peer credentials are for dialing")
}

func (c peerCreds) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(&tls.Config{}).Info()
}

func (c peerCreds) Clone() credentials.TransportCredentials { return c }

func (c peerCreds) OverrideServerName(string) error { return nil }
