package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// assignPartitions splits every partition of topics among n consumers of one subscription,
// dealing them out in turn. Consumers read their partitions directly (ConsumePartitions from
// the start), not through a group: the bench creates fresh topics, and Runnel has no groups yet.
// With n = 0 there are no consumers and nothing to assign.
func assignPartitions(topics []string, partitions int32, n int) []map[string]map[int32]kgo.Offset {
	if n <= 0 {
		return nil
	}
	out := make([]map[string]map[int32]kgo.Offset, n)
	for i := range out {
		out[i] = map[string]map[int32]kgo.Offset{}
	}
	k := 0
	for _, t := range topics {
		for p := range partitions {
			c := out[k%n]
			if c[t] == nil {
				c[t] = map[int32]kgo.Offset{}
			}
			c[t][p] = kgo.NewOffset().AtStart()
			k++
		}
	}
	return out
}

// consumerOpts are the franz-go options of a consumer that reads assigned partitions.
func consumerOpts(w *Workload, assigned map[string]map[int32]kgo.Offset) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumePartitions(assigned),
		kgo.FetchMaxWait(time.Duration(w.FetchMaxWait)),
	}
}

// consumerStats are a consumer's counters, written by its goroutine, read by the reporter.
type consumerStats struct {
	consumed         atomic.Int64 // records received
	consumedMeasured atomic.Int64 // with an intended send time in the window
	bytesMeasured    atomic.Int64 // their value bytes
	foreign          atomic.Int64 // values too short to carry a send time
	failed           atomic.Int64 // fetch errors
}

// consumer is one franz-go client polling its partitions.
type consumer struct {
	subscription int
	cl           *kgo.Client
	window       window
	latency      *Recorder // intended send -> receipt by PollFetches
	stats        consumerStats
	errs         *errorLog
}

// run polls until ctx ends. The receipt time of a record is when PollFetches handed it over.
func (c *consumer) run(ctx context.Context) {
	for {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		now := time.Now()
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			c.stats.failed.Add(1)
			c.errs.add(fmt.Sprintf("fetch %s/%d: %v", topic, partition, err))
		})
		fetches.EachRecord(func(r *kgo.Record) {
			c.stats.consumed.Add(1)
			intended, ok := intendedTime(r.Value)
			if !ok {
				c.stats.foreign.Add(1)
				return
			}
			measured := c.window.contains(intended)
			c.latency.Record(now.Sub(intended), measured)
			if measured {
				c.stats.consumedMeasured.Add(1)
				c.stats.bytesMeasured.Add(int64(len(r.Value)))
			}
		})
	}
}
