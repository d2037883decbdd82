package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// statusPass is one Reconcile as the rollout timing sees it: the PodSet's generation,
// the status clients saw before the pass, and the one they see after it.
type statusPass struct {
	at                    time.Duration
	generation            int64
	seenGen, shownGen     int64
	seenReady, shownReady bool
}

func TestRolloutTiming(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		passes []statusPass
		want   []time.Duration
	}{
		"a new PodSet is timed from its first pass to Ready": {
			passes: []statusPass{
				{at: 0, generation: 1, seenGen: 0, shownGen: 1},
				{at: 5 * time.Second, generation: 1, seenGen: 1, shownGen: 1},
				{at: 9 * time.Second, generation: 1, seenGen: 1, shownGen: 1, shownReady: true},
				{at: 20 * time.Second, generation: 1, seenGen: 1, shownGen: 1, seenReady: true, shownReady: true},
			},
			want: []time.Duration{9 * time.Second},
		},
		"a spec change that keeps the PodSet Ready counts as a rollout of no time": {
			passes: []statusPass{
				{at: 0, generation: 2, seenGen: 1, shownGen: 2, seenReady: true, shownReady: true},
			},
			want: []time.Duration{0},
		},
		"a deferred status write: the rollout ends when Ready is shown for the new generation": {
			passes: []statusPass{
				{at: 0, generation: 2, seenGen: 1, shownGen: 1, seenReady: true, shownReady: true},
				{at: time.Second, generation: 2, seenGen: 1, shownGen: 2, seenReady: true},
				{at: 30 * time.Second, generation: 2, seenGen: 2, shownGen: 2, shownReady: true},
			},
			want: []time.Duration{30 * time.Second},
		},
		"a newer spec mid-rollout restarts the clock": {
			passes: []statusPass{
				{at: 0, generation: 2, seenGen: 1, shownGen: 2, seenReady: true},
				{at: 10 * time.Second, generation: 3, seenGen: 2, shownGen: 3},
				{at: 25 * time.Second, generation: 3, seenGen: 3, shownGen: 3, shownReady: true},
			},
			want: []time.Duration{15 * time.Second},
		},
		"no spec change, no rollout": {
			passes: []statusPass{
				{at: 0, generation: 1, seenGen: 1, shownGen: 1, seenReady: true, shownReady: true},
				{at: time.Second, generation: 1, seenGen: 1, shownGen: 1, seenReady: false, shownReady: true},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, clock := newTestMemory()
			key := types.NamespacedName{Namespace: "demo", Name: "web"}
			var got []time.Duration
			for _, p := range tc.passes {
				ps := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Generation: p.generation}}
				ps.Status = statusAt(p.seenGen, p.seenReady)
				clock.t = start.Add(p.at)
				if since, done := m.rolloutEnded(ps, statusAt(p.shownGen, p.shownReady)); done {
					got = append(got, clock.t.Sub(since))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rollout durations (-want +got):\n%s", diff)
			}
		})
	}
}

func statusAt(generation int64, ready bool) podsetv1alpha1.PodSetStatus {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	return podsetv1alpha1.PodSetStatus{
		ObservedGeneration: generation,
		Conditions:         []metav1.Condition{{Type: podsetv1alpha1.ReadyCondition, Status: status}},
	}
}

// BenchmarkScrape is one scrape of the operator's registry with 1000
// PodSets in its memory, each with a status as a converged PodSet shows.
func BenchmarkScrape(b *testing.B) {
	m, _ := newTestMemory()
	x := newMetrics(m)
	reg := prometheus.NewRegistry()
	reg.MustRegister(x)
	now := metav1.Now()
	for i := range 1000 {
		ps := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ps-%04d", i), Namespace: "bench", Generation: 1}}
		status := podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			CurrentRevision: ps.Name + "-5d8f7c9b", UpdateRevision: ps.Name + "-5d8f7c9b", LastProgressTime: &now,
			Conditions: []metav1.Condition{
				{Type: podsetv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "AllPodsReady"},
				{Type: podsetv1alpha1.ReconcilingCondition, Status: metav1.ConditionFalse, Reason: "Converged"},
				{Type: podsetv1alpha1.StalledCondition, Status: metav1.ConditionFalse, Reason: "Converged"},
			},
		}
		m.rolloutEnded(ps, status)
		x.countPodWrite(ps, "create", nil)
		x.countPodWrite(ps, "gate", nil)
		x.countStatusWrite(ps, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStatusGaugesFollowTheStatusShown: a scrape's gauges of a PodSet are
// those of the status its last pass showed, and a scrape does not hold the
// operator's memory (which every pass takes) while it sends them.
func TestStatusGaugesFollowTheStatusShown(t *testing.T) {
	m, _ := newTestMemory()
	x := newMetrics(m)
	reg := prometheus.NewRegistry()
	reg.MustRegister(x)
	ps := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Generation: 1}}
	ready := func() float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == metricReadyReplicas && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no single %s series", metricReadyReplicas)
		return 0
	}

	m.rolloutEnded(ps, podsetv1alpha1.PodSetStatus{ObservedGeneration: 1, ReadyReplicas: 1})
	if v := ready(); v != 1 {
		t.Errorf("ready replicas %v, want 1", v)
	}
	m.rolloutEnded(ps, podsetv1alpha1.PodSetStatus{ObservedGeneration: 1, ReadyReplicas: 3})
	if v := ready(); v != 3 {
		t.Errorf("ready replicas %v after a pass showed 3, want 3", v)
	}

	ch := make(chan prometheus.Metric)
	go func() {
		x.status.Collect(ch)
		close(ch)
	}()
	<-ch
	// Collect now waits to send its next gauge.
	if !m.mu.TryLock() {
		t.Fatal("the memory is held while a scrape sends the gauges")
	}
	m.mu.Unlock()
	for range ch {
	}
}
