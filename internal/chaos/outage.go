package chaos

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/runnel-dev/runnel/internal/bench"
)

// OutageConfig configures Outage.
type OutageConfig struct {
	Binary      string
	Dir         string
	ObjectStore string        // shared by the nodes and the agent
	Rate        int           // records/s through the ripcord agent; default 5000
	Partitions  int32         // default 8
	Before      time.Duration // steady state before the outage; default 10 s
	Outage      time.Duration // how long every serve node is stopped; default 60 s
	After       time.Duration // observed after the nodes are back; default 30 s
	Kill        bool          // SIGKILL the nodes (and restart them) instead of SIGSTOP
	Out         io.Writer
}

// OutagePoint is one second of an outage run, as the clients see it.
type OutagePoint struct {
	T        float64 `json:"t"`        // seconds since the load started
	Acked    int     `json:"acked"`    // records acknowledged in this second
	Errors   int     `json:"errors"`   // produce errors in this second
	Visible  int64   `json:"visible"`  // records readable (sum of end offsets, as the agent says)
	Backlog  int64   `json:"backlog"`  // acknowledged, not yet readable: waiting in the journal
	Consumed int64   `json:"consumed"` // records a consumer (through the agent) has read
	Lag      int64   `json:"lag"`      // readable, not yet consumed
}

// OutageResult is an outage run: the time series and the final check.
type OutageResult struct {
	Points      []OutagePoint `json:"points"`
	OutageStart float64       `json:"outage_start"`
	OutageEnd   float64       `json:"outage_end"`
	Check       Result        `json:"check"`
}

