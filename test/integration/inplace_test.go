package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// In-place updates against the real API server. envtest has no kubelet:
// fakeKubelet plays one for a namespace with testenv.KubeletStatus, the way
// the local cluster's kwok stages do: containers report the image their
// spec names (a changed image restarts the container), cpu and memory
// follow a resize unless the test makes it Infeasible, and Ready is True
// only when every readiness gate's condition is True.

// fakeKubelet keeps the pods of a namespace Running as a kubelet would,
// until the test ends, and records what a user would notice.
type fakeKubelet struct {
	t  *testing.T
	ns string

	mu sync.Mutex
	// paused stops it from touching pods (a kubelet that is slow).
	paused bool
	// infeasible makes every resize of a pod Infeasible.
	infeasible bool
	// slow holds back what the spec changed in containers, as a kubelet
	// pulling an image or carrying out a resize does: a new image is
	// reported Waiting (ContainerCreating), a resize in progress.
	slow bool
	// openWhileSlow names every pod seen with its gate open while a
	// change was held back.
	openWhileSlow map[string]bool
	// restarts lists, per restart of a container for a new image, the pod
	// and whether it was still Ready (in Service endpoints) then.
	restarts []restart
	// maxGated is the most pods seen at once with the operator's gate
	// closed.
	maxGated int
	// gated lists every pod ever seen with its gate closed.
	gated map[string]bool
}

type restart struct {
	pod   string
	ready bool
}

// kubeletNamespace is a new namespace with a stand-in kubelet
// (startKubelet) running its pods.
func kubeletNamespace(t *testing.T) (string, *fakeKubelet) {
	t.Helper()
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	return ns, startKubelet(t, ns)
}

func startKubelet(t *testing.T, ns string) *fakeKubelet {
	k := &fakeKubelet{t: t, ns: ns, gated: map[string]bool{}, openWhileSlow: map[string]bool{}}
	repeat(t, 20*time.Millisecond, k.sync)
	return k
}

// repeat calls f every interval in a goroutine of its own until the stop
// it returns is called or the test ends, and waits for the last call.
func repeat(t *testing.T, interval time.Duration, f func()) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
			f()
		}
	}()
	stop = sync.OnceFunc(func() { close(done); <-stopped })
	t.Cleanup(stop)
	return stop
}

func (k *fakeKubelet) pause(p bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.paused = p
}

func (k *fakeKubelet) sync() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.paused {
		return
	}
	list := &corev1.PodList{}
	if err := env.Client.List(k.t.Context(), list, client.InNamespace(k.ns)); err != nil {
		return
	}
	gated := 0
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		if c := podCondition(pod, podsetv1alpha1.InPlaceUpdateReadyCondition); c != nil && c.Status == corev1.ConditionFalse {
			gated++
			k.gated[pod.Name] = true
		}
		wasReady := podCondition(pod, corev1.PodReady) != nil && podCondition(pod, corev1.PodReady).Status == corev1.ConditionTrue
		status, restarted := testenv.KubeletStatus(pod, k.infeasible)
		if k.slow && holdBack(pod, &status) {
			restarted = nil
			if c := podCondition(pod, podsetv1alpha1.InPlaceUpdateReadyCondition); c != nil && c.Status == corev1.ConditionTrue {
				k.openWhileSlow[pod.Name] = true
			}
		}
		for range restarted {
			k.restarts = append(k.restarts, restart{pod: pod.Name, ready: wasReady})
		}
		if !equality.Semantic.DeepEqual(status, pod.Status) {
			pod.Status = status
			_ = env.Client.Status().Update(k.t.Context(), pod)
		}
	}
	k.maxGated = max(k.maxGated, gated)
}

// setSlow makes the kubelet hold back container changes, or carry them out.
func (k *fakeKubelet) setSlow(slow bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.slow = slow
}

