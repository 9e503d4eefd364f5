package bench

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteSVG draws the median time of every query, one bar per setup side
// by side, as the paper's Fig. 17 does.
func WriteSVG(w io.Writer, ts []Timing, setups []Setup, queries []int, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "median time (ms)"
	p.Legend.Top = true
	byKey := map[string]Timing{}
	for _, t := range ts {
		byKey[fmt.Sprintf("%s/%d", t.Setup, t.Query)] = t
	}
	width := vg.Points(60 / float64(max(len(setups), 1)))
	names := make([]string, len(queries))
	for i, q := range queries {
		names[i] = fmt.Sprintf("Q%d", q)
	}
	for i, su := range setups {
		vals := make(plotter.Values, len(queries))
		for j, q := range queries {
			t, ok := byKey[fmt.Sprintf("%s/%d", su, q)]
			if !ok || len(t.Runs) == 0 {
				return fmt.Errorf("bench: no timing of Q%d on %s", q, su)
			}
			vals[j] = ms(t.Median())
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = vg.Length(float64(i)-float64(len(setups)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(su.String(), bars)
	}
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	p.BackgroundColor = color.White
	wt, err := p.WriterTo(vg.Length(max(8, len(queries)))*vg.Inch, 5*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
