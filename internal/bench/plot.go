package bench

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// AddLine draws xys on p in palette color color (plotutil's), named in the legend; dashed
// for a second series of the same thing.
func AddLine(p *plot.Plot, name string, xys plotter.XYs, color int, dashed bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color, l.Width = plotutil.Color(color), vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// WriteTimelinePNG writes two plots over the same time axis, one above the other, as a PNG
// at path: each with a grid, its legend at the top and a dashed vertical line at each of
// marks (an event's start and end, in the plots' x units).
func WriteTimelinePNG(path string, top, bottom *plot.Plot, marks ...float64) error {
	for _, p := range []*plot.Plot{top, bottom} {
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		for _, x := range marks {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
			if err != nil {
				return err
			}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(l)
		}
	}
	img := vgimg.New(vg.Points(900), vg.Points(620))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, draw.New(img))
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
