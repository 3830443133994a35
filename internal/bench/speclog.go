package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runnel-dev/runnel/internal/speclog/appendmux"
	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// SpecLogOptions configure `runnel bench speclog`: the workload of the SpecLog paper (seed 002)
// on a total-order topic, with speculation on and off (off: records delivered only once
// confirmed, the Scalog baseline), one after the other on fresh topics.
//
// Per shard, Appenders appenders each append Rate records/s of RecordSize bytes through the
// SpecLog API (open loop, or closed loop as the paper's clients: see appender), and one subscriber reads the shard's records; it is busy for Compute
// per delivered batch (one gRPC message of the stream). By default that busy time is modelled,
// not burnt: a batch's result is ready at max(previous result, arrival) + C, exactly the
// queueing a busy-waiting subscriber causes, without taking the CPU from the node measured (on a
// 2-core machine four spinning subscribers would). Spin busy-waits instead.
//
// Latencies are from each append's intended send time (closed loop: its hand-over): delivery (the record reaches its
// subscriber), confirmation (its position is confirmed there), end-to-end (its result is
// externalized: computed and confirmed) and append (the append is answered).
type SpecLogOptions struct {
	Brokers     []string
	SpecLogAddr string // "": the runnel.speclog.addr the first broker describes
	Shards      int
	Appenders   int     // per shard; default 10
	Rate        float64 // appends/s per appender; default 1000
	RecordSize  int     // default 4096
	// Compute is the subscriber's work per delivered batch; Sweep adds values the end-to-end
	// latency is also reported for (from the same runs when modelled; Spin runs each).
	Compute  time.Duration
	Sweep    []time.Duration
	Duration time.Duration // measured, per mode; default 60 s
	Warmup   time.Duration // before each round, not measured; default 2 s
	// Rounds splits each mode's Duration into rounds, alternating the modes (speculative,
	// baseline, speculative, ...) so that both see the machine's noise alike; default: rounds
	// of at most 15 s.
	Rounds     int
	Spin       bool
	ClosedLoop bool // one append at a time per appender, as the paper's clients
	// IdleShards: the last IdleShards shards get no appenders (a busy shard next to idle ones;
	// the latencies are the busy shards' records').
	IdleShards int
	// UnaryAppends sends each append as its own Append call instead of on one AppendStream
	// (what the Go client library does).
	UnaryAppends bool
	// ReplicationFactor of the topic's partitions (the shards' replicas); 0: the cluster's
	// default. The paper runs shards of two replicas beside a sequencer of three.
	ReplicationFactor int
	TopicConfigs      map[string]string
	Progress          io.Writer
}

