//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestKwokKubeletStages checks that the local cluster's fake pods (the kwok
// stages of hack/kwok/stages) behave as a kubelet does where the operator's
// in-place updates depend on it, with a raw pod and no operator: Ready
// honours a readiness gate both ways, a new image restarts the container on
// that image, and a resize through pods/resize is accepted (the status
// reports resources, as a kubelet that can resize does) and carried out.
func TestKwokKubeletStages(t *testing.T) {
	ns := newNamespace(t, "kwok-stages-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	pod := gatedPod(ns)
	if err := suite.client.Create(t.Context(), pod); err != nil {
		t.Fatalf("creating pod %s: %v", client.ObjectKeyFromObject(pod), err)
	}

	eventually(t, "the pod runs, its containers ready and its status following its spec", func(ctx context.Context) error {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		return errors.Join(checkPhaseRunning(pod), checkCondition(pod, corev1.ContainersReady, corev1.ConditionTrue, ""), checkStatusFollowsSpec(pod))
	})
	consistently(t, "Ready stays False while the gate has no condition", 2*time.Second, func(ctx context.Context) error {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		return checkCondition(pod, corev1.PodReady, corev1.ConditionFalse, "ReadinessGatesNotReady")
	})

	for _, gate := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionTrue} {
		setGateCondition(t, pod, gate)
		want, reason := gate, ""
		if gate == corev1.ConditionFalse {
			reason = "ReadinessGatesNotReady"
		}
		eventually(t, fmt.Sprintf("Ready is %s once the gate's condition is %s", want, gate), func(ctx context.Context) error {
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			return checkCondition(pod, corev1.PodReady, want, reason)
		})
	}

	// A new image: the container restarts on it, in one status update.
	// startedAt counts whole seconds, so wait for the next one first to
	// see it move.
	before := *containerStatus(pod, "app")
	time.Sleep(time.Until(before.State.Running.StartedAt.Add(time.Second)))
	after, sawNotReady := patchAndWatch(t, pod, `{"spec":{"containers":[{"name":"app","image":"busybox:1.37"}]}}`,
		func(p *corev1.Pod) bool {
			s := containerStatus(p, "app")
			return s != nil && s.RestartCount == before.RestartCount+1 && s.Ready && isPodReady(p)
		})
	got := containerStatus(after, "app")
	if got.Image != "busybox:1.37" {
		t.Errorf("after the image patch the container status has image %q, want busybox:1.37", got.Image)
	}
	if got.State.Running == nil || !got.State.Running.StartedAt.After(before.State.Running.StartedAt.Time) {
		t.Errorf("after the restart the container's state is %+v, want running since after %v", got.State, before.State.Running.StartedAt)
	}
	if got.LastTerminationState.Terminated == nil {
		t.Errorf("after the restart the container's lastState is %+v, want the terminated container", got.LastTerminationState)
	}
	// The restart is one status update, as a kubelet reports it when the
	// old container's exit and the new one's start show in one relist (a
	// real kubelet did so for this project's test app on the real node,
	// 2026-11-25): a pod with no readiness probe whose gates are open
	// stays Ready throughout.
	if sawNotReady {
		t.Errorf("the restart was reported in two status updates, the first not ready (ContainersReady and Ready False); want one, the new container running")
	}
	if err := checkStatusFollowsSpec(after); err != nil {
		t.Error(err)
	}

	// A resize through pods/resize: cpu, whose resizePolicy (the default)
	// needs no restart.
	resize := `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"20m"},"limits":{"cpu":"200m"}}}]}}`
	if err := suite.client.SubResource("resize").Patch(t.Context(), pod, client.RawPatch(types.StrategicMergePatchType, []byte(resize))); err != nil {
		t.Fatalf("the API server refused the resize: %v", err)
	}
	eventually(t, "the resize is done: the status reports the new resources", func(ctx context.Context) error {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if cpu := pod.Spec.Containers[0].Resources.Limits.Cpu(); cpu.Cmp(resource.MustParse("200m")) != 0 {
			return fmt.Errorf("the pod's spec has a cpu limit of %v, want 200m", cpu)
		}
		var errs []error
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
				errs = append(errs, fmt.Errorf("the pod still has condition %s=%s", c.Type, c.Status))
			}
		}
		return errors.Join(append(errs, checkStatusFollowsSpec(pod), checkCondition(pod, corev1.PodReady, corev1.ConditionTrue, ""))...)
	})
	if s := containerStatus(pod, "app"); s.RestartCount != got.RestartCount {
		t.Errorf("a cpu resize restarted the container: restartCount %d, was %d", s.RestartCount, got.RestartCount)
	}
}

// gatedPod is a pod of namespace ns that passes Pod Security "restricted",
// with the operator's readiness gate, an init container and a container
// with cpu and memory requests and limits.
func gatedPod(ns string) *corev1.Pod {
	hardened := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gated"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			AutomountServiceAccountToken: ptr.To(false),
			ReadinessGates:               []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}},
			InitContainers: []corev1.Container{{
				Name: "init", Image: "busybox:1.36", Command: []string{"true"}, SecurityContext: hardened,
			}},
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "3600"}, SecurityContext: hardened,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				},
			}},
		},
	}
}