// holdBack turns the status a kubelet reports once it has carried out the
// pod's container changes into the one it reports while it still works on
// them, and reports whether there were any: a container on a new image is
// Waiting to be created on it, one being resized reports its old resources
// and the pod a resize in progress.
func holdBack(pod *corev1.Pod, status *corev1.PodStatus) bool {
	held := false
	resizing := false
	for i := range status.ContainerStatuses {
		cs := &status.ContainerStatuses[i]
		j := slices.IndexFunc(pod.Status.ContainerStatuses, func(o corev1.ContainerStatus) bool { return o.Name == cs.Name })
		if j < 0 {
			continue
		}
		old := pod.Status.ContainerStatuses[j]
		if old.Image != cs.Image || old.State.Waiting != nil {
			held = true
			*cs = old
			cs.Image = status.ContainerStatuses[i].Image
			cs.Ready = false
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}
		if old.Resources != nil && cs.Resources != nil && !equality.Semantic.DeepEqual(*old.Resources, *cs.Resources) {
			held, resizing = true, true
			cs.Resources = old.Resources
			cs.RestartCount = old.RestartCount
			cs.State = old.State
		}
	}
	if resizing {
		status.Conditions = append(status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	}
	if held {
		for i := range status.Conditions {
			if status.Conditions[i].Type == corev1.ContainersReady || status.Conditions[i].Type == corev1.PodReady {
				status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	}
	return held
}

func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// report is what the kubelet saw: restarts of Ready pods, the most pods
// gated at once, and which pods were ever gated.
func (k *fakeKubelet) report() (readyRestarts []string, maxGated int, gated []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range k.restarts {
		if r.ready {
			readyRestarts = append(readyRestarts, r.pod)
		}
	}
	return readyRestarts, k.maxGated, slices.Sorted(maps.Keys(k.gated))
}

// uids is each live pod's UID by name.
func uids(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for name, p := range pods(t, ns) {
		if p.DeletionTimestamp == nil {
			out[name] = p.UID
		}
	}
	return out
}

// wantSamePods checks that the live pods of ns are still the ones of
// before (from uids): none replaced, none added or gone.
func wantSamePods(t *testing.T, ns string, before map[string]types.UID) {
	t.Helper()
	if after := uids(t, ns); !maps.Equal(before, after) {
		t.Errorf("pods were replaced: UIDs %v, then %v", before, after)
	}
}

// eventuallyEveryPod waits until check passes for every pod of ns at once.
func eventuallyEveryPod(t *testing.T, ns, what string, check func(corev1.Pod) error) {
	t.Helper()
	eventually(t, what, func(context.Context) error {
		for _, p := range pods(t, ns) {
			if err := check(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// changeTemplate updates a PodSet's template (a new revision).
func changeTemplate(t *testing.T, ps *podsetv1alpha1.PodSet, change func(*corev1.PodTemplateSpec)) {
	t.Helper()
	eventually(t, "change the template of "+ps.Name, func(context.Context) error {
		cur := get(t, ps)
		change(&cur.Spec.Template)
		return env.Client.Update(t.Context(), cur)
	})
}

// wantEvent checks that a Normal event about a PodSet with the reason has
// a note that contains want.
func wantEvent(t *testing.T, ps *podsetv1alpha1.PodSet, reason, want, problem string) {
	t.Helper()
	// Events are written by the recorder's broadcaster after the pass
	// that emits them, so a loaded machine may show them later.
	eventually(t, "an event "+reason+" saying "+want, func(context.Context) error {
		if notes := strings.Join(eventNotes(t, ps, corev1.EventTypeNormal, reason), "\n"); !strings.Contains(notes, want) {
			return fmt.Errorf("%s; events:\n%s", problem, notes)
		}
		return nil
	})
}

// eventNotes lists the notes of the events of a type (Normal, Warning)
// about a PodSet with a reason.
func eventNotes(t *testing.T, ps *podsetv1alpha1.PodSet, eventType, reason string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ps.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Type == eventType && e.Regarding.Name == ps.Name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// waitForRollout waits until every pod of the namespace runs image, as its
// spec and its status say, and the PodSet is Ready with all pods updated.
func waitForRollout(t *testing.T, ps *podsetv1alpha1.PodSet, image string) {
	t.Helper()
	eventually(t, "every pod on "+image, func(context.Context) error {
		for name, p := range pods(t, ps.Namespace) {
			if p.Spec.Containers[0].Image != image || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Image != image {
				return fmt.Errorf("%s still on %s", name, p.Spec.Containers[0].Image)
			}
		}
		return nil
	})
	waitForStatus(t, ps, readyStatus(replicas(ps)))
}

func replicas(ps *podsetv1alpha1.PodSet) int32 { return ptr.Deref(ps.Spec.Replicas, 1) }

func TestImageChangeUpdatesPodsInPlaceBehindTheirGate(t *testing.T) {
	t.Parallel()
	ns, kubelet := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(3).MaxUnavailable(1))
	before := uids(t, ns)
	applies := requests.count("PATCH", ns, "pods", "")
	statuses := requests.count("PATCH", ns, "pods", "status")

	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
	waitForRollout(t, ps, "busybox:1.37")

	wantSamePods(t, ns, before)
	if n := requests.count("PATCH", ns, "pods", "") - applies; n != 3 {
		t.Errorf("%d pod writes for an image rollout of 3 pods, want 3", n)
	}
	if n := requests.count("PATCH", ns, "pods", "status") - statuses; n != 6 {
		t.Errorf("%d gate condition writes for an image rollout of 3 pods, want 6 (closed, then open again)", n)
	}
	if n := requests.count("DELETE", ns, "pods", ""); n != 0 {
		t.Errorf("%d pod deletes during an image rollout, want 0", n)
	}
	readyRestarts, maxGated, gated := kubelet.report()
	if len(readyRestarts) > 0 {
		t.Errorf("containers of pods %v restarted while their pod was Ready (in Service endpoints)", readyRestarts)
	}
	if maxGated > 1 {
		t.Errorf("%d pods were out of Ready for the update at once, want at most maxUnavailable 1", maxGated)
	}
	if want := []string{"web-0", "web-1", "web-2"}; !slices.Equal(gated, want) {
		t.Errorf("pods taken out of Ready for the update: %v, want %v", gated, want)
	}
	for _, p := range pods(t, ns) {
		// Open again, without the words of the write that closed it.
		if c := podCondition(&p, podsetv1alpha1.InPlaceUpdateReadyCondition); c == nil || c.Status != corev1.ConditionTrue ||
			c.Reason != podsetv1alpha1.GateOpenReason || c.Message != "" {
			t.Errorf("pod %s gate condition %+v, want True, reason %s and no message", p.Name, c, podsetv1alpha1.GateOpenReason)
		}
		if p.Status.ContainerStatuses[0].RestartCount != 1 {
			t.Errorf("pod %s restart count %d, want 1", p.Name, p.Status.ContainerStatuses[0].RestartCount)
		}
	}
	wantEvent(t, ps, "UpdatedInPlace", "new image for app", "no UpdatedInPlace event names the image change")
}

// The gate opens only once the kubelet has carried out the update: while
// it pulls the new image, or resizes a container whose resizePolicy
// restarts it, the pod stays out of Ready (and Service endpoints).
func TestGateOpensOnlyOnceTheKubeletHasCarriedOutTheUpdate(t *testing.T) {
	t.Parallel()
	restartOnCPU := func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Containers[0].Resources = resources("10m", "16Mi", "100m", "64Mi")
		ps.Spec.Template.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	}
	for name, tc := range map[string]struct {
		change func(*corev1.PodTemplateSpec)
		done   func(*corev1.Pod) bool
	}{
		"a new image": {
			change: func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" },
			done:   func(p *corev1.Pod) bool { return p.Spec.Containers[0].Image == "busybox:1.37" },
		},
		"a resize that restarts the container": {
			change: func(tmpl *corev1.PodTemplateSpec) {
				tmpl.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
			},
			done: func(p *corev1.Pod) bool { return p.Spec.Containers[0].Resources.Limits.Cpu().String() == "200m" },
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns, kubelet := kubeletNamespace(t)
			ps := createRunning(t, fixture.PodSet(ns, "web").Mutate(restartOnCPU))
			before := uids(t, ns)["web-0"]

			kubelet.setSlow(true)
			changeTemplate(t, ps, tc.change)
			eventually(t, "the update applied to web-0", func(context.Context) error {
				if p := pods(t, ns)["web-0"]; !tc.done(&p) {
					return fmt.Errorf("web-0 not updated yet")
				}
				return nil
			})
			// The operator has nothing to wait on but the kubelet now: a
			// few of its passes (pod events, the status interval) go by,
			// and one more that surely ran (a repair of web-0).
			time.Sleep(2 * time.Second)
			repairPass(t, pods(t, ns)["web-0"])
			p := pods(t, ns)["web-0"]
			if c := podCondition(&p, podsetv1alpha1.InPlaceUpdateReadyCondition); c == nil || c.Status != corev1.ConditionFalse {
				t.Errorf("web-0 gate %+v while the kubelet has not carried out the update, want False", c)
			}
			if got := get(t, ps); testenv.Condition(got, podsetv1alpha1.ReadyCondition).Status == metav1.ConditionTrue {
				t.Errorf("PodSet Ready while its pod waits for the kubelet")
			}

			kubelet.setSlow(false)
			waitForStatus(t, ps, readyStatus(1))
			p = pods(t, ns)["web-0"]
			if p.UID != before {
				t.Errorf("web-0 was replaced")
			}
			if c := podCondition(&p, podsetv1alpha1.InPlaceUpdateReadyCondition); c == nil || c.Status != corev1.ConditionTrue {
				t.Errorf("web-0 gate %+v after the update, want True", c)
			}
			if p.Status.ContainerStatuses[0].RestartCount != 1 {
				t.Errorf("web-0 restart count %d, want 1", p.Status.ContainerStatuses[0].RestartCount)
			}
			kubelet.mu.Lock()
			defer kubelet.mu.Unlock()
			if len(kubelet.openWhileSlow) > 0 {
				t.Errorf("gates open while the kubelet was still working on the update: %v", kubelet.openWhileSlow)
			}
			if len(kubelet.restarts) != 1 || kubelet.restarts[0].ready {
				t.Errorf("restarts %+v, want one, of a pod out of Ready", kubelet.restarts)
			}
		})
	}
}

func TestLabelAndAnnotationChangeUpdatesEveryPodAtOnceWithoutRestart(t *testing.T) {
	t.Parallel()
	ns, kubelet := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(3).MaxUnavailable(1))
	before := uids(t, ns)

	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Labels["tier"] = "front"
		tmpl.Annotations = map[string]string{"example.com/owner": "team-a"}
	})
	eventuallyEveryPod(t, ns, "labels and annotations on every pod", func(p corev1.Pod) error {
		if p.Labels["tier"] != "front" || p.Annotations["example.com/owner"] != "team-a" {
			return fmt.Errorf("%s has labels %v, annotations %v", p.Name, p.Labels, p.Annotations)
		}
		return nil
	})
	waitForStatus(t, ps, readyStatus(3))
	wantSamePods(t, ns, before)
	if _, _, gated := kubelet.report(); len(gated) > 0 {
		t.Errorf("pods %v were taken out of Ready for a metadata change", gated)
	}
	for _, p := range pods(t, ns) {
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("pod %s restarted for a metadata change", p.Name)
		}
	}
}

// resources is a container's cpu and memory.
func resources(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(reqCPU), corev1.ResourceMemory: resource.MustParse(reqMem)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limCPU), corev1.ResourceMemory: resource.MustParse(limMem)},
	}
}

