package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options are the parts of a run that are not the workload.
type Options struct {
	Bootstrap   []string // host:port of the cluster's brokers
	Label       string   // names the target in reports ("runnel", "kafka"); may be empty
	TopicPrefix string   // default "bench-<workload name>-<6 random hex digits>"
	KeepTopics  bool     // leave the topics behind instead of deleting them
	// DrainTimeout bounds each wait after the schedule ends: for a producer that fell behind to
	// send its backlog, for the acks, and for the consumers to receive every acked record.
	// Default 30 s.
	DrainTimeout time.Duration
	Progress     io.Writer // a line per second; nil for none
	// ClientOpts are added to every client the run makes, after the workload's options.
	ClientOpts []kgo.Opt
	// Metrics are admin addresses (host:port or URLs) of Runnel brokers whose /metrics are
	// scraped at the measured window's start and end: the result then has object topics'
	// stage times and object store request rates (ServerStats).
	Metrics []string
}

func (o *Options) withDefaults(w *Workload) error {
	if len(o.Bootstrap) == 0 {
		return errors.New("bench: no bootstrap address")
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.TopicPrefix == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		o.TopicPrefix = "bench-" + topicSafe.ReplaceAllString(w.Name, "_") + "-" + hex.EncodeToString(b[:])
	}
	return nil
}

var topicSafe = regexp.MustCompile(`[^a-zA-Z0-9._-]`)

// errorLog keeps the first distinct error messages of a run and how often each occurred.
type errorLog struct {
	mu     sync.Mutex
	counts map[string]int64
	order  []string
}

const maxDistinctErrors = 10

func (l *errorLog) add(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int64{}
	}
	if _, ok := l.counts[msg]; !ok && len(l.order) >= maxDistinctErrors {
		msg = "(other errors)"
	}
	if _, ok := l.counts[msg]; !ok {
		l.order = append(l.order, msg)
	}
	l.counts[msg]++
}

func (l *errorLog) list() []ErrorCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ErrorCount, 0, len(l.order))
	for _, m := range l.order {
		out = append(out, ErrorCount{Error: m, Count: l.counts[m]})
	}
	return out
}

// run is one execution of a workload; Run owns it.
type run struct {
	w         Workload
	opts      Options
	topics    []string
	start     time.Time // first intended send time
	window    window
	producers []*producer
	consumers []*consumer
	errs      errorLog
	notes     []string
	intervals []Interval
	scraped   chan struct{} // closed when scrapeWindow is done
	server    *ServerStats
}

// Run creates the workload's topics, runs its producers and consumers, deletes the topics (unless
// opts.KeepTopics) and returns the result. It fails only if the run could not take place
// (invalid workload, topics not created, clients not made); produce and fetch errors are counted
// in the result.
func Run(ctx context.Context, w Workload, opts Options) (*Result, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := opts.withDefaults(&w); err != nil {
		return nil, err
	}
	r := &run{w: w, opts: opts}
	for i := range w.Topics {
		r.topics = append(r.topics, fmt.Sprintf("%s-%d", opts.TopicPrefix, i))
	}
	// A run that does not take place deletes the topics it created, KeepTopics or not (there
	// is nothing in them to keep), and none that existed before it.
	if created, err := r.createTopics(ctx); err != nil {
		return nil, errors.Join(err, DeleteTopics(opts.Bootstrap, opts.ClientOpts, created))
	}
	closeClients, err := r.makeClients()
	if err != nil {
		closeClients()
		return nil, errors.Join(err, DeleteTopics(opts.Bootstrap, opts.ClientOpts, r.topics))
	}
	res := r.execute(ctx)
	res.Topics = r.topics
	closeClients()
	if err := r.deleteTopics(); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	return res, nil
}

// newClient makes a franz-go client for the run.
func (r *run) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return newClient(r.opts.Bootstrap, r.opts.ClientOpts, opts...)
}

// newClient makes a bench client of the cluster at bootstrap: opts, then clientOpts (the
// caller's, e.g. TLS and SASL).
func newClient(bootstrap []string, clientOpts []kgo.Opt, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.ClientID("runnel-bench")}, opts...)
	return kgo.NewClient(append(all, clientOpts...)...)
}

// createTopics creates the run's topics and waits for their leaders. It returns the ones it
// created, also when it fails.
func (r *run) createTopics(ctx context.Context) (created []string, _ error) {
	cl, err := r.newClient()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	configs := map[string]*string{}
	for k, v := range r.w.TopicConfigs {
		configs[k] = &v
	}
	resps, err := adm.CreateTopics(ctx, r.w.Partitions, r.w.ReplicationFactor, configs, r.topics...)
	if err != nil {
		return nil, fmt.Errorf("bench: creating topics: %w", err)
	}
	var failed error
	for _, t := range r.topics {
		resp, ok := resps[t]
		if ok && resp.Err == nil {
			created = append(created, t)
			continue
		}
		if failed != nil {
			continue
		}
		msg := "no answer"
		if ok {
			msg = resp.Err.Error()
			if resp.ErrMessage != "" {
				msg += ": " + resp.ErrMessage
			}
		}
		failed = fmt.Errorf("bench: creating topic %s (%d partitions, configs %v): %s", t, r.w.Partitions, r.w.TopicConfigs, msg)
	}
	if failed != nil {
		return created, failed
	}
	return created, waitForLeaders(ctx, adm, r.topics, r.w.Partitions)
}

