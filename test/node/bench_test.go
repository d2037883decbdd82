//go:build node

package node

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/kruise"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestRolloutBenchmark is the real node's benchmark, not a test: an image
// change across NODE_BENCH_PODS (40) pods, maxUnavailable 25%, by
// contenders of equal safety, with a client sending requests through a
// Service all along, for two pod shapes (benchShapes): the test app
// alone, and the test app with an init container, a sidecar the rollout
// does not change, the service-account token and a ConfigMap volume. The
// contenders:
//   - the PodSet in place, with its default drain (3 s);
//   - a Deployment with maxSurge 0 and a preStop sleep equal to the
//     drain: the peer of equal safety and capacity;
//   - a StatefulSet (Parallel) with the same preStop sleep;
//   - a Deployment as users run it, with its default surge (25%) and no
//     preStop hook: an extra row, whose failed requests are reported;
//   - with KRUISE_DIR, OpenKruise's CloneSet in place twice: with
//     gracePeriodSeconds equal to the drain, as a user would set it, and
//     with the one that drains every pod that long (cloneSetGraces).
//
// It prints, per shape, a table of the time from the change until every
// pod runs the new image and is Ready, the requests that failed, the API
// server's writes (of every client) and the pods that kept their IP; the
// PodSet's pods' phases (median and p90 from the change); the floor, what
// no operator can take away: the drain plus the kubelet's own restart and
// one sync, measured on bare pods of the same shape on the same node; and
// its summary lines, `bench-node <shape>: podset / deployment = <ratio>`
// (the Deployment of equal safety), `bench-node <shape>: podset / floor
// = <ratio>` (the median pod's critical path, gate closed to Ready, over
// the floor) and, with KRUISE_DIR, `podset / kruise` (the CloneSet of
// equal safety) and `podset / kruise at gracePeriodSeconds <drain>`. It runs with NODE_BENCH=1 (make bench-node; make bench runs
// it when the machine can run the node) and asserts nothing about the
// figures.
func TestRolloutBenchmark(t *testing.T) {
	runBenchmark(t, func(shape benchShape, n int32) (string, []string) {
		r := runShape(t, shape, n)
		return r.table, r.summary
	})
}

// runBenchmark is what the real node's benchmarks share: skipped without
// NODE_BENCH=1; NODE_BENCH_PODS pods (40); run, the benchmark of one
// shape, for each of benchShapes (NODE_BENCH_SHAPES, comma-separated,
// runs only those); then every shape's table, and their summary lines.
func runBenchmark(t *testing.T, run func(shape benchShape, n int32) (table string, summary []string)) {
	if os.Getenv("NODE_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-node")
	}
	n := int32(40)
	if v, err := strconv.Atoi(os.Getenv("NODE_BENCH_PODS")); err == nil && v > 0 {
		n = int32(v)
	}
	var out strings.Builder
	var summary []string
	for _, shape := range benchShapes {
		if only := os.Getenv("NODE_BENCH_SHAPES"); only != "" && !slices.Contains(strings.Split(only, ","), shape.name) {
			continue
		}
		eventually(t, "no namespace is still being deleted", namespacesGone)
		table, lines := run(shape, n)
		out.WriteString(table)
		summary = append(summary, lines...)
	}
	fmt.Print(out.String())
	fmt.Println()
	for _, line := range summary {
		fmt.Println(line)
	}
}

// namespacesGone reports whether every namespace an earlier test deleted
// is gone: until then its pods are still stopping on the node, and their
// kubelet's and controllers' writes would be counted, and their
// terminations felt, in the first contender's window, as in the creation
// benchmark's first run after TestDrainSweep (2026-12-01: the PodSet's
// 40 pods counted 1,129 API writes, the Deployment's after it 558).
func namespacesGone(ctx context.Context) error {
	var list corev1.NamespaceList
	if err := suite.client.List(ctx, &list); err != nil {
		return err
	}
	for _, ns := range list.Items {
		if ns.Status.Phase == corev1.NamespaceTerminating {
			return fmt.Errorf("namespace %s is still being deleted", ns.Name)
		}
	}
	return nil
}

