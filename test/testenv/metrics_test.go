package testenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// scrapeText is a scrape as the operator serves one: a gauge without
// labels, a gauge with one series per priority (controller-runtime's
// priority queue), counters, a histogram and a summary.
const scrapeText = `# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 4.2e+07
# TYPE workqueue_depth gauge
workqueue_depth{controller="podset",name="podset",priority="-100"} 3
workqueue_depth{controller="podset",name="podset",priority="0"} 2
workqueue_depth{controller="other",name="other",priority="0"} 7
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="podset",result="success"} 10
controller_runtime_reconcile_total{controller="podset",result="error"} 2
controller_runtime_reconcile_total{controller="other",result="success"} 5
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",method="GET"} 4
rest_client_requests_total{code="201",method="POST"} 3
rest_client_requests_total{code="409",method="POST"} 1
rest_client_requests_total{code="200"} 6
# TYPE podset_rollout_duration_seconds histogram
podset_rollout_duration_seconds_bucket{podset="web",le="+Inf"} 2
podset_rollout_duration_seconds_sum{podset="web"} 9.5
podset_rollout_duration_seconds_count{podset="web"} 2
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.01
go_gc_duration_seconds_count 8
`

// TestSample pins what the benchmark's gauges and the end-to-end suite's
// checks read: the first series whose labels include the asked ones, not
// a sum, with a missing label matching the empty value.
func TestSample(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(scrapeText))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, family string
		labels       map[string]string
		want         float64
		found        bool
	}{
		{"a gauge without labels", "go_memstats_heap_alloc_bytes", nil, 42e6, true},
		{"the first series that matches, not their sum", "workqueue_depth", map[string]string{"name": "podset"}, 3, true},
		{"every label asked for", "workqueue_depth", map[string]string{"name": "podset", "priority": "0"}, 2, true},
		{"no labels asked for: the first series", "workqueue_depth", nil, 3, true},
		{"a missing label is empty", "rest_client_requests_total", map[string]string{"method": ""}, 6, true},
		{"a counter", "controller_runtime_reconcile_total", map[string]string{"result": "error"}, 2, true},
		{"a histogram's count", "podset_rollout_duration_seconds", map[string]string{"podset": "web"}, 2, true},
		{"a summary reads zero: no suite reads one", "go_gc_duration_seconds", nil, 0, true},
		{"no series matches", "workqueue_depth", map[string]string{"name": "none"}, 0, false},
		{"no such family", "podset_status_replicas", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found := m.Sample(tc.family, tc.labels)
			if got != tc.want || found != tc.found {
				t.Errorf("Sample(%s, %v) = %v, %v; want %v, %v", tc.family, tc.labels, got, found, tc.want, tc.found)
			}
		})
	}
}

// TestSumBy pins what the benchmark counts its passes, gate writes and
// writes by method with: every series, summed by one label's value.
func TestSumBy(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(scrapeText))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		family, label string
		want          map[string]float64
	}{
		{"controller_runtime_reconcile_total", "controller", map[string]float64{"podset": 12, "other": 5}},
		{"rest_client_requests_total", "method", map[string]float64{"GET": 4, "POST": 4, "": 6}},
		{"podset_operator_pod_writes_total", "kind", map[string]float64{}},
	} {
		if diff := cmp.Diff(tc.want, m.SumBy(tc.family, tc.label)); diff != "" {
			t.Errorf("SumBy(%s, %s) (-want +got):\n%s", tc.family, tc.label, diff)
		}
	}
}

// TestGatherMetrics checks that a registry gathered in process reads as
// its endpoint's scrape would.
func TestGatherMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	passes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "controller_runtime_reconcile_total", Help: "p"}, []string{"controller", "result"})
	passes.WithLabelValues("podset", "success").Add(3)
	passes.WithLabelValues("podset", "error").Add(1)
	reg.MustRegister(passes)
	m, err := GatherMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.SumBy("controller_runtime_reconcile_total", "controller")["podset"]; got != 4 {
		t.Errorf("podset passes = %v, want 4", got)
	}
}
