package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareOptions configure the share-group benchmark: how fast one share consumer (KIP-932) goes
// through a topic when it acknowledges as it polls. A topic is filled first; then, for each
// poll size and each way of acknowledging, a new share group (share.auto.offset.reset=earliest)
// reads it all with one consumer:
//
//   - sync: every poll's records are accepted and the acknowledgement is flushed (a
//     ShareAcknowledge, waited for) before the next poll, as Java's explicit mode with
//     commitSync does;
//   - async: a poll's records are accepted when the next poll begins, and the acknowledgements
//     ride on the next ShareFetch, as Java's implicit mode does.
//
// Fetches are strict (ShareMaxRecordsStrict, KIP-1206's record limit): the cluster locks at most
// the poll's records per fetch rather than whole batches, so each acknowledgement covers one
// poll in both modes. The share-partition's state is written for each acknowledgement on both
// Kafka and Runnel, so a consumer that acknowledges a few records at a time is bound by that
// write.
type ShareOptions struct {
	Bootstrap    []string
	Label        string
	Records      int   // records in the topic; default 20,000
	RecordSize   int   // default 100 bytes
	Partitions   int32 // default 1
	MaxRecords   []int // records per poll, one run per value; default 10 and 500
	Modes        []string
	TopicConfigs map[string]string
	Timeout      time.Duration // per run; default 5 min
	Progress     io.Writer
}

// ShareModes are the ways of acknowledging the benchmark knows.
var ShareModes = []string{"sync", "async"}

// ShareResult is what the share-group benchmark measured.
type ShareResult struct {
	Label string     `json:"label"`
	Runs  []ShareRun `json:"runs"`
}

// ShareRun is one group reading the whole topic.
type ShareRun struct {
	Mode       string  `json:"mode"`
	MaxRecords int     `json:"max_records"`
	Records    int64   `json:"records"`     // distinct records acknowledged
	Redelivers int64   `json:"redelivered"` // records delivered again (a lock expired, a session moved)
	Seconds    float64 `json:"seconds"`     // first poll to the last acknowledgement
	PerSecond  float64 `json:"records_per_s"`
	// Cycle is a poll's return to the next poll's return; Ack is the flush of a poll's
	// acknowledgements (sync only).
	Cycle LatencyStats `json:"cycle"`
	Ack   LatencyStats `json:"ack"`
}

// WriteText prints the result.
func (r *ShareResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "share group, one consumer, on %s\n", r.Label)
	fmt.Fprintf(w, "  %-6s %7s %10s %11s %14s %14s %11s\n", "mode", "poll", "records/s", "seconds", "cycle p50/p99", "ack p50/p99", "redelivered")
	for _, run := range r.Runs {
		ack := "-"
		if run.Ack.Count > 0 {
			ack = fmt.Sprintf("%.2f/%.2f ms", run.Ack.Median, run.Ack.P99)
		}
		fmt.Fprintf(w, "  %-6s %7d %10.0f %11.2f %14s %14s %11d\n", run.Mode, run.MaxRecords, run.PerSecond, run.Seconds,
			fmt.Sprintf("%.2f/%.2f ms", run.Cycle.Median, run.Cycle.P99), ack, run.Redelivers)
	}
}

