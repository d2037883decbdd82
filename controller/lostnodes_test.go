package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestNodeReachabilityChanged checks that the node watch passes a node
// turning lost or found, or lost since another time, and drops heartbeats
// and everything else.
func TestNodeReachabilityChanged(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	node := func(ready corev1.ConditionStatus, since, heartbeat metav1.Time, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Spec:       corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: ready, LastTransitionTime: since, LastHeartbeatTime: heartbeat,
			}}},
		}
	}
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &t1}
	unschedulable := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	cases := map[string]struct {
		old, cur *corev1.Node
		want     bool
	}{
		"a heartbeat":                           {old: node(corev1.ConditionTrue, t0, t0), cur: node(corev1.ConditionTrue, t0, t1)},
		"Ready turns Unknown":                   {old: node(corev1.ConditionTrue, t0, t0), cur: node(corev1.ConditionUnknown, t1, t0), want: true},
		"Ready turns False":                     {old: node(corev1.ConditionTrue, t0, t0), cur: node(corev1.ConditionFalse, t1, t1), want: true},
		"Ready comes back":                      {old: node(corev1.ConditionUnknown, t0, t0), cur: node(corev1.ConditionTrue, t1, t1), want: true},
		"the unreachable taint on a Ready node": {old: node(corev1.ConditionTrue, t0, t0), cur: node(corev1.ConditionTrue, t0, t0, unreachable), want: true},
		"lost, then tainted later: same since": {
			old: node(corev1.ConditionUnknown, t0, t0), cur: node(corev1.ConditionUnknown, t0, t0, unreachable),
		},
		"cordoned": {old: node(corev1.ConditionTrue, t0, t0), cur: node(corev1.ConditionTrue, t0, t0, unschedulable)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := nodeReachabilityChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}); got != tc.want {
				t.Errorf("nodeReachabilityChanged.Update() = %v, want %v", got, tc.want)
			}
		})
	}
	n := node(corev1.ConditionUnknown, t0, t0)
	if nodeReachabilityChanged.Create(event.CreateEvent{Object: n}) || nodeReachabilityChanged.Delete(event.DeleteEvent{Object: n}) {
		t.Error("a node created or deleted brings passes; want none (a new node is not lost, a deleted node's pods are the pod garbage collector's)")
	}
}
