package controller_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// setImage changes the template's image: a new template, to roll out.
func setImage(t *testing.T, ps *podsetv1alpha1.PodSet, image string) {
	t.Helper()
	eventually(t, "update the template", func() error {
		cur := get(t, ps)
		cur.Spec.Template.Spec.Containers[0].Image = image
		return env.Client.Update(t.Context(), cur)
	})
}

func image(p corev1.Pod) string { return p.Spec.Containers[0].Image }

// waitForImage waits until the named pod is a new pod with the image.
func waitForImage(t *testing.T, ns, name, img string) corev1.Pod {
	t.Helper()
	var got corev1.Pod
	eventually(t, name+" with "+img, func() error {
		p, ok := pods(t, ns)[name]
		if !ok || p.DeletionTimestamp != nil || image(p) != img {
			return fmt.Errorf("%s not replaced yet", name)
		}
		got = p
		return nil
	})
	return got
}

// assertUntouched checks that the named pods are still the given ones.
func assertUntouched(t *testing.T, ns string, before map[string]corev1.Pod, names ...string) {
	t.Helper()
	now := pods(t, ns)
	for _, n := range names {
		if p, ok := now[n]; !ok || p.UID != before[n].UID || p.DeletionTimestamp != nil {
			t.Errorf("%s was replaced or deleted; it should have waited", n)
		}
	}
}

func TestRolloutReplacesFromTheHighestOrdinalWithinMaxUnavailable(t *testing.T) {
	ns := newNamespace(t, nil)
	ps := makePodSet(ns, "web").replicas(3).maxUnavailable(1).create(t)
	waitForPods(t, ns, "web-0", "web-1", "web-2")
	markAllReady(t, ns)
	waitForStatus(t, ps, readyStatus(3))
	before := pods(t, ns)

	setImage(t, ps, "busybox:1.37")
	// One pod at a time, highest ordinal first; the next only once the new
	// one is ready.
	p := waitForImage(t, ns, "web-2", "busybox:1.37")
	assertUntouched(t, ns, before, "web-0", "web-1")
	markReady(t, p)
	p = waitForImage(t, ns, "web-1", "busybox:1.37")
	assertUntouched(t, ns, before, "web-0")
	markReady(t, p)
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.37"))
	waitForStatus(t, ps, readyStatus(3))
}

func TestRolloutReplacesUnreadyPodsFirst(t *testing.T) {
	ns := newNamespace(t, nil)
	ps := makePodSet(ns, "web").replicas(3).maxUnavailable(1).create(t)
	waitForPods(t, ns, "web-0", "web-1", "web-2")
	markAllReady(t, ns)
	waitForStatus(t, ps, readyStatus(3))
	before := pods(t, ns)
	setPodStatus(t, before["web-0"], corev1.PodRunning, corev1.ConditionFalse)
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ReadyReplicas != 2 {
			return fmt.Errorf("readyReplicas %d, want 2", got.Status.ReadyReplicas)
		}
		return nil
	})

	// A broken template is fixed by a new one: the unready pod goes first,
	// and while it is unavailable no ready pod is taken.
	setImage(t, ps, "busybox:1.37")
	p := waitForImage(t, ns, "web-0", "busybox:1.37")
	assertUntouched(t, ns, before, "web-1", "web-2")
	markReady(t, p)
	markReady(t, waitForImage(t, ns, "web-2", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-1", "busybox:1.37"))
	waitForStatus(t, ps, readyStatus(3))
}

func TestOnDeleteReplacesOnlyDeletedPods(t *testing.T) {
	ns := newNamespace(t, nil)
	ps := makePodSet(ns, "web").replicas(2).onDelete().create(t)
	waitForPods(t, ns, "web-0", "web-1")
	markAllReady(t, ns)
	waitForStatus(t, ps, readyStatus(2))
	before := pods(t, ns)

	setImage(t, ps, "busybox:1.37")
	got := waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("generation %d not observed yet", got.Generation)
		}
		return nil
	})
	if got.Status.UpdatedReplicas != 0 || condition(got, podsetv1alpha1.ReconcilingCondition).Reason != podsetv1alpha1.RollingOutReason {
		t.Errorf("status %+v, want 0 updated and Reconciling/RollingOut", got.Status)
	}
	assertUntouched(t, ns, before, "web-0", "web-1")

	forceDelete(t, before["web-1"])
	waitForImage(t, ns, "web-1", "busybox:1.37")
	assertUntouched(t, ns, before, "web-0")
	if img := image(pods(t, ns)["web-0"]); img != "busybox:1.36" {
		t.Errorf("web-0 runs %s, want the old busybox:1.36 until it is deleted", img)
	}
}
