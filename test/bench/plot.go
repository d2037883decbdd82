package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// readyCurve is when each pod of a scenario became Ready, from the
// trigger, sorted: the i-th entry is when i+1 pods were Ready.
func (o *observer) readyCurve(ns string, start time.Time) []time.Duration {
	var curve []time.Duration
	o.read(func(s *state) {
		for _, p := range s.pods {
			if p.ns == ns && p.ready && !p.terminating && !p.readyAt.Before(start) {
				curve = append(curve, p.readyAt.Sub(start))
			}
		}
	})
	slices.Sort(curve)
	return curve
}

// plotOrder is the order, and so the colour, of the contenders in a plot.
var plotOrder = []string{"limit", "podset", "replicaset", "statefulset", "kruise", "tutorial"}

// writePlots writes, for every convergence scenario of the run (the scale
// scenario's included), the pods Ready over time of every contender as an
// SVG file in dir, and returns the files' paths.
func (b *bench) writePlots(dir string, results []result) ([]string, error) {
	var files []string
	var scenarios []*timedResult
	for _, r := range results {
		switch r := r.(type) {
		case *convergenceResult:
			scenarios = append(scenarios, r.ready)
		case *scaleResult:
			scenarios = append(scenarios, r.res)
		}
	}
	seen := map[string]int{}
	for _, res := range scenarios {
		id := res.id
		name := strings.ReplaceAll(strings.ReplaceAll(id, " x ", "x"), " ", "-")
		if seen[id]++; seen[id] > 1 { // a repeated shape (-conv 100x10,100x10)
			name += fmt.Sprintf("-r%d", seen[id])
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s → ready: pods Ready over time (run %s)", id, b.c.runID)
		p.X.Label.Text = "seconds since the sets were created"
		p.Y.Label.Text = "pods Ready"
		p.Legend.Top, p.Legend.Left = false, false
		p.Add(plotter.NewGrid())
		lines := 0
		for i, name := range plotOrder {
			m := res.of(name)
			if m == nil || len(m.curve) == 0 {
				continue
			}
			label := name
			if name == "limit" {
				label = "limit (" + res.limitBest + ")"
			}
			if m.cutoff {
				label += " (cut off)"
			}
			l, err := plotter.NewLine(curveXYs(m.curve))
			if err != nil {
				return files, err
			}
			l.StepStyle = plotter.PostStep
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s: %s", label, fmtDur(m.curve[len(m.curve)-1])), l)
			lines++
		}
		if lines == 0 {
			continue
		}
		path := filepath.Join(dir, "ready-"+name+".svg")
		if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
			return files, fmt.Errorf("writing %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// curveXYs is a ready curve as points (seconds, pods Ready), from (0, 0).
func curveXYs(curve []time.Duration) plotter.XYs {
	xys := make(plotter.XYs, 0, len(curve)+1)
	xys = append(xys, plotter.XY{})
	for i, d := range curve {
		xys = append(xys, plotter.XY{X: d.Seconds(), Y: float64(i + 1)})
	}
	return xys
}
