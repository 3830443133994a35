package security

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/runnel-dev/runnel/internal/security/securitytest"
)

func TestParseListeners(t *testing.T) {
	pm, err := ParseProtocolMap("internal:sasl_ssl, EXT:PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ParseListeners("PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094,internal://:9095", pm)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 || ls[1].Protocol != SASLSSL || ls[2].Name != "INTERNAL" || ls[2].Protocol != SASLSSL || ls[2].Addr != ":9095" {
		t.Fatalf("%+v", ls)
	}
	if err := Advertise(ls, "SASL_SSL://kafka1.example:9094,INTERNAL://10.0.0.1:9095"); err != nil {
		t.Fatal(err)
	}
	if ls[0].Advertised != "127.0.0.1:9092" || ls[1].Advertised != "kafka1.example:9094" {
		t.Fatalf("%+v", ls)
	}
	for _, bad := range []string{"127.0.0.1:9092", "PLAINTEXT://127.0.0.1", "FOO://127.0.0.1:1", "PLAINTEXT://a:1,PLAINTEXT://a:2", "SSL://a:99999"} {
		if _, err := ParseListeners(bad, pm); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseProtocolMap("SSL:PLAINTEXT"); err == nil {
		t.Error("a protocol name mapped to another protocol")
	}
	ls, _ = ParseListeners("SASL_SSL://0.0.0.0:9094", pm)
	if err := Advertise(ls, ""); err == nil || !strings.Contains(err.Error(), "wildcard") {
		t.Errorf("a wildcard advertised address: %v", err)
	}
	if err := Advertise(ls, "SSL://h:1"); err == nil {
		t.Error("advertising a listener that does not exist")
	}
	if !Loopback("127.0.0.1:9092") || !Loopback("[::1]:1") || !Loopback("localhost:1") || Loopback(":9092") || Loopback("0.0.0.0:1") || Loopback("10.1.1.1:1") {
		t.Error("Loopback")
	}
}

func TestFailureLimiterBacksOffPerHost(t *testing.T) {
	l := NewFailureLimiter(100*time.Millisecond, time.Second, time.Minute)
	now := time.Unix(1000, 0)
	var got []time.Duration
	for range 6 {
		got = append(got, l.Fail("10.0.0.1", now))
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v", got)
		}
	}
	if d := l.Fail("10.0.0.2", now); d != 100*time.Millisecond {
		t.Fatalf("another host waits %v", d)
	}
	if d := l.Fail("10.0.0.1", now.Add(2*time.Minute)); d != 100*time.Millisecond {
		t.Fatalf("after the window %v", d)
	}
}

// TestTLSFilesReload: a replaced certificate is served on new handshakes; a broken
// replacement keeps the previous one.
func TestTLSFilesReload(t *testing.T) {
	dir := t.TempDir()
	pki := securitytest.NewPKI(t, dir)
	cert, key := pki.Issue(t, "server", pkix.Name{CommonName: "first"})
	f, err := LoadTLSFiles(cert, key, "", ClientAuthNone, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	f.now = func() time.Time { return clock }
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	subject := func() string {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if s := subject(); s != "first" {
		t.Fatalf("serves %q", s)
	}
	time.Sleep(10 * time.Millisecond) // a later modification time
	pki.Issue(t, "server", pkix.Name{CommonName: "second"})
	if s := subject(); s != "first" {
		t.Fatalf("reloaded within a second: %q", s)
	}
	clock = clock.Add(2 * time.Second)
	if s := subject(); s != "second" || f.Loads() != 2 {
		t.Fatalf("serves %q after the files changed (%d loads)", s, f.Loads())
	}
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Second)
	if s := subject(); s != "second" {
		t.Fatalf("a broken file replaced the certificate: %q", s)
	}
	if _, err := LoadTLSFiles(cert, key, "", ClientAuthNone, nil); err == nil || !strings.Contains(err.Error(), cert) {
		t.Fatalf("loading a broken file: %v", err)
	}
}

func TestPrincipalIsTheVerifiedSubject(t *testing.T) {
	dir := t.TempDir()
	pki := securitytest.NewPKI(t, dir)
	scert, skey := pki.Issue(t, "server", pkix.Name{CommonName: "localhost"})
	ccert, ckey := pki.Issue(t, "client", pkix.Name{CommonName: "writer", OrganizationalUnit: []string{"apps"}, Organization: []string{"Example"}})
	f, err := LoadTLSFiles(scert, skey, pki.CAFile, ClientAuthRequired, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParsePrincipalMappingRules(`RULE:^CN=([^,]*),OU=(app[^,]*),.*$/$1@$2/U, RULE:^CN=(.*)$/$1/, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	none, err := ParsePrincipalMappingRules(`RULE:^CN=nobody,.*$/x/`)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		if err := c.(*tls.Conn).Handshake(); err != nil {
			got <- err.Error()
			return
		}
		st := c.(*tls.Conn).ConnectionState()
		def, err1 := Principal(st, nil)
		mapped, err2 := Principal(st, rules)
		_, err3 := Principal(st, none)
		got <- fmt.Sprintf("%s %s %v %v %v", def, mapped, err1, err2, errors.Is(err3, ErrNoPrincipalRule))
	}()
	pair, _ := tls.LoadX509KeyPair(ccert, ckey)
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pki.Pool(t), Certificates: []tls.Certificate{pair}, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := <-got; p != "User:CN=writer,OU=apps,O=Example User:WRITER@APPS <nil> <nil> true" {
		t.Fatalf("principals (default, mapped, errors, no rule applies): %q", p)
	}
}
