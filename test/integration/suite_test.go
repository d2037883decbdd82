package integration

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var (
	env *testenv.Env
	// wait waits for what a test expects, for up to a minute.
	wait       = testenv.Waiter{Timeout: time.Minute, Interval: 20 * time.Millisecond}
	eventually = wait.Eventually
	// requests counts what the operator sends to the API server.
	requests = &requestCounter{counts: map[requestKey]int{}}
	// operatorCache is the operator's own cache, to prove what it holds.
	operatorCache client.Reader
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Fuzz targets test the pure core: a fuzzing run (each of its workers
	// runs TestMain too) needs no API server.
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	// The operator runs as it does in a cluster: a manager with the
	// operator's cache options, its own client, and a transport that counts
	// every request it sends.
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = requests.wrap
	cfg.QPS, cfg.Burst = -1, -1
	op, err := testenv.StartOperatorInProcess(cfg, manager.Options{}, controller.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	operatorCache = op.Manager.GetCache()
	if !op.Synced(context.Background()) {
		fmt.Fprintln(os.Stderr, "the operator's cache did not sync")
		_ = op.Stop()
		return 1
	}
	code := m.Run()
	if err := op.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// requestKey identifies a kind of request: its verb, and the resource,
// subresource and namespace of its path.
type requestKey struct {
	verb, namespace, resource, subresource string
}

// requestCounter counts requests by requestKey.
type requestCounter struct {
	mu     sync.Mutex
	counts map[requestKey]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return testenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.counts[parseRequest(req)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// parseRequest reads /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]] and the
// /apis/GROUP/VERSION/... equivalent.
func parseRequest(req *http.Request) requestKey {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	k := requestKey{verb: req.Method}
	if req.URL.Query().Get("watch") == "true" {
		k.verb = "WATCH"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		k.namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		k.resource = parts[0]
	}
	if len(parts) > 2 {
		k.subresource = parts[2]
	}
	return k
}

// writes counts the operator's write requests (POST, PUT, PATCH, DELETE)
// in a namespace to a resource ("pods", "podsets") and subresource.
func (c *requestCounter) writes(namespace, resource, subresource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if k.namespace == namespace && k.resource == resource && k.subresource == subresource &&
			slices.Contains([]string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}, k.verb) {
			n += v
		}
	}
	return n
}

// count is the number of requests of one verb to one resource.
func (c *requestCounter) count(verb, namespace, resource, subresource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[requestKey{verb: verb, namespace: namespace, resource: resource, subresource: subresource}]
}

// pods lists the pods in a namespace, straight from the API server, by name.
func pods(t *testing.T, ns string) map[string]corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Pod{}
	for _, p := range list.Items {
		byName[p.Name] = p
	}
	return byName
}

// podNames is the sorted names of pods, excluding terminating ones.
func liveNames(m map[string]corev1.Pod) []string {
	var names []string
	for n, p := range m {
		if p.DeletionTimestamp == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// waitForPods waits until exactly the named pods are live in the namespace.
func waitForPods(t *testing.T, ns string, want ...string) map[string]corev1.Pod {
	t.Helper()
	slices.Sort(want)
	var got map[string]corev1.Pod
	eventually(t, "pods", func(context.Context) error {
		got = pods(t, ns)
		if names := liveNames(got); !slices.Equal(names, want) {
			return fmt.Errorf("live pods %v, want %v", names, want)
		}
		return nil
	})
	return got
}

// createReady creates the PodSet, waits for its pods, plays the kubelet
// to make them Running and Ready, and waits until its status shows them all
// ready, available and up to date. It returns the PodSet as read then.
func createReady(t *testing.T, b *fixture.PodSetBuilder) *podsetv1alpha1.PodSet {
	t.Helper()
	ps := b.Create(t, env.Client)
	n := *ps.Spec.Replicas
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", ps.Name, podset.Start(ps)+i)
	}
	waitForPods(t, ps.Namespace, names...)
	markAllReady(t, ps.Namespace)
	return waitForStatus(t, ps, healthy(n, n))
}

// createRunning creates the PodSet and waits until the namespace's kubelet
// (startKubelet) runs its pods and its status shows them ready and up to
// date. It returns the PodSet as read then.
func createRunning(t *testing.T, b *fixture.PodSetBuilder) *podsetv1alpha1.PodSet {
	t.Helper()
	ps := b.Create(t, env.Client)
	return waitForStatus(t, ps, readyStatus(*ps.Spec.Replicas))
}

// get reads a PodSet back from the API server.
func get(t *testing.T, ps *podsetv1alpha1.PodSet) *podsetv1alpha1.PodSet {
	t.Helper()
	got := &podsetv1alpha1.PodSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// waitForStatus waits until the PodSet's status satisfies check.
func waitForStatus(t *testing.T, ps *podsetv1alpha1.PodSet, check func(*podsetv1alpha1.PodSet) error) *podsetv1alpha1.PodSet {
	t.Helper()
	var got *podsetv1alpha1.PodSet
	eventually(t, "status of "+ps.Name, func(context.Context) error {
		got = get(t, ps)
		return check(got)
	})
	return got
}

// readyStatus checks that status shows n ready, up-to-date pods, Ready=True,
// for the current generation.
func readyStatus(n int32) func(*podsetv1alpha1.PodSet) error {
	return func(ps *podsetv1alpha1.PodSet) error {
		s := ps.Status
		if s.ObservedGeneration != ps.Generation || s.Replicas != n || s.ReadyReplicas != n || s.UpdatedReplicas != n ||
			testenv.Condition(ps, podsetv1alpha1.ReadyCondition).Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v, want %d ready and Ready=True at generation %d", s, n, ps.Generation)
		}
		return nil
	}
}

// markReady plays the kubelet: the pod is Running and Ready.
func markReady(t *testing.T, pod corev1.Pod) {
	t.Helper()
	setPodStatus(t, pod, corev1.PodRunning, corev1.ConditionTrue)
}

// updatePod changes a pod as a user would, with an update of the latest
// version (the operator writes its readiness gate condition right after it
// creates a pod).
func updatePod(t *testing.T, pod corev1.Pod, change func(*corev1.Pod)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&pod), cur); err != nil {
			return err
		}
		change(cur)
		return env.Client.Update(t.Context(), cur)
	})
	if err != nil {
		t.Fatalf("updating pod %s: %v", pod.Name, err)
	}
}