func withResources(r corev1.ResourceRequirements) func(*podsetv1alpha1.PodSet) {
	return func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Resources = r }
}

func TestResourceChangeResizesPodsInPlace(t *testing.T) {
	t.Parallel()
	ns, _ := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(2).Mutate(withResources(resources("10m", "16Mi", "100m", "64Mi"))))
	before := uids(t, ns)

	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].Resources = resources("20m", "16Mi", "200m", "64Mi")
	})
	eventuallyEveryPod(t, ns, "pods resized", func(p corev1.Pod) error {
		if cpu := p.Spec.Containers[0].Resources.Limits.Cpu(); cpu.String() != "200m" {
			return fmt.Errorf("%s has a cpu limit of %s", p.Name, cpu)
		}
		return nil
	})
	waitForStatus(t, ps, readyStatus(2))
	wantSamePods(t, ns, before)
	for _, p := range pods(t, ns) {
		if !ownedThroughResize(p) {
			t.Errorf("pod %s: the operator's resize is not on the pods/resize subresource: %v", p.Name, p.ManagedFields)
		}
	}
}

// ownedThroughResize reports whether the operator's field manager owns
// fields of the pod through the resize subresource.
func ownedThroughResize(p corev1.Pod) bool {
	return slices.ContainsFunc(p.ManagedFields, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == "podset-operator" && mf.Subresource == "resize"
	})
}

