package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

func TestCreateScaleAndScaleToZero(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)

	got := waitForPods(t, ns, "web-0", "web-1", "web-2")
	pod := got["web-1"]
	wantLabels := map[string]string{
		"app":                       "web",
		podsetv1alpha1.NameLabel:    "web",
		podsetv1alpha1.OrdinalLabel: "1",
	}
	for k, v := range wantLabels {
		if pod.Labels[k] != v {
			t.Errorf("pod web-1 label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Labels[podsetv1alpha1.TemplateHashLabel] == "" {
		t.Errorf("pod web-1 has no %s label", podsetv1alpha1.TemplateHashLabel)
	}
	wantOwner := []metav1.OwnerReference{{
		APIVersion: "podset.dev/v1alpha1", Kind: "PodSet", Name: "web", UID: ps.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	if diff := cmp.Diff(wantOwner, pod.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}

	// Pods become ready: status follows (the tutorial's filter dropped these
	// events and left readyReplicas stale).
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.Replicas != 3 || got.Status.ReadyReplicas != 0 {
			return fmt.Errorf("status %+v, want 3 pods, 0 ready", got.Status)
		}
		return nil
	})
	markReady(t, got["web-0"])
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ReadyReplicas != 1 {
			return fmt.Errorf("readyReplicas = %d, want 1", got.Status.ReadyReplicas)
		}
		return nil
	})
	markAllReady(t, ns)
	got2 := waitForStatus(t, ps, readyStatus(3))
	if diff := cmp.Diff([]string{"web-0", "web-1", "web-2"}, got2.Status.PodNames); diff != "" {
		t.Errorf("podNames (-want +got):\n%s", diff)
	}
	if got2.Status.Selector != "podset.dev/name=web" {
		t.Errorf("selector = %q", got2.Status.Selector)
	}

	scale(t, ps, 5)
	waitForPods(t, ns, "web-0", "web-1", "web-2", "web-3", "web-4")

	scale(t, ps, 2)
	waitForPods(t, ns, "web-0", "web-1")
	waitForStatus(t, ps, readyStatus(2))

	scale(t, ps, 0)
	waitForPods(t, ns)
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.Replicas != 0 || len(got.Status.PodNames) != 0 ||
			testenv.Condition(got, podsetv1alpha1.ReadyCondition).Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v, want no pods and Ready=True", got.Status)
		}
		return nil
	})
}

// scale sets spec.replicas through the scale subresource, as kubectl scale
// and the HorizontalPodAutoscaler do.
func scale(t *testing.T, ps *podsetv1alpha1.PodSet, replicas int32) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	target := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: ps.Name, Namespace: ps.Namespace}}
	if err := env.Client.SubResource("scale").Patch(t.Context(), target, patch); err != nil {
		t.Fatal(err)
	}
}

func TestDeletedPodIsRecreatedUnderItsName(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	fixture.PodSet(ns, "web").Replicas(2).Create(t, env.Client)
	before := waitForPods(t, ns, "web-0", "web-1")

	forceDelete(t, before["web-1"])
	eventually(t, "web-1 recreated", func(context.Context) error {
		p, ok := pods(t, ns)["web-1"]
		if !ok || p.UID == before["web-1"].UID {
			return fmt.Errorf("web-1 not recreated yet")
		}
		return nil
	})
	if got := pods(t, ns)["web-0"].UID; got != before["web-0"].UID {
		t.Errorf("web-0 was replaced too")
	}
}

