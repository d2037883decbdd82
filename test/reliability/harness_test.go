package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var env *testenv.Env

// wait waits for what a test expects, for up to three times the
// operator's longest backoff (controller.MaxBackoff), so a PodSet backing
// off after a streak of injected faults is not a failure.
var (
	wait       = testenv.Waiter{Timeout: 3 * controller.MaxBackoff, Interval: 25 * time.Millisecond}
	eventually = wait.Eventually
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// operatorOptions configure one operator instance of a test.
type operatorOptions struct {
	// transport wraps the operator's HTTP transport (fault injection).
	transport func(http.RoundTripper) http.RoundTripper
	// leaderElection turns on leader election with short timings.
	leaderElection bool
	// identity names the instance in leader election.
	identity string
	// impersonate runs the instance as this user (a service account).
	impersonate string
	// metricsAddr serves metrics securely there; empty turns them off.
	metricsAddr string
}

// operator is a running operator instance, watching one namespace.
type operator struct {
	*testenv.Operator
	// writes counts the instance's pod and PodSet write requests.
	writes atomic.Int64
	// drains counts the drains it began: its pods/status patches that
	// closed a readiness gate and landed.
	drains atomic.Int64
	// logWrites prints each write, to name the culprit of a quiet period.
	logWrites atomic.Bool
}

// startOperator runs an operator for the namespace, assembled as main.go
// does, and stops it when the test ends.
func startOperator(t *testing.T, ns string, o operatorOptions) *operator {
	t.Helper()
	op := &operator{}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, -1
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if o.transport != nil {
			rt = o.transport(rt)
		}
		return testenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			// Pod and PodSet writes; lease renewals and events do not count.
			segments := strings.Split(req.URL.Path, "/")
			if req.Method != http.MethodGet && (slices.Contains(segments, "pods") || slices.Contains(segments, "podsets")) {
				op.writes.Add(1)
				if op.logWrites.Load() {
					fmt.Fprintf(os.Stderr, "quiet-period write: %s %s\n", req.Method, req.URL.Path)
				}
			}
			drain := req.Method == http.MethodPatch && slices.Contains(segments, "pods") && segments[len(segments)-1] == "status" && closesGate(req)
			resp, err := rt.RoundTrip(req)
			if drain && err == nil && resp.StatusCode < 300 {
				op.drains.Add(1)
			}
			return resp, err
		})
	}
	if o.impersonate != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: o.impersonate}
	}
	opts := manager.Options{}
	if o.metricsAddr != "" {
		opts.Metrics = metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
	}
	if o.leaderElection {
		opts.LeaderElection = true
		opts.LeaderElectionID = "podset-operator.podset.dev"
		opts.LeaderElectionNamespace = ns
		opts.LeaseDuration = ptr.To(2 * time.Second)
		opts.RenewDeadline = ptr.To(1500 * time.Millisecond)
		opts.RetryPeriod = ptr.To(200 * time.Millisecond)
		cfg.UserAgent = o.identity
	}
	// Each instance registers its metrics with its own registry: the
	// tests run several at once in this process.
	var err error
	op.Operator, err = testenv.StartOperatorInProcess(cfg, opts, controller.Options{Namespaces: []string{ns}, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.stop)
	return op
}

// newScene is a namespace for one test with an operator for it and the
// test's kubelet (kubelet) running its pods.
func newScene(t *testing.T) (ns string, op *operator) {
	t.Helper()
	ns = testenv.Namespace(t, env.Client, "rel-", nil)
	op = startOperator(t, ns, operatorOptions{})
	kubelet(t, ns)
	return ns, op
}

// stop stops the instance and waits for it, as a crash would: without
// releasing its lease.
func (op *operator) stop() {
	_ = op.Stop() // stopped as a crash: how it ended is not the test's question
}

