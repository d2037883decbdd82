package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
)

// The tests of execute: what a plan's writes send, through the writer, and
// what the pass learns they did (podset.Outcome), with no control plane.
// envtest's suites (test/integration) check the same writes against a
// real API server.

// executePodSet is the PodSet "web" of the namespace "ns".
func executePodSet() *podsetv1alpha1.PodSet {
	return fixture.PodSet("ns", "web").UID("ps-uid").Generation(1).Replicas(3).
		Template(corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}).Obj()
}

// ownPod is pod name of ps, controlled by it, with the UID "u-<name>".
func ownPod(ps *podsetv1alpha1.PodSet, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ps.Namespace, Name: name, UID: types.UID("u-" + name),
		Labels:          map[string]string{podsetv1alpha1.NameLabel: ps.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ps, podsetv1alpha1.GroupVersion.WithKind("PodSet"))},
	}}
}

// notFound is the API server's answer for a pod that is not there.
func notFound(name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

// testReconciler is a reconciler whose writes go to w and whose reads of
// the API server find pods.
func testReconciler(w writer, pods podsReader) *PodSetReconciler {
	r := &PodSetReconciler{APIReader: pods, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Workers: 4, writes: w}
	r.init()
	return r
}

// gatesDone waits until every gate opening in the background is through:
// it takes every slot of r.gateSlots.
func gatesDone(r *PodSetReconciler) {
	for range cap(r.gateSlots) {
		r.gateSlots <- struct{}{}
	}
}

func TestExecute(t *testing.T) {
	ps := executePodSet()
	ps.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "web-0", field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "bad")})
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web-0", nil)
	surplus := podset.UpdateWay{Why: podset.WhySurplus}
	inPlace := podset.UpdateWay{InPlace: true, Images: []string{"app"}, Restarts: []string{"app"}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-0", errors.New("resize is not allowed"))
	resize := podset.UpdateWay{InPlace: true, Resize: true}
	// The revision before: the container asked for less cpu.
	before := executePodSet()
	before.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}
	oldHash := podset.TemplateHash(before)
	oldPod := func(name string) *corev1.Pod {
		pod := ownPod(ps, name)
		pod.Labels[podsetv1alpha1.TemplateHashLabel] = oldHash
		pod.Spec = *before.Spec.Template.Spec.DeepCopy()
		return pod
	}
	ready := func(pod *corev1.Pod) *corev1.Pod {
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue},
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		return pod
	}
	lost := ownPod(ps, "web-1")
	lost.Spec.NodeName = "node-a"

	cases := map[string]struct {
		plan   podset.Plan
		fail   map[string]error
		others podsReader // the API server's pods that are not the PodSet's
		// want is every write, sorted (recordingWriter).
		want    []string
		outcome podset.Outcome
		err     bool
	}{
		"nothing to do sends nothing": {},
		"new pods are created, never updated, and their gates opened": {
			plan: podset.Plan{Create: []int{0, 1, 2}},
			want: []string{
				"APPLY pods/web-0 create-only", "APPLY pods/web-1 create-only", "APPLY pods/web-2 create-only",
				"PATCH pods/web-0/status uid=uid-web-0 podset.dev/InPlaceUpdateReady=True",
				"PATCH pods/web-1/status uid=uid-web-1 podset.dev/InPlaceUpdateReady=True",
				"PATCH pods/web-2/status uid=uid-web-2 podset.dev/InPlaceUpdateReady=True",
			},
			outcome: podset.Outcome{Created: []string{"web-0", "web-1", "web-2"}},
		},
		"a template the API server refuses costs one request": {
			plan:    podset.Plan{Create: []int{0, 1, 2, 3, 4}},
			fail:    map[string]error{"APPLY pods/web-0": invalid},
			want:    []string{"APPLY pods/web-0 create-only"},
			outcome: podset.Outcome{Rejection: &podset.Rejection{Reason: "Invalid", Message: invalid.Status().Message}},
		},
		"creates stop after the first batch that fails": {
			// Batches of 1, 2, 4: web-2 fails in the second, so web-3 and
			// web-4 are never sent; web-0 and web-1 are created.
			plan: podset.Plan{Create: []int{0, 1, 2, 3, 4}},
			fail: map[string]error{"APPLY pods/web-2": apierrors.NewInternalError(context.DeadlineExceeded)},
			want: []string{
				"APPLY pods/web-0 create-only", "APPLY pods/web-1 create-only", "APPLY pods/web-2 create-only",
				"PATCH pods/web-0/status uid=uid-web-0 podset.dev/InPlaceUpdateReady=True",
				"PATCH pods/web-1/status uid=uid-web-1 podset.dev/InPlaceUpdateReady=True",
			},
			outcome: podset.Outcome{Created: []string{"web-0", "web-1"}},
			err:     true,
		},
		"a name another pod holds is left to it": {
			plan:    podset.Plan{Create: []int{0}},
			fail:    map[string]error{"APPLY pods/web-0": conflict},
			others:  podsReader{"web-0": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "theirs"}}},
			want:    []string{"APPLY pods/web-0 create-only"},
			outcome: podset.Outcome{Conflicts: []string{"web-0"}},
		},
		"a name its own pod holds, unseen by the cache, is neither taken nor opened again": {
			plan:   podset.Plan{Create: []int{0}},
			fail:   map[string]error{"APPLY pods/web-0": conflict},
			others: podsReader{"web-0": ownPod(ps, "web-0")},
			want:   []string{"APPLY pods/web-0 create-only"},
		},
		"surplus and finished pods are deleted with their UIDs": {
			plan: podset.Plan{Prune: []*corev1.Pod{ownPod(ps, "web-4"), ownPod(ps, "web-3")}, ReplaceFinished: []*corev1.Pod{ownPod(ps, "web-0")}},
			want: []string{"DELETE pods/web-0 uid=u-web-0", "DELETE pods/web-3 uid=u-web-3", "DELETE pods/web-4 uid=u-web-4"},
			outcome: podset.Outcome{
				Pruned: []string{"web-4", "web-3"}, ReplacedFinished: []string{"web-0"},
			},
		},
		"a pod of a lost node is force-deleted; one gone already is not counted": {
			plan: podset.Plan{ReplaceLost: []*corev1.Pod{lost, ownPod(ps, "web-2")}},
			fail: map[string]error{"DELETE pods/web-2": notFound("web-2")},
			want: []string{"DELETE pods/web-1 uid=u-web-1 grace=0", "DELETE pods/web-2 uid=u-web-2 grace=0"},
			outcome: podset.Outcome{
				ReplacedLost: []*corev1.Pod{lost},
			},
		},
		"the drain closes gates: a surplus pod to delete, a pod to restart in place": {
			plan: podset.Plan{Drain: []podset.Step{{Pod: ownPod(ps, "web-3"), Way: surplus}, {Pod: ownPod(ps, "web-0"), Way: inPlace}}},
			want: []string{
				"PATCH pods/web-0/status uid=u-web-0 podset.dev/InPlaceUpdateReady=False Ready=False",
				"PATCH pods/web-3/status uid=u-web-3 podset.dev/InPlaceUpdateReady=False Ready=False",
			},
			outcome: podset.Outcome{
				Restarting: []string{"web-0"}, Stopping: map[string][]string{podset.WhySurplus: {"web-3"}},
			},
		},
		"a gate that closes on a pod gone is not a drain begun": {
			plan:    podset.Plan{Drain: []podset.Step{{Pod: ownPod(ps, "web-3"), Way: surplus}}},
			fail:    map[string]error{"PATCH pods/web-3/status": notFound("web-3")},
			want:    []string{"PATCH pods/web-3/status uid=u-web-3 podset.dev/InPlaceUpdateReady=False Ready=False"},
			outcome: podset.Outcome{Stopping: map[string][]string{}},
		},
		"out-of-date pods are deleted to be recreated, and gates open again": {
			plan: podset.Plan{
				Rollout: []*corev1.Pod{ownPod(ps, "web-1")}, Why: map[string]string{"web-1": podset.WhyPolicy},
				Resume: []*corev1.Pod{ownPod(ps, "web-2")},
			},
			want: []string{"DELETE pods/web-1 uid=u-web-1", "PATCH pods/web-2/status uid=u-web-2 podset.dev/InPlaceUpdateReady=True"},
			outcome: podset.Outcome{
				Recreated: map[string][]string{podset.WhyPolicy: {"web-1"}},
			},
		},
		"labels and annotations are updated in place": {
			plan:    podset.Plan{Update: []podset.Step{{Pod: ownPod(ps, "web-0"), Way: podset.UpdateWay{InPlace: true}}}},
			want:    []string{"APPLY pods/web-0 uid=u-web-0"},
			outcome: podset.Outcome{Updated: map[string][]string{"labels and annotations": {"web-0"}}},
		},
		"a resize goes to pods/resize, then the pod is applied": {
			plan:    podset.Plan{Update: []podset.Step{{Pod: oldPod("web-0"), Way: resize}}},
			want:    []string{"APPLY pods/web-0 uid=u-web-0", "APPLY pods/web-0/resize uid=u-web-0"},
			outcome: podset.Outcome{Updated: map[string][]string{"resized": {"web-0"}}},
		},
		"a resize the API server refuses recreates the pod, drained first where the plan says so": {
			plan: podset.Plan{Update: []podset.Step{
				{Pod: oldPod("web-0"), Way: resize},
				{Pod: ready(oldPod("web-1")), Way: resize, DrainIfRefused: true},
				{Pod: ready(oldPod("web-2")), Way: resize},
			}},
			fail: map[string]error{"APPLY pods/web-0/resize": forbidden, "APPLY pods/web-1/resize": forbidden, "APPLY pods/web-2/resize": forbidden},
			want: []string{
				"APPLY pods/web-0/resize uid=u-web-0", "APPLY pods/web-1/resize uid=u-web-1", "APPLY pods/web-2/resize uid=u-web-2",
				"DELETE pods/web-0 uid=u-web-0", "DELETE pods/web-2 uid=u-web-2",
				"PATCH pods/web-1/status uid=u-web-1 podset.dev/InPlaceUpdateReady=False Ready=False",
			},
			outcome: podset.Outcome{
				Recreated: map[string][]string{podset.WhyResizeDenied: {"web-0", "web-2"}},
				Stopping:  map[string][]string{podset.WhyResizeDenied: {"web-1"}},
			},
		},
		"a drifted pod is applied again, to that pod only": {
			plan:    podset.Plan{Repair: []*corev1.Pod{ownPod(ps, "web-0")}},
			want:    []string{"APPLY pods/web-0 uid=u-web-0"},
			outcome: podset.Outcome{Repaired: []string{"web-0"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := &recordingWriter{fail: tc.fail}
			r := testReconciler(w, tc.others)
			revs := podset.NewRevisions(ps, nil)
			revs.Templates[oldHash] = podset.PodTemplate(before)
			for _, pod := range append(append(tc.plan.Repair, tc.plan.Prune...), tc.plan.ReplaceFinished...) {
				pod.Labels[podsetv1alpha1.TemplateHashLabel] = revs.Update
			}
			done, err := r.execute(t.Context(), ps, &tc.plan, revs, metav1.NewTime(r.Clock.Now()))
			gatesDone(r)
			if (err != nil) != tc.err {
				t.Errorf("error %v, want one: %t", err, tc.err)
			}
			if got := w.sent(); !slices.Equal(got, tc.want) {
				t.Errorf("writes:\n%q\nwant:\n%q", got, tc.want)
			}
			if !outcomeEqual(done, tc.outcome) {
				t.Errorf("outcome:\n%+v\nwant:\n%+v", done, tc.outcome)
			}
			if len(w.events) > 0 {
				t.Errorf("execute sent events %v: a pass's events are sent by record only", w.events)
			}
		})
	}
}

