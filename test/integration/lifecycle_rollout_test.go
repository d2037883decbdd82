package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// The rollout lifecycle of issue 10 against the real API server:
// minReadySeconds, the progress deadline, partitions and ControllerRevisions,
// OnDelete health and rollbacks. envtest has no scheduler and no kubelet; the
// tests play both, writing pod status as they would.

// schedulerMessage is what kube-scheduler writes on a pod no node fits.
const schedulerMessage = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. " +
	"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."

// playKubelet sets a pod's status as the scheduler or the kubelet would:
// f edits the status of the pod as the API server has it now.
func playKubelet(t *testing.T, ns, name string, f func(*corev1.PodStatus)) {
	t.Helper()
	eventually(t, "set the status of pod "+name, func(context.Context) error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		f(&pod.Status)
		return env.Client.Status().Update(t.Context(), pod)
	})
}

// unschedulable is a pod no node fits, as kube-scheduler reports it.
func unschedulable(status *corev1.PodStatus) {
	status.Phase = corev1.PodPending
	status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(),
		Reason: corev1.PodReasonUnschedulable, Message: schedulerMessage,
	}}
}

// notReadyConditions are the conditions the kubelet writes on a scheduled
// pod whose container "app" is not ready.
func notReadyConditions() []corev1.PodCondition {
	now := metav1.Now()
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now,
			Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now,
			Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
	}
}

// imagePullBackOff is a pod whose image never pulls.
func imagePullBackOff(status *corev1.PodStatus) {
	status.Phase = corev1.PodPending
	status.Conditions = notReadyConditions()
	status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", Image: "registry.example/app:missing",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "ImagePullBackOff",
			Message: `Back-off pulling image "registry.example/app:missing"`,
		}},
	}}
}

// crashLoopBackOff is a pod whose container exits with code 1 again and
// again.
func crashLoopBackOff(status *corev1.PodStatus) {
	status.Phase = corev1.PodRunning
	status.Conditions = notReadyConditions()
	status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", Image: "busybox:1.36", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: "back-off 1m20s restarting failed container=app",
		}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error",
			StartedAt: metav1.Now(), FinishedAt: metav1.Now(),
		}},
	}}
}

// readinessProbeFailing is a pod whose container runs and fails its
// readiness probe.
func readinessProbeFailing(status *corev1.PodStatus) {
	status.Phase = corev1.PodRunning
	status.Conditions = notReadyConditions()
	status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", Image: "busybox:1.36", Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
}

// updatePodSet changes a PodSet's spec, retrying on conflicts.
func updatePodSet(t *testing.T, ps *podsetv1alpha1.PodSet, f func(*podsetv1alpha1.PodSet)) {
	t.Helper()
	eventually(t, "update PodSet "+ps.Name, func(context.Context) error {
		cur := get(t, ps)
		f(cur)
		return env.Client.Update(t.Context(), cur)
	})
}

// setPartition sets spec.updateStrategy.rollingUpdate.partition.
func setPartition(t *testing.T, ps *podsetv1alpha1.PodSet, n int32) {
	t.Helper()
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) {
		if ps.Spec.UpdateStrategy.RollingUpdate == nil {
			ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
		}
		ps.Spec.UpdateStrategy.RollingUpdate.Partition = &n
	})
}

// healthy checks that status shows Ready=True for the current generation
// with every one of n desired pods ready and available, updated of them
// on the current template.
func healthy(n, updated int32) func(*podsetv1alpha1.PodSet) error {
	return func(ps *podsetv1alpha1.PodSet) error {
		s := ps.Status
		if s.ObservedGeneration != ps.Generation || s.Replicas != n || s.ReadyReplicas != n || s.AvailableReplicas != n ||
			s.UpdatedReplicas != updated || testenv.Condition(ps, podsetv1alpha1.ReadyCondition).Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v, want %d available, %d updated and Ready=True at generation %d", s, n, updated, ps.Generation)
		}
		return nil
	}
}

// deadlinePassedSaying waits until the PodSet is Stalled for its progress
// deadline and checks the Stalled message says each of want.
func deadlinePassedSaying(t *testing.T, ps *podsetv1alpha1.PodSet, want ...string) {
	t.Helper()
	got := waitForStatus(t, ps, stalledFor(podsetv1alpha1.ProgressDeadlineExceededReason))
	wantSaid(t, "Stalled message", testenv.Condition(got, podsetv1alpha1.StalledCondition).Message, want...)
}

