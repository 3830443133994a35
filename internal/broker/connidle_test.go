package broker

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
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
	req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
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
	req.ClientSoftwareName, req.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
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
	av.ClientSoftwareName, av.ClientSoftwareVersion = "runnel-test", "1" // KIP-511: a v3+ request names its client
	av.Version = 3
	if _, err := nc.Write(ctEncode(av, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ctReadFrame(nc); err != nil {
		t.Fatalf("another client's ApiVersions, 3 s after a connection stopped reading its responses (connections.max.idle.ms 500 ms): %v; "+
			"the stalled connection was never closed and still holds the in-flight budget", err)
	}
}

// TestSlowReaderOfALargeResponseIsNotIdle: a client that reads a large response slowly, for
// longer than connections.max.idle.ms and sending nothing meanwhile, makes progress (its socket's
// send queue drains) and is not closed, as Kafka's selector counts any read or write activity. A
// write deadline per write (or per sendfile range) cut such a reader off mid-response.
func TestSlowReaderOfALargeResponseIsNotIdle(t *testing.T) {
	_, addr, reg := ctBroker(t, func(c *Config) { c.ConnectionsMaxIdle = 300 * time.Millisecond })
	ctCreate(t, reg, "slowread", 1, nil)
	pc := ctDial(t, addr)
	pc.SetDeadline(time.Now().Add(60 * time.Second))
	const batches = 12 // 12 x 500 KB: past the socket buffers, read over several idle periods
	for i := range batches {
		resp := ctExchange(t, pc, ctProduce(9, 1, ctPart{"slowread", 0, ctBatch(5, 100_000)}), int32(i)).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce %d: code %d", i, code)
		}
		pc.SetDeadline(time.Now().Add(60 * time.Second))
	}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(16 << 10)
	fr := ctFetch(11, 100, 1, "slowread", 0, 0)
	fr.Topics[0].Partitions[0].PartitionMaxBytes = 64 << 20
	if _, err := nc.Write(ctEncode(fr, 1)); err != nil {
		t.Fatal(err)
	}
	// The client sends nothing more: its reading the response is the only progress.
	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	total := int(binary.BigEndian.Uint32(size[:]))
	start, got := time.Now(), 0
	buf := make([]byte, 128<<10)
	for got < total {
		n, err := nc.Read(buf[:min(len(buf), total-got)])
		got += n
		if err != nil {
			t.Fatalf("a client reading a %d-byte fetch response steadily (a read every 10 ms) was cut off after %d bytes and %v: %v; "+
				"connections.max.idle.ms (300 ms) closes only a connection that makes no progress", total, got, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("read %d bytes in %v", got, time.Since(start))
}

// TestIdleCloseCounted: a connection closed as idle is counted in the connection-error metric
// under its own reason (it used to be only logged, at debug).
func TestIdleCloseCounted(t *testing.T) {
	_, addr, reg, _ := observedBroker(t, slog.LevelInfo, func(c *Config) { c.ConnectionsMaxIdle = 200 * time.Millisecond })
	nc := ctDial(t, addr)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle connection: read %v; want it closed (EOF)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, reg, "runnel_kafka_connection_errors_total", map[string]string{"reason": "idle"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the idle close was not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
