package podset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// withPartition is a copy of ps with a RollingUpdate partition.
func withPartition(ps *podsetv1alpha1.PodSet, partition int32) *podsetv1alpha1.PodSet {
	ps = ps.DeepCopy()
	ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: &partition}
	return ps
}

// heldView is the view of pods at no particular time whose PodSet's
// current revision is update, for Held.Observe.
func heldView(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, update string) *View {
	revs := NewRevisions(ps, nil)
	revs.Update = update
	return NewView(ps, revs, pods, time.Time{})
}

// threeRevisions is the PodSet web at three templates (images
// busybox:1.36, b:2 and b:3), their hashes and their stored revisions;
// its pod method makes a Ready pod of an ordinal from the revision of a
// hash.
type threeRevisions struct {
	v1, v2, v3 *podsetv1alpha1.PodSet
	h1, h2, h3 string
	history    []appsv1.ControllerRevision
}

func makeThreeRevisions(replicas int32) threeRevisions {
	v1 := makePodSet("web").Replicas(replicas).Obj()
	v2, v3 := withImage(v1, "b:2"), withImage(v1, "b:3")
	return threeRevisions{
		v1: v1, v2: v2, v3: v3,
		h1: TemplateHash(v1), h2: TemplateHash(v2), h3: TemplateHash(v3),
		history: []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2), storedRevision(v3, 3)},
	}
}

func (r threeRevisions) pod(ordinal int, hash string) corev1.Pod {
	byHash := map[string]*podsetv1alpha1.PodSet{r.h1: r.v1, r.h2: r.v2, r.h3: r.v3}
	return makePod(PodName("web", ordinal)).controlledBy(byHash[hash]).ready().hash(hash).obj()
}