// wantSaid fails the test unless the message (what) says each of want.
func wantSaid(t *testing.T, what, msg string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s %q does not say %q", what, msg, w)
		}
	}
}

// stalledFor checks that the PodSet is Stalled for the reason.
func stalledFor(reason string) func(*podsetv1alpha1.PodSet) error {
	return func(ps *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(ps, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("Stalled = %+v, want True/%s", c, reason)
		}
		return nil
	}
}

// waitsOnTheClock marks a test that spends its time waiting for a
// deadline or for minReadySeconds, in its own namespace: such tests run in
// parallel with each other, once every serial test of the package is done,
// so that their waits overlap.
func waitsOnTheClock(t *testing.T) { t.Parallel() }

// hashOf is the template hash a pod was made from.
func hashOf(p corev1.Pod) string { return p.Labels[podsetv1alpha1.TemplateHashLabel] }

// controllerRevisions lists the ControllerRevisions in a namespace by name,
// straight from the API server.
func controllerRevisions(t *testing.T, ns string) map[string]appsv1.ControllerRevision {
	t.Helper()
	list := &appsv1.ControllerRevisionList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	byName := map[string]appsv1.ControllerRevision{}
	for _, cr := range list.Items {
		byName[cr.Name] = cr
	}
	return byName
}

// revisionNames is the sorted names of ControllerRevisions.
func revisionNames(m map[string]appsv1.ControllerRevision) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// deadlineEvents lists the Warning events with reason
// ProgressDeadlineExceeded about a PodSet.
func deadlineEvents(t *testing.T, ps *podsetv1alpha1.PodSet) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ps.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == podsetv1alpha1.ProgressDeadlineExceededReason &&
			e.Regarding.Kind == "PodSet" && e.Regarding.Name == ps.Name {
			out = append(out, e)
		}
	}
	return out
}

// assertOneDeadlineEvent checks that the deadline was announced by one
// event, sent once: a second emission would show as a second event or as
// a series on the first.
func assertOneDeadlineEvent(t *testing.T, ps *podsetv1alpha1.PodSet) {
	t.Helper()
	events := deadlineEvents(t, ps)
	if len(events) != 1 {
		t.Errorf("%d ProgressDeadlineExceeded events, want exactly 1: %+v", len(events), events)
		return
	}
	if s := events[0].Series; s != nil {
		t.Errorf("the ProgressDeadlineExceeded event was emitted %d times, want once", s.Count)
	}
}

// waitForReplacement waits until the named pods are new pods (UIDs other
// than before's), live, and returns them.
func waitForReplacement(t *testing.T, ns string, before map[string]corev1.Pod, names ...string) map[string]corev1.Pod {
	t.Helper()
	var got map[string]corev1.Pod
	eventually(t, fmt.Sprintf("new pods %v", names), func(context.Context) error {
		got = pods(t, ns)
		for _, n := range names {
			if p, ok := got[n]; !ok || p.DeletionTimestamp != nil || p.UID == before[n].UID {
				return fmt.Errorf("%s not replaced yet", n)
			}
		}
		return nil
	})
	return got
}

// pokeAndAssertNoWrites runs a pass of a converged PodSet (a label the
// operator does not own, on one of its pods) and checks it sends no write
// at all: no pod, no status, no ControllerRevision. The passes before it
// end first (repairPass), so that none of their writes counts.
func pokeAndAssertNoWrites(t *testing.T, ps *podsetv1alpha1.PodSet, pod string) {
	t.Helper()
	ns := ps.Namespace
	repairPass(t, pods(t, ns)[pod])
	podWrites := requests.writes(ns, "pods", "")
	statusWrites := requests.writes(ns, "podsets", "status")
	revisionWrites := requests.writes(ns, "controllerrevisions", "")
	psBefore := get(t, ps)
	revsBefore := controllerRevisions(t, ns)

	pokeForAPass(t, pods(t, ns)[pod])
	podWrites++ // pokeForAPass's repair

	for _, w := range []struct {
		what        string
		before, now int
	}{
		{"pod", podWrites, requests.writes(ns, "pods", "")},
		{"status", statusWrites, requests.writes(ns, "podsets", "status")},
		{"ControllerRevision", revisionWrites, requests.writes(ns, "controllerrevisions", "")},
	} {
		if d := w.now - w.before; d != 0 {
			t.Errorf("a converged pass sent %d %s writes, want 0", d, w.what)
		}
	}
	if get(t, ps).ResourceVersion != psBefore.ResourceVersion {
		t.Errorf("the PodSet changed in a converged pass")
	}
	revsAfter := controllerRevisions(t, ns)
	if diff := cmp.Diff(revisionNames(revsBefore), revisionNames(revsAfter)); diff != "" {
		t.Errorf("ControllerRevisions changed in a converged pass (-before +after):\n%s", diff)
	}
	for name, cr := range revsAfter {
		if cr.ResourceVersion != revsBefore[name].ResourceVersion {
			t.Errorf("ControllerRevision %s changed in a converged pass", name)
		}
	}
}