// setPodStatus sets a pod's phase and Ready condition as the kubelet does:
// the conditions others own (the operator's readiness gate) stay.
func setPodStatus(t *testing.T, pod corev1.Pod, phase corev1.PodPhase, ready corev1.ConditionStatus) {
	t.Helper()
	if err := writePodStatus(t, pod, phase, ready); err != nil {
		t.Fatalf("setting the status of pod %s: %v", pod.Name, err)
	}
}

// writePodStatus is setPodStatus's write, with its error.
func writePodStatus(t *testing.T, pod corev1.Pod, phase corev1.PodPhase, ready corev1.ConditionStatus) error {
	t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&pod), cur); err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return fmt.Errorf("pod %s was replaced", pod.Name)
		}
		cur.Status.Phase = phase
		cur.Status.Conditions = slices.DeleteFunc(cur.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
		cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()})
		return env.Client.Status().Update(t.Context(), cur)
	})
}

// markUnready plays the kubelet of a pod whose readiness probe fails, and
// waits until the PodSet's status counts ready pods left.
func markUnready(t *testing.T, ps *podsetv1alpha1.PodSet, pod corev1.Pod, ready int32) {
	t.Helper()
	setPodStatus(t, pod, corev1.PodRunning, corev1.ConditionFalse)
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ReadyReplicas != ready {
			return fmt.Errorf("readyReplicas %d, want %d", got.Status.ReadyReplicas, ready)
		}
		return nil
	})
}

// markAllReady marks every live pod in the namespace Running and Ready.
func markAllReady(t *testing.T, ns string) {
	t.Helper()
	for _, p := range pods(t, ns) {
		if p.DeletionTimestamp != nil {
			continue
		}
		// A pod the operator deletes between the list and the write (an
		// unbound pod goes at once, with no grace) is not live: skip it.
		if err := writePodStatus(t, p, corev1.PodRunning, corev1.ConditionTrue); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("setting the status of pod %s: %v", p.Name, err)
		}
	}
}

// bind schedules a pod to a node, as the scheduler would. A scheduled pod is
// deleted gracefully: it stays, terminating, until the kubelet (here, the
// test) confirms it is gone.
func bind(t *testing.T, pod corev1.Pod) {
	t.Helper()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
	}
	if err := env.Client.SubResource("binding").Create(t.Context(), &pod, binding); err != nil {
		t.Fatalf("binding pod %s: %v", pod.Name, err)
	}
}

// forceDelete removes a pod at once, as the kubelet does once it stopped.
func forceDelete(t *testing.T, pod corev1.Pod) {
	t.Helper()
	if err := env.Client.Delete(t.Context(), &pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// warningEvents lists the reasons and notes of Warning events about a PodSet.
func warningEvents(t *testing.T, ps *podsetv1alpha1.PodSet) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ps.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.Regarding.Name == ps.Name && e.Regarding.Kind == "PodSet" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// pokeForAPass runs a pass of a converged PodSet, one with nothing to
// do, and returns once it has ended (testenv.IdlePass). Its one repair is
// the only write the caller may see.
func pokeForAPass(t *testing.T, pod corev1.Pod) {
	t.Helper()
	testenv.IdlePass(t, env.Client, wait, &pod)
}

// repairPass runs a pass that must write and returns once it has, when
// every pass of the PodSet before it has ended (testenv.RepairPass).
func repairPass(t *testing.T, pod corev1.Pod) {
	t.Helper()
	testenv.RepairPass(t, env.Client, wait, &pod)
}
