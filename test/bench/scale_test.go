package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestReadAsksForItsFamiliesOnly serves metrics as the operator does (the
// Prometheus handler) and checks that the benchmark's scrape gets only the
// families it names, with its token, and everything when it names none.
func TestReadAsksForItsFamiliesOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	heap := prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_memstats_heap_alloc_bytes", Help: "h"})
	heap.Set(42)
	perSet := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "podset_operator_podset_replicas", Help: "r"}, []string{"podset"})
	for _, name := range []string{"a", "b", "c"} {
		perSet.WithLabelValues(name).Set(1)
	}
	reg.MustRegister(heap, perSet)
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	m := &operatorMetrics{url: srv.URL + "/metrics", token: "t0ken", hc: srv.Client()}

	for name, tc := range map[string]struct {
		ask, want []string
	}{
		"one family":   {ask: []string{"go_memstats_heap_alloc_bytes"}, want: []string{"go_memstats_heap_alloc_bytes"}},
		"two families": {ask: []string{"podset_operator_podset_replicas", "go_memstats_heap_alloc_bytes"}, want: []string{"go_memstats_heap_alloc_bytes", "podset_operator_podset_replicas"}},
		"all":          {want: []string{"go_memstats_heap_alloc_bytes", "podset_operator_podset_replicas"}},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := m.read(t.Context(), tc.ask...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := range f {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("families = %v, want %v", got, tc.want)
			}
		})
	}
	f, err := m.read(t.Context(), "go_memstats_heap_alloc_bytes")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Sample("go_memstats_heap_alloc_bytes", nil); got != 42 {
		t.Errorf("heap = %v, want 42", got)
	}
}
