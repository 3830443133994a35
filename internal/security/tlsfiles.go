package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// ClientAuth is Kafka's ssl.client.auth: whether a TLS listener asks for client certificates.
type ClientAuth string

// The ssl.client.auth values.
const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// ParseClientAuth parses --tls-client-auth ("" is the default: required with a client CA,
// none without).
func ParseClientAuth(s string, haveCA bool) (ClientAuth, error) {
	switch ClientAuth(strings.ToLower(s)) {
	case "":
		if haveCA {
			return ClientAuthRequired, nil
		}
		return ClientAuthNone, nil
	case ClientAuthNone:
		return ClientAuthNone, nil
	case ClientAuthRequested, ClientAuthRequired:
		if !haveCA {
			return "", fmt.Errorf("security: --tls-client-auth %s needs --tls-client-ca-file", s)
		}
		return ClientAuth(strings.ToLower(s)), nil
	}
	return "", fmt.Errorf("security: --tls-client-auth %q is not none, requested or required", s)
}

// TLSFiles serves a certificate, key and client CA bundle from PEM files, re-reading them when
// they change (checked at most once a second, on a new handshake). A change that does not parse
// keeps the previous material and is logged once.
type TLSFiles struct {
	certFile, keyFile, caFile string
	clientAuth                ClientAuth
	logger                    *slog.Logger
	now                       func() time.Time

	mu        sync.Mutex
	watch     *fileWatch // the files as last loaded (or refused)
	cert      *tls.Certificate
	pool      *x509.CertPool
	loadedAt  time.Time
	loadCount int
}

// LoadTLSFiles loads the files once (an error names the file that failed) and returns the
// reloading source. caFile may be empty (no client certificates are verified).
func LoadTLSFiles(certFile, keyFile, caFile string, auth ClientAuth, logger *slog.Logger) (*TLSFiles, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("security: TLS needs both --tls-cert-file and --tls-key-file")
	}
	if logger == nil {
		logger = slog.Default()
	}
	f := &TLSFiles{certFile: certFile, keyFile: keyFile, caFile: caFile, clientAuth: auth, logger: logger, now: time.Now}
	watch, err := newFileWatch(f.now(), certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cert, f.pool, f.watch, f.loadedAt, f.loadCount = cert, pool, watch, f.now(), 1
	return f, nil
}

func (f *TLSFiles) load() (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("security: certificate %s with key %s: %w", f.certFile, f.keyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("security: certificate %s: %w", f.certFile, err)
		}
	}
	var pool *x509.CertPool
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("security: client CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("security: client CA file %s holds no PEM certificate", f.caFile)
		}
	}
	return &cert, pool, nil
}

// current returns the certificate and CA pool, reloading them if the files changed.
func (f *TLSFiles) current() (*tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	changed, err := f.watch.changed(now)
	if err != nil {
		f.logger.Error("tls: a certificate file is unreadable; keeping the loaded one", "err", err)
	}
	if !changed {
		return f.cert, f.pool
	}
	cert, pool, err := f.load()
	if err != nil {
		f.logger.Error("tls: the changed certificate files do not load; keeping the loaded ones", "err", err)
		return f.cert, f.pool
	}
	f.cert, f.pool, f.loadedAt = cert, pool, now
	f.loadCount++
	f.logger.Info("tls: certificate reloaded", "cert", f.certFile, "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter)
	return f.cert, f.pool
}

// Loads is how many times the files were loaded (1 + reloads).
func (f *TLSFiles) Loads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadCount
}

// ServerConfig is a TLS 1.2+ server config that picks up reloaded files on new handshakes.
func (f *TLSFiles) ServerConfig() *tls.Config {
	return f.serverConfig(f.clientAuth)
}

// ServerConfigRequiringClients is ServerConfig with client certificates required (the
// cluster's internal listener: every peer presents one).
func (f *TLSFiles) ServerConfigRequiringClients() *tls.Config {
	return f.serverConfig(ClientAuthRequired)
}

// ServerConfigForPeers is ServerConfigRequiringClients with each peer's verified connection
// also checked by allow during the handshake (nil: none), which refuses the peer by erring.
func (f *TLSFiles) ServerConfigForPeers(allow func(tls.ConnectionState) error) *tls.Config {
	c := f.serverConfig(ClientAuthRequired)
	get := c.GetConfigForClient
	c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		cc, err := get(hello)
		if err == nil && allow != nil {
			cc.VerifyConnection = allow
		}
		return cc, err
	}
	return c
}

// OwnPrincipal is the Kafka principal of this node's own certificate of the moment, as
// Principal makes it of a peer's ("" if m has no rule for it).
func (f *TLSFiles) OwnPrincipal(m *PrincipalMapper) string {
	cert, _ := f.current()
	if cert == nil || cert.Leaf == nil {
		return ""
	}
	name, err := m.Map(cert.Leaf.Subject.String())
	if err != nil {
		return ""
	}
	return "User:" + name
}

func (f *TLSFiles) serverConfig(auth ClientAuth) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := f.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, ClientCAs: pool}
			switch {
			case pool == nil || auth == ClientAuthNone:
				c.ClientAuth = tls.NoClientCert
			case auth == ClientAuthRequested:
				c.ClientAuth = tls.VerifyClientCertIfGiven
			default:
				c.ClientAuth = tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// ClientConfigFor is a TLS 1.2+ client config for dialing serverName (a host name or an IP
// address), a peer of the cluster: it presents this node's certificate and trusts the client
// CA bundle (the cluster's CA), both as they are at each handshake, so a CA added to the bundle
// file (a CA rotation) is trusted from the next connection on, as a replaced certificate is
// presented. crypto/tls reads a config's RootCAs once, and a handshake's ConnectionState does
// not name an IP address it was dialled at, so the chain and the name are verified here, with
// crypto/x509's own checks, against the bundle of the moment.
func (f *TLSFiles) ClientConfigFor(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         serverName,
		InsecureSkipVerify: true, // VerifyConnection verifies the chain and the name
		VerifyConnection: func(cs tls.ConnectionState) error {
			return f.verifyPeer(cs, serverName)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := f.current()
			return cert, nil
		},
	}
}

// verifyPeer verifies a peer's certificate chain against the current CA bundle (the system's
// roots without one) and its name against the one dialled.
func (f *TLSFiles) verifyPeer(cs tls.ConnectionState, serverName string) error {
	if serverName == "" {
		return errors.New("tls: no server name to verify the peer's certificate against")
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	_, pool := f.current()
	opts := x509.VerifyOptions{Roots: pool, DNSName: serverName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: the peer's certificate: %w", err)
	}
	return nil
}

// Principal is the Kafka principal of a verified client certificate: User:<name>, the name
// being what m (ssl.principal.mapping.rules; nil: DEFAULT) makes of the subject in RFC 2253
// form, as Kafka's default principal builder does; "" when there is none, and an error when no
// rule applies (the client is not authenticated).
func Principal(state tls.ConnectionState, m *PrincipalMapper) (string, error) {
	if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return "", nil
	}
	name, err := m.Map(state.PeerCertificates[0].Subject.String())
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}
