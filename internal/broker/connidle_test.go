package broker

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdleConnectionsClosed: a connection that sends nothing for connections.max.idle.ms, before
// a request or in the middle of one, is closed, and what a half-sent request held is given back.
// Six connections that each sent only a 100 MiB size prefix used to hold the whole broker-wide
// in-flight budget (512 MiB) for ever, so every other client of the node waited for ever.
func TestIdleConnectionsClosed(t *testing.T) {
	_, addr, _ := ctBroker(t, func(c *Config) { c.ConnectionsMaxIdle = 500 * time.Millisecond })
	idle := ctDial(t, addr) // sends nothing at all
	var stalled []net.Conn
	for range 6 {
		nc := ctDial(t, addr)
		if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, 100<<20)); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, nc)
	}
	for _, nc := range append(stalled, idle) {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("a connection idle past connections.max.idle.ms: read %v; want it closed (EOF)", err)
		}
	}
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	if _, err := nc.Write(ctEncode(req, 9)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ctReadFrame(nc); err != nil {
		t.Fatalf("ApiVersions after the stalled connections were closed: %v", err)
	}
}

// TestSASLRequestSizeBeforeAuthentication: on a SASL listener a request larger than 512 KiB
// (Kafka's sasl.server.max.receive.size) before the client has authenticated closes the
// connection at its size prefix: a client that has not logged in cannot make the node reserve
// up to socket.request.max.bytes for it.
func TestSASLRequestSizeBeforeAuthentication(t *testing.T) {
	addr := oauthBroker(t, 0, nil)
	nc := ctDial(t, addr)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a 1 MiB request before authentication: read %v; want the connection closed (EOF)", err)
	}
	ok := ctDial(t, addr) // a handshake-sized request is read as usual
	ok.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	if _, err := ok.Write(ctEncode(req, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ctReadFrame(ok); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}
}
