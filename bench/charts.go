package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours by kind of row, so fpdedup stands out among its peers and the
// floors read as a bound, not a competitor.
var kindColor = map[string]color.Color{
	kindFpdedup: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	kindPeer:    color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	kindFloor:   color.RGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff},
}

var phaseColor = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0xff, G: 0x98, B: 0x96, A: 0xff},
}

// WriteCharts draws the report's charts into dir, each as SVG and PNG:
// throughput per tool per job, the lookup latency distribution, and peak
// RSS per distinct key.
func (r *Report) WriteCharts(dir string) error {
	charts := []struct {
		name string
		w, h vg.Length
		draw func(draw.Canvas) error
	}{
		{"throughput", 11 * vg.Inch, panelsHeight(len(r.Jobs)), r.drawThroughput},
		{"latency", 8 * vg.Inch, 5 * vg.Inch, r.drawLatency},
		{"rss", 11 * vg.Inch, panelsHeight(len(r.rssJobs())), r.drawRSS},
	}
	if r.Scale != nil {
		charts = append(charts, struct {
			name string
			w, h vg.Length
			draw func(draw.Canvas) error
		}{"scale", 8 * vg.Inch, 5 * vg.Inch, r.drawScale})
	}
	for _, c := range charts {
		svg := vgsvg.New(c.w, c.h)
		if err := c.draw(draw.New(svg)); err != nil {
			return fmt.Errorf("bench: chart %s: %w", c.name, err)
		}
		if err := writeTo(filepath.Join(dir, c.name+".svg"), svg); err != nil {
			return err
		}
		img := vgimg.NewWith(vgimg.UseWH(c.w, c.h), vgimg.UseDPI(110))
		if err := c.draw(draw.New(img)); err != nil {
			return fmt.Errorf("bench: chart %s: %w", c.name, err)
		}
		if err := writeTo(filepath.Join(dir, c.name+".png"), vgimg.PngCanvas{Canvas: img}); err != nil {
			return err
		}
	}
	return nil
}

func writeTo(path string, w io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

const panelCols = 2

func panelsHeight(n int) vg.Length {
	rows := max(1, (n+panelCols-1)/panelCols)
	return vg.Length(rows)*2.4*vg.Inch + 0.3*vg.Inch
}

// bars is one panel: a horizontal bar per row, top to bottom in the job's
// order, with rows that did not run labelled so rather than left out.
func bars(title, xlabel string, rows []Row, value func(*Row) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Min = 0
	names := make([]string, len(rows))
	for i := range rows {
		row := &rows[i]
		pos := len(rows) - 1 - i
		name := row.Tool
		v := 0.0
		if row.Median != nil {
			v = value(row)
		} else {
			name += " (" + row.Status + ")"
		}
		names[pos] = shorten(name, 44)
		if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		bc, err := plotter.NewBarChart(plotter.Values{v}, 9)
		if err != nil {
			return nil, err
		}
		bc.Horizontal = true
		bc.XMin = float64(pos)
		bc.Color = kindColor[row.Kind]
		bc.LineStyle.Width = 0
		p.Add(bc)
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(rows))-0.4
	return p, nil
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// tile lays panels out panelCols to a row.
func tile(dc draw.Canvas, panels []*plot.Plot) {
	if len(panels) == 0 {
		return
	}
	rows := (len(panels) + panelCols - 1) / panelCols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, panelCols)
	}
	for i, p := range panels {
		grid[i/panelCols][i%panelCols] = p
	}
	t := draw.Tiles{Rows: rows, Cols: panelCols, PadX: 0.5 * vg.Inch, PadY: 0.35 * vg.Inch,
		PadTop: 0.1 * vg.Inch, PadBottom: 0.1 * vg.Inch, PadLeft: 0.1 * vg.Inch, PadRight: 0.2 * vg.Inch}
	canvases := plot.Align(grid, t, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
}

func (r *Report) drawThroughput(dc draw.Canvas) error {
	var panels []*plot.Plot
	for _, j := range r.Jobs {
		unit := "MB/s of input"
		if j.Unit == "fingerprints" {
			unit = "MB/s of the input indexes"
		}
		p, err := bars(j.Name+" ("+j.Input+")", unit, j.Rows, func(row *Row) float64 { return row.MBPerS })
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	tile(dc, panels)
	return nil
}

// rssJobs are the jobs whose input has a known number of distinct keys.
func (r *Report) rssJobs() []Job {
	var js []Job
	for _, j := range r.Jobs {
		if j.Name == "build" || j.Name == "merge" || len(j.Name) > 6 && j.Name[:6] == "dedup-" {
			js = append(js, j)
		}
	}
	return js
}

func (r *Report) drawRSS(dc draw.Canvas) error {
	var panels []*plot.Plot
	for _, j := range r.rssJobs() {
		p, err := bars(j.Name, "peak RSS per distinct key (bytes)", j.Rows, func(row *Row) float64 { return row.RSSPerKey })
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	tile(dc, panels)
	return nil
}

func (r *Report) drawLatency(dc draw.Canvas) error {
	p := plot.New()
	p.Title.Text = "Index.Contains latency, in process (CDF)"
	p.X.Label.Text = "latency of one lookup (ns, log scale)"
	p.Y.Label.Text = "fraction of lookups at most that long"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	drawn := 0
	if lk := r.Lookup; lk != nil {
		i := 0
		for _, ph := range []struct {
			name string
			ph   LookupPhase
		}{{"warm", lk.Warm}, {"cold", lk.Cold}} {
			for _, k := range []struct {
				name string
				l    *Latency
			}{{"present", ph.ph.Present}, {"absent", ph.ph.Absent}} {
				c := phaseColor[i%len(phaseColor)]
				i++
				if k.l == nil || len(k.l.CDF) == 0 {
					continue
				}
				xys := make(plotter.XYs, len(k.l.CDF))
				for n, q := range k.l.CDF {
					xys[n] = plotter.XY{X: math.Max(q.Ns, 1), Y: q.Q}
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					return err
				}
				line.Color = c
				line.Width = vg.Points(1.5)
				p.Add(line)
				p.Legend.Add(fmt.Sprintf("%s, %s (p50 %s, p99.9 %s)", ph.name, k.name, fmtNs(k.l.P50Ns), fmtNs(k.l.P999Ns)), line)
				drawn++
			}
		}
	}
	if drawn > 0 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = nsTicks{}
	} else {
		p.Title.Text += ": not measured"
	}
	p.Draw(dc)
	return nil
}

// nsTicks marks a log-scale nanosecond axis at powers of ten, labelled in
// ns, µs and ms.
type nsTicks struct{}

func (nsTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(math.Max(lo, 1))); e <= math.Ceil(math.Log10(math.Max(hi, 1))); e++ {
		v := math.Pow(10, e)
		if v < lo/1.0001 || v > hi*1.0001 {
			continue
		}
		label := fmt.Sprintf("%.0f ns", v)
		switch {
		case v >= 1e6:
			label = fmt.Sprintf("%.0f ms", v/1e6)
		case v >= 1e3:
			label = fmt.Sprintf("%.0f µs", v/1e3)
		}
		ts = append(ts, plot.Tick{Value: v, Label: label})
	}
	return ts
}
