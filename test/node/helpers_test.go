//go:build node

package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// app is a reference to a test image (test/node/images) by tag.
func app(tag string) string { return "localhost/podset-test/app:" + tag }

// appByDigest is the reference by digest of the test image of tag.
func appByDigest(t *testing.T, tag string) string {
	t.Helper()
	digest, ok := suite.images[app(tag)]
	if !ok {
		t.Fatalf("images.json has no %s", app(tag))
	}
	return "localhost/podset-test/app@" + digest
}

// needNodes skips the test, loudly, unless the suite runs at least n real
// nodes (REAL_NODES).
func needNodes(t *testing.T, n int) {
	t.Helper()
	if suite.realNodes < n {
		t.Skipf("SKIPPED: needs %d real nodes, the suite runs %d; run it with make test-node REAL_NODES=%d", n, suite.realNodes, n)
	}
}

// newNamespace makes a namespace enforcing Pod Security "restricted",
// deleted when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := testenv.Namespace(t, suite.client, "node-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(describe(ns))
		}
		_ = suite.client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}

// describe is what a person debugging a failed test would look at.
func describe(ns string) string {
	out, _ := execKubectl("get", "podsets,pods,endpointslices,events", "-n", ns, "-o", "wide")
	pods, _ := execKubectl("get", "pods", "-n", ns, "-o", "yaml")
	return out + "\n" + pods
}

// appPodSet is a PodSet of the test app on the first real node: a
// readiness probe on /healthz every second, small cpu and memory, and a
// memory resize that restarts the container. The suite's tests were
// written for one real node, and keep to it when there are two; a test
// that needs both (needNodes) selects them by label alone.
func appPodSet(ns, name string, replicas int32, image string) *podsetv1alpha1.PodSet {
	labels := map[string]string{"app": name}
	return fixture.PodSet(ns, name).Replicas(replicas).ProgressDeadline(20).Template(corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"podset.dev/real-node": "true", corev1.LabelHostname: nodeName},
			Tolerations:                   []corev1.Toleration{{Key: "podset.dev/real-node", Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds:    1,
					FailureThreshold: 1,
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				ResizePolicy: []corev1.ContainerResizePolicy{
					{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
					{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
				},
			}},
		},
	}).Obj()
}

// spreadOverNodes lets the PodSet's pods run on either real node, spread
// over them by hostname (at most one pod more on one than on the other),
// softly (ScheduleAnyway) or not (DoNotSchedule).
func spreadOverNodes(ps *podsetv1alpha1.PodSet, when corev1.UnsatisfiableConstraintAction) {
	ps.Spec.Template.Spec.NodeSelector = map[string]string{"podset.dev/real-node": "true"}
	ps.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": ps.Name}},
	}}
}

// checkSpread fails unless ps's pods run on both real nodes, when the
// suite runs two, and returns them by node.
func checkSpread(t *testing.T, ps *podsetv1alpha1.PodSet) map[string][]string {
	t.Helper()
	on := nodesOf(t, ps)
	t.Logf("pods by node: %v", on)
	if suite.realNodes >= 2 && (len(on[nodeName]) == 0 || len(on[secondNodeName]) == 0) {
		t.Fatalf("the PodSet's pods are not spread over both real nodes: %v", on)
	}
	return on
}

// startApp makes a PodSet of replicas pods of the test app v1 in a new
// namespace, waits until it is Ready, and returns it with its pods'
// identities and restart counts.
func startApp(t *testing.T, replicas int32) (*podsetv1alpha1.PodSet, map[string]identity, map[string]int32) {
	t.Helper()
	ps := appPodSet(newNamespace(t), "web", replicas, app("v1"))
	create(t, ps)
	waitReady(t, ps)
	return ps, identities(t, ps), restartCounts(t, ps)
}

func create(t *testing.T, ps *podsetv1alpha1.PodSet) {
	t.Helper()
	if err := suite.client.Create(t.Context(), ps); err != nil {
		t.Fatalf("creating PodSet %s: %v", ps.Name, err)
	}
}

// update changes a PodSet's spec, retrying on conflicts.
func update(t *testing.T, ps *podsetv1alpha1.PodSet, change func(*podsetv1alpha1.PodSet)) {
	t.Helper()
	for {
		if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
			t.Fatal(err)
		}
		change(ps)
		err := suite.client.Update(t.Context(), ps)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("updating PodSet %s: %v", ps.Name, err)
		}
	}
}

// setImage sets the image of the PodSet's container.
func setImage(t *testing.T, ps *podsetv1alpha1.PodSet, image string) {
	t.Helper()
	update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = image })
}

