package ycsb

import (
	"errors"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// ErrNothingToPlot means no operation was recorded: there is no
// distribution to draw.
var ErrNothingToPlot = errors.New("ycsb: nothing recorded to plot")

// WriteSVG plots each operation's latency distribution (latency against
// percentile, with the tail stretched on a log "nines" axis as in HdrHistogram
// plots) and writes it as SVG.
func (m *Measurements) WriteSVG(w io.Writer, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.X.Tick.Marker = ninesTicks{}
	p.Add(plotter.NewGrid())
	var lines []any
	for _, op := range m.Operations() {
		pts := m.distribution(op)
		if len(pts) == 0 {
			continue
		}
		xys := make(plotter.XYs, 0, len(pts))
		for _, pt := range pts {
			// x = log10(1/(1-q)): 0 at p0, 1 at p90, 2 at p99, 3 at p99.9.
			q := math.Min(pt[0]/100, 1-1e-6)
			xys = append(xys, plotter.XY{X: math.Log10(1 / (1 - q)), Y: pt[1]})
		}
		lines = append(lines, op, xys)
	}
	if len(lines) == 0 {
		return ErrNothingToPlot
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"}
	var ticks []plot.Tick
	for i, l := range labels {
		if x := float64(i); x >= min-1e-9 && x <= max+1e-9 {
			ticks = append(ticks, plot.Tick{Value: x, Label: l})
		}
	}
	return ticks
}
