package podset

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// What a kubelet reports of a pod, as the planner reads it: whether its
// containers restarted and run, whether a resize was carried out or is
// stuck, and whether the pod is Ready by the kubelet's own word.

// resizeSettled reports whether the kubelet has carried out the pod's
// resize: no resize is pending or in progress, and every container (and
// sidecar) whose resources the kubelet reports runs with the cpu and
// memory its spec asks for. A container whose resizePolicy restarts it
// for a resize runs the image it had, so this, not the image, tells that
// it restarted with its new resources.
func resizeSettled(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress) && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return everyRunningContainer(pod, func(c *corev1.Container, s *corev1.ContainerStatus) bool {
		if s == nil || s.Resources == nil {
			return true
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[name]; ok && !q.Equal(s.Resources.Requests[name]) {
				return false
			}
			if q, ok := c.Resources.Limits[name]; ok && !q.Equal(s.Resources.Limits[name]) {
				return false
			}
		}
		return true
	})
}

// everyRunningContainer reports whether ok holds for every container of
// the pod that runs beside the others (its containers and sidecars, not
// init containers that run to completion), with its status, or nil when
// the pod's status does not list it.
func everyRunningContainer(pod *corev1.Pod, ok func(*corev1.Container, *corev1.ContainerStatus) bool) bool {
	for _, list := range []struct {
		containers []corev1.Container
		statuses   []corev1.ContainerStatus
		init       bool
	}{{pod.Spec.Containers, pod.Status.ContainerStatuses, false}, {pod.Spec.InitContainers, pod.Status.InitContainerStatuses, true}} {
		for i := range list.containers {
			c := &list.containers[i]
			if list.init && !sidecar(c) {
				continue
			}
			var status *corev1.ContainerStatus
			if j := slices.IndexFunc(list.statuses, func(s corev1.ContainerStatus) bool { return s.Name == c.Name }); j >= 0 {
				status = &list.statuses[j]
			}
			if !ok(c, status) {
				return false
			}
		}
	}
	return true
}

// resizeTowards reports whether a pod's containers ask for the cpu and
// memory of a template: a pending resize of such a pod is the operator's
// (a resize by someone else, such as the VerticalPodAutoscaler, is theirs
// to give up on).
func resizeTowards(tmpl *corev1.PodTemplateSpec, pod *corev1.Pod) bool {
	for _, pair := range [][2][]corev1.Container{{tmpl.Spec.Containers, pod.Spec.Containers}, {tmpl.Spec.InitContainers, pod.Spec.InitContainers}} {
		for _, want := range pair[0] {
			j := slices.IndexFunc(pair[1], func(c corev1.Container) bool { return c.Name == want.Name })
			if j < 0 {
				return false
			}
			got := pair[1][j].Resources
			for name, q := range want.Resources.Requests {
				if !q.Equal(got.Requests[name]) {
					return false
				}
			}
			for name, q := range want.Resources.Limits {
				if !q.Equal(got.Limits[name]) {
					return false
				}
			}
		}
	}
	return true
}

// resizeStuck reports why a pod's resize will not happen where it runs
// (the kubelet reports it Infeasible, or Deferred for longer than the
// deadline), or how long until a Deferred one would count as stuck.
func resizeStuck(pod *corev1.Pod, deadline time.Duration, now time.Time) (why string, wait time.Duration) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodResizePending || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case corev1.PodReasonInfeasible:
			return whyInfeasible, 0
		case corev1.PodReasonDeferred:
			if left := c.LastTransitionTime.Add(deadline).Sub(now); left > 0 {
				return "", left
			}
			return whyDeferred, 0
		}
	}
	return "", 0
}

// kubeletReady reports whether the pod's Ready condition is True: after
// the gate closes, the drain waits for it to go False.
func kubeletReady(pod *corev1.Pod) bool {
	c := podCondition(pod, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// kubeletNotReady reports whether the pod's kubelet itself reports it not
// Ready: its Ready condition is False with a reason of its own, not the
// operator's DrainingReason. Until then a kubelet that has not seen the
// closed gate could still write the Ready it had, and put the pod back
// into endpoints.
func kubeletNotReady(pod *corev1.Pod) bool {
	c := podCondition(pod, corev1.PodReady)
	return c != nil && c.Status != corev1.ConditionTrue && c.Reason != podsetv1alpha1.DrainingReason
}

// podCondition is the pod's condition of a type, or nil.
func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
