package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The helpers every suite shares (test/integration, test/reliability,
// test/e2e, test/node, config/prometheus) and the benchmark: waiting,
// namespaces, PodSet fixtures and their conditions.

// Poll calls check every interval until it returns nil, and returns nil
// then. Once timeout has passed, or ctx is done, it returns check's last
// error.
func Poll(ctx context.Context, timeout, interval time.Duration, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not so after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %w)", context.Cause(ctx), err)
		case <-time.After(interval):
		}
	}
}

// Waiter waits in a test: each suite has one, with the timeout that turns
// a hang into a failure there.
type Waiter struct {
	// Timeout bounds a wait.
	Timeout time.Duration
	// Interval is how often a check runs again.
	Interval time.Duration
	// Log logs each wait and how long it took (for the reader of -v
	// output, not as a threshold).
	Log bool
}

// Eventually calls check with the test's context until it returns nil, and
// fails the test with check's last error when that does not happen within
// the timeout.
func (w Waiter) Eventually(t testing.TB, what string, check func(ctx context.Context) error) {
	t.Helper()
	start := time.Now()
	if err := Poll(t.Context(), w.Timeout, w.Interval, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if w.Log {
		t.Logf("%s (waited %v)", what, time.Since(start).Round(time.Millisecond))
	}
}

// Consistently calls check until d has passed, and fails the test with
// check's error the first time it returns one.
func (w Waiter) Consistently(t testing.TB, what string, d time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if err := check(t.Context()); err != nil {
			t.Fatalf("%s: not so any more: %v", what, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-time.After(w.Interval):
		}
	}
	if w.Log {
		t.Logf("%s (for %v)", what, d)
	}
}

// NewNamespace creates a namespace with labels and returns its name: name
// itself, or, when name ends in "-", a name the API server makes from it
// (generateName).
func NewNamespace(ctx context.Context, c client.Client, name string, labels map[string]string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	if strings.HasSuffix(name, "-") {
		ns.GenerateName = name
	} else {
		ns.Name = name
	}
	if err := c.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return ns.Name, nil
}

// Namespace is NewNamespace for a test, which it fails when the namespace
// cannot be made. It leaves the namespace when the test ends: envtest runs
// no namespace controller, so deleting it would delete nothing in it.
func Namespace(t testing.TB, c client.Client, name string, labels map[string]string) string {
	t.Helper()
	ns, err := NewNamespace(t.Context(), c, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddress is FreePort for a test, as 127.0.0.1:port; it fails the
// test when there is none.
func FreeAddress(t testing.TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// Condition is a condition of the PodSet's status, or a zero one.
func Condition(ps *podsetv1alpha1.PodSet, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(ps.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RunningAndReady reports whether the pod is Running and Ready.
func RunningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && PodReady(p)
}

// HeadlessService is a headless Service (clusterIP None) named name
// selecting the pods of PodSet podSet by their podset.dev/name label, with
// one port, 8080: the Service a spec.serviceName names, whose
// EndpointSlices list each pod by its hostname.
func HeadlessService(ns, name, podSet string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{podsetv1alpha1.NameLabel: podSet},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
}

// PodSetBuilder builds PodSet fixtures.
type PodSetBuilder struct{ ps *podsetv1alpha1.PodSet }

// MakePodSet starts a PodSet of one replica whose pods run busybox (sleep
// infinity) as a non-root user and carry the label app=name.
func MakePodSet(ns, name string) *PodSetBuilder {
	return &PodSetBuilder{ps: &podsetv1alpha1.PodSet{
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

// Replicas sets spec.replicas.
func (b *PodSetBuilder) Replicas(n int32) *PodSetBuilder { b.ps.Spec.Replicas = &n; return b }

// Template replaces the pod template.
func (b *PodSetBuilder) Template(t corev1.PodTemplateSpec) *PodSetBuilder {
	b.ps.Spec.Template = t
	return b
}

// MaxUnavailable sets the rolling update's budget. It keeps a partition
// set before it.
func (b *PodSetBuilder) MaxUnavailable(n int32) *PodSetBuilder {
	b.rollingUpdate().MaxUnavailable = ptr.To(intstr.FromInt32(n))
	return b
}

// Partition sets the rolling update's partition. It keeps a maxUnavailable
// set before it.
func (b *PodSetBuilder) Partition(n int32) *PodSetBuilder {
	b.rollingUpdate().Partition = &n
	return b
}

func (b *PodSetBuilder) rollingUpdate() *podsetv1alpha1.RollingUpdatePodSet {
	if b.ps.Spec.UpdateStrategy.RollingUpdate == nil {
		b.ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
	}
	return b.ps.Spec.UpdateStrategy.RollingUpdate
}

// OnDelete sets the OnDelete update strategy.
func (b *PodSetBuilder) OnDelete() *PodSetBuilder {
	b.ps.Spec.UpdateStrategy.Type = podsetv1alpha1.OnDeleteStrategyType
	return b
}

// Recreate makes the PodSet replace out-of-date pods rather than update
// them in place: for tests of the rollout's pacing, which see a pod
// updated by its new UID.
func (b *PodSetBuilder) Recreate() *PodSetBuilder {
	b.ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
	return b
}

// MinReadySeconds sets spec.minReadySeconds.
func (b *PodSetBuilder) MinReadySeconds(n int32) *PodSetBuilder {
	b.ps.Spec.MinReadySeconds = n
	return b
}

// ProgressDeadline sets spec.progressDeadlineSeconds.
func (b *PodSetBuilder) ProgressDeadline(n int32) *PodSetBuilder {
	b.ps.Spec.ProgressDeadlineSeconds = &n
	// The drain must be shorter than the deadline (admission refuses
	// it otherwise): a short deadline gets a short drain.
	if n <= podsetv1alpha1.DefaultDrainSeconds {
		drain := max(0, n-2)
		b.ps.Spec.DrainSeconds = &drain
	}
	return b
}

// RevisionHistoryLimit sets spec.revisionHistoryLimit.
func (b *PodSetBuilder) RevisionHistoryLimit(n int32) *PodSetBuilder {
	b.ps.Spec.RevisionHistoryLimit = &n
	return b
}

// OrdinalsStart sets spec.ordinals.start: the pods are named from it.
func (b *PodSetBuilder) OrdinalsStart(n int32) *PodSetBuilder {
	b.ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: n}
	return b
}

// Mutate changes the PodSet in any other way.
func (b *PodSetBuilder) Mutate(f func(*podsetv1alpha1.PodSet)) *PodSetBuilder { f(b.ps); return b }

// Obj is the PodSet built.
func (b *PodSetBuilder) Obj() *podsetv1alpha1.PodSet { return b.ps }

// Create creates the PodSet, failing the test when it cannot, and deletes
// it when the test ends, so that no PodSet of an ended test keeps an
// operator busy.
func (b *PodSetBuilder) Create(t testing.TB, c client.Client) *podsetv1alpha1.PodSet {
	t.Helper()
	ps := b.ps
	if err := c.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	// t.Context() is already canceled when cleanups run.
	ctx := context.WithoutCancel(t.Context())
	// The precondition spares a PodSet of the same name the test made since.
	uid := ps.UID
	t.Cleanup(func() { _ = c.Delete(ctx, ps, client.Preconditions{UID: &uid}) })
	return ps
}

// HTTPOK is nil when a GET of url answers 200 OK.
func HTTPOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
