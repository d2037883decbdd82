//go:build node

package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestCreateBenchmark is the real node's benchmark of a creation, not a
// test: NODE_BENCH_PODS (40) pods of the test app, from nothing to all
// Ready, created with that replica count by a PodSet, a Deployment and a
// StatefulSet (Parallel), one after the other in a namespace each, for
// both pod shapes (benchShapes; NODE_BENCH_SHAPES runs only those). The
// built-in contenders run the PodSet's template (benchTemplate) hardened,
// with a preStop sleep of the drain on the app container, as in
// TestRolloutBenchmark: the pods the operator makes of it, hardened and
// with its drain hook.
//
// It prints, per shape, a table of the time from the create request until
// every pod is Ready, the kubelet's status writes per pod (createLog) and
// the API server's writes of every client from just before the create
// until the wait for Ready ends (apiWrites); then summary
// lines, `bench-node create <shape>: podset / deployment = <ratio>` and
// `podset / statefulset` (times), and `bench-node create <shape>: kubelet
// status writes per pod, podset / deployment = <ratio>`. It runs with
// NODE_BENCH=1 (make bench-node) and asserts nothing about the figures.
func TestCreateBenchmark(t *testing.T) {
	runBenchmark(t, func(shape benchShape, n int32) (string, []string) { return runCreateShape(t, shape, n) })
}

// createResult is one contender's creation of its pods.
type createResult struct {
	name string
	took time.Duration
	// statusWrites is the kubelet's status writes per pod.
	statusWrites float64
	writes       int
}

// runCreateShape creates n pods of shape with each contender in turn,
// and returns the shape's table and summary lines.
func runCreateShape(t *testing.T, shape benchShape, n int32) (string, []string) {
	contenders := []struct {
		name  string
		build func(ns string) client.Object
	}{
		{"podset", func(ns string) client.Object {
			ps := appPodSet(ns, "web", n, app("v1"))
			ps.Spec.Template = benchTemplate(t, shape, ns, false)
			return ps
		}},
		{"deployment", func(ns string) client.Object { return benchDeployment(ns, n, benchTemplate(t, shape, ns, true)) }},
		{"statefulset (Parallel)", func(ns string) client.Object { return benchStatefulSet(ns, n, benchTemplate(t, shape, ns, true)) }},
	}
	var results []createResult
	for _, c := range contenders {
		ns := newNamespace(t)
		// Built before the count starts: the realistic shape creates a
		// ConfigMap.
		obj := c.build(ns)
		created := watchCreate(t, ns, int(n))
		writes := apiWrites(t)
		start := time.Now()
		if err := suite.client.Create(t.Context(), obj); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		eventually(t, c.name+": every pod is Ready", created.allReady)
		writes = apiWrites(t) - writes
		readyAt, statusWrites := created.result()
		created.stop()
		results = append(results, createResult{
			name: c.name, took: readyAt.Sub(start), statusWrites: float64(statusWrites) / float64(n), writes: writes,
		})
		// The next contender gets the node to itself.
		deleteAndWait(t, c.name, ns, obj)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s pod: %d pods created, from nothing to all Ready, on the real node (make bench-node)\n\n", shape.name, n)
	fmt.Fprintln(&b, "| contender | time to all pods Ready | kubelet status writes per pod | API writes (every client) |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.2f s | %.2f | %d |\n", r.name, r.took.Seconds(), r.statusWrites, r.writes)
	}
	podset, deployment, statefulset := results[0], results[1], results[2]
	return b.String(), []string{
		fmt.Sprintf("bench-node create %s: podset / deployment = %.2f", shape.name, podset.took.Seconds()/deployment.took.Seconds()),
		fmt.Sprintf("bench-node create %s: podset / statefulset = %.2f", shape.name, podset.took.Seconds()/statefulset.took.Seconds()),
		fmt.Sprintf("bench-node create %s: kubelet status writes per pod, podset / deployment = %.2f", shape.name, podset.statusWrites/deployment.statusWrites),
	}
}

