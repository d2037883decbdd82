//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestOperatorUnderItsShippedRBAC runs the built operator with the shipped
// service account's permissions and drives the sample PodSet through its
// life in a namespace that enforces Pod Security "restricted": create,
// scale up and down through the scale subresource, an image rollout in
// place, a resize by another writer kept through a repair, and delete,
// after which
// the cluster's garbage collector (not the operator, which is stopped by
// then) removes the pods.
func TestOperatorUnderItsShippedRBAC(t *testing.T) {
	requireInstalled(t)
	scaleOperatorDeploymentToZero(t)

	op := startOperator(t)
	eventually(t, "the operator holds the leader-election Lease", checkLeaseHeld)
	eventually(t, "the operator logs that it acquired the Lease", func(context.Context) error {
		return checkLogHas(op.log(t), "Successfully acquired lease", operatorNamespace+"/"+leaderElectionName)
	})
	if err := checkLogHas(op.log(t), "starting", e2eVersion); err != nil {
		t.Errorf("the startup log does not name the version: %v", err)
	}

	ns := newNamespace(t, "podset-e2e-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	ps := applySample(t, ns)
	t.Logf("applied the sample PodSet %s", client.ObjectKeyFromObject(ps))

	first := waitForPodSet(t, ps, 3)

	if s := scale(t, ps, 5); s.Spec.Replicas != 5 {
		t.Fatalf("the scale subresource answered spec.replicas %d, want 5", s.Spec.Replicas)
	}
	scaledUp := waitForPodSet(t, ps, 5)
	checkUnchanged(t, first, scaledUp)
	checkScaleSubresource(t, ps, 5)

	scale(t, ps, 2)
	for _, name := range podNames(ps.Name, 2, 5) {
		eventually(t, "pod "+name+" is deleted", func(ctx context.Context) error {
			return checkGone(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		})
	}
	scaledDown := waitForPodSet(t, ps, 2)
	checkUnchanged(t, scaledUp, scaledDown)

	checkImageRolloutInPlace(t, ps)
	checkResizeKeptThroughARepair(t, ps)

	if err := op.stop(t); err != nil {
		t.Errorf("the operator exited with %v after SIGTERM, want status 0", err)
	}
	log := op.log(t)
	// An authorization denial reads `... is forbidden: User "..." cannot
	// ...`; other refusals say forbidden too (a pod created in a namespace
	// another test is deleting: "forbidden: unable to create new content in
	// namespace ... because it is being terminated", seen in a cold CI run)
	// and are not the RBAC's.
	if lines := grepLines(log, "forbidden: User "); len(lines) > 0 {
		t.Errorf("the shipped RBAC is not enough: the operator log has %d authorization denials:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	checkLeaseReleased(t)

	// The operator is stopped: whatever removes the pods now is the
	// cluster's garbage collector, following the pods' owner references.
	// It can take most of a minute here: kube-controller-manager's garbage
	// collector refreshes the resources it watches from discovery every 30
	// seconds, and the CRD was installed only moments ago.
	if err := suite.client.Delete(t.Context(), ps, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("deleting the PodSet: %v", err)
	}
	eventually(t, "the PodSet is gone", func(ctx context.Context) error {
		return checkGone(ctx, &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ps.Name}})
	})
	eventually(t, "the garbage collector deletes the PodSet's pods", func(ctx context.Context) error {
		pods, err := listPods(ctx, ns, client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name})
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("pods left: %v", slices.Sorted(maps.Keys(pods)))
		}
		return nil
	})
}

// scaleOperatorDeploymentToZero scales the installed operator Deployment
// to zero and waits until its pods are gone: in kwok that pod runs no code,
// and the test runs the operator binary itself instead.
func scaleOperatorDeploymentToZero(t *testing.T) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorName}}
	scale(t, d, 0)
	eventually(t, "the operator Deployment has no pods", func(ctx context.Context) error {
		pods, err := listPods(ctx, operatorNamespace, client.MatchingLabels{"app.kubernetes.io/name": operatorName})
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("pods left: %v", slices.Sorted(maps.Keys(pods)))
		}
		return nil
	})
}