func TestProgressDeadlineStallsUnschedulablePodsAndTheFixRecovers(t *testing.T) {
	waitsOnTheClock(t)
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	// No node has the label: the scheduler leaves the pods Pending.
	ps := fixture.PodSet(ns, "web").Replicas(2).ProgressDeadline(3).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.NodeSelector = map[string]string{"disktype": "nvme"}
	}).Create(t, env.Client)
	stuck := waitForPods(t, ns, "web-0", "web-1")
	playKubelet(t, ns, "web-0", unschedulable)
	playKubelet(t, ns, "web-1", unschedulable)

	got := waitForStatus(t, ps, stalledFor(podsetv1alpha1.ProgressDeadlineExceededReason))
	stalled := testenv.Condition(got, podsetv1alpha1.StalledCondition)
	if c := testenv.Condition(got, podsetv1alpha1.ReadyCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v while stalled, want False", c)
	}
	if c := testenv.Condition(got, podsetv1alpha1.ReconcilingCondition); c.Status != metav1.ConditionFalse || c.Reason != podsetv1alpha1.ProgressDeadlineExceededReason {
		t.Errorf("Reconciling = %+v while stalled, want False/ProgressDeadlineExceeded", c)
	}
	wantSaid(t, "Stalled message", stalled.Message,
		"no progress for 3s (spec.progressDeadlineSeconds)",
		"0/2 pods available",
		"web-0, web-1: Unschedulable: "+schedulerMessage,
	)
	switch lp := got.Status.LastProgressTime; {
	case lp == nil:
		t.Errorf("status.lastProgressTime is not set")
	case stalled.LastTransitionTime.Sub(lp.Time) < 3*time.Second:
		t.Errorf("Stalled at %s, less than progressDeadlineSeconds after the last progress at %s", stalled.LastTransitionTime, lp)
	}

	// One Warning event says so.
	eventually(t, "a ProgressDeadlineExceeded event", func(context.Context) error {
		if len(deadlineEvents(t, ps)) == 0 {
			return fmt.Errorf("no ProgressDeadlineExceeded event")
		}
		return nil
	})
	if e := deadlineEvents(t, ps)[0]; !strings.Contains(e.Note, "web-0, web-1: Unschedulable") {
		t.Errorf("event note %q does not name the stuck pods", e.Note)
	}

	// More passes while stalled: web-0 gets a node and fails its readiness
	// probe (a phase change, which runs a pass). The message follows what
	// the pods report; the event is not sent again.
	playKubelet(t, ns, "web-0", readinessProbeFailing)
	got = waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		msg := testenv.Condition(got, podsetv1alpha1.StalledCondition).Message
		if !strings.Contains(msg, "web-0: ContainersNotReady: containers with unready status: [app]") ||
			!strings.Contains(msg, "web-1: Unschedulable: ") {
			return fmt.Errorf("Stalled message %q does not follow the pods", msg)
		}
		return stalledFor(podsetv1alpha1.ProgressDeadlineExceededReason)(got)
	})
	pokeAndAssertNoWrites(t, got, "web-1") // one more pass, and nothing to write
	assertOneDeadlineEvent(t, ps)

	// Fixing the template is progress: the PodSet is Reconciling again at
	// once, replaces the pods that never ran and turns Ready once they are.
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.NodeSelector = nil })
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		rec, st := testenv.Condition(got, podsetv1alpha1.ReconcilingCondition), testenv.Condition(got, podsetv1alpha1.StalledCondition)
		if got.Status.ObservedGeneration != got.Generation || rec.Status != metav1.ConditionTrue || st.Status != metav1.ConditionFalse {
			return fmt.Errorf("Reconciling %+v, Stalled %+v at generation %d/%d, want Reconciling=True, Stalled=False",
				rec, st, got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
	fixed := waitForReplacement(t, ns, stuck, "web-0", "web-1")
	for _, name := range []string{"web-0", "web-1"} {
		if sel := fixed[name].Spec.NodeSelector; len(sel) != 0 {
			t.Errorf("%s has nodeSelector %v, want the fixed template's none", name, sel)
		}
		markReady(t, fixed[name])
	}
	got = waitForStatus(t, ps, healthy(2, 2))
	if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled = %+v once Ready, want False", c)
	}
	assertOneDeadlineEvent(t, ps)
}

