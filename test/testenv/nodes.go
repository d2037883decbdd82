package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Nodes for spec.lostNodeReplacement. envtest has no node lifecycle
// controller: the tests make Node objects and set their Ready condition and
// unreachable taint as kube-controller-manager would.

// MakeNode creates a Ready node, deleted when the test ends.
func MakeNode(t testing.TB, c client.Client, name string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	ctx := context.WithoutCancel(t.Context())
	t.Cleanup(func() { _ = c.Delete(ctx, node) })
	SetNodeReady(t, c, name, corev1.ConditionTrue, time.Now())
	return node
}

// SetNodeReady sets a node's Ready condition, as changed at since (an
// Unknown or False condition makes the node lost since then), and, for
// Unknown, the unreachable taint the node lifecycle controller adds; True
// removes the taint.
func SetNodeReady(t testing.TB, c client.Client, name string, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	at := metav1.NewTime(since)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: status, LastTransitionTime: at, LastHeartbeatTime: at, Reason: "Test",
		}}
		return c.Status().Update(t.Context(), node)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Spec.Taints = nil
		if status == corev1.ConditionUnknown {
			node.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}}
		}
		return c.Update(t.Context(), node)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BindPod binds a pod to a node, as kube-scheduler does, and reports it
// Running and Ready there, as its kubelet would.
func BindPod(t testing.TB, c client.Client, ns, name, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := c.SubResource("binding").Create(t.Context(), pod, binding); err != nil {
		t.Fatalf("binding pod %s to node %s: %v", name, node, err)
	}
	// Ready follows the readiness gates: wait for the operator to open
	// the gate of the pod it just made, as the pod's kubelet would
	// report it Ready only then.
	deadline := time.Now().Add(time.Minute)
	for {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatal(err)
		}
		if gatesSet(pod) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Status, _ = KubeletStatus(pod, false)
		return c.Status().Update(t.Context(), pod)
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// gatesSet reports whether every readiness gate of the pod has its
// condition.
func gatesSet(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if !slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType }) {
			return false
		}
	}
	return true
}
