package podset

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// paused is a copy of ps with spec.paused set.
func paused(ps *podsetv1alpha1.PodSet) *podsetv1alpha1.PodSet {
	ps = ps.DeepCopy()
	ps.Spec.Paused = true
	return ps
}

// TestPausedPlan checks what a pass does while spec.paused is set: no pod
// moves to the new template, and creations, repairs, replacements and
// scaling go on, each new pod from the revision it ran or, for a new
// ordinal, from status.currentRevision.
func TestPausedPlan(t *testing.T) {
	r := makeThreeRevisions(3)
	v1, v2, v3, h1, h2, history, pod := r.v1, r.v2, r.v3, r.h1, r.h2, r.history, r.pod
	// ps is v3 paused, after a rollout from v1 to v2 had reached one pod.
	ps := paused(v3)
	ps.Status.CurrentRevision = RevisionName(ps, h1)
	scaled := func(n int32) *podsetv1alpha1.PodSet {
		ps := ps.DeepCopy()
		ps.Spec.Replicas = &n
		return ps
	}
	type want struct {
		Plan      planNames
		Revisions map[int]string
	}
	cases := map[string]struct {
		ps         *podsetv1alpha1.PodSet
		pods       []corev1.Pod
		remembered Held
		want       want
	}{
		"a template change updates no pod": {
			ps:   ps,
			pods: []corev1.Pod{pod(0, h1), pod(1, h1), pod(2, h2)},
			want: want{Plan: planNames{Empty: true}},
		},
		"an unready out-of-date pod is not recreated either": {
			ps:   ps,
			pods: []corev1.Pod{pod(0, h1), pod(1, h1), makePod("web-2").controlledBy(v2).running().hash(h2).obj()},
			want: want{Plan: planNames{Empty: true}},
		},
		"a deleted pod is made again from the revision it ran": {
			ps:         ps,
			pods:       []corev1.Pod{pod(0, h1), pod(1, h1)},
			remembered: Held{2: h2},
			want:       want{Plan: planNames{Create: []int{2}}, Revisions: map[int]string{2: h2}},
		},
		"after an operator restart: from status.currentRevision": {
			ps:   ps,
			pods: []corev1.Pod{pod(0, h1), pod(2, h2)},
			want: want{Plan: planNames{Create: []int{1}}, Revisions: map[int]string{1: h1}},
		},
		"scaling up: new ordinals from status.currentRevision": {
			ps:   scaled(5),
			pods: []corev1.Pod{pod(0, h1), pod(1, h1), pod(2, h2)},
			want: want{Plan: planNames{Create: []int{3, 4}}, Revisions: map[int]string{3: h1, 4: h1}},
		},
		"scaling down: pruned from the highest ordinal": {
			ps:   scaled(1),
			pods: []corev1.Pod{makePod("web-0").controlledBy(v1).running().hash(h1).obj(), makePod("web-1").controlledBy(v1).running().hash(h1).obj(), makePod("web-2").controlledBy(v2).running().hash(h2).obj()},
			want: want{Plan: planNames{Prune: []string{"web-2", "web-1"}}},
		},
		"a failed pod is replaced": {
			ps:   ps,
			pods: []corev1.Pod{pod(0, h1), pod(1, h1), makePod("web-2").controlledBy(v2).hash(h2).phase(corev1.PodFailed).obj()},
			want: want{Plan: planNames{ReplaceFinished: []string{"web-2"}}},
		},
		"a drifted pod is repaired to its own revision": {
			ps:   ps,
			pods: []corev1.Pod{pod(0, h1), makePod("web-1").controlledBy(v1).ready().hash(h1).withoutLabel("tier").obj(), pod(2, h2)},
			want: want{Plan: planNames{Repair: []string{"web-1"}}},
		},
		"OnDelete: a deleted pod is made again from the revision it ran, not updated": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := ps.DeepCopy()
				ps.Spec.UpdateStrategy.Type = podsetv1alpha1.OnDeleteStrategyType
				return ps
			}(),
			pods:       []corev1.Pod{pod(0, h1), pod(1, h1)},
			remembered: Held{2: h1},
			want:       want{Plan: planNames{Create: []int{2}}, Revisions: map[int]string{2: h1}},
		},
		"created paused: the template is the only revision there is": {
			ps:   paused(v1),
			want: want{Plan: planNames{Create: []int{0, 1, 2}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(tc.ps, noneInFlight)
			if tc.ps.Spec.Template.Spec.Containers[0].Image == "b:3" {
				in.Revs = NewRevisions(tc.ps, history)
			}
			in.Held = tc.remembered
			p := NewView(tc.ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			got := want{Plan: namesOf(p), Revisions: p.Revisions}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlanPods() (-want +got):\n%s", diff)
			}
		})
	}

	// Resumed, the same pods roll out.
	resumed := ps.DeepCopy()
	resumed.Spec.Paused = false
	in := testInput(resumed, noneInFlight)
	in.Revs = NewRevisions(resumed, history)
	if got := namesOf(NewView(resumed, in.Revs, []corev1.Pod{pod(0, h1), pod(1, h1), pod(2, h2)}, in.Now).Plan(in.Input)); got.Empty {
		t.Errorf("resumed: plan %+v, want the rollout to go on", got)
	}
}

