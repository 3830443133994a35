package security

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/security/securitytest"
)

// TestPeerCABundleRotation: a CA rotation adds the new CA to the bundle file of every node.
// From the next handshake on (the files are looked at once a second), a node trusts peers whose
// certificates the new CA signed, as a client (ClientConfigFor, with the config made before
// the change) and as a server asking for client certificates; until then it refuses them.
// The name dialled is verified, an IP address included.
func TestPeerCABundleRotation(t *testing.T) {
	oldCA := securitytest.NewPKI(t, t.TempDir())
	newCA := securitytest.NewPKI(t, t.TempDir())
	oldPEM, err := os.ReadFile(oldCA.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	newPEM, err := os.ReadFile(newCA.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, oldPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := oldCA.Issue(t, "node-1", pkix.Name{CommonName: "node-1"})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := LoadTLSFiles(cert, key, bundle, ClientAuthRequired, quiet)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	f.now = func() time.Time { return clock }

	// A peer whose certificate the new CA signed, trusting both CAs.
	peerCert, peerKey := newCA.Issue(t, "node-2", pkix.Name{CommonName: "node-2"})
	both := filepath.Join(t.TempDir(), "both.pem")
	if err := os.WriteFile(both, append(append([]byte{}, oldPEM...), newPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	peer, err := LoadTLSFiles(peerCert, peerKey, both, ClientAuthRequired, quiet)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(cfg *tls.Config) string {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					c.(*tls.Conn).Handshake()
					c.Write([]byte("x")) // a client's certificate refused shows on its first read
					c.Close()
				}()
			}
		}()
		return ln.Addr().String()
	}
	dial := func(addr string, cfg *tls.Config) error {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 1))
		return err
	}
	peerAddr := serve(peer.ServerConfigRequiringClients())
	ownAddr := serve(f.ServerConfigRequiringClients())
	_, port, _ := net.SplitHostPort(peerAddr)

	toPeer := f.ClientConfigFor("127.0.0.1")
	if err := dial(peerAddr, toPeer); err == nil {
		t.Fatal("a peer signed by a CA not in the bundle was trusted")
	}
	if err := dial(ownAddr, peer.ClientConfigFor("127.0.0.1")); err == nil {
		t.Fatal("a client signed by a CA not in the bundle was taken")
	}

	if err := os.WriteFile(bundle, append(append([]byte{}, oldPEM...), newPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Second)
	if err := dial(peerAddr, toPeer); err != nil {
		t.Fatalf("after the new CA joined the bundle, dialing its peer: %v", err)
	}
	if err := dial(ownAddr, peer.ClientConfigFor("127.0.0.1")); err != nil {
		t.Fatalf("after the new CA joined the bundle, a client it signed: %v", err)
	}
	if err := dial(net.JoinHostPort("localhost", port), f.ClientConfigFor("localhost")); err != nil {
		t.Fatalf("dialing the peer by a name its certificate holds: %v", err)
	}
	if err := dial(peerAddr, f.ClientConfigFor("node-9.example")); err == nil {
		t.Fatal("a peer was trusted for a name its certificate does not hold")
	}
	if err := dial(peerAddr, f.ClientConfigFor("")); err == nil {
		t.Fatal("a peer was trusted with no name to check")
	}
	if err := dial(peerAddr, f.ClientConfigFor("127.0.0.2")); err == nil {
		t.Fatal("a peer was trusted for another IP address")
	}
}
