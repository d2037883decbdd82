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
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// progressedAt sets the PodSet's status as last written: observed at its
// generation, with counts, Ready or not, and the time of the last progress.
func progressedAt(ps *podsetv1alpha1.PodSet, at time.Time, ready bool, counts podsetv1alpha1.PodSetStatus) *podsetv1alpha1.PodSet {
	ps = ps.DeepCopy()
	ps.Status = counts
	ps.Status.ObservedGeneration = ps.Generation
	ps.Status.LastProgressTime = ptr.To(metav1.NewTime(at))
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	ps.Status.Conditions = []metav1.Condition{{Type: podsetv1alpha1.ReadyCondition, Status: status}}
	return ps
}

func TestLastProgress(t *testing.T) {
	ps := makePodSet("web").Replicas(3).Obj()
	before := testNow.Add(-time.Minute)
	now := metav1.NewTime(testNow)
	counts := podsetv1alpha1.PodSetStatus{Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 2, PodNames: []string{"web-0", "web-1", "web-2"}}
	with := func(f func(*podsetv1alpha1.PodSetStatus)) podsetv1alpha1.PodSetStatus {
		s := *counts.DeepCopy()
		f(&s)
		return s
	}
	cases := map[string]struct {
		ps    *podsetv1alpha1.PodSet
		cur   podsetv1alpha1.PodSetStatus
		ready bool
		want  time.Time
	}{
		"nothing changed: the clock stays": {
			ps: progressedAt(ps, before, false, counts), cur: counts, want: before,
		},
		"a pod turned ready but not available: no progress": {
			ps: progressedAt(ps, before, false, counts), cur: with(func(s *podsetv1alpha1.PodSetStatus) { s.ReadyReplicas++ }), want: before,
		},
		"a pod newly available": {
			ps: progressedAt(ps, before, false, counts), cur: with(func(s *podsetv1alpha1.PodSetStatus) { s.AvailableReplicas++ }), want: testNow,
		},
		"a pod updated": {
			ps: progressedAt(ps, before, false, counts), cur: with(func(s *podsetv1alpha1.PodSetStatus) { s.UpdatedReplicas++ }), want: testNow,
		},
		"an old pod gone": {
			ps: progressedAt(ps, before, false, counts), cur: with(func(s *podsetv1alpha1.PodSetStatus) { s.Replicas--; s.PodNames = s.PodNames[:2] }), want: testNow,
		},
		"a pod created": {
			ps:   progressedAt(ps, before, false, with(func(s *podsetv1alpha1.PodSetStatus) { s.PodNames = s.PodNames[:2] })),
			cur:  counts,
			want: testNow,
		},
		"a pod lost (fewer live pods than replicas): no progress": {
			ps: progressedAt(ps, before, false, counts),
			cur: with(func(s *podsetv1alpha1.PodSetStatus) {
				s.PodNames = s.PodNames[:2]
				s.UpdatedReplicas = 1
				s.Replicas = 3
			}),
			want: before,
		},
		"Ready lost: the clock starts": {
			ps: progressedAt(ps, before, true, counts), cur: counts, want: testNow,
		},
		"a new generation": {
			ps:   func() *podsetv1alpha1.PodSet { p := progressedAt(ps, before, false, counts); p.Generation++; return p }(),
			cur:  counts,
			want: testNow,
		},
		"no time yet (a new PodSet, or one from before the clock)": {
			ps: func() *podsetv1alpha1.PodSet {
				p := progressedAt(ps, before, false, counts)
				p.Status.LastProgressTime = nil
				return p
			}(),
			cur:  counts,
			want: testNow,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := lastProgress(tc.ps, &tc.cur, tc.ready, now)
			if got == nil || !got.Time.Equal(tc.want) {
				t.Errorf("lastProgress() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodProblem(t *testing.T) {
	waiting := func(reason string, last *corev1.ContainerStateTerminated) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "back-off 40s"}},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		}}}
	}
	cases := map[string]struct {
		status corev1.PodStatus
		want   string
	}{
		"unschedulable: the scheduler's words": {
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
			}}},
			want: "Unschedulable: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
		},
		"an image that never pulls": {
			status: waiting("ImagePullBackOff", nil), want: "container app: ImagePullBackOff",
		},
		"a crash loop, with its last exit": {
			status: waiting("CrashLoopBackOff", &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}),
			want:   "container app: CrashLoopBackOff (last exit: Error, code 1)",
		},
		"being created is no problem yet": {
			status: waiting("ContainerCreating", nil), want: "Pending",
		},
		"a failing readiness probe": {
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
				Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [app]",
			}}},
			want: "ContainersNotReady: containers with unready status: [app]",
		},
		"evicted": {
			status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}, want: "Failed Evicted",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := makePod("web-0").obj()
			pod.Status = tc.status
			if got := podProblem(&pod, 0); got != tc.want {
				t.Errorf("podProblem() = %q, want %q", got, tc.want)
			}
			// The cache keeps what it needs to say so.
			slim, _ := SlimPod(pod.DeepCopy())
			if got := podProblem(slim.(*corev1.Pod), 0); got != tc.want {
				t.Errorf("podProblem() of the slimmed pod = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestComputeStatusProgressDeadline(t *testing.T) {
	ps := makePodSet("web").Replicas(3).Obj()
	ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	h := TemplateHash(ps)
	unschedulable := func(name string) corev1.Pod {
		p := makePod(name).controlledBy(ps).hash(h).obj()
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available."}}
		return p
	}
	pods := []corev1.Pod{
		makePod("web-0").controlledBy(ps).ready().hash(h).obj(),
		unschedulable("web-1"),
		unschedulable("web-2"),
	}
	counts := podsetv1alpha1.PodSetStatus{Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 3, PodNames: []string{"web-0", "web-1", "web-2"}}
	in := testInput(ps, noneInFlight)
	plan := NewView(ps, in.Revs, pods, in.Now).Plan(in.Input)
	status := func(old *podsetv1alpha1.PodSet) podsetv1alpha1.PodSetStatus {
		return NewView(old, in.Revs, pods, testNow).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
	}

	// Within the deadline: converging, and woken when it passes.
	within := progressedAt(ps, testNow.Add(-59*time.Second), false, counts)
	got := status(within)
	if c := meta.FindStatusCondition(got.Conditions, podsetv1alpha1.ReconcilingCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("within the deadline: Reconciling %s/%s, want True", c.Status, c.Reason)
	}
	if wake := NewView(within, NewRevisions(within, nil), pods, testNow).WakeAfter(&got); wake != 2*time.Second {
		t.Errorf("wakeAfter() = %v, want 2s: the deadline in 1s, rounded up to the status's whole seconds", wake)
	}

	// Past it: stalled, naming the stuck pods in Kubernetes' words.
	past := progressedAt(ps, testNow.Add(-60*time.Second), false, counts)
	got = status(past)
	want := "no progress for 1m0s (spec.progressDeadlineSeconds), 1/3 pods available; web-1, web-2: Unschedulable: 0/1 nodes are available."
	for _, typ := range []string{podsetv1alpha1.StalledCondition, podsetv1alpha1.ReconcilingCondition} {
		c := meta.FindStatusCondition(got.Conditions, typ)
		if c.Reason != podsetv1alpha1.ProgressDeadlineExceededReason || c.Message != want {
			t.Errorf("%s: %s %q, want %s %q", typ, c.Reason, c.Message, podsetv1alpha1.ProgressDeadlineExceededReason, want)
		}
	}
	if !meta.IsStatusConditionTrue(got.Conditions, podsetv1alpha1.StalledCondition) || !got.LastProgressTime.Equal(past.Status.LastProgressTime) {
		t.Errorf("past the deadline: Stalled not True, or the clock moved: %+v", got)
	}
	// And the next pass, nothing changed, writes nothing.
	again := past.DeepCopy()
	again.Status = got
	if diff := cmp.Diff(got, NewView(again, in.Revs, pods, testNow.Add(time.Hour)).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})); diff != "" {
		t.Errorf("a stalled PodSet's status changes from pass to pass (-first +second):\n%s", diff)
	}
	if wake := NewView(again, NewRevisions(again, nil), pods, testNow).WakeAfter(&got); wake != 0 {
		t.Errorf("wakeAfter() of a stalled PodSet = %v, want 0 (events only)", wake)
	}

	// Progress again (a pod available): Reconciling, the clock restarted.
	recovering := append([]corev1.Pod(nil), pods...)
	recovering[1] = makePod("web-1").controlledBy(ps).ready().hash(h).obj()
	got = NewView(again, in.Revs, recovering, testNow.Add(time.Hour)).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
	if c := meta.FindStatusCondition(got.Conditions, podsetv1alpha1.ReconcilingCondition); c.Status != metav1.ConditionTrue || !got.LastProgressTime.Time.Equal(testNow.Add(time.Hour)) {
		t.Errorf("after progress: Reconciling %s, lastProgressTime %v; want True and the time of the pass", c.Status, got.LastProgressTime)
	}
}