// applySample applies config/samples/podset.yaml in namespace ns with
// server-side apply, as `kubectl apply --server-side -n ns` does, and
// returns the stored PodSet.
func applySample(t *testing.T, ns string) *podsetv1alpha1.PodSet {
	t.Helper()
	objs, err := testenv.ReadManifests(filepath.Join(suite.root, "config", "samples", "podset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "PodSet" {
		t.Fatalf("config/samples/podset.yaml: want one PodSet, got %d objects", len(objs))
	}
	sample := objs[0]
	sample.SetNamespace(ns)
	if err := suite.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(sample), client.FieldOwner("podset-e2e")); err != nil {
		t.Fatalf("applying the sample: %v", err)
	}
	ps := &podsetv1alpha1.PodSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sample.Object, ps); err != nil {
		t.Fatal(err)
	}
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

// waitForPodSet waits until ps has exactly the pods <name>-0 to
// <name>-<replicas-1>, each Running, Ready and controlled by ps, and its
// status reports them at its current generation with Ready=True. It returns
// the pods' UIDs by name.
func waitForPodSet(t *testing.T, ps *podsetv1alpha1.PodSet, replicas int) map[string]types.UID {
	t.Helper()
	names := podNames(ps.Name, 0, replicas)
	var uids map[string]types.UID
	eventually(t, fmt.Sprintf("pods %v are Running and Ready", names), func(ctx context.Context) (err error) {
		uids, err = checkPods(ctx, ps, names)
		return err
	})
	eventually(t, fmt.Sprintf("the status of PodSet %s reports %d ready replicas", ps.Name, replicas), func(ctx context.Context) error {
		return checkStatus(ctx, ps, names)
	})
	return uids
}

// checkPods is nil when the pods of ps are exactly names, each Running,
// Ready and controlled by ps, and returns their UIDs.
func checkPods(ctx context.Context, ps *podsetv1alpha1.PodSet, names []string) (map[string]types.UID, error) {
	pods, err := listPods(ctx, ps.Namespace, client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name})
	if err != nil {
		return nil, err
	}
	if got, want := slices.Sorted(maps.Keys(pods)), slices.Sorted(slices.Values(names)); !slices.Equal(got, want) {
		return nil, fmt.Errorf("pods %v, want %v", got, want)
	}
	uids := make(map[string]types.UID, len(pods))
	for name, pod := range pods {
		if err := checkRunningAndReady(pod); err != nil {
			return nil, err
		}
		if owner := metav1.GetControllerOf(pod); owner == nil || owner.UID != ps.UID {
			return nil, fmt.Errorf("pod %s is controlled by %+v, not by PodSet %s (UID %s)", name, owner, ps.Name, ps.UID)
		}
		uids[name] = pod.UID
	}
	return uids, nil
}

// checkStatus is nil when the status of ps describes its current
// generation, counts names as its replicas, all ready and up to date, lists
// them in ordinal order, and has the condition Ready=True.
func checkStatus(ctx context.Context, ps *podsetv1alpha1.PodSet, names []string) error {
	got := &podsetv1alpha1.PodSet{}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
		return err
	}
	s, n := got.Status, int32(len(names))
	ready := meta.FindStatusCondition(s.Conditions, podsetv1alpha1.ReadyCondition)
	switch {
	case s.ObservedGeneration != got.Generation:
		return fmt.Errorf("status.observedGeneration %d, generation %d", s.ObservedGeneration, got.Generation)
	case s.Replicas != n || s.ReadyReplicas != n || s.AvailableReplicas != n || s.UpdatedReplicas != n:
		return fmt.Errorf("status replicas %d, ready %d, available %d, updated %d; want %d each",
			s.Replicas, s.ReadyReplicas, s.AvailableReplicas, s.UpdatedReplicas, n)
	case !slices.Equal(s.PodNames, names):
		return fmt.Errorf("status.podNames %v, want %v", s.PodNames, names)
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != got.Generation:
		return fmt.Errorf("condition Ready is %+v, want True at generation %d", ready, got.Generation)
	}
	return nil
}