// waitForLeaders waits until the metadata shows every partition of topics with a leader.
func waitForLeaders(ctx context.Context, adm *kadm.Client, topics []string, partitions int32) error {
	for {
		details, err := adm.ListTopics(ctx, topics...)
		ready := err == nil
		for _, t := range topics {
			d, ok := details[t]
			ready = ready && ok && d.Err == nil && int32(len(d.Partitions)) == partitions
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: topics created but their partitions have no leader: %v (last error %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deleteTopics deletes the run's topics unless opts.KeepTopics.
func (r *run) deleteTopics() error {
	if r.opts.KeepTopics {
		return nil
	}
	return DeleteTopics(r.opts.Bootstrap, r.opts.ClientOpts, r.topics)
}

// DeleteTopics deletes topics from the cluster at bootstrap.
func DeleteTopics(bootstrap []string, clientOpts []kgo.Opt, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	cl, err := newClient(bootstrap, clientOpts)
	if err != nil {
		return fmt.Errorf("deleting the topics: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("deleting the topics: %w", err)
	}
	return nil
}

// makeClients makes every producer and consumer, with the schedule starting shortly after.
// The returned function closes every client made, even after an error.
func (r *run) makeClients() (func(), error) {
	var clients []*kgo.Client
	closeAll := func() {
		for _, cl := range clients {
			cl.Close()
		}
	}
	w := &r.w
	for s := range w.Subscriptions {
		for _, assigned := range assignPartitions(r.topics, w.Partitions, w.Consumers) {
			cl, err := r.newClient(consumerOpts(w, assigned)...)
			if err != nil {
				return closeAll, fmt.Errorf("bench: consumer: %w", err)
			}
			clients = append(clients, cl)
			r.consumers = append(r.consumers, &consumer{subscription: s, cl: cl, latency: NewRecorder(), errs: &r.errs})
		}
	}
	r.start = time.Now().Add(100 * time.Millisecond)
	measure := r.start.Add(time.Duration(w.Warmup))
	r.window = window{start: measure, end: measure.Add(time.Duration(w.Duration))}
	for _, c := range r.consumers {
		c.window = r.window
	}
	scheds := newSchedules(r.start, w.TotalRate(), w.Producers)
	for i := range w.Producers {
		cl, err := r.newClient(producerOpts(w)...)
		if err != nil {
			return closeAll, fmt.Errorf("bench: producer: %w", err)
		}
		clients = append(clients, cl)
		r.producers = append(r.producers, newProducer(i, cl, w, r.topics, scheds[i], r.window, &r.errs))
	}
	return closeAll, nil
}

// newSchedules splits a total rate among n producers: each gets total/n, and producer i starts
// i/total later, so together they send evenly spaced records. At total 0 (maximum rate) every
// entry is nil.
func newSchedules(start time.Time, total float64, n int) []*Schedule {
	scheds := make([]*Schedule, n)
	if total <= 0 {
		return scheds
	}
	for i := range scheds {
		scheds[i] = NewSchedule(start.Add(time.Duration(float64(i)*1e9/total)), total/float64(n))
	}
	return scheds
}

// execute runs the schedule, drains, and collects the result.
func (r *run) execute(ctx context.Context) *Result {
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	var consumersDone sync.WaitGroup
	for _, c := range r.consumers {
		consumersDone.Go(func() { c.run(consumeCtx) })
	}
	r.scraped = make(chan struct{})
	if len(r.opts.Metrics) > 0 {
		go r.scrapeWindow(ctx)
	} else {
		close(r.scraped)
	}
	progressCtx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	go func() { r.reportProgress(progressCtx); close(progressDone) }()

	// The hard deadline: a producer that has fallen behind gets DrainTimeout past the end to
	// send its backlog. Records carry recordCtx, which ends only when the drain has given up:
	// franz-go fails a buffered record whose context ends, even one merely lingering.
	scheduleCtx, cancelSchedule := context.WithDeadline(ctx, r.window.end.Add(r.opts.DrainTimeout))
	defer cancelSchedule()
	recordCtx, cancelRecords := context.WithCancel(ctx)
	defer cancelRecords()
	producing := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, p := range r.producers {
			wg.Go(func() { p.run(scheduleCtx, recordCtx, r.window.end) })
		}
		wg.Wait()
		close(producing)
	}()
	select {
	case <-producing:
	case <-scheduleCtx.Done(): // past the hard deadline: unblock a Produce waiting for buffer space
		cancelRecords()
		<-producing
	}
	r.flushProducers(ctx)
	cancelRecords()
	r.waitForConsumers(ctx)

	stopProgress()
	<-progressDone
	stopConsumers()
	consumersDone.Wait()
	<-r.scraped
	return r.result(ctx)
}

func (r *run) flushProducers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.DrainTimeout)
	defer cancel()
	for _, p := range r.producers {
		if err := p.cl.Flush(ctx); err != nil {
			if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
				return // interrupted: the result says so
			}
			r.notes = append(r.notes, fmt.Sprintf("producer %d: not every record was acked within %v of the end: %v", p.id, r.opts.DrainTimeout, err))
			return
		}
	}
}

// waitForConsumers waits until every subscription has received as many records as were acked.
func (r *run) waitForConsumers(ctx context.Context) {
	if len(r.consumers) == 0 {
		return
	}
	var acked int64
	for _, p := range r.producers {
		acked += p.stats.acked.Load()
	}
	deadline := time.Now().Add(r.opts.DrainTimeout)
	for {
		short := ""
		for s, got := range r.consumedPerSubscription() {
			if got < acked {
				short = fmt.Sprintf("subscription %d received %d of the %d acked records", s, got, acked)
				break
			}
		}
		switch {
		case short == "":
			return
		case ctx.Err() != nil || time.Now().After(deadline):
			r.notes = append(r.notes, fmt.Sprintf("consumers stopped after waiting %v: %s", r.opts.DrainTimeout, short))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *run) consumedPerSubscription() []int64 {
	got := make([]int64, r.w.Subscriptions)
	for _, c := range r.consumers {
		got[c.subscription] += c.stats.consumed.Load()
	}
	return got
}

// reportProgress takes an interval sample every second until ctx ends, and writes it to
// opts.Progress.
func (r *run) reportProgress(ctx context.Context) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			iv := r.sample(now, now.Sub(last))
			last = now
			r.intervals = append(r.intervals, iv)
			if r.opts.Progress != nil {
				fmt.Fprintln(r.opts.Progress, formatProgress(r.opts.Label, iv))
			}
		}
	}
}