func TestProgressDeadlineMessageSaysWhatTheKubeletReports(t *testing.T) {
	waitsOnTheClock(t)
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Replicas(4).ProgressDeadline(3).Create(t, env.Client)
	waitForPods(t, ns, "web-0", "web-1", "web-2", "web-3")
	playKubelet(t, ns, "web-0", imagePullBackOff)
	playKubelet(t, ns, "web-1", imagePullBackOff)
	playKubelet(t, ns, "web-2", crashLoopBackOff)
	playKubelet(t, ns, "web-3", readinessProbeFailing)

	deadlinePassedSaying(t, ps,
		"0/4 pods available",
		// Pods with the same problem together.
		"web-0, web-1: container app: ImagePullBackOff",
		"web-2: container app: CrashLoopBackOff (last exit: Error, code 1)",
		"web-3: ContainersNotReady: containers with unready status: [app]",
	)

	// The pods recover by themselves (the registry came back, the
	// dependency answered): progress clears the stall with no new spec.
	markAllReady(t, ns)
	got := waitForStatus(t, ps, healthy(4, 4))
	if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled = %+v once Ready, want False", c)
	}
}

func TestMinReadySecondsDelaysAvailability(t *testing.T) {
	waitsOnTheClock(t)
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").MinReadySeconds(3).Create(t, env.Client)
	markReady(t, waitForPods(t, ns, "web-0")["web-0"])
	// The operator opens a new pod's readiness gate right after creating
	// it, a write that may land after markReady's: the pod is as it stays
	// once the gate is open.
	var readyPod corev1.Pod
	eventually(t, "web-0 Ready with its gate open", func(context.Context) error {
		readyPod = pods(t, ns)["web-0"]
		gate := podCondition(&readyPod, podsetv1alpha1.InPlaceUpdateReadyCondition)
		ready := podCondition(&readyPod, corev1.PodReady)
		if gate == nil || gate.Status != corev1.ConditionTrue || ready == nil || ready.Status != corev1.ConditionTrue {
			return fmt.Errorf("gate %+v, Ready %+v", gate, ready)
		}
		return nil
	})

	got := waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ReadyReplicas != 1 {
			return fmt.Errorf("readyReplicas %d, want 1", got.Status.ReadyReplicas)
		}
		return nil
	})
	if got.Status.AvailableReplicas != 0 || testenv.Condition(got, podsetv1alpha1.ReadyCondition).Status != metav1.ConditionFalse {
		t.Errorf("right after its pod turned Ready: availableReplicas %d, Ready %s; want 0 and False (minReadySeconds 3)",
			got.Status.AvailableReplicas, testenv.Condition(got, podsetv1alpha1.ReadyCondition).Status)
	}

	// Nothing happens to the pod or the PodSet from now on: the operator
	// wakes by itself when the pod has been Ready for minReadySeconds.
	waitForStatus(t, ps, healthy(1, 1))
	if rv := pods(t, ns)["web-0"].ResourceVersion; rv != readyPod.ResourceVersion {
		t.Errorf("pod web-0 changed while it became available (resourceVersion %s, was %s)", rv, readyPod.ResourceVersion)
	}
}