// checkUnchanged fails the test when a pod of before is not in after with
// the same UID: scaling must neither replace nor recreate the pods it
// keeps.
func checkUnchanged(t *testing.T, before, after map[string]types.UID) {
	t.Helper()
	for name, uid := range before {
		if got, ok := after[name]; ok && got != uid {
			t.Errorf("pod %s was replaced while scaling (UID %s, then %s)", name, uid, got)
		}
	}
}

// checkScaleSubresource reads the scale subresource of ps, as a
// HorizontalPodAutoscaler does, and checks that it reports replicas pods
// and a selector that selects exactly them.
func checkScaleSubresource(t *testing.T, ps *podsetv1alpha1.PodSet, replicas int32) {
	t.Helper()
	s := &autoscalingv1.Scale{}
	if err := suite.client.SubResource("scale").Get(t.Context(), ps, s); err != nil {
		t.Fatalf("reading the scale subresource: %v", err)
	}
	if s.Spec.Replicas != replicas || s.Status.Replicas != replicas {
		t.Errorf("scale subresource: spec.replicas %d, status.replicas %d, want %d", s.Spec.Replicas, s.Status.Replicas, replicas)
	}
	selector, err := labels.Parse(s.Status.Selector)
	if err != nil {
		t.Fatalf("scale subresource: selector %q: %v", s.Status.Selector, err)
	}
	var pods corev1.PodList
	if err := suite.client.List(t.Context(), &pods, client.InNamespace(ps.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		t.Fatal(err)
	}
	if int32(len(pods.Items)) != replicas {
		t.Errorf("scale subresource: selector %q selects %d pods, want %d", s.Status.Selector, len(pods.Items), replicas)
	}
}

// checkLeaseHeld is nil once the leader-election Lease in podset-system
// names a holder from this machine (controller-runtime's identity is
// <hostname>_<uuid>).
func checkLeaseHeld(ctx context.Context) error {
	var lease coordinationv1.Lease
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leaderElectionName}, &lease); err != nil {
		return err
	}
	hostname, err := os.Hostname()
	if err != nil {
		return err
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); !strings.HasPrefix(holder, hostname+"_") {
		return fmt.Errorf("Lease %s/%s is held by %q, not by an operator on %s", operatorNamespace, leaderElectionName, holder, hostname)
	}
	return nil
}

// checkLeaseReleased fails the test unless the leader-election Lease has no
// holder: the operator releases it when it stops, so that a successor need
// not wait for it to expire.
func checkLeaseReleased(t *testing.T) {
	t.Helper()
	var lease coordinationv1.Lease
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: leaderElectionName}, &lease); err != nil {
		t.Fatal(err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" {
		t.Errorf("the stopped operator did not release the Lease: it is still held by %q", holder)
	}
}

// checkLogHas is nil when a line of log contains every one of parts.
func checkLogHas(log string, parts ...string) error {
	for line := range strings.SplitSeq(log, "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return nil
		}
	}
	return fmt.Errorf("no line of the operator log contains all of %q", parts)
}

// grepLines returns the lines of log that contain word, ignoring case.
func grepLines(log, word string) []string {
	var lines []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(strings.ToLower(line), strings.ToLower(word)) {
			lines = append(lines, line)
		}
	}
	return lines
}

// podNames returns the names of the pods of PodSet name with ordinals from
// first up to, not including, last, in ordinal order.
func podNames(name string, first, last int) []string {
	var names []string
	for i := first; i < last; i++ {
		names = append(names, fmt.Sprintf("%s-%d", name, i))
	}
	return names
}