// createLog follows, from a watch of a namespace's pods started before a
// workload is created, the kubelet's status writes to them and when the
// watch first saw n of them Ready.
//
// A pod's status has three writers here: the kubelet; the operator,
// which writes only its gate's condition (podset.dev/InPlaceUpdateReady:
// it opens the gate of a pod it created; it writes Ready too only when it
// closes the gate, which a creation never does); and the scheduler, which
// writes the status of a pod not yet bound (the binding itself sets
// spec.nodeName and, in the same write, the PodScheduled condition). The
// kubelet writes the status of pods bound to its node only. Each MODIFIED
// event is one write, so a MODIFIED event of a pod bound before it, whose
// status differs from the pod's previous version once the gate's
// condition is taken out of both, is a write of the kubelet's. ADDED
// events (a pod created, or a watch started again) only set the version
// the next one is compared to.
type createLog struct {
	mu sync.Mutex
	n  int
	// last is each pod's version as last seen; ready, whether it was Ready.
	last  map[string]*corev1.Pod
	ready map[string]bool
	// statusWrites counts the kubelet's status writes so far;
	// statusWritesAtReady, those up to the event that made n pods Ready,
	// seen at readyAt.
	statusWrites, statusWritesAtReady int
	readyAt                           time.Time
	// stop ends the watch.
	stop func()
}

// watchCreate starts a createLog of ns, waiting for n pods Ready, and
// stopped when the test ends if not before.
func watchCreate(t *testing.T, ns string, n int) *createLog {
	t.Helper()
	l := &createLog{n: n, last: map[string]*corev1.Pod{}, ready: map[string]bool{}}
	l.stop = watchPods(t, ns, func(typ watch.EventType, p *corev1.Pod, at time.Time) {
		l.observe(typ, p, at)
	})
	t.Cleanup(l.stop)
	return l
}

// observe counts a pod's event, seen at at.
func (l *createLog) observe(typ watch.EventType, p *corev1.Pod, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch typ {
	case watch.Deleted:
		delete(l.last, p.Name)
		delete(l.ready, p.Name)
		return
	case watch.Modified:
		if old, ok := l.last[p.Name]; ok && kubeletStatusWrite(old, p) {
			l.statusWrites++
		}
	}
	l.last[p.Name] = p
	ready := podCondition(p, corev1.PodReady)
	l.ready[p.Name] = p.DeletionTimestamp == nil && ready != nil && ready.Status == corev1.ConditionTrue
	if l.readyAt.IsZero() && l.readyCount() >= l.n {
		l.readyAt, l.statusWritesAtReady = at, l.statusWrites
	}
}

// readyCount is how many pods are Ready in their last version seen; l.mu
// is held.
func (l *createLog) readyCount() int {
	count := 0
	for _, r := range l.ready {
		if r {
			count++
		}
	}
	return count
}

// allReady is nil once the watch has seen n pods Ready at once.
func (l *createLog) allReady(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readyAt.IsZero() {
		return fmt.Errorf("%d of %d pods Ready", l.readyCount(), l.n)
	}
	return nil
}

// result is when the watch first saw n pods Ready, and the kubelet's
// status writes until then.
func (l *createLog) result() (time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readyAt, l.statusWritesAtReady
}

// kubeletStatusWrite reports whether cur, the version of a pod after old,
// was written by the kubelet (createLog): the pod was bound already, and
// its status changed other than in the operator's gate condition.
func kubeletStatusWrite(old, cur *corev1.Pod) bool {
	if old.Spec.NodeName == "" {
		return false // the scheduler's write, or the binding
	}
	return !apiequality.Semantic.DeepEqual(statusWithoutGate(old), statusWithoutGate(cur))
}

// statusWithoutGate is a pod's status without the operator's gate
// condition, the one part of it the kubelet never writes.
func statusWithoutGate(p *corev1.Pod) corev1.PodStatus {
	s := *p.Status.DeepCopy()
	s.Conditions = slices.DeleteFunc(s.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == podsetv1alpha1.InPlaceUpdateReadyCondition
	})
	return s
}