func TestMinReadySecondsPacesARollout(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Recreate().Replicas(2).MaxUnavailable(1).MinReadySeconds(3).Create(t, env.Client)
	waitForPods(t, ns, "web-0", "web-1")
	// Pods that have served for a while.
	playKubelet(t, ns, "web-0", readyFor(time.Minute))
	playKubelet(t, ns, "web-1", readyFor(time.Minute))
	waitForStatus(t, ps, healthy(2, 2))
	before := pods(t, ns)

	setImage(t, ps, "busybox:1.37")
	markReady(t, waitForImage(t, ns, "web-1", "busybox:1.37"))
	// The operator has seen the new web-1 Ready, but it is not available
	// yet, and maxUnavailable 1 counts it: web-0 waits.
	got := waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ObservedGeneration != got.Generation || got.Status.ReadyReplicas != 2 || got.Status.UpdatedReplicas != 1 {
			return fmt.Errorf("status %+v, want 2 ready, 1 updated", got.Status)
		}
		return nil
	})
	if got.Status.AvailableReplicas != 1 {
		t.Errorf("availableReplicas %d right after the new web-1 turned Ready, want 1", got.Status.AvailableReplicas)
	}
	assertUntouched(t, ns, before, "web-0")

	// Once web-1 is available, with nothing else happening, web-0 goes.
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.37"))
	waitForStatus(t, ps, healthy(2, 2))
}

