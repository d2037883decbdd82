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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The helpers every suite shares (test/integration, test/reliability,
// test/e2e, test/node, config/prometheus) and the benchmark: waiting,
// namespaces, service-account tokens, PodSet conditions (the PodSets
// themselves are test/fixture's).

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

// ServiceAccountToken requests a token of the service account sa that
// lasts ttl (TokenRequest), as a Prometheus or any in-cluster client has
// one: what the suites scrape the operator's metrics with.
func ServiceAccountToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, ttl time.Duration) (string, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return tr.Status.Token, nil
}

// CRDEstablished is nil once the CRD named name has the condition
// Established=True, that is once the API server serves its type.
func CRDEstablished(ctx context.Context, c client.Client, name string) error {
	crd, err := GetCRD(ctx, c, name)
	if err != nil {
		return err
	}
	if !Established(crd) {
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		return fmt.Errorf("CRD %s is not Established: conditions %v", name, conditions)
	}
	return nil
}

// GetCRD reads the CustomResourceDefinition named name.
func GetCRD(ctx context.Context, c client.Client, name string) (*unstructured.Unstructured, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// Established reports whether the CRD crd, as read, has the condition
// Established=True.
func Established(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
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

// RoundTripperFunc is a function as an http.RoundTripper: what the suites
// and the benchmark wrap a client's transport with, to count, time or
// fail its requests.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
