//go:build node

package node

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
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// endpointLog watches a Service's EndpointSlices and records, for each
// pod, every time it enters and leaves the Service's ready endpoints: what
// kube-proxy routes new connections to.
type endpointLog struct {
	mu     sync.Mutex
	slices map[string][]discoveryv1.Endpoint
	ready  map[string]bool
	// left and entered count each pod's moves out of and into the ready
	// endpoints since the last reset; firstLeft is when each first left.
	left, entered map[string]int
	firstLeft     map[string]time.Time
	leaves        map[string][]time.Time
	// history is every ready set the slices showed, in order.
	history []readySet
}

// readySet is the pods among a Service's ready endpoints from a time on.
type readySet struct {
	from time.Time
	pods []string
}

// watchEndpoints starts an endpointLog of the Service svc in ns, stopped
// when the test ends.
func watchEndpoints(t *testing.T, ns, svc string) *endpointLog {
	t.Helper()
	l := &endpointLog{slices: map[string][]discoveryv1.Endpoint{}, ready: map[string]bool{}}
	l.reset()
	stop := watchEvents(t, func(ctx context.Context, cs kubernetes.Interface) (watch.Interface, error) {
		return cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	}, func(ev watch.Event) {
		if es, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
			l.observe(ev.Type, es)
		}
	})
	t.Cleanup(stop)
	return l
}

// watchPods is testenv.WatchPods on the pods of ns: handle gets each
// pod event and the time it arrived.
func watchPods(t *testing.T, ns string, handle func(typ watch.EventType, p *corev1.Pod, at time.Time)) (stop func()) {
	t.Helper()
	return watchEvents(t, func(ctx context.Context, cs kubernetes.Interface) (watch.Interface, error) {
		return cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	}, testenv.PodEvents(handle))
}

// watchEvents is testenv.WatchEvents on the suite's cluster, for a
// test: it fails the test when the watch cannot start. A watch the API
// server ends (it stopped: TestFaultsMidRollout) is started again.
func watchEvents(t *testing.T, start func(context.Context, kubernetes.Interface) (watch.Interface, error), handle func(watch.Event)) (stop func()) {
	t.Helper()
	cs, err := testenv.NewClientset(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	stop, err = testenv.WatchEvents(context.WithoutCancel(t.Context()), func(ctx context.Context) (watch.Interface, error) { return start(ctx, cs) }, handle)
	if err != nil {
		t.Fatal(err)
	}
	return stop
}

func (l *endpointLog) observe(typ watch.EventType, es *discoveryv1.EndpointSlice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if typ == watch.Deleted {
		delete(l.slices, es.Name)
	} else {
		l.slices[es.Name] = es.Endpoints
	}
	now := map[string]bool{}
	for _, eps := range l.slices {
		for _, ep := range eps {
			if ep.TargetRef != nil && ptr.Deref(ep.Conditions.Ready, false) {
				now[ep.TargetRef.Name] = true
			}
		}
	}
	for pod := range l.ready {
		if !now[pod] {
			l.left[pod]++
			l.leaves[pod] = append(l.leaves[pod], time.Now())
			if _, ok := l.firstLeft[pod]; !ok {
				l.firstLeft[pod] = time.Now()
			}
		}
	}
	for pod := range now {
		if !l.ready[pod] {
			l.entered[pod]++
		}
	}
	l.ready = now
	l.history = append(l.history, readySet{from: time.Now(), pods: slices.Sorted(maps.Keys(now))})
}

// readyAt describes the ready endpoints at a time: the pods, and since
// when the slices showed them.
func (l *endpointLog) readyAt(at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.history) - 1; i >= 0; i-- {
		if h := l.history[i]; !h.from.After(at) {
			return fmt.Sprintf("%v since %s", h.pods, h.from.Format("15:04:05.000"))
		}
	}
	return "unknown"
}

// reset starts counting anew.
func (l *endpointLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.left, l.entered, l.firstLeft, l.leaves = map[string]int{}, map[string]int{}, map[string]time.Time{}, map[string][]time.Time{}
}

// lastLeftBefore is the last time a pod left the ready endpoints before
// at, and whether it did.
func (l *endpointLog) lastLeftBefore(pod string, at time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lastBefore(l.leaves[pod], at)
}

