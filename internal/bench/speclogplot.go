package bench

import (
	"fmt"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotSpecLogSweep draws the mean end-to-end latency against the compute time, speculative and
// baseline, for each shard count of results (their EndToEndSweep), as a PNG.
func PlotSpecLogSweep(path string, results []*SpecLogResult) error {
	p := plot.New()
	p.Title.Text = "SpecLog: mean end-to-end latency against the subscriber's compute time"
	p.X.Label.Text = "compute time per batch C (ms)"
	p.Y.Label.Text = "end-to-end latency, mean (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	color := 0
	for _, r := range results {
		for _, m := range []struct {
			name  string
			sweep map[string]Micros
			dash  bool
		}{{"speculative", r.Speculative.EndToEndSweep, false}, {"baseline (no speculation)", r.Baseline.EndToEndSweep, true}} {
			if len(m.sweep) == 0 {
				return fmt.Errorf("speclog plot: no sweep in the results (run with --sweep)")
			}
			var xys plotter.XYs
			for _, k := range sweepKeys(m.sweep) {
				d, _ := time.ParseDuration(k)
				xys = append(xys, plotter.XY{X: float64(d) / 1e6, Y: m.sweep[k].Mean / 1000})
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, pts.Color = plotutil.Color(color), plotutil.Color(color)
			l.Width = vg.Points(1.5)
			if m.dash {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l, pts)
			p.Legend.Add(fmt.Sprintf("%d shards, %s", r.Shards, m.name), l, pts)
		}
		color++
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := p.WriterTo(vg.Points(760), vg.Points(480), "png")
	if err != nil {
		f.Close()
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