// checkImageRolloutInPlace changes the image of ps and checks, on kwok's
// stand-in kubelet (hack/kwok/stages), that every pod is updated where it
// runs: same UID, IP and node, the new image running, one restart, its
// readiness gate open again, and the PodSet Ready.
func checkImageRolloutInPlace(t *testing.T, ps *podsetv1alpha1.PodSet) {
	t.Helper()
	where := func() map[string]string {
		pods, err := listPods(t.Context(), ps.Namespace, client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for name, p := range pods {
			out[name] = fmt.Sprintf("uid=%s ip=%s node=%s", p.UID, p.Status.PodIP, p.Spec.NodeName)
		}
		return out
	}
	wide := func() string {
		return string(runTool(t, nil, suite.kubectl, "--kubeconfig", suite.kubeconfig, "get", "pods", "-n", ps.Namespace,
			"-l", podsetv1alpha1.NameLabel+"="+ps.Name, "-o", "wide"))
	}
	before, wideBefore := where(), wide()
	const image = "busybox:1.37"
	eventually(t, "the image of "+ps.Name+" changed", func(ctx context.Context) error {
		cur := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = image
		return suite.client.Update(ctx, cur)
	})
	eventually(t, "every pod runs "+image+" in place", func(ctx context.Context) error {
		pods, err := listPods(ctx, ps.Namespace, client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name})
		if err != nil {
			return err
		}
		for name, p := range pods {
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].Image != image || cs[0].State.Running == nil || cs[0].RestartCount != 1 {
				return fmt.Errorf("pod %s: container statuses %+v", name, cs)
			}
			if err := checkRunningAndReady(p); err != nil {
				return err
			}
		}
		return nil
	})
	waitForPodSet(t, ps, len(before))
	after, wideAfter := where(), wide()
	t.Logf("kubectl get pods -o wide, before the image rollout:\n%s\nand after it:\n%s", wideBefore, wideAfter)
	if !maps.Equal(before, after) {
		t.Errorf("pods moved or were replaced by an image rollout: %v, then %v", before, after)
	}
}

// checkResizeKeptThroughARepair is the VerticalPodAutoscaler repro on a
// real cluster: pod 0 resized through pods/resize by another field
// manager, then a label the operator owns removed. The label comes back,
// the resize stays, and the PodSet stays Ready (not Stalled/PodRejected).
func checkResizeKeptThroughARepair(t *testing.T, ps *podsetv1alpha1.PodSet) {
	t.Helper()
	name := ps.Name + "-0"
	resize := corev1ac.Pod(name, ps.Namespace).WithSpec(corev1ac.PodSpec().WithContainers(
		corev1ac.Container().WithName("app").WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}))))
	if err := suite.client.SubResource("resize").Apply(t.Context(), resize, client.FieldOwner("vpa-updater"), client.ForceOwnership); err != nil {
		t.Fatalf("resizing %s: %v", name, err)
	}
	runTool(t, nil, suite.kubectl, "--kubeconfig", suite.kubeconfig, "label", "pod", "-n", ps.Namespace, name, podsetv1alpha1.OrdinalLabel+"-")
	eventually(t, "the ordinal label of "+name+" restored, its resize kept", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: name}, p); err != nil {
			return err
		}
		if p.Labels[podsetv1alpha1.OrdinalLabel] != "0" {
			return fmt.Errorf("labels %v", p.Labels)
		}
		if cpu := p.Spec.Containers[0].Resources.Requests.Cpu(); cpu.String() != "20m" {
			return fmt.Errorf("cpu request %s, want the resized 20m", cpu)
		}
		return nil
	})
	waitForPodSet(t, ps, 2)
	cur := &podsetv1alpha1.PodSet{}
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), cur); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(cur.Status.Conditions, podsetv1alpha1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("PodSet stalled after a repair of a resized pod: %s: %s", c.Reason, c.Message)
	}
}
