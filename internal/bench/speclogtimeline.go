package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	pb "github.com/runnel-dev/runnel/speclog/speclogpb"
)

// The SpecLog paper's runs over time (speculative mode): a burst on one shard (lag-fix), a
// lasting rate change on one shard (quotas follow it at window boundaries), and a whole-shard
// failure (view change, rejoin).
const (
	TimelineBurst = "burst" // shard 0 appends 5× its rate for 2 s
	TimelineRate  = "rate"  // shard 0 appends 3× its rate from then on
	TimelineFail  = "fail"  // shard 1 is frozen for 1 s (needs the node's admin address, fault injection on)
)

// TimelinePoint is one 250 ms bucket of a timeline run, by intended send time.
type TimelinePoint struct {
	T            float64 `json:"t_s"`
	DeliveryUs   float64 `json:"delivery_mean_us"`
	ConfirmUs    float64 `json:"confirmation_mean_us"`
	AppendsPerS  []int   `json:"appends_per_s"` // per shard
	Quotas       []int64 `json:"quotas"`        // per shard, as Describe showed at the bucket's end
	View         uint64  `json:"view"`
	ConfirmedPos uint64  `json:"confirmed"`
}

// TimelineResult is a timeline run.
type TimelineResult struct {
	Scenario string          `json:"scenario"`
	EventAt  float64         `json:"event_s"` // when the scenario's event starts
	EventEnd float64         `json:"event_end_s"`
	Points   []TimelinePoint `json:"points"`
}

