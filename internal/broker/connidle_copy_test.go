package broker

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// largeCopiedFetch serves a ~48 MB fetch response without sendfile (as on a TLS listener or
// with DisableSendfile) to a client reading steadily in bursts, which always makes progress
// and must not be closed as idle (the response is handed over in one write).
func largeCopiedFetch(t *testing.T, burst int, pause time.Duration) {
	_, addr, reg := ctBroker(t, func(c *Config) {
		c.ConnectionsMaxIdle = 300 * time.Millisecond
		c.DisableSendfile = true
	})
	ctCreate(t, reg, "slowcopy", 1, nil)
	pc := ctDial(t, addr)
	pc.SetDeadline(time.Now().Add(60 * time.Second))
	const batches = 96
	for i := range batches {
		resp := ctExchange(t, pc, ctProduce(9, 1, ctPart{"slowcopy", 0, ctBatch(5, 100_000)}), int32(i)).(*kmsg.ProduceResponse)
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
	fr := ctFetch(11, 100, 1, "slowcopy", 0, 0)
	fr.Topics[0].Partitions[0].PartitionMaxBytes = 64 << 20
	fr.MaxBytes = 64 << 20
	if _, err := nc.Write(ctEncode(fr, 1)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	total := int(binary.BigEndian.Uint32(size[:]))
	start, got := time.Now(), 0
	buf := make([]byte, burst)
	for got < total {
		n, err := io.ReadFull(nc, buf[:min(len(buf), total-got)])
		got += n
		if err != nil {
			t.Fatalf("a client reading a %d-byte copied (non-sendfile) fetch response, %d bytes every %v, was cut off after %d bytes and %v: %v; "+
				"connections.max.idle.ms (300 ms) closes only a connection that makes no progress", total, burst, pause, got, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(pause)
	}
	t.Logf("read %d bytes in %v", got, time.Since(start))
}

func TestCopiedFetchBurstyReaderNotIdle(t *testing.T) {
	largeCopiedFetch(t, 2<<20, 35*time.Millisecond)
}
