package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"math/big"
	"net"
	"testing"
	"time"
)

// watchIdleOneWrite: a response handed to the connection in one Write call (bufio.Writer passes
// a frame larger than its buffer straight through; tls.Conn.Write is one call too) to a client
// reading it quickly is not closed as idle. Such a write used to count as progress only when it
// returned; meanwhile the watchdog saw the client draining only as the socket's send queue
// shrinking between two looks, and a client draining more than a third of the send buffer
// between looks makes the kernel wake the writer, which refills the queue to the same level: the
// looks saw no change and a connection moving ~100 MB/s was closed. Writes now go in 64 KiB
// pieces, each one progress.
func watchIdleOneWrite(t *testing.T, chunk int, useTLS bool) {
	const idle = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw := srv
	if useTLS {
		srv, cli = tlsPipe(t, srv, cli)
	}
	const total = 256 << 20
	// The response exists before the idle watch starts, as a response handed to the
	// connection does: zeroing 256 MiB took longer than the idle limit under -race beside other
	// tests (CI, 2026-12-06: closed after 0 bytes in 196 ms).
	data := make([]byte, total)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &conn{b: &Broker{cfg: Config{ConnectionsMaxIdle: idle}, logger: slog.New(slog.DiscardHandler)}, nc: srv, ctx: ctx, cancel: cancel, remote: "test"}
	c.act.touch()
	go c.watchIdle(raw) // as serveConn: the TCP connection under any TLS

	werr := make(chan error, 1)
	go func() {
		pc := progressConn{srv, &c.act}
		var err error
		for off := 0; off < total && err == nil; off += chunk {
			_, err = pc.Write(data[off:min(off+chunk, total)])
		}
		werr <- err
	}()
	buf := make([]byte, 2<<20)
	start, got := time.Now(), 0
	cli.SetReadDeadline(time.Now().Add(60 * time.Second))
	for got < total {
		n, err := io.ReadFull(cli, buf[:min(len(buf), total-got)])
		got += n
		if err != nil {
			t.Fatalf("writes of %d bytes each: a client reading 2 MiB every 20 ms (%d bytes in %v, ~%.0f MB/s) was closed as idle (connections.max.idle.ms %v): %v; write side: %v",
				chunk, got, time.Since(start).Round(time.Millisecond), float64(got)/time.Since(start).Seconds()/1e6, idle, err, <-werr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d bytes in %v", got, time.Since(start))
}

// One 256 MiB Write: a large response frame without sendfile (TLS listener, DisableSendfile).
func TestWatchIdleOneLargeWrite(t *testing.T) { watchIdleOneWrite(t, 256<<20, false) }

// TLS: a TLS listener never uses sendfile, so every response is one tls.Conn.Write through
// progressConn (wrapping the tls.Conn, not the raw connection).
func TestWatchIdleOneLargeTLSWrite(t *testing.T) { watchIdleOneWrite(t, 256<<20, true) }

func tlsPipe(t *testing.T, srv, cli net.Conn) (net.Conn, net.Conn) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ts := tls.Server(srv, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	tc := tls.Client(cli, &tls.Config{InsecureSkipVerify: true})
	errc := make(chan error, 1)
	go func() { errc <- ts.Handshake() }()
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return ts, tc
}
