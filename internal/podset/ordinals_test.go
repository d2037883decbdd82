package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestPlanPodsWithOrdinalsStart checks the plan of a PodSet numbered from
// spec.ordinals.start: the wanted ordinals are start..start+replicas-1,
// every other pod is surplus (StatefulSet's condemned pods), and moving
// start prunes the pods left behind and creates the new ones in the same
// pass.
func TestPlanPodsWithOrdinalsStart(t *testing.T) {
	ps := makePodSet("web").Replicas(3).OrdinalsStart(5).Obj()
	h := TemplateHash(ps)
	ready := func(ordinals ...int) []corev1.Pod { return readyPodsOf(ps, h, ordinals...) }
	foreign := makePod("web-6").controlledByOther("other-uid").label(podsetv1alpha1.NameLabel, "web").obj()
	cases := map[string]struct {
		ps   *podsetv1alpha1.PodSet
		pods []corev1.Pod
		want planNames
	}{
		"no pods: creates 5, 6 and 7": {
			ps: ps, want: planNames{Create: []int{5, 6, 7}},
		},
		"converged at 5..7: nothing to send": {
			ps: ps, pods: ready(5, 6, 7), want: planNames{Empty: true},
		},
		"start moved from 0 to 5: 0..2 pruned highest first, 5..7 created": {
			ps: ps, pods: ready(0, 1, 2),
			want: planNames{Create: []int{5, 6, 7}, Prune: []string{"web-2", "web-1", "web-0"}},
		},
		"start moved from 5 to 6: web-5 pruned, web-8 created, 6 and 7 kept": {
			ps:   makePodSet("web").Replicas(3).OrdinalsStart(6).Obj(),
			pods: ready(5, 6, 7),
			want: planNames{Create: []int{8}, Prune: []string{"web-5"}},
		},
		"start moved from 5 to 3: 7 and 6 pruned, 3 and 4 created, 5 kept": {
			ps:   makePodSet("web").Replicas(3).OrdinalsStart(3).Obj(),
			pods: ready(5, 6, 7),
			want: planNames{Create: []int{3, 4}, Prune: []string{"web-7", "web-6"}},
		},
		"pods on both sides of the range are surplus": {
			ps: ps, pods: ready(4, 5, 6, 7, 8),
			want: planNames{Prune: []string{"web-8", "web-4"}},
		},
		"a foreign pod holding a wanted name is a conflict": {
			ps: ps, pods: append(ready(5, 7), foreign),
			want: planNames{Conflicts: []string{"web-6"}, Empty: true},
		},
		"a foreign pod below start is a stray": {
			ps:   ps,
			pods: append(ready(5, 6, 7), makePod("web-0").controlledByOther("other-uid").label(podsetv1alpha1.NameLabel, "web").obj()),
			want: planNames{Strays: []string{"web-0"}, Empty: true},
		},
		"scaled to zero: every pod is surplus": {
			ps: makePodSet("web").Replicas(0).OrdinalsStart(5).Obj(), pods: ready(5, 6),
			want: planNames{Prune: []string{"web-6", "web-5"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := namesOf(NewView(tc.ps, NewRevisions(tc.ps, nil), tc.pods, testNow).Plan(Input{InFlight: noneInFlight}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPartitionCountsFromStart checks that the partition counts pods from
// spec.ordinals.start, as StatefulSet's does (updateStatefulSet compares
// it with the index into the ordinal range; newVersionedStatefulSetPod
// creates the pods below start+partition from the current revision): with
// start 10 and partition 2, web-10 and web-11 are held back, web-12 and up
// roll out.
func TestPartitionCountsFromStart(t *testing.T) {
	v1 := makePodSet("web").Replicas(4).OrdinalsStart(10).Obj()
	v2 := withImage(v1, "b:2")
	h1, h2 := TemplateHash(v1), TemplateHash(v2)
	history := []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2)}
	ps := withPartition(v2, 2)
	ps.Status.CurrentRevision = RevisionName(ps, h1)
	byHash := map[string]*podsetv1alpha1.PodSet{h1: v1, h2: v2}
	pod := func(ordinal int, hash string) corev1.Pod {
		return makePod(PodName("web", ordinal)).controlledBy(byHash[hash]).ready().hash(hash).obj()
	}
	cases := map[string]struct {
		pods          []corev1.Pod
		wantPlan      planNames
		wantRevisions map[int]string
		wantUpdated   int32
		wantHeld      Held
	}{
		"all on v1: web-13 rolls out first": {
			pods:        []corev1.Pod{pod(10, h1), pod(11, h1), pod(12, h1), pod(13, h1)},
			wantPlan:    planNames{Rollout: []string{"web-13"}},
			wantHeld:    Held{10: h1, 11: h1},
			wantUpdated: 0,
		},
		"rolled out above the partition: nothing to send": {
			pods:        []corev1.Pod{pod(10, h1), pod(11, h1), pod(12, h2), pod(13, h2)},
			wantPlan:    planNames{Empty: true},
			wantHeld:    Held{10: h1, 11: h1},
			wantUpdated: 2,
		},
		"a held-back pod deleted: recreated from v1": {
			pods:          []corev1.Pod{pod(10, h1), pod(12, h2), pod(13, h2)},
			wantPlan:      planNames{Create: []int{11}},
			wantRevisions: map[int]string{11: h1},
			wantHeld:      Held{10: h1},
			wantUpdated:   2,
		},
		"a pod above the partition deleted: recreated from v2": {
			pods:        []corev1.Pod{pod(10, h1), pod(11, h1), pod(13, h2)},
			wantPlan:    planNames{Create: []int{12}},
			wantHeld:    Held{10: h1, 11: h1},
			wantUpdated: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(ps, noneInFlight)
			in.Revs = NewRevisions(ps, history)
			plan := NewView(ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			if diff := cmp.Diff(tc.wantPlan, namesOf(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRevisions, plan.Revisions); diff != "" {
				t.Errorf("revisions of the creates (-want +got):\n%s", diff)
			}
			var held Held
			if diff := cmp.Diff(tc.wantHeld, held.Observe(heldView(ps, tc.pods, h2))); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			status := NewView(ps, in.Revs, tc.pods, testNow).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
			if status.UpdatedReplicas != tc.wantUpdated {
				t.Errorf("updatedReplicas %d, want %d", status.UpdatedReplicas, tc.wantUpdated)
			}
		})
	}
}

// TestComputeStatusWithOrdinalsStart checks the counts, pod names and
// Ready of a PodSet numbered from start, while it moves: pods left behind
// count in replicas (they exist and are controlled, as StatefulSet counts
// its condemned pods) but not towards Ready.
func TestComputeStatusWithOrdinalsStart(t *testing.T) {
	ps := makePodSet("web").Replicas(2).OrdinalsStart(3).Obj()
	h := TemplateHash(ps)
	ready := func(ordinals ...int) []corev1.Pod { return readyPodsOf(ps, h, ordinals...) }
	cases := map[string]struct {
		pods      []corev1.Pod
		wantCount [3]int32 // replicas, ready, updated
		wantNames []string
		wantReady bool
	}{
		"at 3 and 4": {
			pods: ready(3, 4), wantCount: [3]int32{2, 2, 2}, wantNames: []string{"web-3", "web-4"}, wantReady: true,
		},
		"moving from 0: pods sorted by ordinal, not Ready": {
			pods: ready(4, 0, 3, 1), wantCount: [3]int32{4, 4, 4}, wantNames: []string{"web-0", "web-1", "web-3", "web-4"},
		},
		"the old pods at 0 and 1 only": {
			pods: ready(0, 1), wantCount: [3]int32{2, 2, 2}, wantNames: []string{"web-0", "web-1"},
		},
		"ordinal 10 (10 > 4) is no web-1 of another numbering": {
			pods: ready(3, 4, 10), wantCount: [3]int32{3, 3, 3}, wantNames: []string{"web-3", "web-4", "web-10"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(ps, noneInFlight)
			plan := NewView(ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			status := NewView(ps, in.Revs, tc.pods, testNow).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
			got := [3]int32{status.Replicas, status.ReadyReplicas, status.UpdatedReplicas}
			if got != tc.wantCount {
				t.Errorf("replicas, ready, updated = %v, want %v", got, tc.wantCount)
			}
			if diff := cmp.Diff(tc.wantNames, status.PodNames); diff != "" {
				t.Errorf("podNames (-want +got):\n%s", diff)
			}
			if isReady := meta.IsStatusConditionTrue(status.Conditions, podsetv1alpha1.ReadyCondition); isReady != tc.wantReady {
				t.Errorf("Ready %v, want %v", isReady, tc.wantReady)
			}
		})
	}
}

// TestDeadlineStallNamesOrdinalsFromStart checks that the stuck pods a
// missed deadline names are those of the wanted ordinals.
func TestDeadlineStallNamesOrdinalsFromStart(t *testing.T) {
	ps := makePodSet("web").Replicas(3).OrdinalsStart(7).Obj()
	ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	h := TemplateHash(ps)
	pods := readyPodsOf(ps, h, 7)
	s := NewView(ps, NewRevisions(ps, nil), pods, testNow).deadlineStall(1)
	const want = "no progress for 1m0s (spec.progressDeadlineSeconds), 1/3 pods available; web-8, web-9: not created"
	if s.Message != want {
		t.Errorf("stall message\n%q, want\n%q", s.Message, want)
	}
}
