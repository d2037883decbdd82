package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestWritePlots: a convergence scenario's contenders end up as lines of
// one SVG, each labelled with its name and time to Ready, and a scenario
// without curves gets no file.
func TestWritePlots(t *testing.T) {
	curve := func(n int, step time.Duration) []time.Duration {
		c := make([]time.Duration, n)
		for i := range c {
			c[i] = time.Duration(i+1) * step
		}
		return c
	}
	b := &bench{c: &cluster{runID: "test"}}
	results := []result{
		&convergenceResult{k: 1, n: 10, ready: &timedResult{
			id:    "1 x 10",
			limit: &measurement{curve: curve(10, 100*time.Millisecond)}, limitBest: "create W=32",
			podset:     &measurement{curve: curve(10, 150*time.Millisecond)},
			replicaset: &measurement{curve: curve(10, 120*time.Millisecond)},
		}},
		&convergenceResult{k: 2, n: 5, ready: &timedResult{id: "2 x 5", podset: &measurement{}}},
	}
	files, err := b.writePlots(t.TempDir(), results)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || !strings.HasSuffix(files[0], "ready-1x10.svg") {
		t.Fatalf("files %v, want one ready-1x10.svg", files)
	}
	svg, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "limit (create W=32): 1.00 s", "podset: 1.50 s", "replicaset: 1.20 s", "pods Ready"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the plot does not show %q", want)
		}
	}
}