// TestPausedHeld checks that the pass remembers what every out-of-date pod
// runs while paused, so a deleted one comes back on it.
func TestPausedHeld(t *testing.T) {
	ps := paused(makePodSet("web").Replicas(3).Obj())
	pod := func(ordinal int, hash string) corev1.Pod {
		return makePod(PodName("web", ordinal)).controlledBy(ps).ready().hash(hash).obj()
	}
	got := Held(nil).Observe(heldView(ps, []corev1.Pod{pod(0, "old"), pod(1, "new"), pod(2, "older")}, "new"))
	if diff := cmp.Diff(Held{0: "old", 2: "older"}, got); diff != "" {
		t.Errorf("Held while paused (-want +got):\n%s", diff)
	}
	resumed := ps.DeepCopy()
	resumed.Spec.Paused = false
	if got := got.Observe(heldView(resumed, []corev1.Pod{pod(0, "old"), pod(1, "new"), pod(2, "older")}, "new")); got != nil {
		t.Errorf("Held once resumed: %v, want nothing", got)
	}
}

// TestPausedStatus checks the conditions of a paused PodSet: paused with
// changes pending is neither Ready nor Stalled, all three conditions say
// Paused, and no progress deadline runs.
func TestPausedStatus(t *testing.T) {
	now := metav1.NewTime(testNow)
	long := metav1.NewTime(testNow.Add(-time.Hour)) // far past the 600 s deadline
	ps := paused(makePodSet("web").Replicas(3).Generation(2).Obj())
	h := TemplateHash(ps)
	ps.Status.LastProgressTime = &long
	ps.Status.ObservedGeneration = 2
	old := func(ordinal int) corev1.Pod {
		return makePod(PodName("web", ordinal)).controlledBy(ps).ready().hash("old").obj()
	}
	current := func(ordinal int) corev1.Pod {
		return makePod(PodName("web", ordinal)).controlledBy(ps).ready().hash(h).obj()
	}
	type conditions struct{ Ready, Reconciling, Stalled string }
	// verdict is each condition as "Status/Reason".
	verdict := func(s podsetv1alpha1.PodSetStatus) conditions {
		get := func(typ string) string {
			c := meta.FindStatusCondition(s.Conditions, typ)
			if c == nil {
				return ""
			}
			return string(c.Status) + "/" + c.Reason
		}
		return conditions{get("Ready"), get("Reconciling"), get("Stalled")}
	}
	pausedMessage := "3/3 pods ready, 3/3 available, 1/3 up to date; 2 pods run an older template (spec.paused: updated once resumed)"
	cases := map[string]struct {
		pods        []corev1.Pod
		want        conditions
		wantMessage string
	}{
		"paused with changes pending": {
			pods:        []corev1.Pod{old(0), old(1), current(2)},
			want:        conditions{"False/Paused", "False/Paused", "False/Paused"},
			wantMessage: pausedMessage,
		},
		"paused, scaling up: reconciling, not rolling out": {
			pods: []corev1.Pod{old(0), old(1)},
			want: conditions{"False/ReplicasNotReady", "True/ScalingUp", "False/ScalingUp"},
		},
		"paused with nothing pending: Ready": {
			pods: []corev1.Pod{current(0), current(1), current(2)},
			want: conditions{"True/AllReplicasReady", "False/Converged", "False/Converged"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(ps, noneInFlight)
			plan := NewView(ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			got := NewView(ps, in.Revs, tc.pods, now.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
			if diff := cmp.Diff(tc.want, verdict(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if tc.wantMessage != "" {
				if c := meta.FindStatusCondition(got.Conditions, "Ready"); c.Message != tc.wantMessage {
					t.Errorf("Ready message %q, want %q", c.Message, tc.wantMessage)
				}
			}
			if tc.want.Ready == "False/Paused" {
				if wake := NewView(ps, NewRevisions(ps, nil), tc.pods, testNow).WakeAfter(&got); wake != 0 {
					t.Errorf("WakeAfter %v while paused, want no deadline wake", wake)
				}
			}
		})
	}

	// An hour without progress: paused with changes pending is not stalled.
	idle := ps.DeepCopy()
	idle.Status.Replicas, idle.Status.ReadyReplicas, idle.Status.AvailableReplicas, idle.Status.UpdatedReplicas = 3, 3, 3, 1
	idle.Status.PodNames = []string{"web-0", "web-1", "web-2"}
	idlePods := []corev1.Pod{old(0), old(1), current(2)}
	idlePlan := NewView(idle, NewRevisions(idle, nil), idlePods, testNow).Plan(Input{InFlight: noneInFlight})
	idleStatus := NewView(idle, NewRevisions(idle, nil), idlePods, now.Time).Status(&idlePlan, &Outcome{ReplacedLost: idlePlan.ReplaceLost})
	if diff := cmp.Diff(conditions{"False/Paused", "False/Paused", "False/Paused"}, verdict(idleStatus)); diff != "" {
		t.Errorf("paused an hour past the deadline, conditions (-want +got):\n%s", diff)
	}

	// Past the deadline, a pod the pause does not hold back (created for a
	// scale-up, never ready) still stalls the PodSet, and the message does
	// not count the held pods as waiting to be updated.
	stuck := makePod("web-2").controlledBy(ps).running().hash("old").obj()
	pods := []corev1.Pod{old(0), old(1), stuck}
	since := ps.DeepCopy() // the same counts an hour ago: no progress since
	since.Status.Replicas, since.Status.AvailableReplicas, since.Status.PodNames = 3, 2, []string{"web-0", "web-1", "web-2"}
	in := testInput(since, noneInFlight)
	plan := NewView(since, in.Revs, pods, in.Now).Plan(in.Input)
	got := NewView(since, in.Revs, pods, now.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
	if c := meta.FindStatusCondition(got.Conditions, "Stalled"); c.Status != metav1.ConditionTrue || c.Reason != podsetv1alpha1.ProgressDeadlineExceededReason {
		t.Errorf("Stalled %s/%s with an unready pod past the deadline, want True/ProgressDeadlineExceeded", c.Status, c.Reason)
	} else if want := "web-2: "; !strings.Contains(c.Message, want) || strings.Contains(c.Message, "waiting to be updated") {
		t.Errorf("deadline message %q: want it to name web-2 and no pod waiting to be updated", c.Message)
	}
}

// TestPausedPreview checks that a paused PodSet previews the rollout its
// resume starts.
func TestPausedPreview(t *testing.T) {
	v1 := makePodSet("web").Replicas(2).Obj()
	v2 := withImage(v1, "b:2")
	h1 := TemplateHash(v1)
	pods := readyPodsOf(v1, h1, 0, 1)
	revs := NewRevisions(v2, []appsv1.ControllerRevision{storedRevision(v1, 1)})
	want := NewView(v2, revs, pods, testNow).Preview()
	got := NewView(paused(v2), revs, pods, testNow).Preview()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Preview() paused (-resumed +paused):\n%s", diff)
	}
	if !got.Changed() {
		t.Error("the preview of a paused PodSet with a new image changes nothing")
	}
}

// TestPreviewOfAPausedRollout: a paused PodSet is previewed as it rolls
// out once resumed, with the same batches and nothing waiting; a
// partition's pods are held, not waiting.
func TestPreviewOfAPausedRollout(t *testing.T) {
	r := makeThreeRevisions(3)
	pods := []corev1.Pod{r.pod(0, r.h1), r.pod(1, r.h1), r.pod(2, r.h2)}
	preview := func(ps *podsetv1alpha1.PodSet) Preview {
		return NewView(ps, NewRevisions(ps, r.history), pods, testNow).Preview()
	}
	resumed, stopped := preview(r.v2), preview(paused(r.v2))
	if !cmp.Equal(stopped.Batches, [][]string{{"web-1"}, {"web-0"}}) || len(stopped.Waiting) != 0 {
		t.Errorf("paused: batches %v, waiting %v; want [[web-1] [web-0]], none", stopped.Batches, stopped.Waiting)
	}
	if !cmp.Equal(stopped.Batches, resumed.Batches) {
		t.Errorf("paused: batches %v, resumed: %v; want the same", stopped.Batches, resumed.Batches)
	}
	held := preview(paused(withPartition(r.v2, 1)))
	if !cmp.Equal(held.Batches, [][]string{{"web-1"}}) || len(held.Waiting) != 0 {
		t.Errorf("paused, partition 1: batches %v, waiting %v; want [[web-1]], none", held.Batches, held.Waiting)
	}
}
