package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnOptions configure the transaction benchmarks of seed 004 (Redpanda's "fast transactions"):
//
//   - stream: consume-transform-produce, one record at a time, closed loop. The transactional
//     cycle is begin, produce the record, add the consumer's offset to the transaction
//     (sendOffsetsToTransaction) and commit; the plain cycle is produce with acks=all, wait for
//     the acknowledgement, commit the offset synchronously. Reported: the latency of a cycle
//     (median, p99) of each, and their ratio (Redpanda reported 4.6×, Kafka 6.3×).
//   - bulk: N records sent in one transaction and committed, against N records sent with
//     acks=all (idempotent) and all acknowledged; reported: records/s of each.
type TxnOptions struct {
	Bootstrap  []string
	Label      string
	Cycles     int // stream: cycles of each kind; default 2000
	Bulk       int // bulk: records per round; default 10000
	BulkRounds int // default 3
	// BulkBatchBytes is the producers' batch size in the bulk runs (batch.size; default 16384,
	// the Java client's default, as seed 004's workload ran with it); both runs also use the
	// Java client's linger.ms (5); both are idempotent, with 5 requests in flight as Java.
	BulkBatchBytes int
	RecordSize     int // default 100 bytes
	TopicConfigs   map[string]string
	Progress       io.Writer
}

// TxnResult is what the transaction benchmarks measured.
type TxnResult struct {
	Label        string       `json:"label"`
	Txn          LatencyStats `json:"txn_cycle"`
	Plain        LatencyStats `json:"plain_cycle"`
	RatioMedian  float64      `json:"ratio_median"`
	RatioP99     float64      `json:"ratio_p99"`
	BulkTxn      float64      `json:"bulk_txn_records_per_s"`
	BulkPlain    float64      `json:"bulk_plain_records_per_s"`
	BulkTxnRuns  []float64    `json:"bulk_txn_rounds"`
	BulkPlainRns []float64    `json:"bulk_plain_rounds"`
	// Where a cycle's time goes: the produce (sent to acknowledged), then the rest (the
	// transactional commit with the offsets, or the plain offset commit).
	TxnProduce   LatencyStats `json:"txn_produce"`
	TxnCommit    LatencyStats `json:"txn_commit"`
	PlainProduce LatencyStats `json:"plain_produce"`
	PlainCommit  LatencyStats `json:"plain_commit"`
}

// LatencyStats summarize a histogram in milliseconds.
type LatencyStats struct {
	Count  int64   `json:"count"`
	Median float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

func latencyStats(h *hdrhistogram.Histogram) LatencyStats {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencyStats{Count: h.TotalCount(), Median: ms(h.ValueAtQuantile(50)), P99: ms(h.ValueAtQuantile(99)), Max: ms(h.Max())}
}

// WriteText prints the result.
func (r *TxnResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "transactions on %s\n", r.Label)
	fmt.Fprintf(w, "  stream cycle, transactional: p50 %.2f ms  p99 %.2f ms  (%d cycles)\n", r.Txn.Median, r.Txn.P99, r.Txn.Count)
	fmt.Fprintf(w, "  stream cycle, plain:         p50 %.2f ms  p99 %.2f ms  (%d cycles)\n", r.Plain.Median, r.Plain.P99, r.Plain.Count)
	fmt.Fprintf(w, "  transactional / plain:       p50 %.2f×  p99 %.2f×\n", r.RatioMedian, r.RatioP99)
	fmt.Fprintf(w, "    transactional: produce p50 %.2f ms, commit with offsets p50 %.2f ms\n", r.TxnProduce.Median, r.TxnCommit.Median)
	fmt.Fprintf(w, "    plain:         produce p50 %.2f ms, offset commit p50 %.2f ms\n", r.PlainProduce.Median, r.PlainCommit.Median)
	fmt.Fprintf(w, "  bulk, one transaction:       %.0f records/s %v\n", r.BulkTxn, roundAll(r.BulkTxnRuns))
	fmt.Fprintf(w, "  bulk, acks=all:              %.0f records/s %v\n", r.BulkPlain, roundAll(r.BulkPlainRns))
}

func roundAll(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

// Txn runs both transaction benchmarks against the cluster at opts.Bootstrap, on topics it
// creates (replication factor: the cluster's default; the topic configs given, e.g.
// write.caching=false or flush.messages=1) and deletes.
func Txn(ctx context.Context, opts TxnOptions) (*TxnResult, error) {
	if opts.Cycles <= 0 {
		opts.Cycles = 2000
	}
	if opts.Bulk <= 0 {
		opts.Bulk = 10000
	}
	if opts.BulkRounds <= 0 {
		opts.BulkRounds = 3
	}
	if opts.BulkBatchBytes <= 0 {
		opts.BulkBatchBytes = 16384
	}
	if opts.RecordSize <= 0 {
		opts.RecordSize = 100
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(opts.Bootstrap...))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	in, out, bulk := "bench-txn-in-"+suffix, "bench-txn-out-"+suffix, "bench-txn-bulk-"+suffix
	configs := map[string]*string{}
	for k, v := range opts.TopicConfigs {
		configs[k] = kadm.StringPtr(v)
	}
	for _, t := range []string{in, out, bulk} {
		resp, err := adm.CreateTopic(ctx, 1, -1, configs, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return nil, fmt.Errorf("bench txn: creating %s: %w", t, err)
		}
	}
	defer adm.DeleteTopics(context.Background(), in, out, bulk)
	value := []byte(strings.Repeat("x", opts.RecordSize))
	res := &TxnResult{Label: opts.Label}

	// Input for both stream loops.
	var recs []*kgo.Record
	for range 2*opts.Cycles + 10 {
		recs = append(recs, &kgo.Record{Topic: in, Value: value})
	}
	if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("bench txn: filling %s: %w", in, err)
	}

	fmt.Fprintf(opts.Progress, "%s: stream, transactional (%d cycles)\n", opts.Label, opts.Cycles)
	txn, err := streamTxn(ctx, opts, in, out, "bench-txn-g1-"+suffix, "bench-txn-"+suffix)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "%s: stream, plain (%d cycles)\n", opts.Label, opts.Cycles)
	plain, err := streamPlain(ctx, opts, in, out, "bench-txn-g2-"+suffix)
	if err != nil {
		return nil, err
	}
	res.Txn, res.Plain = latencyStats(txn.cycle), latencyStats(plain.cycle)
	res.TxnProduce, res.TxnCommit = latencyStats(txn.produce), latencyStats(txn.commit)
	res.PlainProduce, res.PlainCommit = latencyStats(plain.produce), latencyStats(plain.commit)
	if res.Plain.Median > 0 && res.Plain.P99 > 0 {
		res.RatioMedian, res.RatioP99 = res.Txn.Median/res.Plain.Median, res.Txn.P99/res.Plain.P99
	}

	if err := bulk2(ctx, opts, bulk, value, "bench-txn-bulk-"+suffix, res); err != nil {
		return nil, err
	}
	res.BulkTxn, res.BulkPlain = mean(res.BulkTxnRuns), mean(res.BulkPlainRns)
	return res, nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// cycleHists are a stream loop's latencies: whole cycles and their two parts.
type cycleHists struct{ cycle, produce, commit *hdrhistogram.Histogram }

func newCycleHists() cycleHists { return cycleHists{NewHistogram(), NewHistogram(), NewHistogram()} }

func (c cycleHists) record(start, produced time.Time) {
	now := time.Now()
	c.cycle.RecordValue(now.Sub(start).Microseconds())
	c.produce.RecordValue(produced.Sub(start).Microseconds())
	c.commit.RecordValue(now.Sub(produced).Microseconds())
}

// streamTxn: the transactional cycle, with franz-go's GroupTransactSession (the consumer's
// offsets go into each transaction, as Java's sendOffsetsToTransaction does).
func streamTxn(ctx context.Context, opts TxnOptions, in, out, group, txnID string) (cycleHists, error) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(opts.Bootstrap...), kgo.TransactionalID(txnID), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out), kgo.ProducerLinger(0), kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
	h := newCycleHists()
	if err != nil {
		return h, err
	}
	defer sess.Close()
	for h.cycle.TotalCount() < int64(opts.Cycles) {
		if ctx.Err() != nil {
			return h, ctx.Err()
		}
		fs := sess.PollRecords(ctx, 1)
		if err := fs.Err0(); err != nil {
			if ctx.Err() != nil {
				return h, ctx.Err()
			}
			// Group errors while the consumer joins (NOT_COORDINATOR while the offsets topic is
			// created) are retried by the client: poll again.
			fmt.Fprintf(opts.Progress, "  poll: %v (retrying)\n", err)
			time.Sleep(100 * time.Millisecond)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		start := time.Now()
		if err := sess.Begin(); err != nil {
			return h, err
		}
		if err := sess.ProduceSync(ctx, &kgo.Record{Value: recs[0].Value}).FirstErr(); err != nil {
			return h, fmt.Errorf("bench txn: produce: %w", err)
		}
		produced := time.Now()
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return h, fmt.Errorf("bench txn: commit: %w", err)
		}
		if committed {
			h.record(start, produced)
		}
	}
	return h, nil
}