// closesGate reports whether a pods/status patch closes the readiness
// gate: the first step of a drain (controller.beginDrain).
func closesGate(req *http.Request) bool {
	if req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer func() { _ = body.Close() }()
	data, err := io.ReadAll(body)
	if err != nil {
		return false
	}
	patch := struct {
		Status struct {
			Conditions []corev1.PodCondition `json:"conditions"`
		} `json:"status"`
	}{}
	if json.Unmarshal(data, &patch) != nil {
		return false
	}
	for _, c := range patch.Status.Conditions {
		if c.Type == podsetv1alpha1.InPlaceUpdateReadyCondition && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// update changes a PodSet's spec, retrying on conflicts.
func update(t *testing.T, key types.NamespacedName, mutate func(*podsetv1alpha1.PodSet)) {
	t.Helper()
	eventually(t, "update "+key.Name, func(context.Context) error {
		ps := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(t.Context(), key, ps); err != nil {
			return err
		}
		mutate(ps)
		return env.Client.Update(t.Context(), ps)
	})
}

// kubelet plays the kubelet for a namespace until the test ends: every pod
// Running, its containers on the images their spec names, Ready as its
// readiness gates allow (testenv.KubeletStatus). While the returned flag is
// set it leaves pods alone, as a kubelet that is slow to react.
func kubelet(t *testing.T, ns string) *atomic.Bool {
	t.Helper()
	paused := &atomic.Bool{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			list := &corev1.PodList{}
			if paused.Load() {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					p := &list.Items[i]
					if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
						continue
					}
					if status, _ := testenv.KubeletStatus(p, false); !equality.Semantic.DeepEqual(status, p.Status) {
						p.Status = status
						_ = env.Client.Status().Update(ctx, p)
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return paused
}

// garbageCollector plays kube-controller-manager's garbage collector, which
// envtest lacks: until the test ends it deletes pods whose controller is a
// PodSet that no longer exists (by UID).
func garbageCollector(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			podSets := &podsetv1alpha1.PodSetList{}
			pods := &corev1.PodList{}
			if env.Client.List(ctx, podSets, client.InNamespace(ns)) == nil && env.Client.List(ctx, pods, client.InNamespace(ns)) == nil {
				live := map[types.UID]bool{}
				for _, ps := range podSets.Items {
					live[ps.UID] = true
				}
				for i := range pods.Items {
					if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil && ref.Kind == "PodSet" && !live[ref.UID] {
						_ = env.Client.Delete(ctx, &pods.Items[i])
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// foreignPods records pods that no PodSet controls, to prove they are never
// modified or deleted.
type foreignPods map[string]string // name -> resourceVersion

// createForeign creates a pod no PodSet controls.
func (f foreignPods) create(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "nginx:1.27"}}},
	}
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	f[name] = pod.ResourceVersion
}

// converged waits until every PodSet in the namespace is Ready at its
// current generation and its pods are exactly the desired ones.
//
// Ready alone is not enough: a pod deleted a moment ago leaves the status
// Ready until the operator has seen the deletion, and the quiet period that
// follows would catch the operator at work. So the status must also agree
// with the pods; a status that never does times out here.
func converged(t *testing.T, ns string) {
	t.Helper()
	eventually(t, "convergence", func(context.Context) error {
		list := &podsetv1alpha1.PodSetList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ps := range list.Items {
			c := testenv.Condition(&ps, podsetv1alpha1.ReadyCondition)
			if ps.Status.ObservedGeneration != ps.Generation || c.Status != metav1.ConditionTrue || c.ObservedGeneration != ps.Generation {
				return fmt.Errorf("%s: not Ready at generation %d: %+v; pods: %s", ps.Name, ps.Generation, ps.Status, describePods(t, ns))
			}
			if got, want := statusSummary(&ps), wantStatus(&ps, pods.Items); got != want || int(*ps.Spec.Replicas) != len(ps.Status.PodNames) {
				return fmt.Errorf("%s: Ready, but its status %s disagrees with the pods (%s) or with %d replicas", ps.Name, got, want, *ps.Spec.Replicas)
			}
		}
		return nil
	})
}

// podPerPodSet is one live pod of each PodSet of the namespace that has
// one, to run passes of it.
func podPerPodSet(t *testing.T, ns string) []*corev1.Pod {
	t.Helper()
	podSets := &podsetv1alpha1.PodSetList{}
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), podSets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range podSets.Items {
		for j := range pods.Items {
			if p := &pods.Items[j]; p.DeletionTimestamp == nil && metav1.IsControlledBy(p, &podSets.Items[i]) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// statusSummary is what wantStatus computes, as the PodSet's status shows it.
func statusSummary(ps *podsetv1alpha1.PodSet) string {
	return fmt.Sprintf("replicas=%d ready=%d updated=%d pods=%v", ps.Status.Replicas, ps.Status.ReadyReplicas, ps.Status.UpdatedReplicas, ps.Status.PodNames)
}

// stalled waits until the PodSet is Stalled for the given reason.
func stalled(t *testing.T, key types.NamespacedName, reason string) {
	t.Helper()
	eventually(t, "Stalled/"+reason, func(context.Context) error {
		got := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(t.Context(), key, got); err != nil {
			return err
		}
		if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("not stalled for %s: %s %s: %s", reason, c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

// describePods lists the pods of a namespace as the API server has them,
// for failure messages.
func describePods(t *testing.T, ns string) string {
	t.Helper()
	list := &corev1.PodList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range list.Items {
		owner := "none"
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = string(ref.UID)[:8]
		}
		out = append(out, fmt.Sprintf("%s(uid %s, owner %s, phase %s, ready %t, hash %s, deleting %t, rv %s)",
			p.Name, string(p.UID)[:8], owner, p.Status.Phase, testenv.RunningAndReady(&p), p.Labels[podsetv1alpha1.TemplateHashLabel], p.DeletionTimestamp != nil, p.ResourceVersion))
	}
	return strings.Join(out, " ")
}

// checkInvariants checks, once the namespace is quiet, what must always
// hold: no two live pods for one ordinal, every labelled pod controlled by
// its PodSet (foreign ones aside), foreign pods untouched, status equal to
// what the pods show, and no write during a quiet second (no hot loop).
func checkInvariants(t *testing.T, ns string, foreign foreignPods, ops ...*operator) (violations int) {
	t.Helper()
	violate := func(format string, args ...any) {
		t.Helper()
		violations++
		t.Errorf(format, args...)
	}
	converged(t, ns)
	var before int64
	for _, op := range ops {
		before += op.writes.Load()
		op.logWrites.Store(true)
	}
	// A quiet second, which ends with a pass of each PodSet with nothing to
	// do: the writes counted are those of passes that ran, and a pass of
	// each ran. Each of those passes ends with the one repair that shows
	// it has ended (testenv.IdlePass).
	time.Sleep(time.Second)
	for _, op := range ops {
		op.logWrites.Store(false)
	}
	idle := 0
	for _, pod := range podPerPodSet(t, ns) {
		testenv.IdlePass(t, env.Client, wait, pod)
		idle++
	}
	var after int64
	for _, op := range ops {
		after += op.writes.Load()
	}
	if after-before != int64(idle) {
		violate("invariant: %d writes in a quiet second and an idle pass of each of %d PodSets, want only the %d repairs of those passes (hot loop?)", after-before, idle, idle)
	}

	podSets := &podsetv1alpha1.PodSetList{}
	if err := env.Client.List(t.Context(), podSets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*podsetv1alpha1.PodSet{}
	for i := range podSets.Items {
		byName[podSets.Items[i].Name] = &podSets.Items[i]
	}
	seen := map[string]bool{}
	live := map[string][]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		seen[p.Name] = true
		if rv, ok := foreign[p.Name]; ok {
			if p.ResourceVersion != rv {
				violate("invariant: foreign pod %s was modified", p.Name)
			}
			continue
		}
		owner := byName[p.Labels[podsetv1alpha1.NameLabel]]
		if owner == nil || !metav1.IsControlledBy(p, owner) {
			violate("invariant: pod %s is not controlled by its PodSet %q", p.Name, p.Labels[podsetv1alpha1.NameLabel])
			continue
		}
		if p.DeletionTimestamp == nil {
			key := owner.Name + "/" + p.Labels[podsetv1alpha1.OrdinalLabel]
			live[key] = append(live[key], p.Name)
		}
	}
	for name := range foreign {
		if !seen[name] {
			violate("invariant: foreign pod %s was deleted", name)
		}
	}
	for key, names := range live {
		if len(names) > 1 {
			violate("invariant: ordinal %s has %d live pods: %v", key, len(names), names)
		}
	}
	for _, ps := range byName {
		want := wantStatus(ps, pods.Items)
		got := statusSummary(ps)
		if got != want {
			violate("invariant: %s status %s, pods show %s", ps.Name, got, want)
		}
		if int(*ps.Spec.Replicas) != len(ps.Status.PodNames) {
			violate("invariant: %s wants %d pods, has %v", ps.Name, *ps.Spec.Replicas, ps.Status.PodNames)
		}
	}
	return violations
}

// wantStatus is the status the pods show, computed independently of the
// operator's code.
func wantStatus(ps *podsetv1alpha1.PodSet, pods []corev1.Pod) string {
	var replicas, readyN, updated int
	type named struct {
		ordinal int
		name    string
	}
	var names []named
	hash := ""
	for i := range pods {
		p := &pods[i]
		if !metav1.IsControlledBy(p, ps) {
			continue
		}
		replicas++
		if p.DeletionTimestamp != nil {
			continue
		}
		if testenv.RunningAndReady(p) {
			readyN++
		}
		n, _ := strconv.Atoi(p.Labels[podsetv1alpha1.OrdinalLabel])
		names = append(names, named{n, p.Name})
		// Every live pod of a converged PodSet carries the current hash.
		hash = p.Labels[podsetv1alpha1.TemplateHashLabel]
	}
	for i := range pods {
		if metav1.IsControlledBy(&pods[i], ps) && pods[i].DeletionTimestamp == nil && pods[i].Labels[podsetv1alpha1.TemplateHashLabel] == hash {
			updated++
		}
	}
	slices.SortFunc(names, func(a, b named) int { return a.ordinal - b.ordinal })
	var podNames []string
	for _, n := range names {
		podNames = append(podNames, n.name)
	}
	return fmt.Sprintf("replicas=%d ready=%d updated=%d pods=%v", replicas, readyN, updated, podNames)
}

// faultyTransport fails a share of requests with 429, 500 or a timeout,
// drawn from a seeded source so a failing run can be replayed.
type faultyTransport struct {
	mu       sync.Mutex
	rng      *rand.Rand
	rate     float64
	injected atomic.Int64
	on       atomic.Bool
}

func (f *faultyTransport) wrap(rt http.RoundTripper) http.RoundTripper {
	return testenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") == "true" || !f.on.Load() {
			return rt.RoundTrip(req)
		}
		f.mu.Lock()
		roll, kind := f.rng.Float64(), f.rng.IntN(3)
		f.mu.Unlock()
		if roll >= f.rate {
			return rt.RoundTrip(req)
		}
		f.injected.Add(1)
		switch kind {
		case 0:
			return statusResponse(req, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests), nil
		case 1:
			return statusResponse(req, http.StatusInternalServerError, metav1.StatusReasonInternalError), nil
		default:
			// The request reached the server, but its answer was lost.
			if _, err := rt.RoundTrip(req); err != nil {
				return nil, err
			}
			return nil, errors.New("injected: timeout awaiting response headers")
		}
	})
}

func statusResponse(req *http.Request, code int, reason metav1.StatusReason) *http.Response {
	body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":%q,"code":%d,"details":{"retryAfterSeconds":0}}`, reason, code)
	return &http.Response{
		StatusCode:    code,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		Request:       req,
		ContentLength: int64(len(body)),
	}
}

// isGone reports whether an object no longer exists.
func isGone(err error) bool { return apierrors.IsNotFound(err) }