func TestInfeasibleResizeRecreatesThePod(t *testing.T) {
	t.Parallel()
	ns, kubelet := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Mutate(withResources(resources("10m", "16Mi", "100m", "64Mi"))))
	before := pods(t, ns)

	kubelet.mu.Lock()
	kubelet.infeasible = true
	kubelet.mu.Unlock()
	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].Resources = resources("10m", "16Mi", "64", "64Mi")
	})
	p := waitForReplacement(t, ns, before, "web-0")["web-0"]
	if cpu := p.Spec.Containers[0].Resources.Limits.Cpu(); cpu.String() != "64" {
		t.Errorf("the new web-0 has a cpu limit of %s, want the new template's 64", cpu)
	}
	wantEvent(t, ps, podsetv1alpha1.RollingOutReason, "Infeasible", "no event says the pod was recreated for an Infeasible resize")
}

func TestChangesBeyondImagesAndResourcesRecreatePods(t *testing.T) {
	t.Parallel()
	ns, _ := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(2).MaxUnavailable(2))
	before := pods(t, ns)

	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.Containers[0].Command = []string{"sleep", "3600"}
	})
	for name, p := range waitForReplacement(t, ns, before, "web-0", "web-1") {
		if c := p.Spec.Containers[0].Command; p.DeletionTimestamp == nil && !slices.Equal(c, []string{"sleep", "3600"}) {
			t.Errorf("the new %s runs %v, want the new template's sleep 3600", name, c)
		}
	}
	wantEvent(t, ps, podsetv1alpha1.RollingOutReason, "the template changed beyond images", "no event says why pods were recreated")
}