// sample drains every recorder's interval histogram into one Interval of length elapsed.
func (r *run) sample(now time.Time, elapsed time.Duration) Interval {
	produce, e2e := NewHistogram(), NewHistogram()
	var errs int64
	for _, p := range r.producers {
		p.latency.TakeInterval(produce)
		errs += p.stats.failed.Load()
	}
	for _, c := range r.consumers {
		c.latency.TakeInterval(e2e)
		errs += c.stats.failed.Load()
	}
	phase := "run"
	switch {
	case now.Before(r.window.start):
		phase = "warmup"
	case !now.Before(r.window.end):
		phase = "drain"
	}
	secs := elapsed.Seconds()
	ps, es := Summarize(produce), Summarize(e2e)
	return Interval{Seconds: round3(now.Sub(r.start).Seconds()), Phase: phase,
		ProduceRate: round3(float64(ps.Count) / secs), ProduceP50Ms: ps.P50Ms, ProduceP99Ms: ps.P99Ms,
		E2ERate: round3(float64(es.Count) / secs), E2EP50Ms: es.P50Ms, E2EP99Ms: es.P99Ms, Errors: errs}
}

// result collects the counters and histograms once every goroutine has stopped; ctx is the
// run's context, ended if the run was interrupted.
func (r *run) result(ctx context.Context) *Result {
	res := &Result{Label: r.opts.Label, Bootstrap: strings.Join(r.opts.Bootstrap, ","), Workload: r.w,
		Started: r.start, Rounds: 1, MeasuredSeconds: time.Duration(r.w.Duration).Seconds(),
		TargetRate: r.w.TotalRate(), Intervals: r.intervals, Notes: r.notes, Errors: r.errs.list(), Server: r.server}
	var produceHists, lagHists, e2eHists []*hdrhistogram.Histogram
	for _, p := range r.producers {
		h, clamped := p.latency.Window()
		produceHists, lagHists = append(produceHists, h), append(lagHists, p.lag)
		res.Records.add(Counts{Clamped: clamped, Sent: p.stats.sent.Load(), Acked: p.stats.acked.Load(),
			ProduceErrors: p.stats.failed.Load(), Unsent: p.unsent, AckedMeasured: p.stats.ackedMeasured.Load(),
			AckedBytesMeasured: p.stats.bytesMeasured.Load()})
	}
	for _, cons := range r.consumers {
		h, clamped := cons.latency.Window()
		e2eHists = append(e2eHists, h)
		res.Records.add(Counts{Clamped: clamped, Consumed: cons.stats.consumed.Load(), FetchErrors: cons.stats.failed.Load(),
			Foreign: cons.stats.foreign.Load(), ConsumedMeasured: cons.stats.consumedMeasured.Load(),
			ConsumedBytesMeasured: cons.stats.bytesMeasured.Load()})
	}
	res.produceHist = MergeHistograms(produceHists...)
	res.lagHist = MergeHistograms(lagHists...)
	res.e2eHist = MergeHistograms(e2eHists...)
	switch {
	case ctx.Err() != nil:
		res.Notes = append(res.Notes, fmt.Sprintf("interrupted (%v): the numbers cover only part of the run", context.Cause(ctx)))
	case res.Records.Unsent > 0:
		res.Notes = append(res.Notes, fmt.Sprintf("the target rate was not sustained: %d scheduled records were never sent", res.Records.Unsent))
	}
	res.summarize()
	return res
}
