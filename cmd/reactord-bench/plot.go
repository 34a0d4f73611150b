package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotScale draws the --scale runs to a PNG: the CPU time (reactord and
// NATS) per 1,000 events against the number of replicas, one line per
// number of partitions, and the JetStream floor as a dashed line.
func plotScale(path string, cells []scaleCell) error {
	p := plot.New()
	p.Title.Text = "reactord-bench --scale: CPU per 1,000 events"
	p.X.Label.Text = "replicas"
	p.Y.Label.Text = "CPU ms per 1,000 events (reactord + NATS)"
	p.Legend.Top = false // bottom right: the lines stay above the floor
	p.Legend.Padding = vg.Points(2)
	p.Legend.YOffs = vg.Points(8)
	p.Y.Min = 0
	byParts := map[int]plotter.XYs{}
	var maxReplicas int
	for _, c := range cells {
		if c.Floor {
			continue
		}
		byParts[c.Partitions] = append(byParts[c.Partitions], plotter.XY{X: float64(c.Replicas), Y: c.Res.CPUms})
		maxReplicas = max(maxReplicas, c.Replicas)
	}
	palette := []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
		color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255}}
	keys := make([]int, 0, len(byParts))
	for k := range byParts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		pts := byParts[k]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, s.Color = palette[i%len(palette)], palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		name := fmt.Sprintf("%d partitions", k)
		switch k {
		case 0:
			name = "shared consumer"
		case 1:
			name = "1 partition"
		}
		p.Legend.Add(name, l, s)
	}
	if floor, _, n := floorFigures(cells); n > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 1, Y: floor}, {X: float64(max(maxReplicas, 2)), Y: floor}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = color.Gray{Y: 80}, []vg.Length{vg.Points(4), vg.Points(3)}, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("JetStream floor (one consumer)", l)
	}
	p.X.Min, p.X.Max = 0.8, float64(max(maxReplicas, 2))+0.2
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var out []plot.Tick
		for r := 1; r <= max(maxReplicas, 2); r++ {
			out = append(out, plot.Tick{Value: float64(r), Label: fmt.Sprint(r)})
		}
		return out
	})
	var top float64
	for _, c := range cells {
		top = max(top, c.Res.CPUms)
	}
	step := 50.0
	p.Y.Max = math.Ceil(top*1.05/step) * step
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var out []plot.Tick
		for v := 0.0; v <= hi+1e-9; v += step {
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
		}
		return out
	})
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// readScale reads the JSON lines of a --scale run (its output, table
// lines ignored) back into its cells, for --plot-from.
func readScale(r io.Reader) ([]scaleCell, error) {
	var cells []scaleCell
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var res benchReplicasResult
		if err := json.Unmarshal(line, &res); err != nil {
			return nil, err
		}
		cells = append(cells, scaleCell{Floor: res.Mode == "jetstream-floor", Replicas: res.Replicas, Partitions: res.Partitions, Res: res})
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("no run lines")
	}
	return cells, sc.Err()
}