// TestRecreatePolicyReplacesPodsForAnImage: under podUpdatePolicy
// Recreate an image change recreates the pod, drained first when a slice
// lists it (a Service selects it), and at once, as a ReplicaSet's, when
// nothing routes to it.
func TestRecreatePolicyReplacesPodsForAnImage(t *testing.T) {
	for name, served := range map[string]bool{"served: drained first": true, "no Service: at once": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns, _ := kubeletNamespace(t)
			// Pods whose hook sleeps less than the drain (made before it
			// grew): the gate is how such a pod is drained before it is
			// deleted (one whose hook sleeps the drain is deleted at
			// once: TestScaleDownDrainsReadyPods).
			ps := createRunning(t, fixture.PodSet(ns, "web").Recreate().Mutate(func(ps *podsetv1alpha1.PodSet) { ps.Spec.DrainSeconds = ptr.To[int32](1) }))
			patchSpec(t, ps, `{"spec":{"drainSeconds":3}}`)
			if served {
				testenv.ServeEndpoints(t, env.Client, ns)
			} else {
				// A pod Ready for less than a second may yet be listed
				// by a slice: the operator drains it. This one has been
				// Ready longer.
				readyOlderThan(t, pods(t, ns)["web-0"], 1500*time.Millisecond)
			}
			if p := pods(t, ns)["web-0"]; len(p.Spec.ReadinessGates) != 1 || p.Spec.ReadinessGates[0].ConditionType != podsetv1alpha1.InPlaceUpdateReadyCondition {
				t.Errorf("a pod made under Recreate has readiness gates %v, want the operator's", p.Spec.ReadinessGates)
			}
			before := uids(t, ns)["web-0"]
			changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
			var seen drainSeen
			eventually(t, "web-0 deleted", func(context.Context) error {
				p, ok := pods(t, ns)["web-0"]
				if seen.see(p, ok && p.UID == before, time.Now()) || seen.deleted {
					return nil
				}
				return fmt.Errorf("web-0 %s, gate closed %t", p.UID, gateIs(p, corev1.ConditionFalse))
			})
			if seen.gateClosed != served {
				t.Errorf("web-0's gate closed before its deletion: %t, want %t (a slice lists it: %t)", seen.gateClosed, served, served)
			}
			waitForRollout(t, ps, "busybox:1.37")
			if uids(t, ns)["web-0"] == before {
				t.Errorf("web-0 was updated in place under podUpdatePolicy Recreate")
			}
		})
	}
}