// outcomeEqual compares what execute fills in of two outcomes, in any
// order (the writes go out in parallel), an empty list and none alike.
func outcomeEqual(a, b podset.Outcome) bool {
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	lists := func(m map[string][]string) map[string][]string {
		out := map[string][]string{}
		for k, v := range m {
			if len(v) > 0 {
				out[k] = slices.Sorted(slices.Values(v))
			}
		}
		return out
	}
	mapsEqual := func(x, y map[string][]string) bool {
		x, y = lists(x), lists(y)
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !slices.Equal(v, y[k]) {
				return false
			}
		}
		return true
	}
	rej := func(r *podset.Rejection) podset.Rejection {
		if r == nil {
			return podset.Rejection{}
		}
		return *r
	}
	same := func(x, y []string) bool {
		return slices.Equal(slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y)))
	}
	return same(a.Created, b.Created) && same(a.Conflicts, b.Conflicts) &&
		same(a.Pruned, b.Pruned) && same(a.ReplacedFinished, b.ReplacedFinished) &&
		same(names(a.ReplacedLost), names(b.ReplacedLost)) &&
		same(a.Restarting, b.Restarting) && same(a.Repaired, b.Repaired) &&
		mapsEqual(a.Stopping, b.Stopping) && mapsEqual(a.Recreated, b.Recreated) && mapsEqual(a.Updated, b.Updated) &&
		rej(a.Rejection) == rej(b.Rejection)
}
