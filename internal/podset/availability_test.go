package podset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readySince makes the pod Running and Ready since the given time.
func (b *podBuilder) readySince(at time.Time) *podBuilder {
	b.ready()
	b.pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
	return b
}

func TestPodAvailable(t *testing.T) {
	cases := map[string]struct {
		pod      corev1.Pod
		minReady time.Duration
		want     bool
		wantIn   time.Duration
	}{
		"ready, no minReadySeconds": {
			pod: makePod("web-0").ready().obj(), want: true,
		},
		"not ready": {
			pod: makePod("web-0").running().obj(), minReady: 10 * time.Second,
		},
		"ready for less than minReadySeconds": {
			pod: makePod("web-0").readySince(testNow.Add(-4 * time.Second)).obj(), minReady: 10 * time.Second,
			wantIn: 6 * time.Second,
		},
		"ready for exactly minReadySeconds": {
			pod: makePod("web-0").readySince(testNow.Add(-10 * time.Second)).obj(), minReady: 10 * time.Second, want: true,
		},
		"ready for longer": {
			pod: makePod("web-0").readySince(testNow.Add(-time.Hour)).obj(), minReady: 10 * time.Second, want: true,
		},
		"ready with no transition time: never available under minReadySeconds, as IsPodAvailable": {
			pod: makePod("web-0").ready().obj(), minReady: 10 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := podAvailable(&tc.pod, tc.minReady, testNow); got != tc.want {
				t.Errorf("podAvailable() = %v, want %v", got, tc.want)
			}
			if got := availableIn(&tc.pod, tc.minReady, testNow); got != tc.wantIn {
				t.Errorf("availableIn() = %v, want %v", got, tc.wantIn)
			}
		})
	}
}