func TestInPlaceRolloutHonoursPartition(t *testing.T) {
	t.Parallel()
	ns, kubelet := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(4).MaxUnavailable(1).Partition(2))
	before := uids(t, ns)

	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
	eventually(t, "pods 2 and 3 updated", func(context.Context) error {
		all := pods(t, ns)
		for _, name := range []string{"web-2", "web-3"} {
			if p := all[name]; len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Image != "busybox:1.37" {
				return fmt.Errorf("%s not updated yet", name)
			}
		}
		return nil
	})
	waitForStatus(t, ps, func(ps *podsetv1alpha1.PodSet) error {
		if ps.Status.UpdatedReplicas != 2 || testenv.Condition(ps, podsetv1alpha1.ReadyCondition).Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v", ps.Status)
		}
		return nil
	})
	all := pods(t, ns)
	for _, name := range []string{"web-0", "web-1"} {
		if image(all[name]) != "busybox:1.36" {
			t.Errorf("%s below the partition runs %s", name, image(all[name]))
		}
	}
	wantSamePods(t, ns, before)
	if _, maxGated, gated := kubelet.report(); maxGated > 1 || !slices.Equal(gated, []string{"web-2", "web-3"}) {
		t.Errorf("pods out of Ready for the update: %v, at most %d at once; want web-2 and web-3, one at a time", gated, maxGated)
	}
}

func TestPodDeletedMidUpdateComesBackOnTheNewRevision(t *testing.T) {
	t.Parallel()
	ns, kubelet := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web"))
	before := uids(t, ns)["web-0"]

	// The kubelet stalls: the gate closes, the kubelet never reports the
	// pod not Ready nor restarts it. Its containers carry the operator's
	// drain hooks, which hold the drain: the operator applies the image
	// without the kubelet's report (the kubelet sees the closed gate
	// first, and reports the pod not Ready as it begins the restart).
	kubelet.pause(true)
	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
	eventually(t, "the gate of web-0 closed and its image applied", func(context.Context) error {
		p := pods(t, ns)["web-0"]
		if c := podCondition(&p, podsetv1alpha1.InPlaceUpdateReadyCondition); c == nil || c.Status != corev1.ConditionFalse {
			return fmt.Errorf("gate %+v", c)
		}
		if image(p) != "busybox:1.37" {
			return fmt.Errorf("web-0 runs %s", image(p))
		}
		return nil
	})
	p := pods(t, ns)["web-0"]
	forceDelete(t, p)
	kubelet.pause(false)
	waitForRollout(t, ps, "busybox:1.37")
	if uids(t, ns)["web-0"] == before {
		t.Errorf("web-0 was not recreated")
	}
}