// setGateCondition sets the pod's InPlaceUpdateReady condition through the
// status subresource, as the operator does.
func setGateCondition(t *testing.T, pod *corev1.Pod, status corev1.ConditionStatus) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":%q,"status":%q,"lastTransitionTime":%q}]}}`,
		podsetv1alpha1.InPlaceUpdateReadyCondition, status, time.Now().UTC().Format(time.RFC3339))
	if err := suite.client.Status().Patch(t.Context(), pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatalf("setting condition %s=%s on pod %s: %v", podsetv1alpha1.InPlaceUpdateReadyCondition, status, pod.Name, err)
	}
}

// patchAndWatch applies a strategic merge patch to the pod and watches it
// from before the patch until done holds. It returns the pod then, and
// whether the pod was ever seen with its ContainersReady and Ready
// conditions False on the way.
func patchAndWatch(t *testing.T, pod *corev1.Pod, patch string, done func(*corev1.Pod) bool) (*corev1.Pod, bool) {
	t.Helper()
	clientset, err := testenv.NewClientset(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	w, err := clientset.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + pod.Name,
		ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		t.Fatalf("watching pod %s: %v", pod.Name, err)
	}
	defer w.Stop()
	if err := suite.client.Patch(t.Context(), pod, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching pod %s with %s: %v", pod.Name, patch, err)
	}
	start, sawNotReady := time.Now(), false
	for event := range w.ResultChan() {
		p, ok := event.Object.(*corev1.Pod)
		if !ok || event.Type != watch.Modified {
			t.Fatalf("watching pod %s: unexpected %s event %v", pod.Name, event.Type, event.Object)
		}
		if checkCondition(p, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady") == nil &&
			checkCondition(p, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady") == nil {
			sawNotReady = true
		}
		if done(p) {
			t.Logf("pod %s is as wanted after %s (waited %v)", pod.Name, patch, time.Since(start).Round(time.Millisecond))
			return p, sawNotReady
		}
	}
	t.Fatalf("pod %s is not as wanted %v after %s", pod.Name, waitTimeout, patch)
	return nil, false
}

// checkStatusFollowsSpec is nil when the pod's status reports what a
// kubelet reports for a running pod it has caught up with: the spec's image
// for every container and init container, each container's requests and
// limits as its resources and its requests as its allocatedResources, and
// the pod's generation as observed.
func checkStatusFollowsSpec(pod *corev1.Pod) error {
	var errs []error
	if pod.Status.ObservedGeneration != pod.Generation {
		errs = append(errs, fmt.Errorf("status.observedGeneration is %d, metadata.generation %d", pod.Status.ObservedGeneration, pod.Generation))
	}
	for _, c := range pod.Spec.InitContainers {
		if s := containerStatus(pod, c.Name); s == nil || s.Image != c.Image {
			errs = append(errs, fmt.Errorf("init container %s: status %+v, want image %s", c.Name, s, c.Image))
		}
	}
	for _, c := range pod.Spec.Containers {
		s := containerStatus(pod, c.Name)
		switch {
		case s == nil:
			errs = append(errs, fmt.Errorf("container %s has no status", c.Name))
		case s.Image != c.Image:
			errs = append(errs, fmt.Errorf("container %s: status image %s, spec image %s", c.Name, s.Image, c.Image))
		case s.Resources == nil ||
			!equality.Semantic.DeepEqual(s.Resources.Requests, c.Resources.Requests) ||
			!equality.Semantic.DeepEqual(s.Resources.Limits, c.Resources.Limits):
			errs = append(errs, fmt.Errorf("container %s: status resources %v, spec resources %v", c.Name, s.Resources, c.Resources))
		case !equality.Semantic.DeepEqual(s.AllocatedResources, c.Resources.Requests):
			errs = append(errs, fmt.Errorf("container %s: allocatedResources %v, spec requests %v", c.Name, s.AllocatedResources, c.Resources.Requests))
		}
	}
	return errors.Join(errs...)
}

// checkPhaseRunning is nil when the pod's phase is Running.
func checkPhaseRunning(pod *corev1.Pod) error {
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s is %s, not Running", pod.Name, pod.Status.Phase)
	}
	return nil
}

// checkCondition is nil when the pod has condition t with the given status
// and, unless reason is empty, reason.
func checkCondition(pod *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason string) error {
	for _, c := range pod.Status.Conditions {
		if c.Type != t {
			continue
		}
		if c.Status != status || reason != "" && c.Reason != reason {
			return fmt.Errorf("pod %s has condition %s=%s (reason %q, message %q), want %s (reason %q)", pod.Name, t, c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	}
	return fmt.Errorf("pod %s has no condition %s", pod.Name, t)
}

// isPodReady reports whether the pod's Ready condition is True.
func isPodReady(pod *corev1.Pod) bool {
	return checkCondition(pod, corev1.PodReady, corev1.ConditionTrue, "") == nil
}

// containerStatus is the status of the pod's container or init container
// of that name, or nil.
func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
