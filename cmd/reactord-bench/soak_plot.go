package main

import (
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotSoak draws a soak's timeline to a PNG, as plotScale draws --scale:
// each process's RSS and goroutines, and p50/p99 from publish
// to reaction over time, each fault a dashed vertical line.
func plotSoak(path string, samples []soakSample, faults []soakFault) error {
	palette := []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
		color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255}, color.RGBA{227, 119, 194, 255}}
	series := func(val func(soakProcSample) float64) (map[string]plotter.XYs, []string) {
		by := map[string]plotter.XYs{}
		for _, sm := range samples {
			for _, p := range sm.Procs {
				if v := val(p); v >= 0 {
					by[p.Name] = append(by[p.Name], plotter.XY{X: sm.T, Y: v})
				}
			}
		}
		names := make([]string, 0, len(by))
		for n := range by {
			names = append(names, n)
		}
		slices.Sort(names)
		return by, names
	}
	panel := func(title, ylabel string, by map[string]plotter.XYs, names []string) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, "seconds", ylabel
		p.Y.Min = 0
		for i, n := range names {
			l, err := plotter.NewLine(by[n])
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = palette[i%len(palette)], vg.Points(1.2)
			p.Add(l)
			p.Legend.Add(n, l)
		}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		for _, f := range faults {
			top := p.Y.Max
			if top <= 0 {
				top = 1
			}
			l, err := plotter.NewLine(plotter.XYs{{X: f.T, Y: 0}, {X: f.T, Y: top}})
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes = color.Gray{Y: 120}, []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(l)
		}
		return p, nil
	}
	rss, rn := series(rssOf)
	gor, gn := series(func(p soakProcSample) float64 {
		if p.Goroutines == 0 {
			return -1
		}
		return float64(p.Goroutines)
	})
	lat := map[string]plotter.XYs{}
	for _, sm := range samples {
		lat["p50"] = append(lat["p50"], plotter.XY{X: sm.T, Y: sm.P50ms})
		lat["p99"] = append(lat["p99"], plotter.XY{X: sm.T, Y: sm.P99ms})
	}
	var plots []*plot.Plot
	for _, pp := range []struct {
		title, y string
		by       map[string]plotter.XYs
		names    []string
	}{
		{"RSS per process (faults dashed)", "MB", rss, rn},
		{"goroutines per process", "goroutines", gor, gn},
		{"publish to reaction", "ms", lat, []string{"p50", "p99"}},
	} {
		p, err := panel(pp.title, pp.y, pp.by, pp.names)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	const w, h = 8 * vg.Inch, 10 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{{plots[0]}, {plots[1]}, {plots[2]}}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return err
	}
	return f.Close()
}
