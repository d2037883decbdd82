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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var (
	env *testenv.Env
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := controller.NewManager(ctx, cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}, controller.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	operatorCache = mgr.GetCache()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "the operator's cache did not sync")
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
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
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.counts[parseRequest(req)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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

// reconciles is how many passes the operator has run, over all PodSets.
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "podset" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// newNamespace creates a namespace for one test with the given labels.
// envtest runs no namespace controller, so nothing in it is ever deleted
// with it; each test deletes its PodSets itself (see newPodSet).
func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "podset-", Labels: labels}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// podSetBuilder builds PodSet fixtures.
type podSetBuilder struct{ ps *podsetv1alpha1.PodSet }

func makePodSet(ns, name string) *podSetBuilder {
	return &podSetBuilder{ps: &podsetv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: podsetv1alpha1.PodSetSpec{
			Replicas: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
					Containers:      []corev1.Container{{Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"}}},
				},
			},
		},
	}}
}

func (b *podSetBuilder) replicas(n int32) *podSetBuilder { b.ps.Spec.Replicas = &n; return b }
func (b *podSetBuilder) image(image string) *podSetBuilder {
	b.ps.Spec.Template.Spec.Containers[0].Image = image
	return b
}
func (b *podSetBuilder) maxUnavailable(n int32) *podSetBuilder {
	b.ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(n))}
	return b
}
func (b *podSetBuilder) onDelete() *podSetBuilder {
	b.ps.Spec.UpdateStrategy.Type = podsetv1alpha1.OnDeleteStrategyType
	return b
}

// recreate makes the PodSet replace out-of-date pods rather than update
// them in place: for tests of the rollout's pacing, which see a pod
// updated by its new UID.
func (b *podSetBuilder) recreate() *podSetBuilder {
	b.ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
	return b
}
func (b *podSetBuilder) mutate(f func(*podsetv1alpha1.PodSet)) *podSetBuilder { f(b.ps); return b }
func (b *podSetBuilder) obj() *podsetv1alpha1.PodSet                          { return b.ps }

// create creates the PodSet and deletes it when the test ends, so that no
// PodSet of an ended test keeps the operator busy.
func (b *podSetBuilder) create(t *testing.T) *podsetv1alpha1.PodSet {
	t.Helper()
	if err := env.Client.Create(t.Context(), b.ps); err != nil {
		t.Fatal(err)
	}
	ps := b.ps
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ps) })
	return ps
}

// eventually polls cond until it returns nil, failing the test with its
// last error after a minute.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	eventually(t, "pods", func() error {
		got = pods(t, ns)
		if names := liveNames(got); !slices.Equal(names, want) {
			return fmt.Errorf("live pods %v, want %v", names, want)
		}
		return nil
	})
	return got
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
	eventually(t, "status of "+ps.Name, func() error {
		got = get(t, ps)
		return check(got)
	})
	return got
}

// condition returns a condition of the PodSet, or a zero one.
func condition(ps *podsetv1alpha1.PodSet, typ string) metav1.Condition {
	for _, c := range ps.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// readyStatus checks that status shows n ready, up-to-date pods, Ready=True,
// for the current generation.
func readyStatus(n int32) func(*podsetv1alpha1.PodSet) error {
	return func(ps *podsetv1alpha1.PodSet) error {
		s := ps.Status
		if s.ObservedGeneration != ps.Generation || s.Replicas != n || s.ReadyReplicas != n || s.UpdatedReplicas != n ||
			condition(ps, podsetv1alpha1.ReadyCondition).Status != metav1.ConditionTrue {
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
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
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
	if err != nil {
		t.Fatalf("setting the status of pod %s: %v", pod.Name, err)
	}
}

// markAllReady marks every live pod in the namespace Running and Ready.
func markAllReady(t *testing.T, ns string) {
	t.Helper()
	for _, p := range pods(t, ns) {
		if p.DeletionTimestamp == nil {
			markReady(t, p)
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

// Builder methods for the rollout fields (spec.minReadySeconds,
// spec.progressDeadlineSeconds, partition, spec.revisionHistoryLimit).
// partition keeps a maxUnavailable set before it.
func (b *podSetBuilder) minReadySeconds(n int32) *podSetBuilder {
	b.ps.Spec.MinReadySeconds = n
	return b
}
func (b *podSetBuilder) progressDeadline(n int32) *podSetBuilder {
	b.ps.Spec.ProgressDeadlineSeconds = &n
	return b
}
func (b *podSetBuilder) partition(n int32) *podSetBuilder {
	if b.ps.Spec.UpdateStrategy.RollingUpdate == nil {
		b.ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
	}
	b.ps.Spec.UpdateStrategy.RollingUpdate.Partition = &n
	return b
}
func (b *podSetBuilder) revisionHistoryLimit(n int32) *podSetBuilder {
	b.ps.Spec.RevisionHistoryLimit = &n
	return b
}

// pokeForAPass changes a label of a pod that the operator does not own,
// which passes the watch predicate, and waits for the pass it causes and
// for any write of that pass to land.
func pokeForAPass(t *testing.T, pod corev1.Pod) {
	t.Helper()
	passes := reconciles(t)
	pod.Labels["test.podset.dev/poke"] = pod.ResourceVersion
	if err := env.Client.Update(t.Context(), &pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a pass", func() error {
		if reconciles(t) <= passes {
			return fmt.Errorf("no pass ran yet")
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
}