// TestResizeByAnotherWriterIsKeptThroughARepair is the repro of the
// VerticalPodAutoscaler bug: a pod resized through pods/resize by another
// field manager, then any drift the operator repairs. The repair must not
// send the template's resources again (the API server refuses any change
// of them outside pods/resize, and the PodSet stalled for good). Nor may
// it drop the readiness gate the pod was made with when the PodSet has
// since switched to podUpdatePolicy Recreate (gates are immutable too).
func TestResizeByAnotherWriterIsKeptThroughARepair(t *testing.T) {
	t.Parallel()
	for name, switchToRecreate := range map[string]bool{"InPlaceIfPossible": false, "switched to Recreate": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testResizeKeptThroughARepair(t, switchToRecreate)
		})
	}
}

func testResizeKeptThroughARepair(t *testing.T, switchToRecreate bool) {
	ns := testenv.Namespace(t, env.Client, "podset-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	startKubelet(t, ns)
	ps := createRunning(t, fixture.PodSet(ns, "rz").Mutate(withResources(resources("10m", "16Mi", "100m", "64Mi"))))
	if switchToRecreate {
		eventually(t, "switch to Recreate", func(context.Context) error {
			cur := get(t, ps)
			cur.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
			return env.Client.Update(t.Context(), cur)
		})
		waitForStatus(t, ps, readyStatus(1))
	}
	pod := pods(t, ns)["rz-0"]
	if len(pod.Spec.ReadinessGates) != 1 {
		t.Fatalf("rz-0 has readiness gates %v, want the operator's", pod.Spec.ReadinessGates)
	}

	resize := corev1ac.Pod("rz-0", ns).WithSpec(corev1ac.PodSpec().WithContainers(
		corev1ac.Container().WithName("app").WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}).
			WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}))))
	if err := env.Client.SubResource("resize").Apply(t.Context(), resize, client.FieldOwner("vpa-updater"), client.ForceOwnership); err != nil {
		t.Fatalf("resizing rz-0: %v", err)
	}
	updatePod(t, pod, func(p *corev1.Pod) { delete(p.Labels, podsetv1alpha1.OrdinalLabel) })

	eventually(t, "the ordinal label restored", func(context.Context) error {
		p := pods(t, ns)["rz-0"]
		if p.Labels[podsetv1alpha1.OrdinalLabel] != "0" {
			return fmt.Errorf("labels %v", p.Labels)
		}
		return nil
	})
	waitForStatus(t, ps, readyStatus(1))
	got := pods(t, ns)["rz-0"]
	if got.UID != pod.UID {
		t.Errorf("rz-0 was replaced")
	}
	r := got.Spec.Containers[0].Resources
	if r.Requests.Cpu().String() != "20m" || r.Limits.Cpu().String() != "200m" || r.Requests.Memory().String() != "16Mi" {
		t.Errorf("rz-0 resources %v, want the resized cpu 20m/200m and the template's memory", r)
	}
	if len(got.Spec.ReadinessGates) != 1 {
		t.Errorf("rz-0 readiness gates %v after the repair, want the one it was made with", got.Spec.ReadinessGates)
	}
	if c := testenv.Condition(get(t, ps), podsetv1alpha1.StalledCondition); c.Status == metav1.ConditionTrue {
		t.Errorf("PodSet stalled: %s: %s", c.Reason, c.Message)
	}
	if got := warningEvents(t, ps); len(got) > 0 {
		t.Errorf("warning events %v", got)
	}
}