func TestFinishedPodsAreReplaced(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded} {
		t.Run(string(phase), func(t *testing.T) {
			ns := testenv.Namespace(t, env.Client, "podset-", nil)
			fixture.PodSet(ns, "job").Replicas(2).Create(t, env.Client)
			before := waitForPods(t, ns, "job-0", "job-1")

			setPodStatus(t, before["job-0"], phase, corev1.ConditionFalse)
			eventually(t, "job-0 replaced", func(context.Context) error {
				p, ok := pods(t, ns)["job-0"]
				if !ok || p.UID == before["job-0"].UID || p.Status.Phase != "" && p.Status.Phase != corev1.PodPending {
					return fmt.Errorf("job-0 not replaced by a fresh pod yet")
				}
				return nil
			})
			if got := pods(t, ns)["job-1"].UID; got != before["job-1"].UID {
				t.Errorf("job-1 was replaced too")
			}
		})
	}
}

func TestTerminatingPodIsWaitedOut(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Replicas(1).Create(t, env.Client)
	old := waitForPods(t, ns, "web-0")["web-0"]

	// Scheduled pods terminate gracefully; no kubelet here confirms it, so
	// the pod stays terminating until the test removes it.
	bind(t, old)
	if err := env.Client.Delete(t.Context(), &old); err != nil {
		t.Fatal(err)
	}
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.Replicas != 1 || len(got.Status.PodNames) != 0 {
			return fmt.Errorf("status %+v, want one terminating pod and no live one", got.Status)
		}
		return nil
	})
	// Still the same single pod: nothing was created beside it.
	all := pods(t, ns)
	if len(all) != 1 || all["web-0"].UID != old.UID || all["web-0"].DeletionTimestamp == nil {
		t.Fatalf("pods while web-0 terminates: %v", liveNames(all))
	}

	forceDelete(t, all["web-0"])
	eventually(t, "web-0 recreated", func(context.Context) error {
		p, ok := pods(t, ns)["web-0"]
		if !ok || p.UID == old.UID {
			return fmt.Errorf("not recreated yet")
		}
		return nil
	})
}

func TestFieldManagerOwnsTheOperatorsFields(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	fixture.PodSet(ns, "web").Create(t, env.Client)
	pod := waitForPods(t, ns, "web-0")["web-0"]
	// The pod is applied by the operator's one field manager, and its
	// readiness gate condition patched on its status (a strategic merge
	// patch, an update: the API server's cheapest write of a condition),
	// which may not have happened yet when the pod is first seen; the pod
	// itself is never updated.
	var managers []string
	for _, mf := range pod.ManagedFields {
		m := fmt.Sprintf("%s/%s", mf.Manager, mf.Operation)
		if mf.Subresource != "" {
			m += "/" + mf.Subresource
		}
		managers = append(managers, m)
	}
	slices.Sort(managers)
	want := []string{controller.FieldManager + "/Apply"}
	if len(managers) == 2 {
		want = append(want, controller.FieldManager+"/Update/status")
	}
	if diff := cmp.Diff(want, managers); diff != "" {
		t.Errorf("managers of a new pod (-want +got):\n%s", diff)
	}
}

// TestScaleDownDrainsReadyPods: a scale-down leaves the drain of a Ready
// pod whose containers sleep drainSeconds in the operator's preStop hook
// to the kubelet: it deletes the pod at once, without closing its gate
// (the terminating pod leaves endpoints while the hook runs), so the
// drain is not waited twice. A Ready pod whose hook sleeps less (made
// before drainSeconds grew, or by a release without the hook) is taken out
// of endpoints first, when an EndpointSlice lists it: its gate closes,
// the pod is not Ready, the kubelet says so too, and drainSeconds pass.
// One that no slice lists (no Service selects it) has nothing to drain
// from and goes at once, as does a pod that is not Ready either way.
func TestScaleDownDrainsReadyPods(t *testing.T) {
	t.Parallel()
	for _, tc := range []scaleDownCase{
		{"pods made with the drain hook", 2, true, false},
		{"pods whose hook sleeps less than the drain", 1, true, true},
		{"pods whose hook sleeps less than the drain, no Service", 1, false, false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			scaleDownDrains(t, tc)
		})
	}
}