func TestPartitionHoldsLowerOrdinalsThroughADeletion(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(4).MaxUnavailable(1).Partition(2))
	before := pods(t, ns)
	oldHash := hashOf(before["web-0"])

	// Only ordinals 2 and up take the new template.
	setImage(t, ps, "busybox:1.37")
	markReady(t, waitForImage(t, ns, "web-3", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-2", "busybox:1.37"))
	got := waitForStatus(t, ps, healthy(4, 2))
	assertUntouched(t, ns, before, "web-0", "web-1")
	now := pods(t, ns)
	newHash := hashOf(now["web-2"])
	wantImages := map[string]string{"web-0": "busybox:1.36", "web-1": "busybox:1.36", "web-2": "busybox:1.37", "web-3": "busybox:1.37"}
	wantHashes := map[string]string{"web-0": oldHash, "web-1": oldHash, "web-2": newHash, "web-3": newHash}
	gotImages, gotHashes := map[string]string{}, map[string]string{}
	for name, p := range now {
		gotImages[name], gotHashes[name] = image(p), hashOf(p)
	}
	if diff := cmp.Diff(wantImages, gotImages); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantHashes, gotHashes); diff != "" {
		t.Errorf("template hashes (-want +got):\n%s", diff)
	}
	if msg := testenv.Condition(got, podsetv1alpha1.ReadyCondition).Message; !strings.Contains(msg, "2 pods run an older template (partition 2") {
		t.Errorf("Ready message %q does not say 2 pods are held back by the partition", msg)
	}
	if want := "web-" + oldHash; got.Status.CurrentRevision != want {
		t.Errorf("currentRevision %q, want %q (what web-0 and web-1 run)", got.Status.CurrentRevision, want)
	}
	if want := "web-" + newHash; got.Status.UpdateRevision != want {
		t.Errorf("updateRevision %q, want %q", got.Status.UpdateRevision, want)
	}
	revs := controllerRevisions(t, ns)
	for _, name := range []string{got.Status.CurrentRevision, got.Status.UpdateRevision} {
		cr, ok := revs[name]
		switch {
		case !ok:
			t.Errorf("no ControllerRevision %s; have %v", name, revisionNames(revs))
		case !metav1.IsControlledBy(&cr, got):
			t.Errorf("ControllerRevision %s is not controlled by the PodSet: %+v", name, cr.OwnerReferences)
		case cr.Labels[podsetv1alpha1.NameLabel] != "web" || "web-"+cr.Labels[podsetv1alpha1.TemplateHashLabel] != name:
			t.Errorf("ControllerRevision %s labels %v", name, cr.Labels)
		}
	}
	if revs[got.Status.UpdateRevision].Revision <= revs[got.Status.CurrentRevision].Revision {
		t.Errorf("revision numbers: update %d, current %d; want the update revision newer",
			revs[got.Status.UpdateRevision].Revision, revs[got.Status.CurrentRevision].Revision)
	}

	// A held-back pod that is deleted comes back on the revision it ran.
	forceDelete(t, now["web-0"])
	web0 := waitForReplacement(t, ns, now, "web-0")["web-0"]
	if image(web0) != "busybox:1.36" || hashOf(web0) != oldHash {
		t.Errorf("web-0 recreated with image %s, hash %s; want the old busybox:1.36, %s", image(web0), hashOf(web0), oldHash)
	}
	markReady(t, web0)
	waitForStatus(t, ps, healthy(4, 2))
	assertUntouched(t, ns, now, "web-1", "web-2", "web-3")

	// Lowering the partition continues the rollout.
	setPartition(t, ps, 0)
	markReady(t, waitForImage(t, ns, "web-1", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.37"))
	got = waitForStatus(t, ps, healthy(4, 4))
	if got.Status.CurrentRevision != got.Status.UpdateRevision || got.Status.UpdateRevision != "web-"+newHash {
		t.Errorf("currentRevision %q, updateRevision %q; want both web-%s", got.Status.CurrentRevision, got.Status.UpdateRevision, newHash)
	}
}

func TestRevisionHistoryLimitKeepsRevisionsInUse(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	// Partition 1 keeps web-0 on the first template throughout.
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(2).MaxUnavailable(1).Partition(1).RevisionHistoryLimit(1))
	first := ps.Status.UpdateRevision
	firstUID := controllerRevisions(t, ns)[first].UID

	revisions := []string{first}
	for _, img := range []string{"busybox:1.37", "busybox:1.38", "busybox:1.35"} {
		setImage(t, ps, img)
		markReady(t, waitForImage(t, ns, "web-1", img))
		got := waitForStatus(t, ps, healthy(2, 1))
		revisions = append(revisions, got.Status.UpdateRevision)
		// The revision web-0 runs is never deleted.
		if cr, ok := controllerRevisions(t, ns)[first]; !ok || cr.UID != firstUID {
			t.Fatalf("after rolling out %s the ControllerRevision %s that web-0 runs is gone", img, first)
		}
		if h := hashOf(pods(t, ns)["web-0"]); "web-"+h != first {
			t.Fatalf("web-0 runs %s, want %s", h, first)
		}
	}
	// In use: the first (web-0) and the last (web-1); of the others, one,
	// the newest, is kept.
	want := []string{revisions[0], revisions[2], revisions[3]}
	slices.Sort(want)
	eventually(t, "revisions pruned to the limit", func(context.Context) error {
		if got := revisionNames(controllerRevisions(t, ns)); !slices.Equal(got, want) {
			return fmt.Errorf("ControllerRevisions %v, want %v", got, want)
		}
		return nil
	})

	// Once web-0 moves on too, its old revision is the oldest unused one.
	setPartition(t, ps, 0)
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.35"))
	waitForStatus(t, ps, healthy(2, 2))
	want = []string{revisions[2], revisions[3]}
	slices.Sort(want)
	eventually(t, "revisions pruned to the limit", func(context.Context) error {
		if got := revisionNames(controllerRevisions(t, ns)); !slices.Equal(got, want) {
			return fmt.Errorf("ControllerRevisions %v, want %v", got, want)
		}
		return nil
	})
}

func TestRollbackMakesTheOldRevisionTheNewest(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(2).MaxUnavailable(1))
	revA := ps.Status.UpdateRevision
	crA := controllerRevisions(t, ns)[revA]

	setImage(t, ps, "busybox:1.37")
	markReady(t, waitForImage(t, ns, "web-1", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.37"))
	revB := waitForStatus(t, ps, healthy(2, 2)).Status.UpdateRevision
	if revB == revA {
		t.Fatalf("the new template has the old revision %s", revA)
	}

	// Back to the first template: the pods end on it, and its revision,
	// the same object renumbered, is the newest, as StatefulSet does.
	setImage(t, ps, "busybox:1.36")
	markReady(t, waitForImage(t, ns, "web-1", "busybox:1.36"))
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.36"))
	got := waitForStatus(t, ps, healthy(2, 2))
	if got.Status.UpdateRevision != revA || got.Status.CurrentRevision != revA {
		t.Errorf("currentRevision %q, updateRevision %q; want both %q", got.Status.CurrentRevision, got.Status.UpdateRevision, revA)
	}
	for name, p := range pods(t, ns) {
		if "web-"+hashOf(p) != revA {
			t.Errorf("%s runs revision web-%s, want %s", name, hashOf(p), revA)
		}
	}
	revs := controllerRevisions(t, ns)
	a, b := revs[revA], revs[revB]
	if a.UID != crA.UID {
		t.Errorf("ControllerRevision %s was recreated; want the same object renumbered", revA)
	}
	if a.Revision <= b.Revision {
		t.Errorf("revision numbers after the rollback: %s %d, %s %d; want %s the newest", revA, a.Revision, revB, b.Revision, revA)
	}
	// Renumbered once: a converged pass does not write it again.
	pokeAndAssertNoWrites(t, got, "web-0")
}

func TestConvergedPassSendsNoWrite(t *testing.T) {
	const n = 10
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Recreate().Replicas(n).MaxUnavailable(5).MinReadySeconds(1).Create(t, env.Client)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("web-%d", i)
	}
	waitForPods(t, ns, names...)
	for _, name := range names {
		playKubelet(t, ns, name, readyFor(time.Minute))
	}
	waitForStatus(t, ps, healthy(n, n))
	pokeAndAssertNoWrites(t, ps, "web-0")

	// A staged rollout at rest: two revisions in use, half of the pods
	// held back by the partition.
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](n / 2)
		ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	})
	eventually(t, "staged rollout", func(context.Context) error {
		updated := 0
		for _, p := range pods(t, ns) {
			if p.DeletionTimestamp != nil || image(p) != "busybox:1.37" {
				continue
			}
			if !testenv.RunningAndReady(&p) {
				markReady(t, p)
			}
			updated++
		}
		if updated != n/2 {
			return fmt.Errorf("%d of %d pods updated", updated, n/2)
		}
		return healthy(n, n/2)(get(t, ps))
	})
	pokeAndAssertNoWrites(t, ps, "web-0")
}