// A pod made before in-place updates (no readiness gate) is recreated for
// a new image rather than restarted while in Service endpoints.
func TestPodsWithoutTheGateAreRecreatedForAnImage(t *testing.T) {
	t.Parallel()
	ns, _ := kubeletNamespace(t)
	// web-0 as an earlier release made it under Recreate: without the
	// gate (every pod has it now). It is made without the label the
	// operator's cache selects on, so that no pass sees it as surplus
	// before the scale-up, which finds it by name and restores the label.
	ps := fixture.PodSet(ns, "web").Replicas(0).Create(t, env.Client)
	old, err := podset.DesiredPod(get(t, ps), 0)
	if err != nil {
		t.Fatal(err)
	}
	old.Spec.ReadinessGates = nil
	delete(old.Labels, podsetv1alpha1.NameLabel)
	if err := env.Client.Apply(t.Context(), old, client.FieldOwner(controller.FieldManager)); err != nil {
		t.Fatal(err)
	}
	scale(t, ps, 1)
	ps = waitForStatus(t, ps, readyStatus(1))
	if p := pods(t, ns)["web-0"]; len(p.Spec.ReadinessGates) != 0 {
		t.Fatalf("web-0 has readiness gates %v: not the pod made without", p.Spec.ReadinessGates)
	}
	before := uids(t, ns)["web-0"]
	eventually(t, "a new image", func(context.Context) error {
		cur := get(t, ps)
		cur.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		return env.Client.Update(t.Context(), cur)
	})
	waitForRollout(t, ps, "busybox:1.37")
	p := pods(t, ns)["web-0"]
	if p.UID == before {
		t.Errorf("a pod without the readiness gate was restarted in place")
	}
	if len(p.Spec.ReadinessGates) != 1 {
		t.Errorf("the new pod has readiness gates %v, want the operator's", p.Spec.ReadinessGates)
	}
	wantEvent(t, ps, podsetv1alpha1.RollingOutReason, "readiness gate", "no event says the pod lacked the gate")
}

// gateIs reports whether the pod's InPlaceUpdateReady condition has the
// status.
// readyOlderThan waits until the pod's Ready condition is older than age.
func readyOlderThan(t *testing.T, p corev1.Pod, age time.Duration) {
	t.Helper()
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			// Conditions' times are whole seconds: the next one.
			time.Sleep(time.Until(c.LastTransitionTime.Add(time.Second + age)))
			return
		}
	}
	t.Fatalf("pod %s has no Ready condition", p.Name)
}

func gateIs(p corev1.Pod, status corev1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == podsetv1alpha1.InPlaceUpdateReadyCondition {
			return c.Status == status
		}
	}
	return false
}

// TestInPlaceKeepsTheDrainHookThePodWasMadeWith: a pod's lifecycle cannot
// change, so an in-place update of pods made before drainSeconds changed
// (or by a release that gave no hook) sends the preStop sleep they run,
// and the API server accepts it: the pods keep their UIDs and their old
// sleep, and run the new image. The operator drains them itself for the
// part of the drain their sleep does not hold.
func TestInPlaceKeepsTheDrainHookThePodWasMadeWith(t *testing.T) {
	t.Parallel()
	ns, _ := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(2).MaxUnavailable(2).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DrainSeconds = ptr.To[int32](1)
	}))
	before := uids(t, ns)
	patchSpec(t, ps, `{"spec":{"drainSeconds":2}}`)
	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
	waitForRollout(t, ps, "busybox:1.37")
	wantSamePods(t, ns, before)
	for name, p := range pods(t, ns) {
		if l := p.Spec.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 1 {
			t.Errorf("pod %s: lifecycle %+v, want the preStop sleep of 1 s it was made with", name, l)
		}
	}
}