// scaleDownCase is a case of TestScaleDownDrainsReadyPods.
type scaleDownCase struct {
	what string
	// drainBefore is spec.drainSeconds when the pods are made; the
	// scale-down runs with 2.
	drainBefore int32
	// served: a Service selects the pods (testenv.ServeEndpoints).
	served   bool
	wantGate bool
}

// scaleDownDrains scales three pods, web-2 not Ready, down to one, and
// checks which of web-1 and web-2 the operator drains before it deletes
// them.
func scaleDownDrains(t *testing.T, tc scaleDownCase) {
	t.Parallel()
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Replicas(3).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DrainSeconds = ptr.To(tc.drainBefore)
	}).Create(t, env.Client)
	waitForPods(t, ns, "web-0", "web-1", "web-2")
	markAllReady(t, ns)
	waitForStatus(t, ps, readyStatus(3))
	if tc.served {
		testenv.ServeEndpoints(t, env.Client, ns)
	}
	for name, p := range pods(t, ns) {
		if l := p.Spec.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != int64(tc.drainBefore) {
			t.Fatalf("pod %s: lifecycle %+v, want the operator's preStop sleep of %d s", name, l, tc.drainBefore)
		}
	}
	if tc.drainBefore != 2 {
		patchSpec(t, ps, `{"spec":{"drainSeconds":2}}`)
	}
	setPodStatus(t, pods(t, ns)["web-2"], corev1.PodRunning, corev1.ConditionFalse)
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ReadyReplicas != 2 || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("readyReplicas = %d, want 2 (observed generation %d of %d)", got.Status.ReadyReplicas, got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})

	timeline := map[string]*drainSeen{"web-1": {}, "web-2": {}}
	scale(t, ps, 1)
	eventually(t, "web-1 and web-2 are deleted", func(context.Context) error {
		now := time.Now()
		all := pods(t, ns)
		for name, s := range timeline {
			p, ok := all[name]
			if s.see(p, ok, now) && name == "web-1" && tc.wantGate && (!s.gateClosed || s.notReady.IsZero() || now.Sub(s.notReady) < 1500*time.Millisecond) {
				t.Errorf("web-1 was deleted %v after it was first seen not Ready (gate closed: %t), want a drain of 2 s first", now.Sub(s.notReady), s.gateClosed)
			}
		}
		if !timeline["web-1"].deleted || !timeline["web-2"].deleted {
			return fmt.Errorf("web-1 deleted %t, web-2 deleted %t", timeline["web-1"].deleted, timeline["web-2"].deleted)
		}
		return nil
	})
	if !tc.wantGate && timeline["web-1"].gateClosed {
		t.Errorf("web-1 was drained by the operator (%s): want it deleted at once, its hook sleeping the drain or no slice listing it", tc.what)
	}
	if timeline["web-2"].gateClosed {
		t.Errorf("web-2, not Ready, was drained before it was deleted: it should go at once")
	}
	waitForStatus(t, ps, readyStatus(1))
}

// drainSeen is what a test saw of a pod on its way out: whether its gate
// closed, when it was first seen not Ready once it had, and whether it is
// gone.
type drainSeen struct {
	gateClosed, deleted bool
	notReady            time.Time
}

// see records what the pod p (ok: it exists) shows at now, and reports
// whether now is when it was first seen deleted.
func (s *drainSeen) see(p corev1.Pod, ok bool, now time.Time) bool {
	switch {
	case s.deleted:
		return false
	case !ok || p.DeletionTimestamp != nil:
		s.deleted = true
		return true
	}
	s.gateClosed = s.gateClosed || gateIs(p, corev1.ConditionFalse)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && s.notReady.IsZero() && s.gateClosed {
			s.notReady = now
		}
	}
	return false
}

// patchSpec merge-patches the PodSet with patch.
func patchSpec(t *testing.T, ps *podsetv1alpha1.PodSet, patch string) {
	t.Helper()
	target := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: ps.Name, Namespace: ps.Namespace}}
	if err := env.Client.Patch(t.Context(), target, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