// SpecLogTimeline runs a scenario for o.Duration (speculative mode; the event at a third of it)
// and returns its timeline. admin is the node's admin address, for TimelineFail.
func SpecLogTimeline(ctx context.Context, o SpecLogOptions, scenario, admin string) (*TimelineResult, error) {
	if o.Shards < 2 {
		o.Shards = 2
	}
	adm, api, closeAll, err := connectSpecLog(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	topic, drop, err := createSpecLogTopic(ctx, o, adm, api)
	if err != nil {
		return nil, err
	}
	defer drop()
	sctx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	routes, closeRoutes, err := routeShards(ctx, o, api, topic)
	if err != nil {
		return nil, err
	}
	defer closeRoutes()
	var delivered atomic.Int64
	traces, _, waitSubs, err := subscribers(sctx, o, routes, topic, false, &delivered)
	if err != nil {
		return nil, err
	}
	start := time.Now().Add(100 * time.Millisecond)
	end := start.Add(o.Duration)
	eventAt := start.Add(o.Duration / 3)
	eventEnd := eventAt.Add(2 * time.Second)
	if scenario == TimelineFail {
		eventEnd = eventAt.Add(time.Second)
	} else if scenario == TimelineRate {
		eventEnd = end
	}
	const bucket = 250 * time.Millisecond
	nb := int(o.Duration/bucket) + 1
	appends := make([][]atomic.Int64, o.Shards)
	for i := range appends {
		appends[i] = make([]atomic.Int64, nb)
	}
	done := make(chan struct{})
	count := func(sh int) func(time.Time, time.Time, time.Duration, error) {
		return func(t, _ time.Time, _ time.Duration, err error) {
			if b := int(t.Sub(start) / bucket); err == nil && b >= 0 && b < nb {
				appends[sh][b].Add(1)
			}
		}
	}
	run := func(sh int, from, until time.Time, rate float64) {
		for a := range o.Appenders {
			offset := appenderOffset(a, o.Appenders, rate)
			go func() {
				appender(ctx, routes[sh].appends, topic, int32(sh), o.RecordSize, from.Add(offset), until, rate, false, func() {}, count(sh))
				done <- struct{}{}
			}()
		}
	}
	runs := 0
	for sh := range o.Shards {
		run(sh, start, end, o.Rate)
		runs += o.Appenders
	}
	switch scenario {
	case TimelineBurst:
		run(0, eventAt, eventEnd, 4*o.Rate) // with the base: 5×
		runs += o.Appenders
	case TimelineRate:
		run(0, eventAt, end, 2*o.Rate) // with the base: 3×
		runs += o.Appenders
	case TimelineFail:
		if admin == "" {
			return nil, fmt.Errorf("the fail timeline needs the node's admin address (fault injection on)")
		}
		go func() {
			if !waitUntil(ctx, eventAt) {
				return
			}
			body, _ := json.Marshal(map[string]any{"stall_shard": map[string]any{"topic": topic, "partition": 1, "ms": 1000}})
			resp, err := http.Post("http://"+admin+"/v1/debug/faults", "application/json", bytes.NewReader(body))
			if err != nil {
				fmt.Fprintf(o.Progress, "speclog timeline: fault injection: %v\n", err)
				return
			}
			resp.Body.Close()
		}()
	default:
		return nil, fmt.Errorf("unknown timeline scenario %q (burst, rate or fail)", scenario)
	}
	// Describe every bucket: quotas, view, confirmed prefix.
	res := &TimelineResult{Scenario: scenario, EventAt: eventAt.Sub(start).Seconds(), EventEnd: eventEnd.Sub(start).Seconds()}
	res.Points = make([]TimelinePoint, nb)
	tick := time.NewTicker(bucket)
	defer tick.Stop()
	for finished := 0; finished < runs; {
		select {
		case <-done:
			finished++
		case now := <-tick.C:
			b := int(now.Sub(start) / bucket)
			if b < 0 || b >= nb {
				continue
			}
			if d, err := api.Describe(ctx, &pb.DescribeRequest{Topic: topic}); err == nil {
				p := &res.Points[b]
				for _, s := range d.GetShards() {
					p.Quotas = append(p.Quotas, int64(s.GetQuota()))
				}
				p.View, p.ConfirmedPos = d.GetView(), d.GetConfirmed()
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	time.Sleep(2 * time.Second) // the last confirmations
	stopSubs()
	waitSubs()
	sums := make([][2]float64, nb) // delivery, confirmation sums (µs)
	ns := make([][2]int, nb)
	for _, tr := range traces {
		for _, r := range tr.recs {
			b := int(r.sent.Sub(start) / bucket)
			if b < 0 || b >= nb {
				continue
			}
			sums[b][0] += float64(r.arrived.Sub(r.sent).Microseconds())
			ns[b][0]++
			if c := tr.confirmedAt(r.pos); !c.IsZero() {
				sums[b][1] += float64(c.Sub(r.sent).Microseconds())
				ns[b][1]++
			}
		}
	}
	for b := range res.Points {
		p := &res.Points[b]
		p.T = (time.Duration(b) * bucket).Seconds()
		for k, v := range []*float64{&p.DeliveryUs, &p.ConfirmUs} {
			if ns[b][k] > 0 {
				*v = math.Round(sums[b][k] / float64(ns[b][k]))
			}
		}
		for sh := range o.Shards {
			p.AppendsPerS = append(p.AppendsPerS, int(appends[sh][b].Load()*int64(time.Second/bucket)))
		}
	}
	return res, nil
}

// WritePNG plots the timeline: latencies on top, appends/s and quotas per shard below, the
// event's start and end dashed.
func (r *TimelineResult) WritePNG(path string) error {
	top, bottom := plot.New(), plot.New()
	top.Title.Text = fmt.Sprintf("SpecLog timeline: %s", map[string]string{TimelineBurst: "a 5× burst on shard 0 for 2 s (lag-fix)",
		TimelineRate: "shard 0's rate tripled (quotas follow at window boundaries)", TimelineFail: "shard 1 frozen for 1 s (view change, rejoin)"}[r.Scenario])
	top.Y.Label.Text = "latency, mean (ms)"
	bottom.X.Label.Text = "seconds"
	bottom.Y.Label.Text = "appends/s ÷ 100, quota"
	var deliv, conf plotter.XYs
	shards := 0
	for _, p := range r.Points {
		if p.DeliveryUs > 0 {
			deliv = append(deliv, plotter.XY{X: p.T, Y: p.DeliveryUs / 1000})
		}
		if p.ConfirmUs > 0 {
			conf = append(conf, plotter.XY{X: p.T, Y: p.ConfirmUs / 1000})
		}
		shards = max(shards, len(p.AppendsPerS))
	}
	if err := AddLine(top, "delivery (speculative)", deliv, 0, false); err != nil {
		return err
	}
	if err := AddLine(top, "confirmation", conf, 1, false); err != nil {
		return err
	}
	for sh := range shards {
		var rate, quota plotter.XYs
		for _, p := range r.Points {
			if sh < len(p.AppendsPerS) {
				rate = append(rate, plotter.XY{X: p.T, Y: float64(p.AppendsPerS[sh]) / 100})
			}
			if sh < len(p.Quotas) {
				quota = append(quota, plotter.XY{X: p.T, Y: float64(p.Quotas[sh])})
			}
		}
		if err := AddLine(bottom, fmt.Sprintf("shard %d appends/s ÷ 100", sh), rate, 2+sh, false); err != nil {
			return err
		}
		if len(quota) > 0 {
			if err := AddLine(bottom, fmt.Sprintf("shard %d quota", sh), quota, 2+sh, true); err != nil {
				return err
			}
		}
	}
	return WriteTimelinePNG(path, top, bottom, r.EventAt, r.EventEnd)
}

// WriteText summarizes the timeline: the latencies before, during and after the event.
func (r *TimelineResult) WriteText(w io.Writer) {
	phase := func(from, to float64) (d, c float64) {
		var ds, cs []float64
		for _, p := range r.Points {
			if p.T >= from && p.T < to && p.DeliveryUs > 0 {
				ds, cs = append(ds, p.DeliveryUs), append(cs, p.ConfirmUs)
			}
		}
		sort.Float64s(ds)
		return mean(ds), mean(cs)
	}
	last := r.Points[len(r.Points)-1].T
	fmt.Fprintf(w, "speclog timeline %s (event %.1f-%.1f s)\n", r.Scenario, r.EventAt, r.EventEnd)
	for _, ph := range []struct {
		name     string
		from, to float64
	}{{"before", 1, r.EventAt}, {"during", r.EventAt, r.EventEnd}, {"after", r.EventEnd + 1, last}} {
		if ph.to <= ph.from {
			continue
		}
		d, c := phase(ph.from, ph.to)
		fmt.Fprintf(w, "  %-7s delivery %.0f µs, confirmation %.0f µs (means of 250 ms buckets)\n", ph.name, d, c)
	}
	var views []uint64
	var quotas []int64
	for _, p := range r.Points {
		if len(p.Quotas) == 0 {
			continue // not described (the run's last buckets): no view to show
		}
		if len(views) == 0 || views[len(views)-1] != p.View {
			views = append(views, p.View)
		}
		quotas = p.Quotas
	}
	fmt.Fprintf(w, "  views seen: %v; quotas at the end: %v\n", views, quotas)
}