// waitReady waits until the PodSet reports its current generation rolled
// out: Ready, every pod updated and ready.
func waitReady(t *testing.T, ps *podsetv1alpha1.PodSet) {
	t.Helper()
	eventually(t, "PodSet "+ps.Name+" is Ready", func(ctx context.Context) error {
		cur := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
			return err
		}
		want := ptr.Deref(cur.Spec.Replicas, 1)
		s := cur.Status
		switch {
		case s.ObservedGeneration != cur.Generation:
			return fmt.Errorf("observedGeneration %d, generation %d", s.ObservedGeneration, cur.Generation)
		case !meta.IsStatusConditionTrue(s.Conditions, "Ready"):
			return fmt.Errorf("not Ready: %v", s.Conditions)
		case s.UpdatedReplicas != want || s.ReadyReplicas != want || s.Replicas != want:
			return fmt.Errorf("replicas %d, updated %d, ready %d, want %d", s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, want)
		}
		return nil
	})
}

// waitStalled waits until the PodSet is Stalled for reason, with a
// message that names every one of words (each of them, "a|b", one of
// several).
func waitStalled(t *testing.T, ps *podsetv1alpha1.PodSet, reason string, words ...string) *metav1.Condition {
	t.Helper()
	var stalled *metav1.Condition
	eventually(t, "PodSet "+ps.Name+" is Stalled with "+reason, func(ctx context.Context) error {
		cur := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Stalled")
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("Stalled is %+v", c)
		}
		for _, w := range words {
			// A word may be alternatives, "a|b": the kubelet's reason
			// for a container that cannot start alternates between the
			// cause and CrashLoopBackOff while it backs off.
			if !slices.ContainsFunc(strings.Split(w, "|"), func(w string) bool { return strings.Contains(c.Message, w) }) {
				return fmt.Errorf("the Stalled message does not name %q: %s", w, c.Message)
			}
		}
		stalled = c
		return nil
	})
	return stalled
}

// pods returns the PodSet's pods by name.
func pods(t *testing.T, ps *podsetv1alpha1.PodSet) map[string]*corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := suite.client.List(t.Context(), &list, client.InNamespace(ps.Namespace), client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// identity is what an in-place update keeps of a pod.
type identity struct {
	uid  string
	ip   string
	node string
}

func identities(t *testing.T, ps *podsetv1alpha1.PodSet) map[string]identity {
	t.Helper()
	out := map[string]identity{}
	for name, p := range pods(t, ps) {
		out[name] = identity{string(p.UID), p.Status.PodIP, p.Spec.NodeName}
	}
	return out
}

// restartCounts is each pod's app container's restart count, as the
// kubelet reports it.
func restartCounts(t *testing.T, ps *podsetv1alpha1.PodSet) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for name, p := range pods(t, ps) {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "app" {
				out[name] = s.RestartCount
			}
		}
	}
	return out
}

// checkAnswers fails unless every pod of the PodSet answers version on
// its own IP.
func checkAnswers(t *testing.T, ps *podsetv1alpha1.PodSet, version string) {
	t.Helper()
	for name, p := range pods(t, ps) {
		got, err := get("http://" + p.Status.PodIP + ":8080/")
		if err != nil || got != version {
			t.Errorf("pod %s at %s answers %q (%v), want %q", name, p.Status.PodIP, got, err, version)
		}
	}
}

// httpClient opens a new connection for every request, as a new client of
// a Service does: the dataplane routes each connection by the rules it has
// when the connection opens.
var httpClient = &http.Client{
	Timeout: 2 * time.Second,
	Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{ControlContext: bindFirst}).DialContext,
	},
}

// attemptKey is the context key of a request's *attempt.
type attemptKey struct{}

// attempt is how far one request of getTraced got: what its dial and the
// httptrace hooks saw, from whichever goroutine the transport ran them on.
type attempt struct {
	mu        sync.Mutex
	port      int    // the local port, bound before the connect
	remote    string // the address it connected to
	connected bool
	wrote     bool
}

// bindFirst binds a request's socket to an ephemeral port before it
// connects, and records the port: connect would pick one too, but too
// late to read when the connection never opens.
func bindFirst(ctx context.Context, network, _ string, c syscall.RawConn) error {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	if a == nil || network != "tcp4" {
		return nil
	}
	var err error
	if cerr := c.Control(func(fd uintptr) {
		if err = syscall.Bind(int(fd), &syscall.SockaddrInet4{}); err != nil {
			return
		}
		var sa syscall.Sockaddr
		if sa, err = syscall.Getsockname(int(fd)); err == nil {
			if in4, ok := sa.(*syscall.SockaddrInet4); ok {
				a.mu.Lock()
				a.port = in4.Port
				a.mu.Unlock()
			}
		}
	}); cerr != nil {
		return cerr
	}
	return err
}