// kruiseGate is the readiness gate of OpenKruise's pods.
const kruiseGate = "InPlaceUpdateReady"

// drainSeconds is the drain of every contender: the PodSet's default
// spec.drainSeconds, and the preStop sleep of the built-in ones.
const drainSeconds = podsetv1alpha1.DefaultDrainSeconds

// benchShape is one shape of pod: its name, and what it adds to the test
// app's template (with the namespace, for what it needs there).
type benchShape struct {
	name  string
	shape func(t *testing.T, ns string, tmpl *corev1.PodTemplateSpec)
}

var benchShapes = []benchShape{
	{"minimal", func(*testing.T, string, *corev1.PodTemplateSpec) {}},
	{"realistic", realisticPod},
}

// realisticPod makes the test app's pod what a production pod looks like
// to a kubelet: an init container that checks the configuration, a
// sidecar with its own readiness probe (its image does not change in the
// rollout), the service-account token mounted and a ConfigMap volume.
// Each runs the test app binary, doing real work: no sleep is added.
func realisticPod(t *testing.T, ns string, tmpl *corev1.PodTemplateSpec) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns}, Data: map[string]string{"config.yaml": "greeting: hello\n"}}
	if err := suite.client.Create(t.Context(), cm); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mount := corev1.VolumeMount{Name: "config", MountPath: "/etc/app", ReadOnly: true}
	spec := &tmpl.Spec
	spec.AutomountServiceAccountToken = ptr.To(true)
	spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount}
	spec.InitContainers = []corev1.Container{
		{Name: "check-config", Image: app("v1"), ImagePullPolicy: corev1.PullNever, Command: []string{"/app", "-check", "/etc/app/config.yaml"}, VolumeMounts: []corev1.VolumeMount{mount}},
		{
			Name: "sidecar", Image: app("v1"), ImagePullPolicy: corev1.PullNever, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Command: []string{"/app", "-listen", ":9090"},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(9090)}},
				PeriodSeconds: 1, FailureThreshold: 1,
			},
		},
	}
}

// benchTemplate is the test app's pod template of shape for namespace ns
// (the realistic shape makes its ConfigMap there), with a preStop sleep of
// the drain on the app container if preStop: the hook the operator gives
// its own pods, so that the built-in contenders' pods drain as long. Every
// contender of the real node's benchmarks runs this template.
func benchTemplate(t *testing.T, shape benchShape, ns string, preStop bool) corev1.PodTemplateSpec {
	t.Helper()
	tmpl := appPodSet(ns, "web", 1, app("v1")).Spec.Template
	shape.shape(t, ns, &tmpl)
	if preStop {
		tmpl.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: drainSeconds}}}
	}
	return tmpl
}

// benchDeployment is the Deployment web of n pods of tmpl in ns, hardened
// as the operator hardens its pods (the namespace enforces Pod Security
// "restricted"). Its strategy is the API server's default until the
// caller sets one.
func benchDeployment(ns string, n int32, tmpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: hardened(tmpl),
		},
	}
}

// benchStatefulSet is the StatefulSet web of n pods of tmpl in ns,
// hardened as benchDeployment's, that creates and deletes its pods all at
// once (Parallel), as a PodSet and a Deployment do, rather than one after
// the other. Its update strategy is the API server's default until the
// caller sets one.
func benchStatefulSet(ns string, n int32, tmpl corev1.PodTemplateSpec) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(n),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template:            hardened(tmpl),
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}
}

// shapeResult is what benchShape prints: its tables, and its two summary
// lines.
type shapeResult struct {
	table   string
	summary []string
}

// rolloutContender is a workload of the real node's rollout benchmark.
type rolloutContender struct {
	name   string
	create func(ns string) client.Object
	change func(obj client.Object)
	// start runs what the contender needs beside the cluster for
	// namespace ns, and returns what stops it.
	start func(ns string) (stop func() error)
	// versus, when set, is the contender's name in a summary line,
	// `podset / <versus> = <ratio>`.
	versus string
}