// Outage measures Ripcord over a controller outage (issue 15): three serve nodes and a
// `runnel agent --ripcord` on a shared store, an idempotent acks=all producer that knows only
// the agent at a steady rate into a classic object topic, and a consumer through the agent;
// every serve node (the whole controller quorum) is stopped for cfg.Outage. Each second it
// records what the clients see; at the end every acknowledged record is checked, exactly once.
func Outage(ctx context.Context, cfg OutageConfig) (*OutageResult, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 5000
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 8
	}
	if cfg.Before == 0 {
		cfg.Before = 10 * time.Second
	}
	if cfg.Outage == 0 {
		cfg.Outage = 60 * time.Second
	}
	if cfg.After == 0 {
		cfg.After = 30 * time.Second
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	u, err := url.Parse(cfg.ObjectStore)
	if err != nil {
		return nil, err
	}
	u.Path = path.Join(u.Path, fmt.Sprintf("outage-%d", time.Now().UnixNano())) // a fresh part of the store
	objArgs := []string{"--object-store", u.String(), "--object-batch-timeout", "50ms"}
	c, err := StartCluster(ctx, cfg.Binary, cfg.Dir, 3, objArgs...)
	if err != nil {
		return nil, err
	}
	defer c.StopAll()
	if err := c.AddAgent(ctx, 101, append(objArgs, "--ripcord")...); err != nil {
		return nil, err
	}
	res := &OutageResult{}
	r := &run{cfg: Config{Partitions: cfg.Partitions, Rate: cfg.Rate, Out: cfg.Out}, c: c, topic: "outage", res: &res.Check,
		object: true, lazy: true, ripcord: true}
	if err := r.setup(ctx, "false"); err != nil {
		return nil, err
	}
	defer r.close()
	agent := c.AgentBrokers()
	view, err := kgo.NewClient(kgo.SeedBrokers(agent...))
	if err != nil {
		return nil, err
	}
	defer view.Close()
	adm := kadm.NewClient(view)
	assign := map[string]map[int32]kgo.Offset{r.topic: {}}
	for p := range cfg.Partitions {
		assign[r.topic][p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(agent...), kgo.ConsumePartitions(assign), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var consumed int64
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	go func() {
		for cctx.Err() == nil {
			n := int64(cons.PollFetches(cctx).NumRecords())
			r.mu.Lock()
			consumed += n
			r.mu.Unlock()
		}
	}()

	start := time.Now()
	r.startLoad()
	ackedTotal, failedTotal := 0, 0
	sample := func() {
		r.mu.Lock()
		acked := 0
		for _, as := range r.acks {
			acked += len(as)
		}
		failed, cons := r.failed, consumed
		r.mu.Unlock()
		qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		ends, err := adm.ListEndOffsets(qctx, r.topic)
		cancel()
		var visible int64 = -1
		if err == nil {
			visible = 0
			ends.Each(func(o kadm.ListedOffset) { visible += o.Offset })
		} else if n := len(res.Points); n > 0 {
			visible = res.Points[n-1].Visible
		}
		pt := OutagePoint{T: time.Since(start).Seconds(), Acked: acked - ackedTotal, Errors: failed - failedTotal, Visible: visible,
			Backlog: int64(acked) - visible, Consumed: cons, Lag: visible - cons}
		ackedTotal, failedTotal = acked, failed
		res.Points = append(res.Points, pt)
	}
	phase := func(d time.Duration) {
		end := time.Now().Add(d)
		for time.Now().Before(end) && ctx.Err() == nil {
			time.Sleep(time.Until(start.Add(time.Duration(len(res.Points)+1) * time.Second)))
			sample()
		}
	}
	phase(cfg.Before)
	res.OutageStart = time.Since(start).Seconds()
	c.StopNodes(cfg.Kill)
	fmt.Fprintf(cfg.Out, "outage: every serve node stopped at %.0f s for %v\n", res.OutageStart, cfg.Outage)
	phase(cfg.Outage)
	if err := c.RestartNodes(cfg.Kill); err != nil {
		return nil, err
	}
	res.OutageEnd = time.Since(start).Seconds()
	fmt.Fprintf(cfg.Out, "outage: serve nodes back at %.0f s\n", res.OutageEnd)
	phase(cfg.After)
	r.stopLoad()
	if err := r.check(ctx); err != nil {
		res.Check.Error = err.Error()
	}
	return res, nil
}

// WritePNG plots the run: produce rate and errors on top, journal backlog and consumer lag
// below, the outage shaded by its start and end lines.
func (res *OutageResult) WritePNG(path string) error {
	rate, errs, backlog, lag := plotter.XYs{}, plotter.XYs{}, plotter.XYs{}, plotter.XYs{}
	for _, p := range res.Points {
		rate = append(rate, plotter.XY{X: p.T, Y: float64(p.Acked)})
		errs = append(errs, plotter.XY{X: p.T, Y: float64(p.Errors)})
		backlog = append(backlog, plotter.XY{X: p.T, Y: float64(max(p.Backlog, 0))})
		lag = append(lag, plotter.XY{X: p.T, Y: float64(max(p.Lag, 0))})
	}
	top, bottom := plot.New(), plot.New()
	top.Title.Text = fmt.Sprintf("Ripcord: the controller quorum stopped from %.0f s to %.0f s", res.OutageStart, res.OutageEnd)
	top.Y.Label.Text = "records/s"
	bottom.X.Label.Text = "seconds"
	bottom.Y.Label.Text = "records"
	for _, s := range []struct {
		p     *plot.Plot
		name  string
		xys   plotter.XYs
		color int
	}{
		{top, "produce acks/s", rate, 0}, {top, "produce errors/s", errs, 1},
		{bottom, "journal backlog (acknowledged, not yet readable)", backlog, 2}, {bottom, "consumer lag", lag, 3},
	} {
		if err := bench.AddLine(s.p, s.name, s.xys, s.color, false); err != nil {
			return err
		}
	}
	return bench.WriteTimelinePNG(path, top, bottom, res.OutageStart, res.OutageEnd)
}

// WriteText summarizes the run.
func (res *OutageResult) WriteText(w io.Writer) {
	var during, errs, maxBacklog int64
	for _, p := range res.Points {
		if p.T > res.OutageStart && p.T <= res.OutageEnd {
			during += int64(p.Acked)
		}
		errs += int64(p.Errors)
		maxBacklog = max(maxBacklog, p.Backlog)
	}
	drained := "not within the run"
	for _, p := range res.Points {
		if p.T > res.OutageEnd && p.Backlog <= int64(res.Check.Acked)/1000+50 {
			drained = fmt.Sprintf("%.0f s after the nodes were back", p.T-res.OutageEnd)
			break
		}
	}
	fmt.Fprintf(w, "outage %.0f s: %d records acknowledged during it, %d produce errors in the whole run, journal backlog up to %d records, drained %s\n",
		res.OutageEnd-res.OutageStart, during, errs, maxBacklog, drained)
	c := res.Check
	fmt.Fprintf(w, "check: %d acknowledged, %d lost, %d duplicated, %d misplaced%s\n", c.Acked, c.Lost, c.Duplicated, c.Misplaced,
		map[bool]string{true: "", false: ", error: " + strings.TrimSpace(c.Error)}[c.Error == ""])
}