func (o *ShareOptions) defaults() error {
	if o.Records <= 0 {
		o.Records = 20000
	}
	if o.RecordSize <= 0 {
		o.RecordSize = 100
	}
	if o.Partitions <= 0 {
		o.Partitions = 1
	}
	if len(o.MaxRecords) == 0 {
		o.MaxRecords = []int{10, 500}
	}
	if len(o.Modes) == 0 {
		o.Modes = ShareModes
	}
	for _, m := range o.Modes {
		if !oneOf(m, ShareModes...) {
			return fmt.Errorf("bench share: unknown mode %q (want %s)", m, strings.Join(ShareModes, ", "))
		}
	}
	for _, k := range o.MaxRecords {
		if k <= 0 {
			return fmt.Errorf("bench share: records per poll must be positive, not %d", k)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Share runs the share-group benchmark against one cluster.
func Share(ctx context.Context, opts ShareOptions) (*ShareResult, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(opts.Bootstrap...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	topic := "bench-share-" + suffix
	configs := map[string]*string{}
	for k, v := range opts.TopicConfigs {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, opts.Partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return nil, fmt.Errorf("bench share: creating %s: %w", topic, err)
	}
	defer adm.DeleteTopics(context.Background(), topic)
	if err := waitForLeaders(ctx, adm, []string{topic}, opts.Partitions); err != nil {
		return nil, err
	}
	value := []byte(strings.Repeat("x", opts.RecordSize))
	recs := make([]*kgo.Record, opts.Records)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: value}
	}
	if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("bench share: filling %s: %w", topic, err)
	}
	res := &ShareResult{Label: opts.Label}
	for _, k := range opts.MaxRecords {
		for _, mode := range opts.Modes {
			group := fmt.Sprintf("bench-share-%s-%d-%s", mode, k, suffix)
			if err := setShareReset(ctx, admCl, group); err != nil {
				return nil, err
			}
			fmt.Fprintf(opts.Progress, "%s: %s, %d records per poll\n", opts.Label, mode, k)
			run, err := shareRun(ctx, opts, topic, group, mode, k)
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, run)
			adm.DeleteGroups(context.Background(), group) // Kafka deletes share groups with DeleteGroups too
		}
	}
	return res, nil
}

// setShareReset makes a new share group start at the log start (its default is the end).
func setShareReset(ctx context.Context, cl *kgo.Client, group string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	earliest := "earliest"
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: &earliest}}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Resources) == 1 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("bench share: setting share.auto.offset.reset of %s: %w", group, err)
	}
	return nil
}

// shareRun reads the whole topic with one share consumer of a new group.
func shareRun(ctx context.Context, opts ShareOptions, topic, group, mode string, k int) (ShareRun, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	run := ShareRun{Mode: mode, MaxRecords: k}
	var mu sync.Mutex
	var ackErr error // the first acknowledgement the cluster refused
	cl, err := kgo.NewClient(kgo.SeedBrokers(opts.Bootstrap...), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.ShareMaxRecords(int32(k)), kgo.ShareMaxRecordsStrict(), kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			if err := rs.Error(); err != nil && ackErr == nil {
				ackErr = err
			}
		}))
	if err != nil {
		return run, err
	}
	defer cl.Close()
	type pos struct {
		p int32
		o int64
	}
	seen := make(map[pos]struct{}, opts.Records)
	cycle, ack := NewHistogram(), NewHistogram()
	var start, last time.Time // the first and the latest poll with records
	for len(seen) < opts.Records {
		fs := cl.PollRecords(ctx, k)
		if err := ctx.Err(); err != nil {
			return run, fmt.Errorf("bench share: %s, %d per poll: %d of %d records after %v: %w", mode, k, len(seen), opts.Records, opts.Timeout, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil && kerr.IsRetriable(ferr) {
			ferr = nil
		}
		if ferr != nil {
			return run, fmt.Errorf("bench share: poll: %w", ferr)
		}
		now := time.Now()
		if fs.NumRecords() == 0 {
			continue
		}
		if start.IsZero() {
			start = now
		} else {
			cycle.RecordValue(now.Sub(last).Microseconds())
		}
		last = now
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := seen[pos{r.Partition, r.Offset}]; ok {
				run.Redelivers++
			}
			seen[pos{r.Partition, r.Offset}] = struct{}{}
		})
		if mode == "sync" {
			cl.MarkAcks(kgo.AckAccept)
			t := time.Now()
			if err := cl.FlushAcks(ctx); err != nil {
				return run, fmt.Errorf("bench share: flushing acknowledgements: %w", err)
			}
			ack.RecordValue(time.Since(t).Microseconds())
		}
	}
	// The last poll's records: accepted and flushed in both modes, so the run ends when the
	// group has all of them.
	cl.MarkAcks(kgo.AckAccept)
	if err := cl.FlushAcks(ctx); err != nil {
		return run, fmt.Errorf("bench share: flushing acknowledgements: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ackErr != nil {
		return run, fmt.Errorf("bench share: an acknowledgement failed: %w", ackErr)
	}
	run.Seconds = time.Since(start).Seconds()
	run.Records = int64(len(seen))
	run.PerSecond = float64(run.Records) / run.Seconds
	run.Cycle = latencyStats(cycle)
	if ack.TotalCount() > 0 {
		run.Ack = latencyStats(ack)
	}
	return run, nil
}
