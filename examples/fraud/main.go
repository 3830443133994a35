// Command fraud is the example application of Runnel's total-order topics (docs/speclog.md):
// the fraud monitor of the SpecLog paper. Payment generators append card payments to the shards
// of a total-order topic (one shard per region); the monitor subscribes to the whole log, keeps
// a sliding window of spend per card, and raises an alert when a card spends over the limit in
// its last payments. It computes on speculative records at once, rolls back on a fail notice,
// and prints an alert only once its position is confirmed.
//
//	runnel serve &
//	runnel topic create payments --partitions 3 --config runnel.ordering=total
//	go run ./examples/fraud --speclog 127.0.0.1:9096 --topic payments --generate 2000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/runnel-dev/runnel/speclog"
)

func main() {
	addr := flag.String("speclog", "127.0.0.1:9096", "the SpecLog address of a Runnel node")
	topic := flag.String("topic", "payments", "a total-order topic")
	generate := flag.Int("generate", 0, "append this many random payments per shard first (0: only monitor)")
	window := flag.Int("window", 5, "payments per card the limit applies to")
	limit := flag.Int64("limit", 400_000, "cents a card may spend over its window")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, *topic, *generate, *window, *limit); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "fraud:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, topic string, generate, window int, limit int64) error {
	c, err := speclog.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	log := c.Topic(topic)
	d, err := log.Describe(ctx)
	if err != nil {
		return err
	}
	m := NewMonitor(window, limit, func(a Alert) {
		fmt.Printf("ALERT card %s spent %d.%02d over its last %d payments (position %d)\n", a.Card, a.Spent/100, a.Spent%100, window, a.Position)
	})
	if generate > 0 {
		var wg sync.WaitGroup
		for _, s := range d.Shards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := Generate(ctx, log, s.Shard, generate, rand.New(rand.NewPCG(uint64(s.Shard), 7))); err != nil {
					fmt.Fprintln(os.Stderr, "fraud: generating:", err)
				}
			}()
		}
		defer wg.Wait()
	}
	sub := log.Subscribe(ctx, d.Trimmed, speclog.SubscribeOptions{})
	for {
		ev, err := sub.Next()
		if err != nil {
			return err
		}
		if err := m.Handle(ev); err != nil {
			return err
		}
	}
}

// Generate appends n random payments to a shard: cards of the shard's region, mostly small
// amounts, now and then a large one.
func Generate(ctx context.Context, log *speclog.Log, shard int32, n int, rnd *rand.Rand) error {
	for i := range n {
		p := Payment{Card: fmt.Sprintf("r%d-%02d", shard, rnd.IntN(20)), Amount: int64(100 + rnd.IntN(20000))}
		if rnd.IntN(50) == 0 {
			p.Amount = int64(200_000 + rnd.IntN(200_000))
		}
		v, _ := json.Marshal(p)
		if _, err := log.Append(ctx, shard, speclog.Record{Key: []byte(p.Card), Value: v}); err != nil {
			return fmt.Errorf("payment %d: %w", i, err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return nil
}
