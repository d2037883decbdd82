package podset

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// gated gives the pod the operator's readiness gate, open: every pod the
// operator makes carries it.
func (b *podBuilder) gated() *podBuilder {
	b.pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	b.setCondition(corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue})
	return b
}

// draining is a Ready pod whose gate the operator closed at at: its own
// Ready False beside it, which the kubelet has not replaced yet.
func (b *podBuilder) draining(at time.Time) *podBuilder {
	t := metav1.NewTime(at)
	b.setCondition(corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse, LastTransitionTime: t})
	b.setCondition(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: podsetv1alpha1.DrainingReason, LastTransitionTime: t})
	return b
}

// kubeletNotReadySince is the kubelet's own report of the closed gate.
func (b *podBuilder) kubeletNotReadySince(at time.Time) *podBuilder {
	b.setCondition(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady", LastTransitionTime: metav1.NewTime(at)})
	return b
}

// runningContainers reports every container running, restarted restarts
// times.
func (b *podBuilder) runningContainers(restarts int32) *podBuilder {
	b.pod.Status.ContainerStatuses = nil
	for _, c := range b.pod.Spec.Containers {
		b.pod.Status.ContainerStatuses = append(b.pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	return b
}

// withSidecar adds a native sidecar, an init container that restarts
// always, with a preStop hook of its own.
func (b *podBuilder) withSidecar(name string) *podBuilder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, corev1.Container{
		Name: name, Image: name + ":1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
	})
	return b
}

func (b *podBuilder) preStop() *podBuilder {
	for i := range b.pod.Spec.Containers {
		b.pod.Spec.Containers[i].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	}
	return b
}

func (b *podBuilder) setCondition(c corev1.PodCondition) {
	for i := range b.pod.Status.Conditions {
		if b.pod.Status.Conditions[i].Type == c.Type {
			b.pod.Status.Conditions[i] = c
			return
		}
	}
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, c)
}

// drainNames is what a plan does about drains, by pod name.
type drainNames struct {
	Drain, Prune, Rollout, Update, Resume []string
	Wake                                  time.Duration
}

func drainNamesOf(p Plan) drainNames {
	var out drainNames
	for _, s := range p.Drain {
		out.Drain = append(out.Drain, s.Pod.Name)
	}
	for _, s := range p.Update {
		out.Update = append(out.Update, s.Pod.Name)
	}
	for _, list := range []struct {
		pods []*corev1.Pod
		into *[]string
	}{{p.Prune, &out.Prune}, {p.Rollout, &out.Rollout}, {p.Resume, &out.Resume}} {
		for _, pod := range list.pods {
			*list.into = append(*list.into, pod.Name)
		}
	}
	out.Wake = p.Wake
	return out
}