// TestPartitionedPlan checks what a pass does under a partition: pods below
// it keep their revision, also when recreated, and the rollout stays above.
func TestPartitionedPlan(t *testing.T) {
	r := makeThreeRevisions(4)
	v1, v3, h1, h2, h3, history, pod := r.v1, r.v3, r.h1, r.h2, r.h3, r.history, r.pod
	ps := withPartition(v3, 2)
	ps.Status.CurrentRevision = RevisionName(ps, h1)
	type want struct {
		Plan      planNames
		Revisions map[int]string
	}
	cases := map[string]struct {
		pods       []corev1.Pod
		remembered Held
		want       want
	}{
		"ordinals 2 and up roll out, 0 and 1 stay": {
			pods: []corev1.Pod{pod(0, h1), pod(1, h1), pod(2, h1), pod(3, h1)},
			want: want{Plan: planNames{Rollout: []string{"web-3"}}},
		},
		"a held-back pod deleted: recreated from the revision it ran": {
			pods:       []corev1.Pod{pod(0, h1), pod(2, h3), pod(3, h3)},
			remembered: Held{1: h2},
			want:       want{Plan: planNames{Create: []int{1}}, Revisions: map[int]string{1: h2}},
		},
		"after a restart: from status.currentRevision, as StatefulSet": {
			pods: []corev1.Pod{pod(0, h1), pod(2, h3), pod(3, h3)},
			want: want{Plan: planNames{Create: []int{1}}, Revisions: map[int]string{1: h1}},
		},
		"a remembered revision no longer known: status.currentRevision": {
			pods:       []corev1.Pod{pod(0, h1), pod(2, h3), pod(3, h3)},
			remembered: Held{1: "gone"},
			want:       want{Plan: planNames{Create: []int{1}}, Revisions: map[int]string{1: h1}},
		},
		"an ordinal above the partition is recreated from the current template": {
			pods: []corev1.Pod{pod(0, h1), pod(1, h1), pod(2, h3)},
			want: want{Plan: planNames{Create: []int{3}}},
		},
		"a held-back pod that drifted is repaired to its own revision": {
			pods: []corev1.Pod{pod(0, h1), makePod("web-1").controlledBy(v1).ready().hash(h1).withoutLabel("tier").obj(), pod(2, h3), pod(3, h3)},
			want: want{Plan: planNames{Repair: []string{"web-1"}}},
		},
		"held back and converged: nothing to do": {
			pods: []corev1.Pod{pod(0, h1), pod(1, h2), pod(2, h3), pod(3, h3)},
			want: want{Plan: planNames{Empty: true}},
		},
		"a held-back pod whose image is not its revision's is repaired": {
			pods: []corev1.Pod{pod(0, h1), makePod("web-1").controlledBy(v3).ready().hash(h1).obj(), pod(2, h3), pod(3, h3)},
			want: want{Plan: planNames{Repair: []string{"web-1"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(ps, noneInFlight)
			in.Revs = NewRevisions(ps, history)
			in.Held = tc.remembered
			p := NewView(ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			got := want{Plan: namesOf(p), Revisions: p.Revisions}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlanPods() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMinReadySecondsPacesTheRollout checks that the budget counts pods
// that are Ready but not yet available.
func TestMinReadySecondsPacesTheRollout(t *testing.T) {
	v1 := makePodSet("web").Replicas(3).Obj()
	ps := withImage(v1, "b:2")
	ps.Spec.MinReadySeconds = 10
	h1, h2 := TemplateHash(v1), TemplateHash(ps)
	old := func(o int) corev1.Pod {
		return makePod(PodName("web", o)).controlledBy(ps).readySince(testNow.Add(-time.Hour)).hash(h1).obj()
	}
	fresh := makePod("web-2").controlledBy(ps).readySince(testNow.Add(-3 * time.Second)).hash(h2).obj()
	settled := makePod("web-2").controlledBy(ps).readySince(testNow.Add(-10 * time.Second)).hash(h2).obj()

	if got := namesOf(NewView(ps, NewRevisions(ps, nil), []corev1.Pod{old(0), old(1), fresh}, testNow).Plan(Input{InFlight: noneInFlight})); !got.Empty {
		t.Errorf("with the new web-2 Ready for 3s of 10: plan %+v, want to wait", got)
	}
	if got := namesOf(NewView(ps, NewRevisions(ps, nil), []corev1.Pod{old(0), old(1), settled}, testNow).Plan(Input{InFlight: noneInFlight})); !cmp.Equal(got.Rollout, []string{"web-1"}) {
		t.Errorf("with the new web-2 available: rollout %v, want web-1", got.Rollout)
	}
}

func TestHeldRevisions(t *testing.T) {
	ps := withPartition(makePodSet("web").Replicas(4).Obj(), 2)
	pod := func(ordinal int, hash string) corev1.Pod {
		return makePod(PodName("web", ordinal)).controlledBy(ps).hash(hash).obj()
	}
	var h Held
	h = h.Observe(heldView(ps, []corev1.Pod{pod(0, "old"), pod(1, "older"), pod(2, "new"), pod(3, "old")}, "new"))
	if got := h.Remembered; got(0) != "old" || got(1) != "older" || got(2) != "" || got(3) != "" {
		t.Errorf("remembered 0:%q 1:%q 2:%q 3:%q, want old, older and nothing at or above the partition", got(0), got(1), got(2), got(3))
	}
	// web-1 is gone: its entry stays until it is back.
	h = h.Observe(heldView(ps, []corev1.Pod{pod(0, "old")}, "new"))
	if got := h.Remembered(1); got != "older" {
		t.Errorf("remembered 1:%q after web-1 went, want older", got)
	}
	// The partition lowered to 1: ordinal 1 is no longer held back.
	lowered := withPartition(ps, 1)
	h = h.Observe(heldView(lowered, []corev1.Pod{pod(0, "old")}, "new"))
	if got := h.Remembered; got(1) != "" || got(0) != "old" {
		t.Errorf("after lowering the partition: 0:%q 1:%q, want old and nothing", got(0), got(1))
	}
	// Updated pods and a zero partition leave nothing behind.
	if h = h.Observe(heldView(withPartition(ps, 0), []corev1.Pod{pod(0, "new")}, "new")); h != nil || len(h.Kept()) != 0 {
		t.Errorf("entries left without a partition: %v", h)
	}
}