// Micros summarizes latencies in microseconds.
type Micros struct {
	Mean float64 `json:"mean_us"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
}

func micros(h *hdrhistogram.Histogram) Micros {
	return Micros{Mean: math.Round(h.Mean()*10) / 10, P50: float64(h.ValueAtQuantile(50)), P99: float64(h.ValueAtQuantile(99))}
}

// SpecLogMode is what one mode measured.
type SpecLogMode struct {
	Delivery     Micros `json:"delivery"`
	Confirmation Micros `json:"confirmation"`
	EndToEnd     Micros `json:"end_to_end"`
	Append       Micros `json:"append"`
	// SendLag: intended send time → the Append call (the harness's own delay, in every latency
	// above, as the Kafka benchmark's send lag).
	SendLag      Micros  `json:"send_lag"`
	Records      int64   `json:"records"`       // measured records delivered
	AppendRate   float64 `json:"appends_per_s"` // achieved, over the measured window
	AppendErrors int64   `json:"append_errors"`
	NoOpFraction float64 `json:"noop_fraction"` // of the positions the measured records span
	Fails        int     `json:"fails"`
	// EndToEndSweep: end-to-end latency for each swept compute time (µs → latency).
	EndToEndSweep map[string]Micros `json:"end_to_end_sweep,omitempty"`
}

// SpecLogResult is both modes and their ratios.
type SpecLogResult struct {
	Shards      int         `json:"shards"`
	ComputeUs   float64     `json:"compute_us"`
	DurationS   float64     `json:"duration_s"`
	ClosedLoop  bool        `json:"closed_loop,omitempty"`        // appenders wait for each answer (see appender)
	IdleShards  int         `json:"idle_shards,omitempty"`        // shards with no appenders
	Replication int         `json:"replication_factor,omitempty"` // as asked; 0: the cluster's default
	Speculative SpecLogMode `json:"speculative"`
	Baseline    SpecLogMode `json:"baseline"`
	// DeliveryRatio and EndToEndRatio: baseline mean over speculative mean (the paper: 3.2-3.5×
	// and 1.6×); AppendOverhead: speculative append mean over the baseline's, minus 1.
	DeliveryRatio  float64 `json:"delivery_ratio"`
	EndToEndRatio  float64 `json:"end_to_end_ratio"`
	AppendOverhead float64 `json:"append_overhead"`
}

// WriteText prints the result.
func (r *SpecLogResult) WriteText(w io.Writer) {
	loop := "open-loop"
	if r.ClosedLoop {
		loop = "closed-loop"
	}
	fmt.Fprintf(w, "speclog: %d shards, C = %.2f ms, %.0f s per mode, %s appenders\n", r.Shards, r.ComputeUs/1000, r.DurationS, loop)
	fmt.Fprintf(w, "  %-13s %-26s %-26s %-26s %-26s %s\n", "mode", "delivery µs mean/p50/p99", "confirmation", "end-to-end", "append", "appends/s  no-ops")
	for _, m := range []struct {
		name string
		m    *SpecLogMode
	}{{"speculative", &r.Speculative}, {"baseline", &r.Baseline}} {
		f := func(x Micros) string { return fmt.Sprintf("%.0f / %.0f / %.0f", x.Mean, x.P50, x.P99) }
		fmt.Fprintf(w, "  %-13s %-26s %-26s %-26s %-26s %.0f  %.2f%%\n", m.name, f(m.m.Delivery), f(m.m.Confirmation), f(m.m.EndToEnd), f(m.m.Append),
			m.m.AppendRate, 100*m.m.NoOpFraction)
	}
	fmt.Fprintf(w, "  send lag (intended send → Append call) mean/p50/p99: %.0f / %.0f / %.0f µs speculative, %.0f / %.0f / %.0f µs baseline\n",
		r.Speculative.SendLag.Mean, r.Speculative.SendLag.P50, r.Speculative.SendLag.P99, r.Baseline.SendLag.Mean, r.Baseline.SendLag.P50, r.Baseline.SendLag.P99)
	fmt.Fprintf(w, "  delivery %.2f× earlier, end-to-end %.2f× lower, append overhead %+.1f%%\n", r.DeliveryRatio, r.EndToEndRatio, 100*r.AppendOverhead)
	if len(r.Speculative.EndToEndSweep) > 0 {
		fmt.Fprintf(w, "  end-to-end mean by compute time (speculative / baseline):")
		for _, k := range sweepKeys(r.Speculative.EndToEndSweep) {
			fmt.Fprintf(w, " C=%s %.0f/%.0f µs", k, r.Speculative.EndToEndSweep[k].Mean, r.Baseline.EndToEndSweep[k].Mean)
		}
		fmt.Fprintln(w)
	}
}

func sweepKeys(m map[string]Micros) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		a, _ := time.ParseDuration(ks[i])
		b, _ := time.ParseDuration(ks[j])
		return a < b
	})
	return ks
}

// SpecLog runs the benchmark, the speculative mode first.
func SpecLog(ctx context.Context, o SpecLogOptions) (*SpecLogResult, error) {
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Appenders <= 0 {
		o.Appenders = 10
	}
	if o.Rate <= 0 {
		o.Rate = 1000
	}
	if o.RecordSize < valueHeaderSize {
		o.RecordSize = 4096
	}
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.Warmup <= 0 {
		o.Warmup = 2 * time.Second
	}
	if o.IdleShards < 0 || o.IdleShards >= o.Shards {
		return nil, fmt.Errorf("speclog bench: %d idle shards of %d: at least one must take appends", o.IdleShards, o.Shards)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	adm, api, closeAll, err := connectSpecLog(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	res := &SpecLogResult{Shards: o.Shards, ComputeUs: float64(o.Compute.Microseconds()), DurationS: o.Duration.Seconds(), ClosedLoop: o.ClosedLoop, IdleShards: o.IdleShards, Replication: o.ReplicationFactor}
	if o.Rounds <= 0 {
		o.Rounds = int((o.Duration + 15*time.Second - 1) / (15 * time.Second))
	}
	round := o
	round.Duration = o.Duration / time.Duration(o.Rounds)
	acc := [2]*modeAcc{newModeAcc(o), newModeAcc(o)}
	for r := range o.Rounds {
		for i, name := range []string{"speculative", "baseline"} {
			fmt.Fprintf(o.Progress, "speclog: round %d/%d, %s mode, %d shards × %d appenders × %.0f/s of %d B, %v warm-up + %v\n",
				r+1, o.Rounds, name, o.Shards, o.Appenders, o.Rate, o.RecordSize, o.Warmup, round.Duration)
			if err := runSpecLogMode(ctx, round, adm, api, i == 1, acc[i]); err != nil {
				return nil, fmt.Errorf("speclog %s mode: %w", name, err)
			}
		}
	}
	res.Speculative, res.Baseline = acc[0].result(o), acc[1].result(o)
	if s := res.Speculative.Delivery.Mean; s > 0 {
		res.DeliveryRatio = round2(res.Baseline.Delivery.Mean / s)
	}
	if s := res.Speculative.EndToEnd.Mean; s > 0 {
		res.EndToEndRatio = round2(res.Baseline.EndToEnd.Mean / s)
	}
	if b := res.Baseline.Append.Mean; b > 0 {
		res.AppendOverhead = math.Round((res.Speculative.Append.Mean/b-1)*1000) / 1000
	}
	return res, nil
}

// connectSpecLog connects to the brokers and to the SpecLog service (finding its address from
// the brokers when o does not give it); closeAll closes both.
func connectSpecLog(ctx context.Context, o *SpecLogOptions) (*kadm.Client, pb.SpecLogClient, func(), error) {
	kc, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...))
	if err != nil {
		return nil, nil, nil, err
	}
	adm := kadm.NewClient(kc)
	if o.SpecLogAddr == "" {
		if o.SpecLogAddr, err = specLogAddr(ctx, adm); err != nil {
			kc.Close()
			return nil, nil, nil, err
		}
	}
	cc, err := grpc.NewClient(o.SpecLogAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		kc.Close()
		return nil, nil, nil, err
	}
	return adm, pb.NewSpecLogClient(cc), func() { cc.Close(); kc.Close() }, nil
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// specLogAddr asks a broker for its SpecLog address (the read-only broker config
// runnel.speclog.addr).
func specLogAddr(ctx context.Context, adm *kadm.Client) (string, error) {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return "", err
	}
	rs, err := adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		for _, c := range r.Configs {
			if c.Key == "runnel.speclog.addr" && c.Value != nil && *c.Value != "" {
				return *c.Value, nil
			}
		}
	}
	return "", errors.New("the brokers name no SpecLog address (runnel.speclog.addr): is this Runnel with --speclog-addr? Give --speclog")
}

// specTrace is what one shard's subscriber saw.
type specTrace struct {
	recs     []tracedRecord
	confirms []confirmAt // ascending
	fails    int
}

type tracedRecord struct {
	pos      uint64
	sent     time.Time // intended send time
	arrived  time.Time // the batch holding it arrived
	batch    int
	computed time.Time // the batch's result is ready (modelled, or spun)
}

type confirmAt struct {
	upTo uint64
	at   time.Time
}

// confirmedAt is when pos was confirmed (zero: never).
func (t *specTrace) confirmedAt(pos uint64) time.Time {
	i := sort.Search(len(t.confirms), func(i int) bool { return t.confirms[i].upTo > pos })
	if i == len(t.confirms) {
		return time.Time{}
	}
	return t.confirms[i].at
}

// createSpecLogTopic creates a fresh total-order topic for a run and waits until the sequencer
// has taken it up; drop deletes it.
func createSpecLogTopic(ctx context.Context, o SpecLogOptions, adm *kadm.Client, api pb.SpecLogClient) (topic string, drop func(), err error) {
	topic = fmt.Sprintf("runnel-bench-speclog-%d", time.Now().UnixNano())
	configs := map[string]*string{"runnel.ordering": new("total")}
	for k, v := range o.TopicConfigs {
		configs[k] = &v
	}
	rf := int16(-1)
	if o.ReplicationFactor > 0 {
		rf = int16(o.ReplicationFactor)
	}
	if _, err := adm.CreateTopic(ctx, int32(o.Shards), rf, configs, topic); err != nil {
		return "", nil, fmt.Errorf("creating %s: %w", topic, err)
	}
	drop = func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		adm.DeleteTopics(dctx, topic)
	}
	for { // the sequencer takes the topic up a moment after its creation
		if _, err := api.Describe(ctx, &pb.DescribeRequest{Topic: topic}); err == nil {
			return topic, drop, nil
		} else if ctx.Err() != nil {
			drop()
			return "", nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// subscribers subscribes one trace per shard, at its leader; errs receives a subscriber's
// failure; wait waits for them once ctx ends.
func subscribers(ctx context.Context, o SpecLogOptions, routes []shardRoute, topic string, baseline bool, delivered *atomic.Int64) (traces []*specTrace, errs chan error, wait func(), err error) {
	traces = make([]*specTrace, o.Shards)
	var wg sync.WaitGroup
	errs = make(chan error, o.Shards)
	for sh := range o.Shards {
		traces[sh] = &specTrace{}
		stream, err := routes[sh].api.Subscribe(ctx, &pb.SubscribeRequest{Topic: topic, Shards: []int32{int32(sh)}, ConfirmedOnly: baseline})
		if err != nil {
			return nil, nil, nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := subscribeTrace(stream, traces[sh], o, baseline, delivered); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	return traces, errs, wg.Wait, nil
}

// shardRoute is how the benchmark reaches a shard: its leader's SpecLog service, so that on a
// cluster appends and subscriptions go where the paper's clients send them (the shard's
// primary) rather than through another node.
type shardRoute struct {
	api     pb.SpecLogClient
	appends appendAPI
}

// routeShards waits until every shard of topic has a leader with a SpecLog address and
// connects to each leader once (the shards a node leads share its connection and its append
// stream). close closes what it opened.
func routeShards(ctx context.Context, o SpecLogOptions, api pb.SpecLogClient, topic string) (routes []shardRoute, close func(), err error) {
	var d *pb.DescribeResponse
	for {
		d, err = api.Describe(ctx, &pb.DescribeRequest{Topic: topic})
		if err == nil && len(d.GetShards()) == o.Shards && !slices.ContainsFunc(d.GetShards(), func(s *pb.ShardInfo) bool { return s.GetLeaderAddr() == "" }) {
			break
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("waiting for the leaders of %s's shards: %w", topic, cmp.Or(err, ctx.Err()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	byAddr := map[string]shardRoute{}
	var closers []func()
	close = func() {
		for _, c := range closers {
			c()
		}
	}
	routes = make([]shardRoute, o.Shards)
	for _, s := range d.GetShards() {
		addr := s.GetLeaderAddr()
		r, ok := byAddr[addr]
		if !ok {
			r.api = api
			if addr != o.SpecLogAddr {
				cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					close()
					return nil, nil, err
				}
				closers = append(closers, func() { cc.Close() })
				r.api = pb.NewSpecLogClient(cc)
			}
			for { // the leader learns of the topic from the sequencer's log, maybe after node 1
				_, err := r.api.Describe(ctx, &pb.DescribeRequest{Topic: topic})
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					close()
					return nil, nil, fmt.Errorf("waiting for %s to know %s: %w", addr, topic, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			var closeAppends func()
			r.appends, closeAppends = newAppends(o, r.api)
			closers = append(closers, closeAppends)
			byAddr[addr] = r
		}
		if sh := int(s.GetShard()); sh >= 0 && sh < o.Shards {
			routes[sh] = r
		}
	}
	return routes, close, nil
}

// appendAPI is how appenders append: an appendmux.Mux (one stream), or the unary call.
type appendAPI interface {
	Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error)
}

type unaryAppends struct{ api pb.SpecLogClient }

func (u unaryAppends) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	return u.api.Append(ctx, req)
}

// newAppends returns the appenders' way to append, and what closes it.
func newAppends(o SpecLogOptions, api pb.SpecLogClient) (appendAPI, func()) {
	if o.UnaryAppends {
		return unaryAppends{api}, func() {}
	}
	m := appendmux.New(api)
	return m, m.Close
}

// appender appends rate records/s to a shard from start until until; done is called with each
// append's intended time, the time of the Append call, its latency and error.
//
// Open loop (closed false): at the intended times of a Schedule, up to 64 appends in flight, so
// a backlog is measured as latency (no coordinated omission). Closed loop: one append at a time,
// the next one handed over 1/rate after the previous one was due or, when that one was answered
// later, as soon as it is; its intended time is its hand-over, so it has no send lag. That is
// the paper's appender (the artifact's clients call a blocking AppendOne in a loop and time each
// call), whose offered load falls when appends are slow: the achieved rate shows how much.
func appender(ctx context.Context, api appendAPI, topic string, shard int32, size int, start, until time.Time, rate float64, closed bool,
	issued func(), done func(t, called time.Time, d time.Duration, err error)) {
	call := func(t time.Time) {
		v := make([]byte, size)
		putIntended(v, t)
		called := time.Now()
		_, err := api.Append(ctx, &pb.AppendRequest{Topic: topic, Shard: shard, Records: []*pb.Record{{Value: v}}})
		done(t, called, time.Since(t), err)
	}
	if closed {
		period := time.Duration(float64(time.Second) / rate)
		for next := start; next.Before(until) && waitUntil(ctx, next); {
			issued()
			call(time.Now()) // timed from the hand-over, as the paper times it
			if next = next.Add(period); next.Before(time.Now()) {
				next = time.Now()
			}
		}
		return
	}
	sched := NewSchedule(start, rate)
	sem := make(chan struct{}, 64)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		t := sched.Next()
		if !t.Before(until) || !waitUntil(ctx, t) {
			return
		}
		sem <- struct{}{}
		inflight.Add(1)
		issued()
		go func() {
			defer func() { <-sem; inflight.Done() }()
			call(t)
		}()
	}
}

func runSpecLogMode(ctx context.Context, o SpecLogOptions, adm *kadm.Client, api pb.SpecLogClient, baseline bool, acc *modeAcc) error {
	topic, drop, err := createSpecLogTopic(ctx, o, adm, api)
	if err != nil {
		return err
	}
	defer drop()
	sctx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	routes, closeRoutes, err := routeShards(ctx, o, api, topic)
	if err != nil {
		return err
	}
	defer closeRoutes()
	var delivered atomic.Int64
	traces, subErr, waitSubs, err := subscribers(sctx, o, routes, topic, baseline, &delivered)
	if err != nil {
		return err
	}
	start := time.Now().Add(100 * time.Millisecond)
	win := window{start: start.Add(o.Warmup), end: start.Add(o.Warmup + o.Duration)}
	appendHist, lagHist := NewHistogram(), NewHistogram()
	var hmu sync.Mutex
	var appendErrs, issued, inWindow atomic.Int64
	var wg sync.WaitGroup
	for sh := range o.Shards - o.IdleShards {
		for a := range o.Appenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				offset := appenderOffset(a, o.Appenders, o.Rate)
				appender(ctx, routes[sh].appends, topic, int32(sh), o.RecordSize, start.Add(offset), win.end, o.Rate, o.ClosedLoop, func() { issued.Add(1) },
					func(t, called time.Time, d time.Duration, err error) {
						if err != nil {
							appendErrs.Add(1)
							return
						}
						if win.contains(t) {
							inWindow.Add(1)
							us, _ := histMicros(d)
							lag, _ := histMicros(called.Sub(t))
							hmu.Lock()
							appendHist.RecordValue(us)
							lagHist.RecordValue(lag)
							hmu.Unlock()
						}
					})
			}()
		}
	}
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	appended := make(chan struct{})
	go func() { wg.Wait(); close(appended) }()
wait:
	for {
		select {
		case <-appended:
			break wait
		case err := <-subErr:
			return fmt.Errorf("subscriber: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-progress.C:
			var quotas []uint64
			var confirmed uint64
			if d, err := api.Describe(ctx, &pb.DescribeRequest{Topic: topic}); err == nil {
				for _, s := range d.GetShards() {
					quotas = append(quotas, s.GetQuota())
				}
				confirmed = d.GetConfirmed()
			}
			fmt.Fprintf(o.Progress, "  %5.0f s: %d appends issued, %d records delivered, %d append errors; %d positions confirmed, quotas %v\n",
				time.Since(start).Seconds(), issued.Load(), delivered.Load(), appendErrs.Load(), confirmed, quotas)
		}
	}
	// Let the subscribers receive and see confirmed everything appended.
	want := issued.Load() - appendErrs.Load()
	deadline := time.Now().Add(30 * time.Second)
	for delivered.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the last confirmations
	stopSubs()
	waitSubs()
	select {
	case err := <-subErr:
		return fmt.Errorf("subscriber: %w", err)
	default:
	}
	if got := delivered.Load(); got < want {
		var per []string
		for sh, tr := range traces {
			per = append(per, fmt.Sprintf("shard %d: %d records, %d fail notices", sh, len(tr.recs), tr.fails))
		}
		view := uint64(0)
		if d, err := api.Describe(ctx, &pb.DescribeRequest{Topic: topic}); err == nil {
			view = d.GetView()
		}
		return fmt.Errorf("the subscribers received %d of %d acknowledged records (%s; view %d)", got, want, strings.Join(per, ", "), view)
	}
	acc.lag.Merge(lagHist)
	acc.add(o, traces, win, appendHist, appendErrs.Load(), inWindow.Load(), baseline)
	return nil
}

// subscribeTrace reads a shard's stream into its trace, modelling (or spinning) the compute
// time per batch.
func subscribeTrace(stream pb.SpecLog_SubscribeClient, tr *specTrace, o SpecLogOptions, baseline bool, delivered *atomic.Int64) error {
	var ready time.Time // spin: the previous batch's result
	batch := 0
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		n := 0
		for _, e := range resp.GetEvents() {
			switch k := e.GetKind().(type) {
			case *pb.Event_Record:
				sent, ok := intendedTime(k.Record.GetRecord().GetValue())
				if !ok {
					continue
				}
				tr.recs = append(tr.recs, tracedRecord{pos: k.Record.GetPosition(), sent: sent, arrived: now, batch: batch})
				n++
			case *pb.Event_Confirm:
				tr.confirms = append(tr.confirms, confirmAt{k.Confirm.GetUpTo(), now})
			case *pb.Event_Fail:
				tr.fails++
			}
		}
		if n == 0 {
			continue
		}
		delivered.Add(int64(n))
		if o.Spin { // a batch is what one message holds
			for end := time.Now().Add(o.Compute); time.Now().Before(end); {
			}
			ready = time.Now()
			for i := len(tr.recs) - n; i < len(tr.recs); i++ {
				tr.recs[i].computed = ready
			}
		}
		batch++
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// modelCompute is when each record's result is ready for a subscriber busy c per batch that,
// whenever it is free, takes everything that has arrived as its next batch (or, with nothing
// waiting, the next message as it arrives). recs are in arrival order; batch numbers mark the
// stream's messages.
func modelCompute(recs []tracedRecord, c time.Duration) []time.Time {
	out := make([]time.Time, len(recs))
	var ready time.Time // the subscriber is free from then on
	for i := 0; i < len(recs); {
		j := i
		if recs[i].arrived.After(ready) { // idle: the next message is the batch
			ready = recs[i].arrived
			for j < len(recs) && recs[j].batch == recs[i].batch {
				j++
			}
		}
		for j < len(recs) && !recs[j].arrived.After(ready) { // and everything arrived meanwhile
			j++
		}
		ready = ready.Add(c)
		for k := i; k < j; k++ {
			out[k] = ready
		}
		i = j
	}
	return out
}

// modeAcc accumulates one mode's measurements over its rounds.
type modeAcc struct {
	deliv, conf, e2e, appends, lag *hdrhistogram.Histogram
	sweep                          map[time.Duration]*hdrhistogram.Histogram
	records, appendErrs            int64
	inWindow                       int64
	fails                          int
	positions, spanned             int64 // records' positions, and the positions they span, summed over rounds
}

func newModeAcc(o SpecLogOptions) *modeAcc {
	a := &modeAcc{deliv: NewHistogram(), conf: NewHistogram(), e2e: NewHistogram(), appends: NewHistogram(), lag: NewHistogram(), sweep: map[time.Duration]*hdrhistogram.Histogram{}}
	if !o.Spin {
		for _, c := range o.Sweep {
			a.sweep[c] = NewHistogram()
		}
	}
	return a
}

// add takes a round's traces.
func (a *modeAcc) add(o SpecLogOptions, traces []*specTrace, win window, appendHist *hdrhistogram.Histogram, appendErrs, inWindow int64, baseline bool) {
	rec := func(h *hdrhistogram.Histogram, d time.Duration) {
		us, _ := histMicros(d)
		h.RecordValue(us)
	}
	a.appends.Merge(appendHist)
	a.appendErrs += appendErrs
	a.inWindow += inWindow
	var positions []uint64
	for _, tr := range traces {
		a.fails += tr.fails
		// The modelled result time of every record for the compute time and each swept one.
		sweepReady := map[time.Duration][]time.Time{}
		if !o.Spin {
			for c := range a.sweep {
				sweepReady[c] = modelCompute(tr.recs, c)
			}
			for i, t := range modelCompute(tr.recs, o.Compute) {
				tr.recs[i].computed = t
			}
		}
		for i, r := range tr.recs {
			if !win.contains(r.sent) {
				continue
			}
			a.records++
			positions = append(positions, r.pos)
			confirmed := r.arrived // the baseline delivers confirmed records
			if !baseline {
				if confirmed = tr.confirmedAt(r.pos); confirmed.IsZero() {
					continue // never confirmed before the run ended
				}
			}
			rec(a.deliv, r.arrived.Sub(r.sent))
			rec(a.conf, confirmed.Sub(r.sent))
			rec(a.e2e, maxTime(r.computed, confirmed).Sub(r.sent))
			for c, ready := range sweepReady {
				rec(a.sweep[c], maxTime(ready[i], confirmed).Sub(r.sent))
			}
		}
	}
	if len(positions) > 1 {
		slices.Sort(positions)
		a.positions += int64(len(positions))
		a.spanned += int64(positions[len(positions)-1] - positions[0] + 1)
	}
}

// result summarizes the mode.
func (a *modeAcc) result(o SpecLogOptions) SpecLogMode {
	m := SpecLogMode{AppendErrors: a.appendErrs, AppendRate: math.Round(float64(a.inWindow) / o.Duration.Seconds()), Records: a.records, Fails: a.fails,
		Delivery: micros(a.deliv), Confirmation: micros(a.conf), EndToEnd: micros(a.e2e), Append: micros(a.appends), SendLag: micros(a.lag)}
	if a.spanned > 0 {
		m.NoOpFraction = math.Round((1-float64(a.positions)/float64(a.spanned))*10000) / 10000
	}
	if len(a.sweep) > 0 {
		m.EndToEndSweep = map[string]Micros{}
		for c, h := range a.sweep {
			m.EndToEndSweep[c.String()] = micros(h)
		}
	}
	return m
}

// appenderOffset staggers appender a of n, each appending rate records/s, across one period:
// a/n of 1/rate seconds (a float: a rate below 1/s, or a fractional one, is a period too).
func appenderOffset(a, n int, rate float64) time.Duration {
	return time.Duration(float64(a) / float64(n) * float64(time.Second) / rate)
}
