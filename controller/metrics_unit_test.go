package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
