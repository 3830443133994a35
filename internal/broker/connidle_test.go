package broker

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
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

// TestUnreadResponsesClosedWhenIdle: a client that pipelines requests and never reads the
// responses is closed after connections.max.idle.ms without progress, and what its requests
// held of the in-flight budget is given back. Its write loop used to block in a socket write
// with no deadline and its read loop outside any read (on the budget or the queue), so the idle
// timeout, a read deadline then, never fired and every other client waited for ever. Kafka's
// idle expiry counts a connection that makes no read or write progress as idle.
func TestUnreadResponsesClosedWhenIdle(t *testing.T) {
	_, addr, _ := ctBroker(t, func(c *Config) {
		c.ConnectionsMaxIdle = 500 * time.Millisecond
		c.MaxInflightBytes = 256 << 10
	})
	stuck, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.(*net.TCPConn).SetReadBuffer(4096) // reads nothing anyway
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4
	req.AllowAutoTopicCreation = false
	for i := range 50 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("%s%03d", strings.Repeat("u", 200), i))
		req.Topics = append(req.Topics, rt)
	}
	go func() {
		stuck.SetWriteDeadline(time.Now().Add(8 * time.Second))
		for i := range 2000 {
			if _, err := stuck.Write(ctEncode(req, int32(i))); err != nil {
				return
			}
		}
	}()
	time.Sleep(3 * time.Second) // six idle periods with no progress on the stuck connection

	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(4 * time.Second))
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	if _, err := nc.Write(ctEncode(av, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ctReadFrame(nc); err != nil {
		t.Fatalf("another client's ApiVersions, 3 s after a connection stopped reading its responses (connections.max.idle.ms 500 ms): %v; "+
			"the stalled connection was never closed and still holds the in-flight budget", err)
	}
}
