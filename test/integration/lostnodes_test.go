package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// The lost-node tests make their own nodes, cluster-wide: they do not run
// in parallel, and each names its nodes after its namespace.

// lostNodeScene is a namespace with a PodSet "web" of two pods, web-0 bound
// to a node that stays healthy and web-1 to one that will be lost, both
// Running and Ready, and evicted web-1 as the taint manager does: it sits
// Terminating, since no kubelet confirms. afterSeconds nil: the field off.
func lostNodeScene(t *testing.T, afterSeconds *int32, nodes ...string) (ps *podsetv1alpha1.PodSet, healthyNode, lostNode string, before map[string]corev1.Pod) {
	t.Helper()
	ns := testenv.Namespace(t, env.Client, "lost-", nil)
	healthyNode, lostNode = ns+"-healthy", ns+"-lost"
	testenv.MakeNode(t, env.Client, healthyNode)
	testenv.MakeNode(t, env.Client, lostNode)
	for _, n := range nodes {
		testenv.MakeNode(t, env.Client, ns+"-"+n)
	}
	b := fixture.PodSet(ns, "web").Replicas(2).Recreate()
	if afterSeconds != nil {
		b.LostNodeAfter(*afterSeconds)
	}
	ps = b.Create(t, env.Client)
	waitForPods(t, ns, "web-0", "web-1")
	testenv.BindPod(t, env.Client, ns, "web-0", healthyNode)
	testenv.BindPod(t, env.Client, ns, "web-1", lostNode)
	waitForStatus(t, ps, readyStatus(2))
	before = pods(t, ns)
	if err := env.Client.Delete(t.Context(), ptrTo(before["web-1"])); err != nil {
		t.Fatal(err)
	}
	return ps, healthyNode, lostNode, before
}

func ptrTo(p corev1.Pod) *corev1.Pod { return &p }

// replaced waits until the pod has a new UID and is live, and returns it.
func replaced(t *testing.T, old corev1.Pod) corev1.Pod {
	t.Helper()
	var got corev1.Pod
	eventually(t, old.Name+" replaced", func(context.Context) error {
		p, ok := pods(t, old.Namespace)[old.Name]
		switch {
		case !ok:
			return fmt.Errorf("%s is gone, not yet created again", old.Name)
		case p.UID == old.UID:
			return fmt.Errorf("%s is still the old pod (terminating: %v)", old.Name, p.DeletionTimestamp != nil)
		case p.DeletionTimestamp != nil:
			return fmt.Errorf("the new %s is terminating", old.Name)
		}
		got = p
		return nil
	})
	return got
}

// lostNodeReplacementsMetric is podset_operator_lost_node_replacements_total of a
// PodSet, from the operator's registry (it runs in this process).
func lostNodeReplacementsMetric(t *testing.T, ps *podsetv1alpha1.PodSet) float64 {
	t.Helper()
	families, err := testenv.GatherMetrics(ctrlmetrics.Registry)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := families.Sample("podset_operator_lost_node_replacements_total", map[string]string{"namespace": ps.Namespace, "podset": ps.Name})
	return v
}