// cloneSetGraces are the CloneSet's gracePeriodSeconds the benchmark runs,
// with each one's name in the summary lines: the drain, as a user would
// set it, and one more, the CloneSet of equal safety. kruise counts the
// grace from the update's timestamp, which it keeps in an annotation in
// whole seconds (InPlaceUpdateState.UpdateTimestamp, a metav1.Time;
// finishGracePeriod in kruise's pkg/util/inplaceupdate/inplace_update.go),
// so a reconcile in the grace's last second, which a rollout's other pods
// bring, finds it over up to a second early: gracePeriodSeconds G drains a
// pod more than G-1 and at most G seconds before its image changes. A
// PodSet's pod drains drainSeconds at least: the preStop sleep begins
// once its gate has closed and its image changed.
var cloneSetGraces = []struct {
	seconds int32
	versus  string
}{
	{drainSeconds, fmt.Sprintf("kruise at gracePeriodSeconds %d", drainSeconds)},
	{drainSeconds + 1, "kruise"},
}

// cloneSetContender is OpenKruise's CloneSet of n pods of template, in
// place with gracePeriodSeconds grace, with its manager started for the
// contender's namespace.
func cloneSetContender(t *testing.T, n int32, maxUnavailable intstr.IntOrString, template func(ns string, preStop bool) corev1.PodTemplateSpec, grace int32, versus string) rolloutContender {
	safety := ""
	if grace-1 == drainSeconds {
		safety = ", equal safety"
	}
	return rolloutContender{
		name: fmt.Sprintf("OpenKruise CloneSet (InPlaceIfPossible, gracePeriodSeconds %d: drains %d to %d s%s)", grace, grace-1, grace, safety),
		create: func(ns string) client.Object {
			return cloneSet(t, ns, n, hardened(template(ns, false)), maxUnavailable, grace)
		},
		change: func(obj client.Object) {
			// A custom resource takes no strategic merge patch.
			patch := fmt.Appendf(nil, `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, app("v2"))
			if err := suite.client.Patch(t.Context(), obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
				t.Fatal(err)
			}
		},
		start: func(ns string) func() error {
			state := t.TempDir()
			m, err := kruise.Start(t.Context(), kruise.Options{
				Dir: kruise.Dir(), Kubeconfig: suite.kubeconfig, Client: suite.client,
				StateDir: state, Log: filepath.Join(state, "kruise-manager.log"),
				FieldManager: "podset-bench-node", Namespaces: []string{ns},
			})
			if err != nil {
				t.Fatal(err)
			}
			return m.Stop
		},
		versus: versus,
	}
}

// contenderResult is one contender's rollout.
type contenderResult struct {
	name            string
	took            time.Duration
	sent, failed    int
	writes, keptIPs int
	// phases of the in-place pods, from the change (the PodSet's and the
	// CloneSets').
	phases *podPhases
	// versus is the contender's rolloutContender.versus.
	versus string
}

func runShape(t *testing.T, shape benchShape, n int32) shapeResult {
	maxUnavailable := intstr.FromString("25%")
	template := func(ns string, preStop bool) corev1.PodTemplateSpec { return benchTemplate(t, shape, ns, preStop) }
	deployment := func(surge *intstr.IntOrString, preStop bool) func(ns string) client.Object {
		return func(ns string) client.Object {
			d := benchDeployment(ns, n, template(ns, preStop))
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: &maxUnavailable, MaxSurge: surge,
			}}
			return d
		}
	}
	contenders := []rolloutContender{
		{"podset (in place)", func(ns string) client.Object {
			ps := appPodSet(ns, "web", n, app("v1"))
			ps.Spec.Template = template(ns, false)
			ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
			ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: &maxUnavailable}
			return ps
		}, func(obj client.Object) { setImage(t, obj.(*podsetv1alpha1.PodSet), app("v2")) }, nil, ""},
		{fmt.Sprintf("Deployment (maxSurge 0, preStop sleep %d s)", drainSeconds), deployment(ptr.To(intstr.FromInt32(0)), true), func(obj client.Object) { patchImage(t, obj) }, nil, "deployment"},
		{fmt.Sprintf("StatefulSet (Parallel, preStop sleep %d s)", drainSeconds), func(ns string) client.Object {
			ss := benchStatefulSet(ns, n, template(ns, true))
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
				MaxUnavailable: &maxUnavailable,
			}}
			return ss
		}, func(obj client.Object) { patchImage(t, obj) }, nil, ""},
		{"Deployment (default surge 25%, no preStop; unequal safety)", deployment(nil, false), func(obj client.Object) { patchImage(t, obj) }, nil, ""},
	}
	if kruise.Dir() != "" {
		for _, g := range cloneSetGraces {
			contenders = append(contenders, cloneSetContender(t, n, maxUnavailable, template, g.seconds, g.versus))
		}
	}

	var results []contenderResult
	for _, c := range contenders {
		ns := newNamespace(t)
		stop := func() error { return nil }
		if c.start != nil {
			stop = c.start(ns)
		}
		obj := c.create(ns)
		if err := suite.client.Create(t.Context(), obj); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		url := benchService(t, ns)
		eventually(t, c.name+": every pod runs v1 and is Ready", allRun(ns, n, app("v1")))
		waitAnswers(t, c.name+": the Service", url)
		before := map[string]bool{}
		for _, p := range listPods(t, ns) {
			before[p.Status.PodIP] = true
		}
		endpoints := watchEndpoints(t, ns, "web")
		timeline := watchTimeline(t, ns)
		tr := startTraffic(url)
		time.Sleep(time.Second)
		writes := apiWrites(t)
		start := time.Now()
		c.change(obj)
		eventually(t, c.name+": every pod runs v2 and is Ready", allRun(ns, n, app("v2")))
		r := contenderResult{name: c.name, took: time.Since(start), writes: apiWrites(t) - writes}
		time.Sleep(time.Second)
		var failures []string
		r.sent, failures, _ = tr.finish()
		r.failed = len(failures)
		for _, p := range listPods(t, ns) {
			if before[p.Status.PodIP] {
				r.keptIPs++
			}
		}
		switch o := obj.(type) {
		case *podsetv1alpha1.PodSet:
			r.phases = timeline.phases(start, endpoints.leftAt())
		case *unstructured.Unstructured:
			if o.GroupVersionKind() == kruise.CloneSetGVK {
				r.phases = timeline.phases(start, endpoints.leftAt())
			}
		}
		timeline.stop()
		r.versus = c.versus
		results = append(results, r)
		// The next contender gets the node to itself.
		deleteAndWait(t, c.name, ns, obj)
		if err := stop(); err != nil {
			t.Errorf("%s: stopping: %v", c.name, err)
		}
	}
	restart := measureKubeletRestart(t, template, n, maxUnavailable, false)
	floor := time.Duration(drainSeconds)*time.Second + restart.median
	// The same bare pods with the operator's drain hook (a preStop sleep
	// of the drain), which every PodSet pod carries: the kubelet holds the
	// container in it when the image changes.
	hooked := measureKubeletRestart(t, template, n, maxUnavailable, true)

	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s pod: an image change across %d pods on the real node, maxUnavailable %s, a client through a Service (make bench-node)\n\n", shape.name, n, maxUnavailable.String())
	fmt.Fprintln(&b, "| contender | time to all new pods Ready | failed / sent requests | API writes | pods that kept their IP |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.2f s | %d / %d | %d | %d of %d |\n", r.name, r.took.Seconds(), r.failed, r.sent, r.writes, r.keptIPs, n)
	}
	if kruise.Dir() == "" {
		fmt.Fprintln(&b, "| OpenKruise CloneSet (InPlaceIfPossible) | not run: KRUISE_DIR is not set (make bench-node builds kruise-manager and sets it) | — | — | — |")
	}
	ps := results[0].phases
	fmt.Fprintf(&b, "\nThe in-place pods, seconds from the change (median / p90 of %d pods):\n\n", ps.pods)
	fmt.Fprintln(&b, "| contender | first gate closed | gate closed | out of ready EndpointSlices | image applied | container restarted | gate open again | Ready | critical path (gate closed → Ready) | per pod: restarted → gate open | per pod: gate open → Ready | handover: a pod Ready → the next gate closed | pods out at once: most / mean until the last gate closed |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		if ph := r.phases; ph != nil {
			fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d / %.1f |\n", r.name, ph.firstClosed.Seconds(), ph.gateClosed, ph.outOfEndpoints, ph.imageApplied, ph.restarted, ph.gateOpened, ph.ready, ph.critical, ph.restartToGate, ph.gateToReady, ph.handover, ph.peakOut, ph.meanOut)
		}
	}
	fmt.Fprintf(&b, "\nFloor: the drain (%d s) + the kubelet's own restart and Ready report of a bare pod of this shape (image patched, %s at a time: median %.2f s, p90 %.2f s) = %.2f s\n",
		drainSeconds, maxUnavailable.String(), restart.median.Seconds(), restart.p90.Seconds(), floor.Seconds())
	fmt.Fprintf(&b, "The same bare pods with a preStop sleep of the drain (%d s), as the operator gives its pods: the kubelet's restart and Ready report, median %.2f s, p90 %.2f s\n",
		drainSeconds, hooked.median.Seconds(), hooked.p90.Seconds())
	var summary []string
	for _, r := range results[1:] {
		if r.versus != "" {
			summary = append(summary, fmt.Sprintf("bench-node %s: podset / %s = %.2f", shape.name, r.versus, results[0].took.Seconds()/r.took.Seconds()))
		}
	}
	summary = append(summary, fmt.Sprintf("bench-node %s: podset / floor = %.2f", shape.name, ps.criticalMedian.Seconds()/floor.Seconds()))
	return shapeResult{table: b.String(), summary: summary}
}

// benchService makes the Service web in ns and returns its URL.
func benchService(t *testing.T, ns string) string {
	t.Helper()
	svc := &corev1.Service{}
	svc.Name, svc.Namespace = "web", ns
	svc.Spec.Selector = map[string]string{"app": "web"}
	svc.Spec.Ports = []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if err := suite.client.Create(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	return "http://" + svc.Spec.ClusterIP + "/"
}

// quantiles is a median and a p90.
type quantiles struct{ median, p90 time.Duration }

func quantilesOf(ds []time.Duration) quantiles {
	return quantiles{median: testenv.Percentile(ds, 50), p90: testenv.Percentile(ds, 90)}
}

func (q quantiles) String() string {
	return fmt.Sprintf("%.2f / %.2f", q.median.Seconds(), q.p90.Seconds())
}

// measureKubeletRestart is how long a kubelet takes to restart a bare
// pod's container for a new image and report the pod Ready again, with
// as many at a time as the rollouts take: no controller, no gate, no
// drain (preStop: the container sleeps the drain in a preStop hook, which
// the kubelet runs before it stops it).
func measureKubeletRestart(t *testing.T, template func(string, bool) corev1.PodTemplateSpec, n int32, maxUnavailable intstr.IntOrString, preStop bool) quantiles {
	ns := newNamespace(t)
	k, _ := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, int(n), false)
	k = max(1, k)
	tmpl := hardened(template(ns, preStop))
	for i := range k {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bare-%d", i), Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		if err := suite.client.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the bare pods run v1 and are Ready", allRun(ns, int32(k), app("v1")))
	timeline := watchTimeline(t, ns)
	start := time.Now()
	for _, p := range listPods(t, ns) {
		patch := fmt.Appendf(nil, `{"spec":{"containers":[{"name":"app","image":%q}]}}`, app("v2"))
		if err := suite.client.Patch(t.Context(), &p, client.RawPatch("application/strategic-merge-patch+json", patch)); err != nil {
			t.Fatal(err)
		}
	}
	// Ready again once restarted: the old container stays Ready until the
	// kubelet stops it.
	eventually(t, "the bare pods restarted on v2 and are Ready", func(context.Context) error {
		if n := timeline.readyCount(); n < k {
			return fmt.Errorf("%d of %d", n, k)
		}
		return nil
	})
	ph := timeline.phases(start, nil)
	timeline.stop()
	for _, p := range listPods(t, ns) {
		_ = suite.client.Delete(t.Context(), &p)
	}
	return ph.readyFromImage
}

// podTimeline records, from a watch of a namespace's pods, when each pod
// first showed each step of an in-place update.
type podTimeline struct {
	mu sync.Mutex
	// restarts is each pod's restart count of its app container when
	// first seen.
	restarts                                                 map[string]int32
	gateClosed, imageApplied, restarted, gateOpened, readyAt map[string]time.Time
	// stop ends the watch.
	stop func()
}

func watchTimeline(t *testing.T, ns string) *podTimeline {
	t.Helper()
	tl := &podTimeline{
		restarts: map[string]int32{}, gateClosed: map[string]time.Time{}, imageApplied: map[string]time.Time{},
		restarted: map[string]time.Time{}, gateOpened: map[string]time.Time{}, readyAt: map[string]time.Time{},
	}
	tl.stop = watchPods(t, ns, func(_ watch.EventType, p *corev1.Pod, at time.Time) {
		tl.observe(p, at)
	})
	return tl
}

func (tl *podTimeline) observe(p *corev1.Pod, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	i := slices.IndexFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == "app" })
	if i < 0 {
		return
	}
	count := p.Status.ContainerStatuses[i].RestartCount
	first, seen := tl.restarts[p.Name]
	if !seen {
		tl.restarts[p.Name], first = count, count
	}
	once := func(m map[string]time.Time, cond bool) {
		if _, ok := m[p.Name]; cond && !ok {
			m[p.Name] = at
		}
	}
	gate := podCondition(p, podsetv1alpha1.InPlaceUpdateReadyCondition)
	if gate == nil {
		gate = podCondition(p, kruiseGate) // a CloneSet's pod
	}
	once(tl.gateClosed, gate != nil && gate.Status == corev1.ConditionFalse)
	once(tl.imageApplied, p.Spec.Containers[0].Image == app("v2"))
	once(tl.restarted, count > first)
	_, closed := tl.gateClosed[p.Name]
	once(tl.gateOpened, closed && gate != nil && gate.Status == corev1.ConditionTrue)
	ready := podCondition(p, corev1.PodReady)
	once(tl.readyAt, count > first && p.Spec.Containers[0].Image == app("v2") && ready != nil && ready.Status == corev1.ConditionTrue)
}

// readyCount is how many pods were Ready again on v2 after a restart.
func (tl *podTimeline) readyCount() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.readyAt)
}

// podPhases is the steps of pods' in-place updates, from the change.
type podPhases struct {
	pods                                                                   int
	gateClosed, outOfEndpoints, imageApplied, restarted, gateOpened, ready quantiles
	// critical is each pod's time from its gate closing to Ready again;
	// readyFromImage from its image applied to Ready again; restartToGate
	// from its restarted container's report to its gate open again, and
	// gateToReady from there to Ready.
	critical, readyFromImage, restartToGate, gateToReady quantiles
	// firstClosed is the first gate closed, from the change; handover is
	// from a pod's Ready to the gate that closes in its place: the k-th
	// Ready pod's to the gate closed k-th after the window's first ones
	// (those closed before any pod was Ready again).
	firstClosed    time.Duration
	handover       quantiles
	criticalMedian time.Duration
	// peakOut is the most pods out at once (gate closed, not yet Ready
	// again); meanOut their mean number from the first gate closed to
	// the last: the window the rollout kept full, which with the
	// critical path makes its time.
	peakOut int
	meanOut float64
}

func (tl *podTimeline) phases(start time.Time, leftEndpoints map[string]time.Time) *podPhases {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	since := func(m map[string]time.Time) quantiles {
		var ds []time.Duration
		for _, at := range m {
			ds = append(ds, at.Sub(start))
		}
		return quantilesOf(ds)
	}
	var critical, fromImage, restartToGate, gateToReady []time.Duration
	for name, opened := range tl.gateOpened {
		if restarted, ok := tl.restarted[name]; ok {
			restartToGate = append(restartToGate, opened.Sub(restarted))
		}
		if ready, ok := tl.readyAt[name]; ok {
			gateToReady = append(gateToReady, ready.Sub(opened))
		}
	}
	for name, ready := range tl.readyAt {
		if closed, ok := tl.gateClosed[name]; ok {
			critical = append(critical, ready.Sub(closed))
		}
		if applied, ok := tl.imageApplied[name]; ok {
			fromImage = append(fromImage, ready.Sub(applied))
		}
	}
	ph := &podPhases{
		pods: len(tl.readyAt), gateClosed: since(tl.gateClosed), outOfEndpoints: since(leftEndpoints),
		imageApplied: since(tl.imageApplied), restarted: since(tl.restarted), gateOpened: since(tl.gateOpened), ready: since(tl.readyAt),
		critical: quantilesOf(critical), readyFromImage: quantilesOf(fromImage),
		restartToGate: quantilesOf(restartToGate), gateToReady: quantilesOf(gateToReady),
	}
	ph.criticalMedian = ph.critical.median
	closes, readies := sortedTimes(tl.gateClosed), sortedTimes(tl.readyAt)
	if len(closes) > 0 {
		ph.firstClosed = closes[0].Sub(start)
	}
	if len(readies) > 0 {
		window := 0
		for window < len(closes) && !closes[window].After(readies[0]) {
			window++
		}
		var handover []time.Duration
		for k := 0; window+k < len(closes) && k < len(readies); k++ {
			handover = append(handover, closes[window+k].Sub(readies[k]))
		}
		ph.handover = quantilesOf(handover)
	}
	ph.peakOut, ph.meanOut = outAtOnce(tl.gateClosed, tl.readyAt)
	return ph
}

// outAtOnce is the most pods out at once, each from its gate closed to
// Ready again, and their mean number from the first gate closed to the
// last.
func outAtOnce(closed, ready map[string]time.Time) (peak int, mean float64) {
	type step struct {
		at time.Time
		d  int
	}
	var steps []step
	var last time.Time
	for name, c := range closed {
		steps = append(steps, step{c, 1})
		if c.After(last) {
			last = c
		}
		if r, ok := ready[name]; ok {
			steps = append(steps, step{r, -1})
		}
	}
	if len(closed) < 2 {
		return len(closed), float64(len(closed))
	}
	// The first step is the first gate closed: a pod is Ready again only
	// after its gate closed.
	slices.SortFunc(steps, func(a, b step) int { return cmp.Or(a.at.Compare(b.at), a.d-b.d) })
	first := steps[0].at
	out, area := 0, 0.0
	for i, s := range steps {
		out += s.d
		peak = max(peak, out)
		if i+1 < len(steps) && s.at.Before(last) {
			to := steps[i+1].at
			if to.After(last) {
				to = last
			}
			area += float64(out) * to.Sub(s.at).Seconds()
		}
	}
	return peak, area / last.Sub(first).Seconds()
}

// sortedTimes is the times of m, earliest first.
func sortedTimes(m map[string]time.Time) []time.Time {
	ts := make([]time.Time, 0, len(m))
	for _, t := range m {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// hardened is a pod template as the operator hardens it, for the
// built-in controllers and bare pods, whose pods must pass the
// namespace's Pod Security "restricted" by themselves.
func hardened(tmpl corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	if tmpl.Spec.AutomountServiceAccountToken == nil {
		tmpl.Spec.AutomountServiceAccountToken = ptr.To(false)
	}
	tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	for _, list := range [][]corev1.Container{tmpl.Spec.Containers, tmpl.Spec.InitContainers} {
		for i := range list {
			list[i].SecurityContext = &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				ReadOnlyRootFilesystem:   ptr.To(true),
			}
		}
	}
	return tmpl
}

// patchImage sets the image of a Deployment's or StatefulSet's container
// to v2.
func patchImage(t *testing.T, obj client.Object) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, app("v2"))
	if err := suite.client.Patch(t.Context(), obj, client.RawPatch("application/strategic-merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func listPods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := suite.client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// allRun is nil once the namespace has exactly n pods, each live, running
// image and Ready.
func allRun(ns string, n int32, image string) func(context.Context) error {
	return func(ctx context.Context) error {
		var list corev1.PodList
		if err := suite.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for _, p := range list.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
			if p.DeletionTimestamp == nil && ready && p.Spec.Containers[0].Image == image {
				done++
			}
		}
		if done != int(n) || len(list.Items) != int(n) {
			return fmt.Errorf("%d pods, %d of %d run %s and are Ready", len(list.Items), done, n, image)
		}
		return nil
	}
}

// apiWrites is the count of the API server's write requests so far, of
// every client.
func apiWrites(t *testing.T) int {
	t.Helper()
	out, err := execKubectl("get", "--raw", "/metrics")
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	r, err := testenv.ParseRequests([]byte(out))
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	return r.Count(func(k testenv.RequestKey) bool { return testenv.IsWrite(k.Verb) })
}

// TestDrainSweep is the evidence behind spec.drainSeconds' default, not a
// test: for each drain (0, 1, 2, 3 s; the field is in whole seconds, so
// 0.5 s cannot be asked for), NODE_DRAIN_ROUNDS (3) rounds of an in-place
// image update and a scale-down 6 -> 3 of the test app (no preStop hook),
// maxUnavailable 2, under a client that opens a new connection through a
// ClusterIP Service every 10 ms. It prints the failed and sent requests
// per drain. It runs with NODE_BENCH=1 (make bench-node).
func TestDrainSweep(t *testing.T) {
	if os.Getenv("NODE_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-node")
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("NODE_DRAIN_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	type tally struct{ sent, failed int }
	var lines []string
	for _, drain := range []int32{0, 1, 2, 3} {
		var inPlace, scaleDown tally
		for round := range rounds {
			ns := newNamespace(t)
			ps := appPodSet(ns, "web", 6, app("v1"))
			ps.Spec.DrainSeconds = ptr.To(drain)
			ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
			create(t, ps)
			url := benchService(t, ns)
			waitReady(t, ps)
			waitAnswers(t, "the Service", url)
			for _, step := range []struct {
				into *tally
				do   func()
			}{
				{&inPlace, func() { setImage(t, ps, app([]string{"v2", "v3", "v1"}[round%3])) }},
				{&scaleDown, func() { update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](3) }) }},
			} {
				tr := startTraffic(url)
				time.Sleep(500 * time.Millisecond)
				step.do()
				waitReady(t, ps)
				waitOnlyReplicas(t, ps)
				time.Sleep(time.Second)
				sent, failures, _ := tr.finish()
				step.into.sent += sent
				step.into.failed += len(failures)
			}
			if err := suite.client.Delete(t.Context(), ps); err != nil {
				t.Fatal(err)
			}
		}
		lines = append(lines, fmt.Sprintf("| %d s | %d / %d | %d / %d |", drain, inPlace.failed, inPlace.sent, scaleDown.failed, scaleDown.sent))
	}
	fmt.Printf("\nFailed / sent requests against spec.drainSeconds, %d rounds each, the test app without a preStop hook (make bench-node):\n\n", rounds)
	fmt.Println("| drainSeconds | in-place image update, 6 pods | scale-down 6 -> 3 |")
	fmt.Println("|---|---|---|")
	for _, l := range lines {
		fmt.Println(l)
	}
}

// cloneSet is OpenKruise's CloneSet of n pods of tmpl, updated in place
// where it can, maxUnavailable at a time, each after grace seconds
// (gracePeriodSeconds: the time between its readiness gate going False
// and the update, cloneSetGraces).
func cloneSet(t *testing.T, ns string, n int32, tmpl corev1.PodTemplateSpec, maxUnavailable intstr.IntOrString, grace int32) client.Object {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	cs := kruise.CloneSet(ns, "web")
	cs.Object["spec"] = map[string]any{
		"replicas": int64(n),
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"template": u,
		"updateStrategy": map[string]any{
			"type":                  "InPlaceIfPossible",
			"maxUnavailable":        maxUnavailable.String(),
			"inPlaceUpdateStrategy": map[string]any{"gracePeriodSeconds": int64(grace)},
		},
	}
	return cs
}

// deleteAndWait deletes a contender's workload obj and waits until none of
// the pods of its namespace ns is left.
func deleteAndWait(t *testing.T, name, ns string, obj client.Object) {
	t.Helper()
	if err := suite.client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, name+": its pods are gone", func(context.Context) error {
		if got := len(listPods(t, ns)); got > 0 {
			return fmt.Errorf("%d pods left", got)
		}
		return nil
	})
}
