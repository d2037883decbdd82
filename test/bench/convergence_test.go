package main

import (
	"strings"
	"testing"
	"time"
)

// TestRepeats checks that a shape run three times gets, for each ratio,
// the median of its runs held to the target, and that a shape run once
// gets none.
func TestRepeats(t *testing.T) {
	run := func(podset, replicaset time.Duration, apiPS, apiRS time.Duration) *convergenceResult {
		m := func(d, api time.Duration) *measurement {
			return &measurement{dur: d, cpu: cpuTimes{api: api, ok: true}}
		}
		return &convergenceResult{k: 10, n: 100, ready: &timedResult{id: "10 x 100",
			podset: m(podset, apiPS), replicaset: m(replicaset, apiRS)}}
	}
	once := &convergenceResult{k: 1, n: 1000, ready: &timedResult{id: "1 x 1000",
		podset: &measurement{dur: 2 * time.Second}, replicaset: &measurement{dur: time.Second}}}
	results := []result{
		run(12*time.Second, 10*time.Second, 13*time.Second, 10*time.Second), // 1.20, API 1.30
		once,
		run(20*time.Second, 10*time.Second, 12*time.Second, 10*time.Second), // 2.00, API 1.20
		run(11*time.Second, 10*time.Second, 11*time.Second, 10*time.Second), // 1.10, API 1.10
	}
	rows := repeats(results)
	if len(rows) != 2 {
		t.Fatalf("got %d rows, want 2 (time and API server CPU against ReplicaSet):\n%+v", len(rows), rows)
	}
	for i, want := range []struct{ check, result string }{
		{"podset / replicaset: median 1.20 (runs: 1.20, 2.00, 1.10)", "missed"},
		{"API server CPU per pod, podset / replicaset: median 1.20 (runs: 1.30, 1.20, 1.10)", "met"},
	} {
		r := rows[i]
		if r.check != want.check || r.result != want.result || !strings.HasPrefix(r.scenario, "10 x 100 → ready, 3 runs") {
			t.Errorf("row %d = %q %q %q, want %q %q", i, r.scenario, r.check, r.result, want.check, want.result)
		}
	}
}
