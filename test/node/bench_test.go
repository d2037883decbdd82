//go:build node

package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestRolloutBenchmark is the real node's benchmark, not a test: an image
// change across NODE_BENCH_PODS (20) pods of the test app, made by a
// PodSet in place (with the default inPlaceDrainSeconds, and with 0), a
// Deployment and a StatefulSet (Parallel), one after
// the other, each with the same maxUnavailable (a quarter of the pods).
// It prints a table: the time from the change until every pod runs the new
// image and is Ready, the API server's writes meanwhile (of every client:
// the controllers and the kubelet), and the pods that kept their IP. It
// runs with NODE_BENCH=1 (make bench-node; make bench runs it when the
// machine can run the node) and asserts nothing about the figures.
func TestRolloutBenchmark(t *testing.T) {
	if os.Getenv("NODE_BENCH") == "" {
		t.Skip("a benchmark: run it with make bench-node")
	}
	n := int32(20)
	if v, err := strconv.Atoi(os.Getenv("NODE_BENCH_PODS")); err == nil && v > 0 {
		n = int32(v)
	}
	maxUnavailable := intstr.FromInt32(max(1, n/4))

	type result struct {
		name   string
		took   time.Duration
		writes int
		kept   int
	}
	var results []result
	// podSet makes the PodSet contender, with the drain given (nil: the
	// default).
	podSet := func(drain *int32) func(ns string) client.Object {
		return func(ns string) client.Object {
			ps := appPodSet(ns, "web", n, app("v1"))
			ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: &maxUnavailable}
			ps.Spec.UpdateStrategy.InPlaceDrainSeconds = drain
			return ps
		}
	}
	setPodSetImage := func(obj client.Object) { setImage(t, obj.(*podsetv1alpha1.PodSet), app("v2")) }
	patchAppImage := func(obj client.Object) { patchImage(t, obj) }
	for _, c := range []struct {
		name   string
		create func(ns string) client.Object
		change func(obj client.Object)
	}{
		{"podset (in place)", podSet(nil), setPodSetImage},
		{"podset (in place, inPlaceDrainSeconds 0)", podSet(ptr.To[int32](0)), setPodSetImage},
		{"Deployment", func(ns string) client.Object {
			return &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To(n),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Template: hardenedTemplate(ns),
					Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
						MaxUnavailable: &maxUnavailable, MaxSurge: ptr.To(intstr.FromInt32(0)),
					}},
				},
			}
		}, patchAppImage},
		{"StatefulSet (Parallel)", func(ns string) client.Object {
			return &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
				Spec: appsv1.StatefulSetSpec{
					Replicas:            ptr.To(n),
					Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Template:            hardenedTemplate(ns),
					PodManagementPolicy: appsv1.ParallelPodManagement,
					UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
						MaxUnavailable: &maxUnavailable,
					}},
				},
			}
		}, patchAppImage},
	} {
		ns := newNamespace(t)
		obj := c.create(ns)
		if err := suite.client.Create(t.Context(), obj); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		eventually(t, c.name+": every pod runs v1 and is Ready", allRun(ns, n, app("v1")))
		before := map[string]bool{}
		for _, p := range listPods(t, ns) {
			before[p.Status.PodIP] = true
		}
		writes := apiWrites(t)
		start := time.Now()
		c.change(obj)
		eventually(t, c.name+": every pod runs v2 and is Ready", allRun(ns, n, app("v2")))
		r := result{name: c.name, took: time.Since(start), writes: apiWrites(t) - writes}
		for _, p := range listPods(t, ns) {
			if before[p.Status.PodIP] {
				r.kept++
			}
		}
		results = append(results, r)
		// The next contender gets the node to itself.
		if err := suite.client.Delete(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		eventually(t, c.name+": its pods are gone", func(context.Context) error {
			if got := len(listPods(t, ns)); got > 0 {
				return fmt.Errorf("%d pods left", got)
			}
			return nil
		})
	}

	var table strings.Builder
	fmt.Fprintf(&table, "\nImage change across %d pods of the test app on the real node, maxUnavailable %s (make bench-node):\n\n", n, maxUnavailable.String())
	fmt.Fprintln(&table, "| contender | time to all new pods Ready | API writes | pods that kept their IP |")
	fmt.Fprintln(&table, "|---|---|---|---|")
	for _, r := range results {
		fmt.Fprintf(&table, "| %s | %.2f s | %d | %d of %d |\n", r.name, r.took.Seconds(), r.writes, r.kept, n)
	}
	faster := min(results[2].took, results[3].took)
	fmt.Fprintf(&table, "\npodset / the faster built-in: %.2f with the default drain, %.2f without (target: at most 0.5)\n",
		results[0].took.Seconds()/faster.Seconds(), results[1].took.Seconds()/faster.Seconds())
	fmt.Print(table.String())
}

// hardenedTemplate is the PodSet's pod template as the operator hardens
// it, for the built-in controllers, whose pods must pass the namespace's
// Pod Security "restricted" by themselves.
func hardenedTemplate(ns string) corev1.PodTemplateSpec {
	tmpl := appPodSet(ns, "web", 1, app("v1")).Spec.Template
	tmpl.Spec.AutomountServiceAccountToken = ptr.To(false)
	tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	tmpl.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
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
	total := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		write := false
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
			write = write || strings.Contains(line, `verb="`+verb+`"`)
		}
		if !write {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			total += int(v)
		}
	}
	return total
}
