package main

import (
	"strings"
	"testing"
	"time"
)

// TestRepeats checks that a shape run three times gets, for each ratio,
// the median of its runs held to the target (the floor of the limit's
// apply loop against ReplicaSet shown without one), and that a shape run
// once gets none.
func TestRepeats(t *testing.T) {
	run := func(podset, replicaset time.Duration, apiPS, apiRS, apiLimit time.Duration) *convergenceResult {
		m := func(d, api time.Duration) *measurement {
			return &measurement{dur: d, cpu: cpuTimes{api: api, ok: true}}
		}
		return &convergenceResult{k: 10, n: 100, ready: &timedResult{id: "10 x 100",
			podset: m(podset, apiPS), replicaset: m(replicaset, apiRS),
			apply: &limitRun{how: "apply W=32", m: m(podset, apiLimit)}}}
	}
	once := &convergenceResult{k: 1, n: 1000, ready: &timedResult{id: "1 x 1000",
		podset: &measurement{dur: 2 * time.Second}, replicaset: &measurement{dur: time.Second}}}
	results := []result{
		run(12*time.Second, 10*time.Second, 13*time.Second, 10*time.Second, 10*time.Second), // 1.20, API 1.30, floor 1.00
		once,
		run(20*time.Second, 10*time.Second, 12*time.Second, 10*time.Second, 8*time.Second), // 2.00, API 1.20, floor 0.80
		run(11*time.Second, 10*time.Second, 11*time.Second, 10*time.Second, 9*time.Second), // 1.10, API 1.10, floor 0.90
	}
	rows := repeats(results)
	if len(rows) != 4 {
		t.Fatalf("got %d rows, want 4 (time and API server CPU against ReplicaSet, the floor's and podset's against the floor):\n%+v", len(rows), rows)
	}
	for i, want := range []struct{ check, result string }{
		{"podset / replicaset: median 1.20 (runs: 1.20, 2.00, 1.10)", "missed"},
		{"API server CPU per pod, podset / replicaset: median 1.20 (runs: 1.30, 1.20, 1.10)", "met"},
		{"API server CPU per pod, the limit's apply loop / replicaset: the floor of the operator's pod and gate writes: median 0.90 (runs: 1.00, 0.80, 0.90)", "—"},
		{"API server CPU per pod, podset / the limit's apply loop: median 1.30 (runs: 1.30, 1.50, 1.22)", "missed"},
	} {
		r := rows[i]
		if r.check != want.check || r.result != want.result || !strings.HasPrefix(r.scenario, "10 x 100 → ready, 3 runs") {
			t.Errorf("row %d = %q %q %q, want %q %q", i, r.scenario, r.check, r.result, want.check, want.result)
		}
	}
}
