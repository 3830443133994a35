package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel-dev/runnel/internal/broker"
	"github.com/runnel-dev/runnel/internal/server"
)

// TestLogRetentionCheckInterval: --log-retention-check-interval (Kafka's
// log.retention.check.interval.ms) sets how often retention runs: at 200 ms a topic with
// retention.bytes=0 is emptied within a second or two of its records, where the 5-minute
// default would keep them.
func TestLogRetentionCheckInterval(t *testing.T) {
	b := startBrokerConfig(t, t.TempDir(), "127.0.0.1:0", broker.Hooks{}, func(c *server.Config) {
		c.LogRetentionCheckInterval, c.LogCleanerBackoff = 200*time.Millisecond, 200*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("ret"))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.bytes": kadm.StringPtr("0")}, "ret"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		starts, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("ret", 0); o.Offset == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log start offset %v 10 s after producing; want 3 (retention.bytes=0 checked every 200 ms)", starts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
