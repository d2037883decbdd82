package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// KubeletStatus is the status a kubelet that runs the pod would report
// next, for the tests' stand-ins of the kubelet (envtest has none), the way
// the local cluster's kwok stages (hack/kwok/stages) report it:
//   - the pod is Running and every container runs the image its spec
//     names; a changed image restarts the container (restarted lists it);
//   - containers report the cpu and memory their spec asks for, unless
//     infeasible: then a resize stays pending (PodResizePending, reason
//     Infeasible) and they report what they had; a resize of a resource
//     whose resizePolicy is RestartContainer restarts the container;
//   - Ready is True only when every readiness gate's condition is True;
//     conditions the kubelet does not own (the gates') stay as they are.
func KubeletStatus(pod *corev1.Pod, infeasible bool) (status corev1.PodStatus, restarted []string) {
	now := metav1.Now()
	status = *pod.Status.DeepCopy()
	status.Phase = corev1.PodRunning
	statuses := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	pending := false
	for _, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptrTrue(),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
		if i := slices.IndexFunc(pod.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == c.Name }); i >= 0 {
			old := pod.Status.ContainerStatuses[i]
			cs.RestartCount, cs.State, cs.Resources, cs.Started = old.RestartCount, old.State, old.Resources, old.Started
			if old.Image != c.Image {
				cs.RestartCount++
				cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
				restarted = append(restarted, c.Name)
			}
		}
		want := &corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}
		switch {
		case cs.Resources == nil:
			cs.Resources = want
		case equality.Semantic.DeepEqual(*cs.Resources, *want):
		case infeasible:
			pending = true
		default:
			if resizeRestarts(&c, cs.Resources) && !slices.Contains(restarted, c.Name) {
				cs.RestartCount++
				cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
				restarted = append(restarted, c.Name)
			}
			cs.Resources = want
		}
		statuses = append(statuses, cs)
	}
	status.ContainerStatuses = statuses
	ready := true
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		if i < 0 || pod.Status.Conditions[i].Status != corev1.ConditionTrue {
			ready = false
		}
	}
	setCondition(&status, corev1.PodResizePending, pending, corev1.PodReasonInfeasible, "", now)
	// Resizes are carried out at once: none is left in progress.
	setCondition(&status, corev1.PodResizeInProgress, false, "", "", now)
	setCondition(&status, corev1.ContainersReady, true, "", "", now)
	reason, message := "", ""
	if !ready {
		reason, message = "ReadinessGatesNotReady", gateMessage(pod)
	}
	setCondition(&status, corev1.PodReady, ready, reason, message, now)
	return status, restarted
}

// gateMessage is the message of the Ready condition False a kubelet
// writes for a pod whose containers are ready and some of whose readiness
// gates are not (GeneratePodReadyCondition in the kubelet's
// pkg/kubelet/status/generate.go).
func gateMessage(pod *corev1.Pod) string {
	var unready []string
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		switch {
		case i < 0:
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case pod.Status.Conditions[i].Status != corev1.ConditionTrue:
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, pod.Status.Conditions[i].Status))
		}
	}
	return strings.Join(unready, ", ")
}

// setCondition sets a condition, keeping its transition time unless its
// status changes; a PodResizePending or PodResizeInProgress that is no
// longer True goes, as the kubelet removes it.
func setCondition(status *corev1.PodStatus, typ corev1.PodConditionType, isTrue bool, reason, message string, now metav1.Time) {
	want := corev1.ConditionFalse
	if isTrue {
		want = corev1.ConditionTrue
	}
	i := slices.IndexFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == typ })
	switch {
	case (typ == corev1.PodResizePending || typ == corev1.PodResizeInProgress) && !isTrue:
		if i >= 0 {
			status.Conditions = slices.Delete(status.Conditions, i, i+1)
		}
	case i < 0:
		status.Conditions = append(status.Conditions, corev1.PodCondition{Type: typ, Status: want, Reason: reason, Message: message, LastTransitionTime: now})
	case status.Conditions[i].Status != want, status.Conditions[i].Message != message,
		typ != corev1.PodReady && status.Conditions[i].Reason != reason:
		// A status, or a message someone else wrote (the operator's Ready
		// False beside a closed gate, unless it wrote the kubelet's own):
		// the kubelet writes its own, with its own time, as its status
		// manager does from its cached Ready. For Ready it compares the
		// status and the message only, as the kubelet does before it
		// syncs a pod for its readiness (NeedToReconcilePodReadiness).
		status.Conditions[i] = corev1.PodCondition{Type: typ, Status: want, Reason: reason, Message: message, LastTransitionTime: now}
	}
}

// resizeRestarts reports whether the kubelet restarts a container to give
// it its spec's resources in place of those it has: a resource that
// changes and whose resizePolicy is RestartContainer.
func resizeRestarts(c *corev1.Container, have *corev1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy == corev1.RestartContainer &&
			(!c.Resources.Requests[p.ResourceName].Equal(have.Requests[p.ResourceName]) ||
				!c.Resources.Limits[p.ResourceName].Equal(have.Limits[p.ResourceName])) {
			return true
		}
	}
	return false
}

func ptrTrue() *bool { t := true; return &t }

// reactToDrains plays, for every pod of the API server, the one thing a
// kubelet always does that the suites' stand-ins do not: when the
// operator closes a pod's readiness gate it marks the pod not Ready
// itself (DrainingReason), and the kubelet, seeing the gate, reports the
// pod not Ready with its own reason (GeneratePodReadyCondition's
// ReadinessGatesNotReady), which is what the operator waits for before
// it stops the pod, unless the operator wrote the kubelet's own message:
// then the kubelet, which compares a Ready condition's status and message
// only (NeedToReconcilePodReadiness), does not sync the pod for it. It
// runs until ctx ends, through API server restarts (an informer relists).
func reactToDrains(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	react := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		message := gateMessage(pod)
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Reason == podsetv1alpha1.DrainingReason && c.Message != message
		})
		if i < 0 {
			return
		}
		pod = pod.DeepCopy()
		pod.Status.Conditions[i] = corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady",
			Message: message, LastTransitionTime: metav1.Now(),
		}
		// A conflict means a newer pod, whose own event follows.
		_, _ = cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}
	_, err = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    react,
		UpdateFunc: func(_, obj any) { react(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	return nil
}