// ready is a pod whose container runs and passes its readiness probe, Ready
// from now.
func ready(status *corev1.PodStatus) { readyFor(0)(status) }

// readyFor is a pod Ready for d already: a pod that has served for a while.
func readyFor(d time.Duration) func(*corev1.PodStatus) {
	return func(status *corev1.PodStatus) { readySince(status, metav1.NewTime(time.Now().Add(-d))) }
}

func readySince(status *corev1.PodStatus, now metav1.Time) {
	status.Phase = corev1.PodRunning
	status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", Image: "busybox:1.36", Started: ptr.To(true), Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}
}

func TestProgressDeadlineStallsABrokenRolloutAndARollbackRecovers(t *testing.T) {
	waitsOnTheClock(t)
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(3).MaxUnavailable(1).ProgressDeadline(3))
	revA := ps.Status.UpdateRevision
	before := pods(t, ns)

	// The new image never pulls: the first new pod is stuck, and the
	// rollout with it.
	setImage(t, ps, "registry.example/app:missing")
	waitForImage(t, ns, "web-2", "registry.example/app:missing")
	playKubelet(t, ns, "web-2", imagePullBackOff)
	deadlinePassedSaying(t, ps,
		"2/3 pods available",
		"web-0, web-1: waiting to be updated",
		"web-2: container app: ImagePullBackOff",
	)
	assertUntouched(t, ns, before, "web-0", "web-1")

	// Rolling back is progress: the stuck pod is replaced from the old
	// template, the others already run it and stay.
	setImage(t, ps, "busybox:1.36")
	stuck := pods(t, ns)
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ObservedGeneration != got.Generation || testenv.Condition(got, podsetv1alpha1.StalledCondition).Status != metav1.ConditionFalse {
			return fmt.Errorf("Stalled %+v at generation %d/%d", testenv.Condition(got, podsetv1alpha1.StalledCondition), got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
	markReady(t, waitForReplacement(t, ns, stuck, "web-2")["web-2"])
	got := waitForStatus(t, ps, healthy(3, 3))
	assertUntouched(t, ns, before, "web-0", "web-1")
	if got.Status.CurrentRevision != revA || got.Status.UpdateRevision != revA {
		t.Errorf("currentRevision %q, updateRevision %q after the rollback; want both %q", got.Status.CurrentRevision, got.Status.UpdateRevision, revA)
	}
}

func TestProgressDeadlineIsNotHeldOffByAPodFlappingReady(t *testing.T) {
	waitsOnTheClock(t)
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").MinReadySeconds(2).ProgressDeadline(3).Create(t, env.Client)
	waitForPods(t, ns, "web-0")

	// The container crashes within a second of each Ready: never
	// available, so never progress.
	var got *podsetv1alpha1.PodSet
	eventually(t, "stalled while flapping", func(context.Context) error {
		playKubelet(t, ns, "web-0", ready)
		time.Sleep(300 * time.Millisecond)
		playKubelet(t, ns, "web-0", crashLoopBackOff)
		time.Sleep(300 * time.Millisecond)
		got = get(t, ps)
		if got.Status.AvailableReplicas != 0 {
			t.Fatalf("availableReplicas %d for a pod never Ready for minReadySeconds", got.Status.AvailableReplicas)
		}
		return stalledFor(podsetv1alpha1.ProgressDeadlineExceededReason)(got)
	})
	if msg := testenv.Condition(got, podsetv1alpha1.StalledCondition).Message; !strings.Contains(msg, "0/1 pods available; web-0: ") {
		t.Errorf("Stalled message %q does not name web-0", msg)
	}

	// It stays up: available after minReadySeconds, which is progress.
	playKubelet(t, ns, "web-0", ready)
	got = waitForStatus(t, ps, healthy(1, 1))
	if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Stalled = %+v once Ready, want False", c)
	}
}

