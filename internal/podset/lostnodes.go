package podset

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Nodes is what a pass knows of the cluster's nodes for
// spec.lostNodeReplacement: the lost nodes its pods run on, since when, and
// how many of the cluster's nodes are lost. It is empty for a PodSet
// without the field: the operator then reads no node at all.
type Nodes struct {
	// Lost holds, by name, the lost nodes that pods of the PodSet run on,
	// and since when they are lost (NodeLostSince).
	Lost map[string]time.Time
	// LostInCluster is how many of the cluster's nodes are lost, and Total
	// how many nodes it has. They are counted only when Lost is not empty.
	LostInCluster, Total int
}

// Partitioned reports whether more than half of the cluster's nodes are
// lost. Nodes rarely fail together; the control plane losing its way to
// them (a partition on its side, an overloaded API server, a network
// change) looks the same from here, and then the pods most likely still
// run: replacing them all would run every one twice and crowd the few
// nodes left. The node lifecycle controller stops evicting for the same
// reason (its unhealthyZoneThreshold, 55% of a zone's nodes).
func (n Nodes) Partitioned() bool {
	return n.Total > 0 && 2*n.LostInCluster > n.Total
}

// lostNodeTaints are the taints the node lifecycle controller puts on a
// node it lost: a node whose kubelet stopped posting its status
// (unreachable) or posts it NotReady. The operator's cache keeps only
// these of a node's taints (SlimNode).
var lostNodeTaints = []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady}

// NodeLostSince reports whether a node is lost, and since when: its Ready
// condition is Unknown (the node lifecycle controller heard nothing from
// its kubelet for the grace period) or False, from the condition's
// lastTransitionTime, or it carries the unreachable taint, from the time
// the taint was added; the earlier of the two. A node that never reported
// Ready at all (still joining) is not lost.
func NodeLostSince(node *corev1.Node) (time.Time, bool) {
	var since time.Time
	lost := false
	earliest := func(t metav1.Time) {
		if !lost || t.Time.Before(since) {
			since = t.Time
		}
		lost = true
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			earliest(c.LastTransitionTime)
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable {
			added := metav1.Time{}
			if t.TimeAdded != nil {
				added = *t.TimeAdded
			}
			earliest(added)
		}
	}
	return since, lost
}

// SlimNode keeps of a node only what NodeLostSince reads: its name, its
// Ready condition and the taints of a lost node. The operator watches
// every node of the cluster, and a node's status (images, addresses,
// capacity) is most of its size.
func SlimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // a tombstone: the informer passes it as it is
	}
	slim := &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.Name,
			UID:             node.UID,
			ResourceVersion: node.ResourceVersion,
		},
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(lostNodeTaints, t.Key) {
			slim.Spec.Taints = append(slim.Spec.Taints, corev1.Taint{Key: t.Key, Effect: t.Effect, TimeAdded: t.TimeAdded})
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.NodeCondition{
				Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason,
			})
		}
	}
	return slim, nil
}

// lostNodeAfter is spec.lostNodeReplacement.afterSeconds, and whether the
// field is set at all.
func lostNodeAfter(ps *podsetv1alpha1.PodSet) (time.Duration, bool) {
	lnr := ps.Spec.LostNodeReplacement
	if lnr == nil {
		return 0, false
	}
	seconds := int32(podsetv1alpha1.DefaultLostNodeAfterSeconds)
	if lnr.AfterSeconds != nil {
		seconds = max(0, *lnr.AfterSeconds)
	}
	return time.Duration(seconds) * time.Second, true
}

// lostFor reports whether a controlled pod runs on a lost node, and how
// long until it has been lost for afterSeconds (0 or less: due).
func (v *View) lostFor(m *Member) (wait time.Duration, lost bool) {
	after, on := lostNodeAfter(v.PodSet)
	if !on || !m.Controlled || m.Pod.Spec.NodeName == "" {
		return 0, false
	}
	since, lost := v.Nodes.Lost[m.Pod.Spec.NodeName]
	if !lost {
		return 0, false
	}
	return since.Add(after).Sub(v.Now), true
}

// pausedRecheck is how often a pass looks again while replacement is
// paused (Nodes.Partitioned): the nodes that recover need not be those its
// pods run on, whose changes alone bring a pass.
const pausedRecheck = 30 * time.Second

// replaceLost plans the replacement of the pods due on lost nodes, lowest
// ordinal first. None while the cluster looks partitioned (Partitioned).
// Otherwise at most maxUnavailable pods of the PodSet are brought back at
// once: the budget is maxUnavailable less the desired pods that are
// unavailable for another reason than a lost node (missing, starting,
// replaced a moment ago and not yet available), so pods of a failed zone
// come back in waves the size of a rollout's, not all at once.
func (v *View) replaceLost(p *Plan, due []*corev1.Pod) {
	if len(due) == 0 {
		return
	}
	if v.Nodes.Partitioned() {
		p.LostHeld = due
		p.wakeIn(pausedRecheck)
		return
	}
	budget := maxUnavailable(v.PodSet)
	for _, m := range v.Slots {
		if m == nil || !m.live() || !m.Available {
			if _, lost := v.Nodes.Lost[nodeOf(m)]; !lost || !m.Controlled {
				budget--
			}
		}
	}
	for _, pod := range due {
		if budget <= 0 {
			break
		}
		p.ReplaceLost = append(p.ReplaceLost, pod)
		if p.LostSince == nil {
			p.LostSince = map[string]time.Time{}
		}
		p.LostSince[pod.Spec.NodeName] = v.Nodes.Lost[pod.Spec.NodeName]
		budget--
	}
}

// nodeOf is the node a member's pod runs on, or "" for no pod.
func nodeOf(m *Member) string {
	if m == nil {
		return ""
	}
	return m.Pod.Spec.NodeName
}
