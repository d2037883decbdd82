//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// lostLabel marks the node the test cuts off, so that the test's pods land
// there first.
const lostLabel = "e2e.podset.dev/lost-node"

// TestLostNodeReplacementOnKwok cuts one kwok node off from the control
// plane, as a partition or a dead machine would: kwok stops renewing its
// Lease (the test takes the Lease over for another holder, which kwok
// leaves alone, and then neither manages the node nor its pods), so
// kube-controller-manager's node lifecycle controller marks the node
// Ready=Unknown after its grace period (20 seconds with the suite's
// HEARTBEAT_FACTOR) and taints it unreachable. The pods tolerate the taint
// for an hour, so its taint manager does not evict them during the test:
// an eviction is a graceful delete that kwok has been seen to finish for
// a pod of the cut-off node, which would free the name without the
// operator, and then the test could not tell who replaced the pod. (Pods
// already Terminating on a lost node are replaced the same way; the pure
// core's tables cover them.) The PodSet with spec.lostNodeReplacement
// gets its pod back on the other node; the one without keeps its pod on
// the lost node, as a StatefulSet would.
func TestLostNodeReplacementOnKwok(t *testing.T) {
	requireInstalled(t)
	scaleOperatorDeploymentToZero(t)
	startOperator(t)
	eventually(t, "the operator holds the leader-election Lease", checkLeaseHeld)

	node := pickKwokNode(t)
	ns := newNamespace(t, "podset-lost-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	notEvicted := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3600)}
	on := fixture.PodSet(ns, "on").LostNodeAfter(5).Mutate(func(ps *podsetv1alpha1.PodSet) {
		spec := &ps.Spec.Template.Spec
		spec.Tolerations = []corev1.Toleration{notEvicted}
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight:     100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: lostLabel, Operator: corev1.NodeSelectorOpExists}}},
			}},
		}}
	}).Create(t, suite.client)
	off := fixture.PodSet(ns, "off").Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Tolerations = []corev1.Toleration{notEvicted}
		ps.Spec.Template.Spec.NodeSelector = map[string]string{lostLabel: "true"}
	}).Create(t, suite.client)
	onPod := runningOn(t, ns, "on-0", node)
	offPod := runningOn(t, ns, "off-0", node)

	cutOff(t, node)
	eventually(t, "node "+node+" Ready=Unknown and tainted unreachable", func(ctx context.Context) error {
		n := &corev1.Node{}
		if err := suite.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }) {
			return fmt.Errorf("node %s has taints %v", node, n.Spec.Taints)
		}
		return nil
	})

	eventually(t, "on-0 replaced, Running and Ready on another node", func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "on-0"}, pod); err != nil {
			return err
		}
		switch {
		case pod.UID == onPod.UID:
			return fmt.Errorf("on-0 is still the pod on %s (terminating: %v)", node, pod.DeletionTimestamp != nil)
		case pod.Spec.NodeName == node:
			return fmt.Errorf("the new on-0 is on the lost node %s", node)
		}
		return checkRunningAndReady(pod)
	})
	eventually(t, "the status and a Warning count the replacement", func(ctx context.Context) error {
		ps := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(on), ps); err != nil {
			return err
		}
		if ps.Status.LostNodeReplacements != 1 {
			return fmt.Errorf("status.lostNodeReplacements %d, want 1", ps.Status.LostNodeReplacements)
		}
		events := &eventsv1.EventList{}
		if err := suite.client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == podsetv1alpha1.ReplacingLostReason &&
				strings.Contains(e.Note, "on-0") && strings.Contains(e.Note, "node "+node) {
				t.Logf("event %s: %s", e.Reason, e.Note)
				return nil
			}
		}
		return fmt.Errorf("no Warning %s naming on-0 and node %s", podsetv1alpha1.ReplacingLostReason, node)
	})

	// Without the field: the pod stays on the lost node, its name taken.
	consistently(t, "off-0 stranded on the lost node", 15*time.Second, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "off-0"}, pod); err != nil {
			return err
		}
		if pod.UID != offPod.UID {
			return fmt.Errorf("off-0 was replaced without spec.lostNodeReplacement")
		}
		return nil
	})
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(off), off); err != nil {
		t.Fatal(err)
	}
	if n := off.Status.LostNodeReplacements; n != 0 {
		t.Errorf("PodSet off counts %d lost-node replacements", n)
	}
}

// pickKwokNode is a Ready node kwok manages, labelled lostLabel until the
// test ends.
func pickKwokNode(t *testing.T) string {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := suite.client.List(t.Context(), nodes); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		if n.Annotations["kwok.x-k8s.io/node"] == "fake" {
			names = append(names, n.Name)
		}
	}
	if len(names) < 2 {
		t.Fatalf("kwok nodes %v: want at least two, one to lose and one to move to", names)
	}
	slices.Sort(names)
	node := names[0]
	labelNode(t, node, ptr.To("true"))
	t.Cleanup(func() { labelNode(t, node, nil) })
	return node
}

// labelNode sets lostLabel on a node, or removes it (nil).
func labelNode(t *testing.T, node string, value *string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, lostLabel)
	if value != nil {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, lostLabel, *value)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := suite.client.Patch(context.WithoutCancel(t.Context()), n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("labelling node %s: %v", node, err)
	}
}

// runningOn waits until the pod is Running and Ready on node.
func runningOn(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	eventually(t, name+" Running and Ready on "+node, func(ctx context.Context) error {
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		if pod.Spec.NodeName != node {
			return fmt.Errorf("%s is on node %q, want %s", name, pod.Spec.NodeName, node)
		}
		return checkRunningAndReady(pod)
	})
	return pod
}

// cutOff stops the heartbeat of a kwok node: its Lease passes to another
// holder for an hour, with one renewal now and none after. kwok renews
// only a Lease it holds or one that has expired, and manages only nodes
// whose Lease it holds, so the node and its pods are left alone; the node
// lifecycle controller sees no renewal for its grace period and marks the
// node lost. When the test ends the Lease is deleted: kwok makes a new
// one, and manages the node again.
func cutOff(t *testing.T, node string) {
	t.Helper()
	key := client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := suite.client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the Lease of node %s: %v", node, err)
		}
		// The tests after this one find the node Ready and untainted.
		err := testenv.Poll(ctx, waitTimeout, pollInterval, func(ctx context.Context) error {
			n := &corev1.Node{}
			if err := suite.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				return err
			}
			if len(n.Spec.Taints) > 0 || !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}) {
				return fmt.Errorf("node %s is not back: taints %v", node, n.Spec.Taints)
			}
			return nil
		})
		if err != nil {
			t.Errorf("node %s after its Lease went back to kwok: %v", node, err)
		}
	})
	eventually(t, "the Lease of node "+node+" taken from kwok", func(ctx context.Context) error {
		lease := &coordinationv1.Lease{}
		if err := suite.client.Get(ctx, key, lease); err != nil {
			return err
		}
		t.Logf("the Lease of node %s was held by %q", node, ptr.Deref(lease.Spec.HolderIdentity, ""))
		lease.Spec.HolderIdentity = ptr.To("podset-e2e-partition")
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		return suite.client.Update(ctx, lease)
	})
}