func get(url string) (string, error) {
	body, _, err := getTraced(url)
	return body, err
}

// getTraced is get that, when the request fails, also says how far it got
// and where the dataplane sent it: whether the connection opened, from
// which local port, whether the request was written, and the kernel's
// conntrack entries of that connection then (their reply source is the
// backend kube-proxy chose; none: no packet of it was tracked, or the
// entry is gone).
func getTraced(url string) (string, string, error) {
	a := &attempt{}
	set := func(f func()) { a.mu.Lock(); defer a.mu.Unlock(); f() }
	trace := &httptrace.ClientTrace{
		ConnectStart: func(_, addr string) { set(func() { a.remote = addr }) },
		GotConn:      func(httptrace.GotConnInfo) { set(func() { a.connected = true }) },
		WroteRequest: func(httptrace.WroteRequestInfo) { set(func() { a.wrote = true }) },
	}
	body, err := fetch(httptrace.WithClientTrace(context.WithValue(context.Background(), attemptKey{}, a), trace), url)
	if err == nil {
		return body, "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	entries := conntrack(strconv.Itoa(a.port), a.remote)
	if !a.connected {
		return "", fmt.Sprintf("no connection opened from port %d; conntrack: %s", a.port, entries), err
	}
	return "", fmt.Sprintf("connected from port %d, request written %v; conntrack: %s", a.port, a.wrote, entries), err
}

// conntrack returns the kernel's connection-tracking entries whose
// original direction goes from local port sport to dst (host:port), or
// why it cannot.
func conntrack(sport, dst string) string {
	raw, err := os.ReadFile("/proc/net/nf_conntrack")
	if err != nil {
		return err.Error()
	}
	var found []string
	for line := range strings.Lines(string(raw)) {
		fields := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				if _, seen := fields[k]; !seen { // the original direction's fields come first
					fields[k] = v
				}
			}
		}
		if fields["sport"] == sport && fields["dst"]+":"+fields["dport"] == dst {
			found = append(found, strings.Join(strings.Fields(line)[2:], " "))
		}
	}
	if len(found) == 0 {
		return "none"
	}
	return strings.Join(found, " | ")
}

func fetch(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// waitAnswers waits until the Service at url (http://CLUSTER-IP/) answers,
// sending its first request only once kube-proxy routes the cluster IP. A
// connection opened before that is not translated, and the kernel keeps
// its untranslated conntrack entry for 120 s (kubernetes/kubernetes#48719):
// a later connection from the same local port (the traffic of the tests
// opens 100 a second) follows that entry to nowhere and times out. Every
// client timeout of this suite came from there until it waited.
func waitAnswers(t *testing.T, what, url string) {
	t.Helper()
	ip := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	eventually(t, "kube-proxy routes "+ip, func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, "iptables-save", "-t", "nat").Output()
		if err != nil {
			return err
		}
		if !strings.Contains(string(out), "-A KUBE-SERVICES -d "+ip+"/32 ") {
			return fmt.Errorf("no rule for %s in the nat table's KUBE-SERVICES yet", ip)
		}
		return nil
	})
	eventually(t, what+" answers", func(context.Context) error { _, err := get(url); return err })
}

// traffic sends requests to a URL one after the other until stopped, at
// most maxRequests, and counts the answers by body and the failures.
type traffic struct {
	mu       sync.Mutex
	answers  map[string]int
	failures []string
	// failedAt is when each failed request was sent.
	failedAt []time.Time
	total    int
	stop     chan struct{}
	done     chan struct{}
}

const maxRequests = 20000

func startTraffic(url string) *traffic {
	tr := &traffic{answers: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for range maxRequests {
			select {
			case <-tr.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			sent := time.Now()
			body, how, err := getTraced(url)
			tr.mu.Lock()
			tr.total++
			if err != nil {
				tr.failures = append(tr.failures, fmt.Sprintf("sent %s, failed %v later: %v (%s)",
					sent.Format("15:04:05.000"), time.Since(sent).Round(time.Millisecond), err, how))
				tr.failedAt = append(tr.failedAt, sent)
			} else {
				tr.answers[body]++
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

// finish stops the traffic and returns the count of requests, of failures
// and the answers.
func (tr *traffic) finish() (total int, failures []string, answers map[string]int) {
	close(tr.stop)
	<-tr.done
	return tr.total, tr.failures, tr.answers
}

// checkOnly fails unless every answer is one of versions.
func checkOnly(t *testing.T, answers map[string]int, versions ...string) {
	t.Helper()
	for body, n := range answers {
		if !slices.Contains(versions, body) {
			t.Errorf("%d answers %q, want only %v", n, body, versions)
		}
	}
}