func TestComputeStatusHeldBackPods(t *testing.T) {
	v1 := makePodSet("web").Replicas(4).Obj()
	v2 := withImage(v1, "busybox:1.37")
	h1, h2 := TemplateHash(v1), TemplateHash(v2)
	partitioned := v2.DeepCopy()
	partitioned.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: ptr.To[int32](2)}
	onDelete := v2.DeepCopy()
	onDelete.Spec.UpdateStrategy = podsetv1alpha1.PodSetUpdateStrategy{Type: podsetv1alpha1.OnDeleteStrategyType}
	cases := map[string]struct {
		ps *podsetv1alpha1.PodSet
		// hashes are the template hashes of ps's ready pods, from ordinal 0.
		hashes      []string
		wantReady   bool
		wantMessage string
		wantCurrent string
	}{
		"partition 2: ordinals 2 and up updated, 0 and 1 held back": {
			ps: partitioned, hashes: []string{h1, h1, h2, h2}, wantReady: true, wantCurrent: h1,
			wantMessage: "4/4 pods ready, 4/4 available, 2/4 up to date; 2 pods run an older template (partition 2 holds back ordinals below it)",
		},
		"partition 2: ordinal 3 not updated yet": {
			ps: partitioned, hashes: []string{h1, h1, h2, h1}, wantCurrent: h1,
			wantMessage: "4/4 pods ready, 4/4 available, 1/4 up to date; 3 pods run an older template (partition 2 holds back ordinals below it)",
		},
		"OnDelete: every pod available, none updated": {
			ps: onDelete, hashes: []string{h1, h1, h1, h1}, wantReady: true, wantCurrent: h1,
			wantMessage: "4/4 pods ready, 4/4 available, 0/4 up to date; 4 pods run an older template (OnDelete: each is updated once deleted)",
		},
		"RollingUpdate: older pods are a rollout": {
			ps: v2, hashes: []string{h1, h2, h2, h2}, wantCurrent: h1,
			wantMessage: "4/4 pods ready, 4/4 available, 3/4 up to date",
		},
		"all updated: current is the update revision": {
			ps: v2, hashes: []string{h2, h2, h2, h2}, wantReady: true, wantCurrent: h2,
			wantMessage: "4/4 pods ready, 4/4 available, 4/4 up to date",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pods []corev1.Pod
			for i, h := range tc.hashes {
				pods = append(pods, readyPodsOf(tc.ps, h, i)...)
			}
			history := []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2)}
			in := testInput(tc.ps, noneInFlight)
			in.Revs = NewRevisions(tc.ps, history)
			plan := NewView(tc.ps, in.Revs, pods, in.Now).Plan(in.Input)
			got := NewView(tc.ps, in.Revs, pods, testNow).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
			ready := meta.FindStatusCondition(got.Conditions, podsetv1alpha1.ReadyCondition)
			if (ready.Status == metav1.ConditionTrue) != tc.wantReady || ready.Message != tc.wantMessage {
				t.Errorf("Ready %s %q, want ready %v %q", ready.Status, ready.Message, tc.wantReady, tc.wantMessage)
			}
			if got.CurrentRevision != "web-"+tc.wantCurrent || got.UpdateRevision != "web-"+h2 {
				t.Errorf("revisions current %s update %s, want web-%s and web-%s", got.CurrentRevision, got.UpdateRevision, tc.wantCurrent, h2)
			}
			if !strings.HasPrefix(got.UpdateRevision, "web-") {
				t.Errorf("updateRevision %q is no revision name", got.UpdateRevision)
			}
		})
	}
}