// lastBefore is the last of times before at, and whether there is one.
func lastBefore(times []time.Time, at time.Time) (time.Time, bool) {
	var last time.Time
	for _, t := range times {
		if t.Before(at) {
			last = t
		}
	}
	return last, !last.IsZero()
}

// leftAt is when each pod first left the ready endpoints since the last
// reset.
func (l *endpointLog) leftAt() map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.firstLeft)
}

// moves is how often each pod left and entered the ready endpoints since
// the last reset.
func (l *endpointLog) moves() (left, entered map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.left), maps.Clone(l.entered)
}

// serve puts a ClusterIP Service named after the PodSet in front of its
// pods (port 80 to the app's 8080), waits until it answers, and returns
// its URL.
func serve(t *testing.T, ps *podsetv1alpha1.PodSet) string {
	t.Helper()
	svc := &corev1.Service{}
	svc.Name, svc.Namespace = ps.Name, ps.Namespace
	svc.Spec.Selector = ps.Spec.Template.Labels
	svc.Spec.Ports = []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if err := suite.client.Create(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.Spec.ClusterIP + "/"
	waitAnswers(t, "the Service", url)
	return url
}

// load is what the client of a Service saw during a rollout.
type load struct {
	total    int
	failures []string
	// failedAt is when each failed request was sent.
	failedAt []time.Time
	answers  map[string]int
	// took is how long the rollout took.
	took time.Duration
}

// underLoad sends the client load of startTraffic to url from a second
// before do until a second after the PodSet has rolled out what do
// changed (Ready at its generation, only its replicas left).
func underLoad(t *testing.T, ps *podsetv1alpha1.PodSet, url string, do func()) load {
	t.Helper()
	tr := startTraffic(url)
	time.Sleep(time.Second)
	start := time.Now()
	do()
	waitReady(t, ps)
	waitOnlyReplicas(t, ps)
	took := time.Since(start)
	time.Sleep(time.Second)
	total, failures, answers := tr.finish()
	return load{total: total, failures: failures, failedAt: tr.failedAt, answers: answers, took: took}
}

// firstFailures lists the first ten failed requests, each with the
// Service's ready endpoints when it failed.
func (l load) firstFailures(endpoints *endpointLog) string {
	var b strings.Builder
	for i := range min(len(l.failures), 10) {
		fmt.Fprintf(&b, "%s; ready endpoints when sent: %s\n", l.failures[i], endpoints.readyAt(l.failedAt[i]))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// checkOnly fails unless every answer is one of versions, the last of
// them among them.
func (l load) checkOnly(t *testing.T, versions ...string) {
	t.Helper()
	checkOnly(t, l.answers, versions...)
	if l.answers[versions[len(versions)-1]] == 0 {
		t.Errorf("no answer from %s", versions[len(versions)-1])
	}
}

// TestZeroDroppedRequests: a client sending requests through a ClusterIP
// Service, a new connection every 10 ms, gets an answer to every one,
// from the old or the new version, during every kind of stop the operator
// makes, from an app that has no preStop hook: the operator takes each
// Ready pod out of endpoints (closing its gate for a restart in place, by
// deleting it otherwise), and the kubelet holds each container for
// drainSeconds in the operator's preStop sleep before it stops it.
// During a restart in place, no pod goes back into endpoints before its
// restart: each leaves them once.
//
// The pods spread over the real nodes: with two (make test), each node
// runs half, and every stop is also one across nodes.
//
// It runs alone, before the parallel tests: the others' load on the node
// (two cores here) would make the dataplane's lag a property of the test
// run rather than of the rollout.
func TestZeroDroppedRequests(t *testing.T) {
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 4, app("v1"))
	ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	spreadOverNodes(ps, corev1.ScheduleAnyway)
	create(t, ps)
	waitReady(t, ps)
	checkSpread(t, ps)
	endpoints := watchEndpoints(t, ns, "web")
	url := serve(t, ps)
	drain := time.Duration(podsetv1alpha1.DefaultDrainSeconds) * time.Second
	replicas := func(n int32) func() {
		return func() { update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To(n) }) }
	}

	for _, step := range []struct {
		what     string
		versions []string
		do       func()
		// inPlace: every pod stays, and leaves the endpoints once.
		inPlace bool
	}{
		{"an in-place image update", []string{"v1", "v2"}, func() { setImage(t, ps, app("v2")) }, true},
		{"a memory resize that restarts the container", []string{"v2"}, func() {
			update(t, ps, func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("80Mi")
			})
		}, true},
		{"kubectl podset rollout restart", []string{"v2"}, func() {
			out, err := runPlugin(t, "rollout", "restart", "web", "-n", ns)
			if err != nil {
				t.Fatalf("kubectl podset rollout restart: %v\n%s", err, out)
			}
		}, false},
		{"a Recreate rollout", []string{"v2", "v3"}, func() {
			update(t, ps, func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
				ps.Spec.Template.Spec.Containers[0].Image = app("v3")
			})
		}, false},
		{"a scale-up 4 -> 6", []string{"v3"}, replicas(6), false},
		{"a scale-down 6 -> 2", []string{"v3"}, replicas(2), false},
	} {
		t.Run(step.what, func(t *testing.T) {
			before := pods(t, ps)
			endpoints.reset()
			specs := watchSpecs(t, ns)
			load := underLoad(t, ps, url, step.do)
			t.Logf("%s: %d requests, rollout %v, %d failed, answers %v; pods by node after: %v", step.what, load.total, load.took.Round(time.Millisecond), len(load.failures), load.answers, nodesOf(t, ps))
			if len(load.failures) > 0 {
				t.Errorf("%d of %d requests failed during %s; first ones:\n%s", len(load.failures), load.total, step.what, load.firstFailures(endpoints))
			}
			load.checkOnly(t, step.versions...)
			if step.inPlace {
				checkInPlaceDrains(t, before, endpoints, specs, drain)
			}
		})
	}
}

