package podset

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// A pod is available once it has been Ready for spec.minReadySeconds, as
// Kubernetes' own IsPodAvailable has it for Deployments and StatefulSets: a
// pod that crashes seconds after its first Ready never counts, so a rollout
// does not race through it.

// podAvailable reports whether a pod has been Ready for minReady at now.
func podAvailable(pod *corev1.Pod, minReady time.Duration, now time.Time) bool {
	if !podReady(pod) {
		return false
	}
	if minReady <= 0 {
		return true
	}
	since := readySince(pod)
	return !since.IsZero() && !since.Add(minReady).After(now)
}

// availableIn is how long until a Ready pod becomes available, or 0 if it
// is available already or not Ready at all (its next readiness change is
// an event, not a time).
func availableIn(pod *corev1.Pod, minReady time.Duration, now time.Time) time.Duration {
	if minReady <= 0 || !podReady(pod) {
		return 0
	}
	since := readySince(pod)
	if since.IsZero() {
		return 0
	}
	return max(0, since.Add(minReady).Sub(now))
}

// readySince is when the pod's Ready condition last turned True.
func readySince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// minReadySeconds is spec.minReadySeconds as a duration.
func minReadySeconds(ps *podsetv1alpha1.PodSet) time.Duration {
	return time.Duration(max(0, ps.Spec.MinReadySeconds)) * time.Second
}
