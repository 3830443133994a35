package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadyResponseNotHeldBehindLongPoll: a response that is ready goes out while a later
// request on the connection still waits (a Fetch's long poll), as in Kafka. The write loop used
// to flush only when nothing else was queued, and then waited for the next request's slow part:
// a Metadata answer ready after the first fetch's 200 ms waited in the write buffer for the
// second fetch's 3 s.
func TestReadyResponseNotHeldBehindLongPoll(t *testing.T) {
	_, addr, reg := ctBroker(t, nil)
	ctCreate(t, reg, "lp", 1, nil)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	var wire []byte
	wire = append(wire, ctEncode(ctFetch(11, 200, 1, "lp", 0, 0), 1)...)  // empty log: waits 200 ms
	wire = append(wire, ctEncode(meta, 2)...)                             // ready at once
	wire = append(wire, ctEncode(ctFetch(11, 3000, 1, "lp", 0, 0), 3)...) // waits 3 s
	nc := ctDial(t, addr)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := nc.Write(wire); err != nil {
		t.Fatal(err)
	}
	for want := int32(1); want <= 2; want++ {
		corr, _, err := ctReadFrame(nc)
		if err != nil || corr != want {
			t.Fatalf("response %d: correlation id %d, %v", want, corr, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("response %d (ready after ~200 ms) arrived after %v: held back while the next request long-polls", want, took.Round(time.Millisecond))
		}
	}
}
