package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// setImage changes the template's image: a new template, to roll out.
func setImage(t *testing.T, ps *podsetv1alpha1.PodSet, image string) {
	t.Helper()
	eventually(t, "update the template", func(context.Context) error {
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
	eventually(t, name+" with "+img, func(context.Context) error {
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
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(3).MaxUnavailable(1))
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
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(3).MaxUnavailable(1))
	before := pods(t, ns)
	markUnready(t, ps, before["web-0"], 2)

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
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Replicas(2).OnDelete())
	before := pods(t, ns)

	// Under OnDelete a PodSet whose pods all exist and are available is
	// healthy, as kstatus and Argo CD read an OnDelete StatefulSet:
	// updatedReplicas and the message show the lag.
	setImage(t, ps, "busybox:1.37")
	got := waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("generation %d not observed yet", got.Generation)
		}
		return nil
	})
	ready := testenv.Condition(got, podsetv1alpha1.ReadyCondition)
	if ready.Status != metav1.ConditionTrue || got.Status.UpdatedReplicas != 0 || got.Status.AvailableReplicas != 2 {
		t.Errorf("status %+v, want Ready=True with 2 available and 0 updated", got.Status)
	}
	if want := "2 pods run an older template (OnDelete"; !strings.Contains(ready.Message, want) {
		t.Errorf("Ready message %q does not say %q", ready.Message, want)
	}
	if c := testenv.Condition(got, podsetv1alpha1.ReconcilingCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Reconciling = %+v, want False: there is nothing for the operator to do", c)
	}
	if want := "web-" + before["web-0"].Labels[podsetv1alpha1.TemplateHashLabel]; got.Status.CurrentRevision != want || got.Status.UpdateRevision == want {
		t.Errorf("currentRevision %q, updateRevision %q; want the pods' %q and the new template's", got.Status.CurrentRevision, got.Status.UpdateRevision, want)
	}
	assertUntouched(t, ns, before, "web-0", "web-1")

	// Deleting a pod is what updates it.
	forceDelete(t, before["web-1"])
	web1 := waitForImage(t, ns, "web-1", "busybox:1.37")
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.UpdatedReplicas != 1 || got.Status.Replicas != 2 {
			return fmt.Errorf("status %+v, want 2 pods, 1 updated", got.Status)
		}
		return nil
	})
	assertUntouched(t, ns, before, "web-0")
	if img := image(pods(t, ns)["web-0"]); img != "busybox:1.36" {
		t.Errorf("web-0 runs %s, want the old busybox:1.36 until it is deleted", img)
	}
	markReady(t, web1)
	got = waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(got, podsetv1alpha1.ReadyCondition); c.Status != metav1.ConditionTrue || got.Status.UpdatedReplicas != 1 {
			return fmt.Errorf("status %+v, want Ready=True with 1 updated", got.Status)
		}
		return nil
	})
	if want := "1 pod runs an older template (OnDelete"; !strings.Contains(testenv.Condition(got, podsetv1alpha1.ReadyCondition).Message, want) {
		t.Errorf("Ready message %q does not say %q", testenv.Condition(got, podsetv1alpha1.ReadyCondition).Message, want)
	}
}
