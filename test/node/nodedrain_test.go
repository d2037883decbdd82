//go:build node

package node

import (
	"context"
	"errors"
	"maps"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestNodeDrainMovesPodsUnderTheirNames: on two real nodes, a PodSet of 4
// pods spread over both (a topologySpreadConstraint on the hostname,
// ScheduleAnyway) behind a Service, under the client load of
// TestZeroDroppedRequests (whose PodSet spreads the same way, for the
// operator's own stops across nodes), with an app that has no preStop
// hook and disruptionBudget maxUnavailable 1. `kubectl drain` of the
// second node, as before a node's upgrade, with the operator killed
// (SIGKILL) at the first eviction and started again 5 s later: the
// drain's evictions wait for the budget, each pod comes back on the first
// node under its name, no more than one pod is ever unavailable, no pod
// is duplicated or named otherwise, and no request fails.
//
// It runs alone, before the parallel tests, as TestZeroDroppedRequests.
func TestNodeDrainMovesPodsUnderTheirNames(t *testing.T) {
	needNodes(t, 2)
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 4, app("v1"))
	ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	// A label of this test's own: kubectl drain evicts only its pods.
	ps.Spec.Template.Labels["drain-test"] = ns
	spreadOverNodes(ps, corev1.ScheduleAnyway)
	create(t, ps)
	waitReady(t, ps)
	checkSpread(t, ps)
	history := watchPodHistory(t, ns)
	endpoints := watchEndpoints(t, ns, "web")
	url := serve(t, ps)

	// Then node drains, as before a node's upgrade.
	for _, step := range []struct {
		what, drain, to string
		killOperator    bool
	}{
		{"kubectl drain of the second node, the operator killed as it begins", secondNodeName, nodeName, true},
	} {
		t.Run(step.what, func(t *testing.T) {
			kubectl(t, "uncordon", step.to)
			moving := nodesOf(t, ps)[step.drain]
			if len(moving) == 0 {
				t.Errorf("no pod of the PodSet runs on %s before its drain: %v", step.drain, nodesOf(t, ps))
			}
			from := history.mark()
			endpoints.reset()
			load := underLoad(t, ps, url, func() {
				kubectlDrain(t, step.drain, ns, func() {
					if step.killOperator {
						waitEvicted(t, history, from)
						killOperator(t, func() { time.Sleep(5 * time.Second) })
					}
				})
			})
			t.Cleanup(func() { _, _ = execKubectl("uncordon", step.drain) })
			after := nodesOf(t, ps)
			t.Logf("%s: %d requests, %v until Ready again, %d failed, answers %v; moved %v, pods by node after: %v",
				step.what, load.total, load.took.Round(time.Millisecond), len(load.failures), load.answers, moving, after)
			if len(load.failures) > 0 {
				t.Errorf("%d of %d requests failed during %s; first ones:\n%s", len(load.failures), load.total, step.what, load.firstFailures(endpoints))
			}
			load.checkOnly(t, "v1")
			if len(after[step.drain]) > 0 || !slices.Equal(after[step.to], []string{"web-0", "web-1", "web-2", "web-3"}) {
				t.Errorf("after the drain, pods by node: %v; want web-0 to web-3 on %s", after, step.to)
			}
			if worst := mostUnavailable(history.since(0), from, 4); worst > 1 {
				t.Errorf("%d pods were unavailable at once, want at most the budget's 1", worst)
			}
			for _, e := range history.since(from) {
				if !slices.Contains([]string{"web-0", "web-1", "web-2", "web-3"}, e.name) {
					t.Errorf("pod %s appeared, want only web-0 to web-3", e.name)
				}
			}
		})
	}
}

// kubectlDrain drains node of the pods of this test's namespace ns with
// kubectl drain, calling during once the drain has started, and returns
// once it is done.
func kubectlDrain(t *testing.T, node, ns string, during func()) {
	t.Helper()
	drain := exec.CommandContext(t.Context(), suite.kubectl, "--kubeconfig", suite.kubeconfig, "drain", node,
		"--pod-selector", "drain-test="+ns, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s")
	out := &lockedBuffer{}
	drain.Stdout, drain.Stderr = out, out
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	during()
	if err := drain.Wait(); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out.String())
	}
	t.Logf("kubectl drain %s:\n%s", node, out.String())
}

// nodesOf lists the PodSet's pods by the node they run on.
func nodesOf(t *testing.T, ps *podsetv1alpha1.PodSet) map[string][]string {
	t.Helper()
	on := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(pods(t, ps))) {
		p := pods(t, ps)[name]
		on[p.Spec.NodeName] = append(on[p.Spec.NodeName], name)
	}
	return on
}

// waitEvicted waits until a pod has been deleted since event from.
func waitEvicted(t *testing.T, h *podHistory, from int) {
	t.Helper()
	eventually(t, "a pod is evicted", func(context.Context) error {
		for _, e := range h.since(from) {
			if e.terminating || e.deleted {
				return nil
			}
		}
		return errors.New("no pod deleted yet")
	})
}

// mostUnavailable is the most pods of replicas that the events from
// index from on show unavailable at once: not there, terminating, or not
// Ready (the events before say where each pod stood).
func mostUnavailable(events []podEvent, from, replicas int) int {
	type state struct {
		uid       string
		available bool
	}
	live := map[string]state{}
	worst := 0
	for i, e := range events {
		switch {
		case e.deleted:
			if live[e.name].uid == e.uid {
				delete(live, e.name)
			}
		default:
			live[e.name] = state{uid: e.uid, available: !e.terminating && e.ready == corev1.ConditionTrue}
		}
		available := 0
		for _, s := range live {
			if s.available {
				available++
			}
		}
		if i >= from {
			worst = max(worst, replicas-available)
		}
	}
	return worst
}

// lockedBuffer is an output buffer a command writes to while the test
// may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