func TestPartitionRecreatesEachHeldBackPodFromItsOwnRevision(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(4).MaxUnavailable(1).Partition(3))
	revA := ps.Status.UpdateRevision

	// B reaches web-3, then, the partition lowered, web-2; then C comes
	// with the partition back at 3: three revisions live at once.
	setImage(t, ps, "busybox:1.37")
	markReady(t, waitForImage(t, ns, "web-3", "busybox:1.37"))
	revB := waitForStatus(t, ps, healthy(4, 1)).Status.UpdateRevision
	setPartition(t, ps, 2)
	markReady(t, waitForImage(t, ns, "web-2", "busybox:1.37"))
	waitForStatus(t, ps, healthy(4, 2))
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](3)
		ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.38"
	})
	markReady(t, waitForImage(t, ns, "web-3", "busybox:1.38"))
	got := waitForStatus(t, ps, healthy(4, 1))
	if got.Status.CurrentRevision != revA {
		t.Errorf("currentRevision %q, want %q, the oldest pods'", got.Status.CurrentRevision, revA)
	}

	// Each held-back pod, deleted, comes back on the revision it ran.
	before := pods(t, ns)
	forceDelete(t, before["web-2"])
	forceDelete(t, before["web-1"])
	after := waitForReplacement(t, ns, before, "web-1", "web-2")
	for name, want := range map[string]string{"web-1": revA, "web-2": revB} {
		if got := "web-" + hashOf(after[name]); got != want {
			t.Errorf("%s recreated on %s (image %s), want %s", name, got, image(after[name]), want)
		}
	}
	markReady(t, after["web-1"])
	markReady(t, after["web-2"])
	waitForStatus(t, ps, healthy(4, 1))
	for _, rev := range []string{revA, revB} {
		if _, ok := controllerRevisions(t, ns)[rev]; !ok {
			t.Errorf("ControllerRevision %s, which held-back pods run, is gone", rev)
		}
	}
}

func TestProgressDeadlineEventIsSentForALongSchedulerMessage(t *testing.T) {
	waitsOnTheClock(t)
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").ProgressDeadline(3).Create(t, env.Client)
	waitForPods(t, ns, "web-0")
	// A cluster of dedicated node pools: the scheduler names every taint
	// the pod does not tolerate.
	var taints []string
	for i := range 20 {
		taints = append(taints, fmt.Sprintf("1 node(s) had untolerated taint {dedicated.example.com/team-%02d: reserved}", i))
	}
	long := "0/40 nodes are available: " + strings.Join(taints, ", ") +
		", 20 node(s) didn't match Pod's node affinity/selector. preemption: 0/40 nodes are available: 40 Preemption is not helpful for scheduling."
	playKubelet(t, ns, "web-0", func(status *corev1.PodStatus) {
		unschedulable(status)
		status.Conditions[0].Message = long
	})

	got := waitForStatus(t, ps, stalledFor(podsetv1alpha1.ProgressDeadlineExceededReason))
	if msg := testenv.Condition(got, podsetv1alpha1.StalledCondition).Message; !strings.Contains(msg, "web-0: Unschedulable: "+long) {
		t.Errorf("Stalled message %q does not carry the scheduler's message", msg)
	}
	// The alert still goes out, however long the message (an event's note
	// holds at most 1024 bytes).
	eventually(t, "a ProgressDeadlineExceeded event", func(context.Context) error {
		if len(deadlineEvents(t, ps)) == 0 {
			return fmt.Errorf("no ProgressDeadlineExceeded event")
		}
		return nil
	})
	assertOneDeadlineEvent(t, ps)
	if note := deadlineEvents(t, ps)[0].Note; !strings.Contains(note, "web-0") {
		t.Errorf("event note %q does not name the stuck pod", note)
	}
}