// checkInPlaceDrains checks the pods before a rollout in place, as the
// endpoints and the specs logged it: each container stopped no less than
// drain after its pod last left Ready.
func checkInPlaceDrains(t *testing.T, before map[string]*corev1.Pod, endpoints *endpointLog, specs *specLog, drain time.Duration) {
	t.Helper()
	// What the operator promises: no container stops less than
	// drainSeconds after its pod last left Ready. A kubelet that
	// has not seen the closed gate yet may write back the Ready
	// it had (its status manager's reconciliation, every 10 s):
	// the pod goes back in for a moment while its old container
	// still serves, and the drain counts again from its next
	// exit. The EndpointSlice follows the pod's Ready a moment
	// later (up to its controller's 1 s retry when its cache of
	// slices is behind its own writes), and the drain also
	// covers that; the gap from the slice is logged.
	left, _ := endpoints.moves()
	changed := specs.changedAt()
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if left[name] > 1 {
			t.Logf("pod %s went back into the ready endpoints %d times before its restart", name, left[name]-1)
		}
		at, ok := changed[name]
		if !ok {
			t.Errorf("pod %s: its spec never changed", name)
			continue
		}
		notReady, ok := specs.lastNotReadyBefore(name, at)
		if !ok {
			t.Errorf("pod %s: its spec changed while it was Ready", name)
			continue
		}
		// The container stops once the kubelet has run its
		// preStop sleep (the operator's drain hook), which
		// begins when the spec changes.
		var hook time.Duration
		if l := before[name].Spec.Containers[0].Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
			hook = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
		}
		if gap := at.Sub(notReady) + hook; gap < drain-250*time.Millisecond {
			t.Errorf("pod %s: its container stopped %v after it last left Ready (its spec changed %v after, then its preStop sleep of %v), want the drain, %v",
				name, gap, at.Sub(notReady), hook, drain)
		}
		exit, ok := endpoints.lastLeftBefore(name, at)
		t.Logf("pod %s: its spec changed %v after it last left Ready, %v after it last left the ready EndpointSlices (seen %t)",
			name, at.Sub(notReady).Round(10*time.Millisecond), at.Sub(exit).Round(10*time.Millisecond), ok)
	}
}

