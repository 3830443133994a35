package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FailoverOptions configure a failover measurement.
type FailoverOptions struct {
	Bootstrap []string
	Label     string
	// Kill kills a node with SIGKILL and returns once the process is gone; Restart starts it
	// again. Shell builds both from command lines.
	Kill, Restart func(ctx context.Context, node int32) error
	Rounds        int           // default 3
	Rate          float64       // records/s; default 1000
	Settle        time.Duration // after a restart, before the next round; default 15 s
	TopicConfigs  map[string]string
	Progress      io.Writer
}

// FailoverResult is what a failover measurement found: per round, the time from the kill of the
// partition leader to the first acknowledgement of a record a new leader wrote.
type FailoverResult struct {
	Label    string          `json:"label"`
	Rounds   []time.Duration `json:"rounds_ns"`
	Killed   []int32         `json:"killed"`
	Median   time.Duration   `json:"median_ns"`
	Max      time.Duration   `json:"max_ns"`
	Acked    int             `json:"acked"`
	Failures int             `json:"failed"`
}

// WriteText prints the result.
func (r *FailoverResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "failover of %s: kill -9 of the partition leader → next acknowledged produce\n", r.Label)
	for i, d := range r.Rounds {
		fmt.Fprintf(w, "  round %d: killed node %d, %v\n", i+1, r.Killed[i], d.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  median %v, max %v; %d records acknowledged, %d failed\n", r.Median.Round(time.Millisecond),
		r.Max.Round(time.Millisecond), r.Acked, r.Failures)
}

// Failover produces acks=all (idempotent) records at a fixed rate to a new one-partition topic
// of the cluster's default replication factor, kills the partition's leader, and measures the
// time from the kill to the first acknowledgement of a record written in a later leader epoch
// (read back from the log at the end: an acknowledgement the dead leader sent just before it died
// may reach the client after the kill, and does not count); then restarts the node and does it
// again.
//
// The client refreshes metadata at most every 100 ms (kgo.MetadataMinAge; franz-go's default
// is 5 s, which would measure the client, not the cluster).
func Failover(ctx context.Context, o FailoverOptions) (*FailoverResult, error) {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.Settle == 0 {
		o.Settle = 15 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Kill == nil || o.Restart == nil {
		return nil, errors.New("bench: failover needs a way to kill and restart a node")
	}
	topic := fmt.Sprintf("failover-%d", time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.Bootstrap...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	configs := map[string]*string{}
	for k, v := range o.TopicConfigs {
		configs[k] = &v
	}
	if resp, err := adm.CreateTopic(ctx, 1, -1, configs, topic); err != nil || resp.Err != nil {
		return nil, fmt.Errorf("bench: creating %s: %w", topic, errors.Join(err, resp.Err))
	}
	defer adm.DeleteTopics(context.Background(), topic)
	res := &FailoverResult{Label: o.Label}
	type ackAt struct {
		offset int64
		at     time.Time
	}
	var mu sync.Mutex
	var lastAck time.Time
	var acks []ackAt
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		sent := 0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for due := int(time.Since(start).Seconds() * o.Rate); sent < due; sent++ {
				cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(sent))}, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						res.Failures++
						return
					}
					res.Acked++
					lastAck = time.Now()
					acks = append(acks, ackAt{r.Offset, lastAck})
				})
			}
		}
	}()
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
			cl.Flush(context.Background())
		}
	}
	defer stopLoad()
	type kill struct {
		at    time.Time
		epoch int32
	}
	var kills []kill
	time.Sleep(3 * time.Second)
	for round := 0; round < o.Rounds; round++ {
		leader, epoch, err := partitionLeader(ctx, adm, topic)
		if err != nil {
			return res, err
		}
		t := time.Now()
		if err := o.Kill(ctx, leader); err != nil {
			return res, err
		}
		kills, res.Killed = append(kills, kill{t, epoch}), append(res.Killed, leader)
		returned := time.Now()
		for { // the next acknowledgement, maybe a late one of the old leader: enough to go on
			mu.Lock()
			seen := lastAck.After(returned)
			mu.Unlock()
			if seen {
				break
			}
			if time.Since(t) > time.Minute {
				return res, fmt.Errorf("bench: nothing acknowledged for a minute after killing node %d", leader)
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Fprintf(o.Progress, "%s round %d: killed leader %d (epoch %d)\n", o.Label, round+1, leader, epoch)
		if err := o.Restart(ctx, leader); err != nil {
			return res, err
		}
		time.Sleep(o.Settle) // the node catches up and, maybe, leads again
	}
	stopLoad()
	epochs, err := readEpochs(ctx, o.Bootstrap, topic)
	if err != nil {
		return res, err
	}
	mu.Lock()
	defer mu.Unlock()
	for i, k := range kills {
		var first time.Time
		for _, a := range acks {
			if e, ok := epochs[a.offset]; ok && e > k.epoch && a.at.After(k.at) && (first.IsZero() || a.at.Before(first)) {
				first = a.at
			}
		}
		if first.IsZero() {
			return res, fmt.Errorf("bench: round %d: no record of a later leader epoch than %d was acknowledged", i+1, k.epoch)
		}
		res.Rounds = append(res.Rounds, first.Sub(k.at))
	}
	res.Median, res.Max = medianOf(res.Rounds), slices.Max(res.Rounds)
	return res, nil
}

// medianOf is the median of ds (not empty): the middle one, or the mean of the two middle ones.
func medianOf(ds []time.Duration) time.Duration {
	sorted := slices.Sorted(slices.Values(ds))
	n := len(sorted)
	if n%2 == 0 {
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return sorted[n/2]
}

// partitionLeader is partition 0's leader and leader epoch, as Metadata says.
func partitionLeader(ctx context.Context, adm *kadm.Client, topic string) (int32, int32, error) {
	for range 100 {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok && p.Leader >= 0 {
				return p.Leader, p.LeaderEpoch, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, -1, fmt.Errorf("bench: %s has no leader", topic)
}

// readEpochs reads partition 0 of topic from its start to its end: offset → the leader epoch of
// the batch that holds it.
func readEpochs(ctx context.Context, bootstrap []string, topic string) (map[int64]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("bench: end offset of %s: %w", topic, err)
	}
	end, _ := ends.Lookup(topic, 0)
	out := map[int64]int32{}
	for last := int64(-1); last+1 < end.Offset; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bench: reading %s back: %w", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Offset] = r.LeaderEpoch
			last = max(last, r.Offset)
		})
	}
	return out, nil
}

// Shell is a kill or restart action that runs cmdline with sh -c, {node} standing for the
// node id (scripts/cluster.sh kill {node}, scripts/kafka.sh cluster-restart {node}, ...).
func Shell(cmdline string, out io.Writer) func(context.Context, int32) error {
	return func(ctx context.Context, node int32) error {
		if cmdline == "" {
			return errors.New("bench: no command given")
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmdline, "{node}", strconv.Itoa(int(node))))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("bench: %q: %w", cmdline, err)
		}
		return nil
	}
}