// streamPlain: the plain cycle: produce with acks=all and wait, then commit the offset.
func streamPlain(ctx context.Context, opts TxnOptions, in, out, group string) (cycleHists, error) {
	h := newCycleHists()
	cons, err := kgo.NewClient(kgo.SeedBrokers(opts.Bootstrap...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return h, err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(opts.Bootstrap...), kgo.DefaultProduceTopic(out), kgo.ProducerLinger(0),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return h, err
	}
	defer prod.Close()
	for h.cycle.TotalCount() < int64(opts.Cycles) {
		if ctx.Err() != nil {
			return h, ctx.Err()
		}
		fs := cons.PollRecords(ctx, 1)
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		start := time.Now()
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: recs[0].Value}).FirstErr(); err != nil {
			return h, fmt.Errorf("bench txn: produce: %w", err)
		}
		produced := time.Now()
		if err := cons.CommitRecords(ctx, recs...); err != nil {
			return h, fmt.Errorf("bench txn: commit: %w", err)
		}
		h.record(start, produced)
	}
	return h, nil
}

// bulk2 runs the bulk rounds: one transactional and one plain producer, each warmed up with a
// round of its own (connections, producer ids, buffers), then rounds of each kind in turn.
func bulk2(ctx context.Context, opts TxnOptions, topic string, value []byte, txnID string, res *TxnResult) error {
	txnCl, err := kgo.NewClient(append(bulkProducerOpts(opts), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer txnCl.Close()
	plainCl, err := kgo.NewClient(append(bulkProducerOpts(opts), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return err
	}
	defer plainCl.Close()
	for round := range opts.BulkRounds + 1 {
		if round == 0 {
			fmt.Fprintf(opts.Progress, "%s: bulk warm-up (%d records each way)\n", opts.Label, opts.Bulk)
		} else {
			fmt.Fprintf(opts.Progress, "%s: bulk round %d of %d (%d records each way)\n", opts.Label, round, opts.BulkRounds, opts.Bulk)
		}
		t, err := bulkTxn(ctx, opts, txnCl, value)
		if err != nil {
			return err
		}
		p, err := bulkPlain(ctx, opts, plainCl, value)
		if err != nil {
			return err
		}
		if round > 0 {
			res.BulkTxnRuns, res.BulkPlainRns = append(res.BulkTxnRuns, t), append(res.BulkPlainRns, p)
		}
	}
	return nil
}

// bulkTxn sends n records in one transaction and commits it; records/s.
func bulkTxn(ctx context.Context, opts TxnOptions, cl *kgo.Client, value []byte) (float64, error) {
	start := time.Now()
	if err := cl.BeginTransaction(); err != nil {
		return 0, err
	}
	if err := produceAll(ctx, cl, opts.Bulk, value); err != nil {
		return 0, err
	}
	flushed := time.Now()
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, err
	}
	fmt.Fprintf(opts.Progress, "  transactional: sends acknowledged after %v, committed %v later\n",
		flushed.Sub(start).Round(time.Microsecond), time.Since(flushed).Round(time.Microsecond))
	return float64(opts.Bulk) / time.Since(start).Seconds(), nil
}

// bulkProducerOpts are the bulk producers' settings: the Java client's defaults (seed 004 ran
// the Java client), the batch size from the options.
func bulkProducerOpts(opts TxnOptions) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(opts.Bootstrap...), kgo.ProducerBatchMaxBytes(int32(opts.BulkBatchBytes)),
		kgo.ProducerLinger(5 * time.Millisecond)} // idempotent: franz-go keeps 5 requests in flight, as Java
}

// bulkPlain sends n records with acks=all (idempotent) and waits for every acknowledgement.
func bulkPlain(ctx context.Context, opts TxnOptions, cl *kgo.Client, value []byte) (float64, error) {
	start := time.Now()
	if err := produceAll(ctx, cl, opts.Bulk, value); err != nil {
		return 0, err
	}
	fmt.Fprintf(opts.Progress, "  acks=all: sends acknowledged after %v\n", time.Since(start).Round(time.Microsecond))
	return float64(opts.Bulk) / time.Since(start).Seconds(), nil
}

// produceAll sends n records of value and waits for every acknowledgement; the first failure,
// if any, is the error.
func produceAll(ctx context.Context, cl *kgo.Client, n int, value []byte) error {
	errc := make(chan error, 1)
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("bench txn: bulk produce: %w", err)
	default:
		return nil
	}
}