// TestRevertDuringTheDrain: the image changes, and goes back while the
// operator drains the pods (drainSeconds 20, longer than the drain hook
// they were made with), before the new image was applied. The
// pods run the containers their revision asks for, so they are Ready
// again at once, without a restart, however containerd names the image
// they were made from: by tag, by a tag that names the same image as
// another (reported by the first of the two), or by digest (reported by
// a tag).
func TestRevertDuringTheDrain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what, answer string
		image        func(*testing.T) string
	}{
		{"made by tag", "v1", func(*testing.T) string { return app("v1") }},
		// containerd reports v2's image as app:stable.
		{"made by an alias tag", "v2", func(*testing.T) string { return app("v2") }},
		{"made by digest", "v1", func(t *testing.T) string { return appByDigest(t, "v1") }},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			image := tc.image(t)
			ps := appPodSet(newNamespace(t), "web", 2, image)
			// Pods whose drain hook sleeps 1 s of a 20 s drain (made
			// before drainSeconds grew): the operator drains them itself,
			// and applies the image only after the drain. (Pods whose
			// hook sleeps the whole drain get the image at once, and the
			// kubelet holds them in the hook: a revert then restarts them
			// once.)
			ps.Spec.DrainSeconds = ptr.To[int32](1)
			ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
			ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
			ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
			create(t, ps)
			waitReady(t, ps)
			before, counts := identities(t, ps), restartCounts(t, ps)

			update(t, ps, func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DrainSeconds = ptr.To[int32](20)
				ps.Spec.Template.Spec.Containers[0].Image = app("v3")
			})
			eventually(t, "every pod drains", func(context.Context) error {
				for name, p := range pods(t, ps) {
					if c := podCondition(p, podsetv1alpha1.InPlaceUpdateReadyCondition); c == nil || c.Status != corev1.ConditionFalse {
						return fmt.Errorf("pod %s: gate %+v", name, c)
					}
				}
				return nil
			})
			time.Sleep(2 * time.Second)
			reverted := time.Now()
			setImage(t, ps, image)
			waitReady(t, ps)
			t.Logf("%s: Ready %v after the revert", tc.what, time.Since(reverted).Round(100*time.Millisecond))
			checkAnswers(t, ps, tc.answer)
			if got := identities(t, ps); !maps.Equal(got, before) {
				t.Errorf("pods %v, want the same as %v", got, before)
			}
			if got := restartCounts(t, ps); !maps.Equal(got, counts) {
				t.Errorf("restart counts %v, want %v: nothing was to restart", got, counts)
			}
		})
	}
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// specLog records when each pod's spec first changed (its generation went
// up) after it was first seen: when the operator applied a new image or a
// resize.
type specLog struct {
	mu      sync.Mutex
	first   map[string]int64
	changed map[string]time.Time
	// ready is each pod's Ready as last seen; notReady the times it went
	// from True to anything else.
	ready    map[string]bool
	notReady map[string][]time.Time
}

func watchSpecs(t *testing.T, ns string) *specLog {
	t.Helper()
	l := &specLog{first: map[string]int64{}, changed: map[string]time.Time{}, ready: map[string]bool{}, notReady: map[string][]time.Time{}}
	stop := watchPods(t, ns, func(_ watch.EventType, p *corev1.Pod, at time.Time) {
		l.mu.Lock()
		defer l.mu.Unlock()
		now := at
		if g, seen := l.first[p.Name]; !seen {
			l.first[p.Name] = p.Generation
		} else if _, done := l.changed[p.Name]; !done && p.Generation > g {
			l.changed[p.Name] = now
		}
		c := podCondition(p, corev1.PodReady)
		ready := c != nil && c.Status == corev1.ConditionTrue
		if l.ready[p.Name] && !ready {
			l.notReady[p.Name] = append(l.notReady[p.Name], now)
		}
		l.ready[p.Name] = ready
	})
	t.Cleanup(stop)
	return l
}

// lastNotReadyBefore is the last time a pod left Ready before at.
func (l *specLog) lastNotReadyBefore(pod string, at time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lastBefore(l.notReady[pod], at)
}

func (l *specLog) changedAt() map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.changed)
}

// waitOnlyReplicas waits until the PodSet has as many pods as it wants:
// the surplus ones of a scale-down are gone.
func waitOnlyReplicas(t *testing.T, ps *podsetv1alpha1.PodSet) {
	t.Helper()
	eventually(t, "only the PodSet's replicas are left", func(context.Context) error {
		cur := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), cur); err != nil {
			return err
		}
		if got, want := len(pods(t, ps)), int(ptr.Deref(cur.Spec.Replicas, 1)); got != want {
			return fmt.Errorf("%d pods, want %d", got, want)
		}
		return nil
	})
}