// TestPlanDrains: the operator takes every Ready pod it stops out of
// endpoints first (the gate closes), waits for the kubelet to report it
// not Ready and for drainSeconds, and only then deletes it or restarts
// its containers; a pod that is not Ready, or whose containers drain
// themselves (preStop), is stopped at once.
func TestPlanDrains(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	// A drain of 2 s, not the default, so the cases' times stay apart.
	ps := makePodSet("web").Replicas(2).Obj()
	ps.Spec.DrainSeconds = ptr.To[int32](2)
	h := TemplateHash(ps)
	recreate := makePodSet("web").Replicas(3).MaxUnavailableOf(intstr.FromInt32(1)).Obj()
	recreate.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
	recreate.Spec.DrainSeconds = ptr.To[int32](2)
	gatedPod := func(ps *podsetv1alpha1.PodSet, o int, hash string) *podBuilder {
		return makePod(PodName("web", o)).controlledBy(ps).ready().hash(hash).gated().runningContainers(0)
	}
	current := func(o int) *podBuilder { return gatedPod(ps, o, h) }
	stale := func(o int) *podBuilder { return gatedPod(recreate, o, "old") }
	// unserved: no Service selects the pods, no EndpointSlice lists them;
	// otherwise the slices list every Ready pod as ready.
	cases := map[string]struct {
		ps       *podsetv1alpha1.PodSet
		pods     []corev1.Pod
		drains   Drains
		unserved bool
		want     drainNames
	}{
		"scale-down: a Ready surplus pod drains first": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).obj()},
			want: drainNames{Drain: []string{"web-2"}},
		},
		"scale-down: a Ready surplus pod no slice lists goes at once": {
			ps:       ps,
			pods:     []corev1.Pod{current(0).obj(), current(1).obj(), current(2).readySince(now.Add(-endpointsLag)).obj()},
			unserved: true,
			want:     drainNames{Prune: []string{"web-2"}},
		},
		"scale-down: a surplus pod Ready for less than endpointsLag is waited for, not drained": {
			ps:       ps,
			pods:     []corev1.Pod{current(0).obj(), current(1).obj(), current(2).readySince(now.Add(-300 * time.Millisecond)).obj()},
			unserved: true,
			want:     drainNames{Wake: endpointsLag - 300*time.Millisecond},
		},
		"scale-down: a surplus pod that is not Ready goes at once": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).running().obj()},
			want: drainNames{Prune: []string{"web-2"}},
		},
		"scale-down: a surplus pod whose containers have preStop hooks goes at once": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).preStop().obj()},
			want: drainNames{Prune: []string{"web-2"}},
		},
		"scale-down: out of endpoints by the operator's write, the kubelet has not said so yet": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-5 * time.Second)).obj()},
			want: drainNames{Wake: 25 * time.Second},
		},
		"scale-down: a kubelet silent for 30 s is not waited on": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-31 * time.Second)).obj()},
			want: drainNames{Prune: []string{"web-2"}},
		},
		"scale-down: a kubelet silent for 25 s is waited on for 5 s more": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-25 * time.Second)).obj()},
			want: drainNames{Wake: 5 * time.Second},
		},
		"scale-down: the kubelet reports it not Ready, the drain is not over": {
			ps:     ps,
			pods:   []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-time.Second)).kubeletNotReadySince(now).obj()},
			drains: Drains{"web-2-uid": now.Add(-500 * time.Millisecond)},
			want:   drainNames{Wake: 1500 * time.Millisecond},
		},
		"scale-down: drained, deleted": {
			ps:     ps,
			pods:   []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-3 * time.Second)).kubeletNotReadySince(now.Add(-2 * time.Second)).obj()},
			drains: Drains{"web-2-uid": now.Add(-2 * time.Second)},
			want:   drainNames{Prune: []string{"web-2"}},
		},
		"an operator restarted mid-drain resumes it from the condition's time, a second late": {
			ps:   ps,
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-3 * time.Second)).kubeletNotReadySince(now.Add(-2 * time.Second)).obj()},
			want: drainNames{Wake: time.Second},
		},
		"scaled up again mid-drain: the gate opens": {
			ps:   makePodSet("web").Replicas(3).Obj(),
			pods: []corev1.Pod{current(0).obj(), current(1).obj(), current(2).draining(now.Add(-time.Second)).kubeletNotReadySince(now).obj()},
			want: drainNames{Resume: []string{"web-2"}},
		},
		"Recreate: Ready out-of-date pods drain within maxUnavailable, from the highest ordinal": {
			ps:   recreate,
			pods: []corev1.Pod{stale(0).obj(), stale(1).obj(), stale(2).obj()},
			want: drainNames{Drain: []string{"web-2"}},
		},
		"Recreate: a draining pod is unavailable, and deleted once drained": {
			ps: recreate,
			pods: []corev1.Pod{stale(0).obj(), stale(1).obj(),
				stale(2).draining(now.Add(-4 * time.Second)).kubeletNotReadySince(now.Add(-3 * time.Second)).obj()},
			drains: Drains{"web-2-uid": now.Add(-3 * time.Second)},
			want:   drainNames{Rollout: []string{"web-2"}},
		},
		"Recreate: while one drains, the budget is spent": {
			ps:   recreate,
			pods: []corev1.Pod{stale(0).obj(), stale(1).obj(), stale(2).draining(now).obj()},
			want: drainNames{Wake: 30 * time.Second},
		},
		"Recreate: an out-of-date pod that is not Ready goes at once": {
			ps:   recreate,
			pods: []corev1.Pod{stale(0).obj(), stale(1).obj(), stale(2).running().obj()},
			want: drainNames{Rollout: []string{"web-2"}},
		},
		"drainSeconds 0: stopped once the kubelet reports it not Ready": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := recreate.DeepCopy()
				ps.Spec.DrainSeconds = ptr.To[int32](0)
				return ps
			}(),
			pods:   []corev1.Pod{stale(0).obj(), stale(1).obj(), stale(2).draining(now).kubeletNotReadySince(now).obj()},
			drains: Drains{"web-2-uid": now},
			want:   drainNames{Rollout: []string{"web-2"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := NewView(tc.ps, NewRevisions(tc.ps, nil), tc.pods, now.Truncate(time.Second))
			endpoints := Endpoints{}
			for i := range tc.pods {
				if !tc.unserved && podReady(&tc.pods[i]) {
					endpoints[tc.pods[i].UID] = EndpointState{Listed: true}
				}
			}
			got := drainNamesOf(v.Plan(Input{InFlight: noneInFlight, Drains: tc.drains, Endpoints: endpoints}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanReopensAGateWhenTheImageGoesBack is the revert bug: the image
// changes, the gate closes, and the template goes back before the new
// image was applied. The pod runs its revision's containers, whatever
// name the runtime reports for their image (containerd reports the first
// tag of an image made by an alias tag, and a tag for one made by
// digest), so its gate opens.
func TestPlanReopensAGateWhenTheImageGoesBack(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	for name, images := range map[string][2]string{
		"created by tag":       {"localhost/app:v1", "localhost/app:v1"},
		"created by alias tag": {"localhost/app:v2", "localhost/app:stable"},
		"created by digest":    {"localhost/app@sha256:0123", "localhost/app:v1"},
	} {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			ps.Spec.Template.Spec.Containers[0].Image = images[0]
			pod := makePod("web-0").controlledBy(ps).ready().hash(TemplateHash(ps)).gated().runningContainers(0).
				draining(now.Add(-2 * time.Second)).kubeletNotReadySince(now.Add(-time.Second)).obj()
			pod.Status.ContainerStatuses[0].Image = images[1]
			v := NewView(ps, NewRevisions(ps, nil), []corev1.Pod{pod}, now.Truncate(time.Second))
			got := drainNamesOf(v.Plan(Input{InFlight: noneInFlight, Drains: Drains{types.UID("web-0-uid"): now.Add(-time.Second)}}))
			if diff := cmp.Diff(drainNames{Resume: []string{"web-0"}}, got); diff != "" {
				t.Errorf("plan after the revert (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanInPlaceWaitsOnlyForAKubeletThatMayReportReady: an unready pod
// to restart in place is updated at once when its kubelet never reported
// it Ready (a Pending pod it has not started; FuzzPlanPods'
// 0db5d096a0def292) or reported it not Ready; one whose gate is closed
// waits for its kubelet's own not-Ready, even with no Ready condition at
// all (2bce87540c68137f).
func TestPlanInPlaceWaitsOnlyForAKubeletThatMayReportReady(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	v1 := makePodSet("web").Obj()
	v2 := v1.DeepCopy()
	v2.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	revs := NewRevisions(v2, []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2)})
	stale := func() *podBuilder {
		return makePod("web-0").controlledBy(v1).hash(TemplateHash(v1)).gated().on("node-a")
	}
	closedGate := corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	cases := map[string]struct {
		pod  *podBuilder
		want drainNames
	}{
		"Pending, never reported by its kubelet: updated at once": {
			pod:  stale(),
			want: drainNames{Update: []string{"web-0"}},
		},
		"Running, reported not Ready by its kubelet: updated at once": {
			pod:  stale().running(),
			want: drainNames{Update: []string{"web-0"}},
		},
		"Pending, its gate closed, no Ready condition: waits for its kubelet": {
			pod: func() *podBuilder { b := stale(); b.setCondition(closedGate); return b }(),
		},
		"its gate closed by the operator's write, the kubelet silent for an hour: waits for it": {
			pod: stale().ready().gated().draining(now.Add(-time.Hour)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := NewView(v2, revs, []corev1.Pod{tc.pod.obj()}, now.Truncate(time.Second))
			got := drainNamesOf(v.Plan(Input{InFlight: noneInFlight}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanWakeIsTheSoonestOfItsDecisions: each decision says when its
// slot wants a look again, and the plan wakes at the soonest of them; a
// slot that waits for an event (a restart in place waits for its
// kubelet's report, however long) asks for no time and takes none from
// another slot's wait, whichever comes first.
func TestPlanWakeIsTheSoonestOfItsDecisions(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	v1 := makePodSet("web").Replicas(2).MaxUnavailableOf(intstr.FromInt32(2)).Obj()
	v2 := v1.DeepCopy()
	v2.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	revs := NewRevisions(v2, []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2)})
	// Recreated on request, its gate closed 25 s ago by the operator's
	// write, its kubelet silent: waited on for 5 s more.
	replaced := func(o int) corev1.Pod {
		return makePod(PodName("web", o)).controlledBy(v2).hash(TemplateHash(v2)).ready().gated().replacing().draining(now.Add(-25 * time.Second)).obj()
	}
	// Restarted in place, its gate closed an hour ago: waits for its
	// kubelet, on no clock.
	restarted := func(o int) corev1.Pod {
		return makePod(PodName("web", o)).controlledBy(v1).hash(TemplateHash(v1)).ready().gated().draining(now.Add(-time.Hour)).on("node-a").obj()
	}
	for name, tc := range map[string]struct {
		pods  []corev1.Pod
		wakes []time.Duration
	}{
		"the timed wait first":  {pods: []corev1.Pod{replaced(0), restarted(1)}, wakes: []time.Duration{5 * time.Second, 0}},
		"the timed wait second": {pods: []corev1.Pod{restarted(0), replaced(1)}, wakes: []time.Duration{0, 5 * time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			p := NewView(v2, revs, tc.pods, now).Plan(Input{InFlight: noneInFlight})
			if p.Wake != 5*time.Second {
				t.Errorf("Plan.Wake = %v, want 5s", p.Wake)
			}
			var wakes []time.Duration
			for _, d := range p.Decisions {
				wakes = append(wakes, d.Wake)
			}
			if !cmp.Equal(wakes, tc.wakes) {
				t.Errorf("the decisions' Wake = %v, want %v", wakes, tc.wakes)
			}
		})
	}
}

// TestDrainForWaitsForASilentKubeletBeforeARestart: a pod whose
// containers restart in place waits for its kubelet however long it is
// silent, since only that kubelet can restart them; a pod to delete does
// not wait past kubeletSilence.
func TestDrainForWaitsForASilentKubeletBeforeARestart(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	ps := makePodSet("web").Obj()
	pod := makePod("web-0").controlledBy(ps).ready().gated().draining(now.Add(-time.Hour)).obj()
	if stage, wait := drainFor(ps, &pod, time.Time{}, now, EndpointState{}, false, false); stage != draining || wait != 0 {
		t.Errorf("restart in place: drainFor() = %v, %v; want draining until an event", stage, wait)
	}
	if stage, _ := drainFor(ps, &pod, time.Time{}, now, EndpointState{}, false, true); stage != stopNow {
		t.Errorf("deletion: drainFor() = %v; want stopNow once the kubelet has been silent for %v", stage, kubeletSilence)
	}
}

// TestDrainsCountFromTheLastExit: a pod that a kubelet put back into Ready
// for a moment after its gate closed (its status manager writes back the
// Ready it had until its pod worker has seen the gate) drains again from
// when it left the second time, even when no pass saw it Ready.
func TestDrainsCountFromTheLastExit(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	ps := makePodSet("web").Obj()
	ready := makePod("web-0").controlledBy(ps).ready().gated().obj()
	closed := makePod("web-0").controlledBy(ps).ready().gated().draining(t0).obj()
	back := makePod("web-0").controlledBy(ps).ready().gated().obj()
	back.Status.Conditions[1].Status = corev1.ConditionFalse // the gate stays closed, Ready is True again
	confirmed := makePod("web-0").controlledBy(ps).ready().gated().draining(t0).kubeletNotReadySince(t0.Add(time.Second)).obj()

	var d Drains
	for _, step := range []struct {
		old, cur *corev1.Pod
		at       time.Time
		want     time.Time
	}{
		{&ready, &closed, t0, t0},
		{&closed, &back, t0.Add(500 * time.Millisecond), time.Time{}},
		{&back, &confirmed, t0.Add(1200 * time.Millisecond), t0.Add(1200 * time.Millisecond)},
	} {
		if left, isBack := EndpointsMove(step.old, step.cur); left || isBack {
			d = d.Moved("web-0-uid", left, step.at)
		}
		if got := d["web-0-uid"]; !got.Equal(step.want) {
			t.Errorf("at %v: the drain counts from %v, want %v", step.at.Sub(t0), got, step.want)
		}
	}
	// A pass after all that, which never saw the pod Ready again, keeps
	// the last exit.
	v := NewView(ps, NewRevisions(ps, nil), []corev1.Pod{confirmed}, t0.Add(2*time.Second))
	if got := d.Observe(v, t0.Add(2*time.Second))["web-0-uid"]; !got.Equal(t0.Add(1200 * time.Millisecond)) {
		t.Errorf("after a pass the drain counts from %v, want the last exit", got)
	}
}

// TestDrainForLeavesTheDrainToPreStopHooks: containers whose every
// stopping one has a preStop hook drain themselves (the kubelet runs the
// hook before it stops a container, on a deletion and on an in-place
// restart alike), so the operator does not wait drainSeconds on top; a
// restart in place closes the gate and then waits only for the
// EndpointSlices, not for the kubelet's report (DrainConditions), and
// a pod to delete needs no gate at all.
func TestDrainForLeavesTheDrainToPreStopHooks(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	ps := makePodSet("web").Obj()
	ps.Spec.DrainSeconds = ptr.To[int32](2)
	open := makePod("web-0").controlledBy(ps).ready().gated().preStop().obj()
	if stage, _ := drainFor(ps, &open, time.Time{}, now, EndpointState{}, allPreStop(ps, &open, nil), true); stage != stopNow {
		t.Errorf("a Ready pod to delete whose containers have preStop hooks: %v, want stopNow", stage)
	}
	if stage, _ := drainFor(ps, &open, time.Time{}, now, EndpointState{}, allPreStop(ps, &open, []string{"app"}), false); stage != beginDrain {
		t.Errorf("a Ready pod to restart in place whose containers have preStop hooks: %v, want its gate closed first", stage)
	}
	justClosed := makePod("web-0").controlledBy(ps).ready().gated().preStop().draining(now).obj()
	if stage, wait := drainFor(ps, &justClosed, now, now, EndpointState{}, allPreStop(ps, &justClosed, []string{"app"}), false); stage != stopNow {
		t.Errorf("restart in place, the gate closed, no report of the kubelet: %v (wait %v), want stopNow: the hook drains", stage, wait)
	}
	if stage, wait := drainFor(ps, &justClosed, now, now, EndpointState{Listed: true}, allPreStop(ps, &justClosed, []string{"app"}), false); stage != draining || wait != endpointsSilence {
		t.Errorf("restart in place, the gate closed, the slices still list it: %v (wait %v), want draining %v", stage, wait, endpointsSilence)
	}
	justConfirmed := makePod("web-0").controlledBy(ps).ready().gated().preStop().draining(now).kubeletNotReadySince(now).obj()
	if stage, wait := drainFor(ps, &justConfirmed, now, now, EndpointState{}, allPreStop(ps, &justConfirmed, []string{"app"}), false); stage != stopNow {
		t.Errorf("restart in place, the kubelet reports it not Ready: %v (wait %v), want stopNow: the hook drains", stage, wait)
	}
	// Still listed as ready by the slices (a kube-controller-manager down
	// after an API server outage): the restart waits for them, or the
	// hook would run while kube-proxy still sends it connections.
	if stage, wait := drainFor(ps, &justConfirmed, now, now, EndpointState{Listed: true}, allPreStop(ps, &justConfirmed, []string{"app"}), false); stage != draining || wait != endpointsSilence {
		t.Errorf("restart in place, the kubelet reports it not Ready, the slices still list it: %v (wait %v), want draining %v", stage, wait, endpointsSilence)
	}
	// A sleep shorter than the drain (the operator's, made before
	// drainSeconds grew, or an app's own) does not hold the pod for it:
	// the operator drains it first.
	ps.Spec.DrainSeconds = ptr.To[int32](6)
	if stage, _ := drainFor(ps, &open, time.Time{}, now, EndpointState{Listed: true}, allPreStop(ps, &open, nil), true); stage != beginDrain {
		t.Errorf("a Ready pod to delete whose hooks sleep 5 s of a 6 s drain: %v, want its gate closed first", stage)
	}
	ps.Spec.DrainSeconds = ptr.To[int32](2)
	noHook := makePod("web-0").controlledBy(ps).ready().gated().draining(now).kubeletNotReadySince(now).obj()
	if stage, wait := drainFor(ps, &noHook, now, now, EndpointState{}, allPreStop(ps, &noHook, []string{"app"}), false); stage != draining || wait != 2*time.Second {
		t.Errorf("restart in place without a hook: %v, wait %v; want the drain, 2 s", stage, wait)
	}
}

// TestDrainWaitsForTheEndpointSlices: a pod its kubelet reports not Ready
// but that an EndpointSlice still lists as ready (its controller is down,
// or not leading yet after an API server outage) keeps draining until the
// slices drop it, for at most endpointsSilence from when the operator saw
// it not Ready, and its drain counts from when the last slice dropped it.
func TestDrainWaitsForTheEndpointSlices(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 10, 0, time.UTC)
	ps := makePodSet("web").Obj()
	drain := DrainSeconds(ps)
	pod := makePod("web-0").controlledBy(ps).ready().gated().
		draining(now.Add(-time.Minute)).kubeletNotReadySince(now.Add(-time.Minute)).obj()
	seen := now.Add(-10 * time.Second)
	for _, deleting := range []bool{false, true} {
		if stage, wait := drainFor(ps, &pod, seen, now, EndpointState{}, false, deleting); stage != stopNow {
			t.Errorf("deleting %v, in no slice: drainFor() = %v, %v; want stopNow, the drain being over", deleting, stage, wait)
		}
		if stage, wait := drainFor(ps, &pod, seen, now, EndpointState{Listed: true}, false, deleting); stage != draining || wait != endpointsSilence-10*time.Second {
			t.Errorf("deleting %v, still listed: drainFor() = %v, %v; want draining for %v", deleting, stage, wait, endpointsSilence-10*time.Second)
		}
		if stage, wait := drainFor(ps, &pod, now.Add(-endpointsSilence), now, EndpointState{Listed: true}, false, deleting); stage != stopNow {
			t.Errorf("deleting %v, listed for %v: drainFor() = %v, %v; want stopNow", deleting, endpointsSilence, stage, wait)
		}
		left := now.Add(-time.Second)
		if stage, wait := drainFor(ps, &pod, seen, now, EndpointState{Left: left}, false, deleting); stage != draining || wait != drain-time.Second {
			t.Errorf("deleting %v, dropped a second ago: drainFor() = %v, %v; want draining for %v", deleting, stage, wait, drain-time.Second)
		}
		if stage, wait := drainFor(ps, &pod, seen, now, EndpointState{Left: now.Add(-drain)}, false, deleting); stage != stopNow {
			t.Errorf("deleting %v, dropped %v ago: drainFor() = %v, %v; want stopNow", deleting, drain, stage, wait)
		}
	}
	// Without a pass's first sight of it, the silence counts from the
	// kubelet's not-Ready: a minute ago here, so it is over.
	if stage, wait := drainFor(ps, &pod, time.Time{}, now, EndpointState{Listed: true}, false, true); stage != stopNow {
		t.Errorf("never seen, listed, not Ready for a minute: drainFor() = %v, %v; want stopNow", stage, wait)
	}
	// A pod whose containers all have a preStop hook that holds the
	// drain, its gate closed, waits for the slices too (the hook runs
	// once it is told to stop, and must not run while kube-proxy still
	// routes to it), then stops without the drain's wait: the hook is
	// its drain.
	if stage, _ := drainFor(ps, &pod, seen, now, EndpointState{Listed: true}, true, true); stage != draining {
		t.Errorf("preStop, still listed: drainFor() = %v; want draining", stage)
	}
	if stage, _ := drainFor(ps, &pod, seen, now, EndpointState{Left: now}, true, true); stage != stopNow {
		t.Errorf("preStop, dropped now: drainFor() = %v; want stopNow", stage)
	}
}

// TestCloseGateConditionsSpareTheKubeletASync: the write that closes the
// gate of a pod restarted in place behind its drain hooks sets the Ready
// message the kubelet's readiness check expects of the pod, so that the
// kubelet does not sync the pod for the gate and syncs the new images at
// once; the check reads status.containerStatuses only, so for a pod with
// a native sidecar it expects the sidecar's status unknown (the slim pod
// of the operator's cache keeps no container status of a Ready pod: the
// message comes from the spec). Every other close keeps the operator's
// own words.
func TestCloseGateConditionsSpareTheKubeletASync(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC))
	ps := makePodSet("web").Obj()
	ps.Spec.DrainSeconds = ptr.To[int32](2)
	hooked := makePod("web-0").controlledBy(ps).ready().gated().preStop().obj()
	// As the operator's cache holds it.
	slim, _ := SlimPod(ptr.To(makePod("web-0").controlledBy(ps).ready().gated().preStop().withSidecar("proxy").obj()))
	sidecar := *slim.(*corev1.Pod)
	bare := makePod("web-1").controlledBy(ps).ready().gated().obj()
	inPlace := UpdateWay{InPlace: true, Restarts: []string{"app"}}
	const gate = `the status of pod readiness gate "podset.dev/InPlaceUpdateReady" is not "True", but False`
	for name, tc := range map[string]struct {
		step Step
		want string
	}{
		"in place, hooks that hold the drain": {Step{Pod: &hooked, Way: inPlace}, gate},
		"in place, a native sidecar":          {Step{Pod: &sidecar, Way: inPlace}, "containers with unknown status: [proxy]"},
		"in place, no hook":                   {Step{Pod: &bare, Way: inPlace}, ""},
		"a deletion, hooks that hold it":      {Step{Pod: &hooked, Way: UpdateWay{Why: "why"}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			var ready *corev1.PodCondition
			for _, c := range DrainConditions(ps, tc.step, now) {
				if c.Type == corev1.PodReady {
					ready = &c
				}
			}
			if ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != podsetv1alpha1.DrainingReason {
				t.Fatalf("Ready condition %+v, want False with %s", ready, podsetv1alpha1.DrainingReason)
			}
			if tc.want == "" {
				if !strings.HasPrefix(ready.Message, "the operator took the pod out of Service endpoints") {
					t.Errorf("Ready's message %q, want the operator's own", ready.Message)
				}
				return
			}
			if ready.Message != tc.want {
				t.Errorf("Ready's message %q, want the kubelet's %q", ready.Message, tc.want)
			}
		})
	}
}