func TestLostNodeReplacementAfterTheDelay(t *testing.T) {
	const after = 3
	ps, healthyNode, lostNode, before := lostNodeScene(t, new(int32(after)))
	lostAt := time.Now().Truncate(time.Second)
	testenv.SetNodeReady(t, env.Client, lostNode, corev1.ConditionUnknown, lostAt)
	web1 := replaced(t, before["web-1"])
	if due := lostAt.Add(after * time.Second); web1.CreationTimestamp.Time.Before(due) {
		t.Errorf("web-1 was created again at %s, before the node was lost for %ds (%s)", web1.CreationTimestamp.Time, after, due)
	}
	if web1.Spec.NodeName != "" {
		t.Errorf("the new web-1 is bound to %s; want it left to the scheduler", web1.Spec.NodeName)
	}

	waitForStatus(t, ps, func(ps *podsetv1alpha1.PodSet) error {
		if ps.Status.LostNodeReplacements != 1 {
			return fmt.Errorf("status.lostNodeReplacements %d, want 1", ps.Status.LostNodeReplacements)
		}
		return nil
	})
	eventually(t, "a Warning naming the node and the pod", func(context.Context) error {
		notes := strings.Join(eventNotes(t, ps, corev1.EventTypeWarning, podsetv1alpha1.ReplacingLostReason), "\n")
		if !strings.Contains(notes, "web-1") || !strings.Contains(notes, "node "+lostNode) {
			return fmt.Errorf("events %s: %q", podsetv1alpha1.ReplacingLostReason, notes)
		}
		return nil
	})
	if got := lostNodeReplacementsMetric(t, ps); got != 1 {
		t.Errorf("podset_operator_lost_node_replacements_total = %v, want 1", got)
	}

	// web-0 turns not Ready, but on a reachable node: it is the same pod
	// after a pass that began after that.
	testenv.BindPod(t, env.Client, ps.Namespace, "web-1", healthyNode)
	playKubelet(t, ps.Namespace, "web-0", func(s *corev1.PodStatus) { s.Conditions = notReadyConditions() })
	now := pods(t, ps.Namespace)
	testenv.RepairPass(t, env.Client, wait, ptrTo(now["web-0"]))
	if got := pods(t, ps.Namespace)["web-0"]; got.UID != before["web-0"].UID {
		t.Errorf("web-0, on the reachable node %s, was replaced", healthyNode)
	}
}

func TestLostNodeReplacementOffLeavesPodsStranded(t *testing.T) {
	ps, _, lostNode, before := lostNodeScene(t, nil)
	testenv.SetNodeReady(t, env.Client, lostNode, corev1.ConditionUnknown, time.Now().Add(-time.Hour))
	// The node's change brings no pass (the PodSet does not ask for
	// replacement); a repair does, and the pod is still there after it.
	testenv.RepairPass(t, env.Client, wait, ptrTo(before["web-0"]))
	wait.Consistently(t, "web-1 stranded on its lost node", 2*time.Second, func(context.Context) error {
		p, ok := pods(t, ps.Namespace)["web-1"]
		if !ok || p.UID != before["web-1"].UID {
			return fmt.Errorf("web-1 was replaced with the field off")
		}
		return nil
	})
	if got := get(t, ps).Status.LostNodeReplacements; got != 0 {
		t.Errorf("status.lostNodeReplacements %d, want 0", got)
	}
}

func TestLostNodeReplacementPausesWhileMostNodesAreLost(t *testing.T) {
	// Three nodes: healthy, lost and other. Lost and other gone: two of
	// three, more than half, so replacement pauses; other back: one of
	// three, and web-1 is replaced.
	ps, _, lostNode, before := lostNodeScene(t, new(int32(0)), "other")
	other := ps.Namespace + "-other"
	testenv.SetNodeReady(t, env.Client, other, corev1.ConditionUnknown, time.Now())
	testenv.SetNodeReady(t, env.Client, lostNode, corev1.ConditionUnknown, time.Now())
	eventually(t, "a Warning that replacement is paused", func(context.Context) error {
		notes := strings.Join(eventNotes(t, ps, corev1.EventTypeWarning, podsetv1alpha1.LostNodeReplacementPausedReason), "\n")
		if !strings.Contains(notes, "web-1") {
			return fmt.Errorf("events %s: %q", podsetv1alpha1.LostNodeReplacementPausedReason, notes)
		}
		return nil
	})
	if p := pods(t, ps.Namespace)["web-1"]; p.UID != before["web-1"].UID {
		t.Fatal("web-1 was replaced while most nodes were lost")
	}
	// The paused pass has ended; the pod is still the same after another.
	testenv.RepairPass(t, env.Client, wait, ptrTo(before["web-0"]))
	if p := pods(t, ps.Namespace)["web-1"]; p.UID != before["web-1"].UID {
		t.Fatal("web-1 was replaced while most nodes were lost")
	}

	testenv.SetNodeReady(t, env.Client, other, corev1.ConditionTrue, time.Now())
	// other has no pod of the PodSet: the paused PodSet looks again by
	// itself within 30 seconds (TestPlanReplacesPodsOfLostNodes), or on
	// any event of its own, as here.
	testenv.RepairPass(t, env.Client, wait, ptrTo(before["web-0"]))
	replaced(t, before["web-1"])
}
