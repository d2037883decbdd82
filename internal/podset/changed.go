package podset

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// PodOutcomeChanged reports whether a pod's update can change what a pass
// decides: its phase, its readiness (the kubelet's own not-Ready report
// after the operator's ends a drain's wait), its gate, a resize, what its
// containers run, its deletion, labels, annotations, owners or images.
func PodOutcomeChanged(old, cur *corev1.Pod) bool {
	return old.Status.Phase != cur.Status.Phase ||
		podReady(old) != podReady(cur) ||
		kubeletReady(old) != kubeletReady(cur) ||
		kubeletNotReady(old) != kubeletNotReady(cur) ||
		conditionChanged(old, cur, podsetv1alpha1.InPlaceUpdateReadyCondition) ||
		conditionChanged(old, cur, corev1.PodResizePending) ||
		conditionChanged(old, cur, corev1.PodResizeInProgress) ||
		!slices.EqualFunc(old.Status.ContainerStatuses, cur.Status.ContainerStatuses, sameStatusImage) ||
		!slices.EqualFunc(old.Status.InitContainerStatuses, cur.Status.InitContainerStatuses, sameStatusImage) ||
		gateClosed(cur) && restartsChanged(old, cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		!maps.Equal(old.Labels, cur.Labels) ||
		!maps.Equal(old.Annotations, cur.Annotations) ||
		!slices.EqualFunc(old.OwnerReferences, cur.OwnerReferences, func(a, b metav1.OwnerReference) bool {
			return a.UID == b.UID && ptrEqual(a.Controller, b.Controller) && ptrEqual(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
		}) ||
		!slices.EqualFunc(old.Spec.Containers, cur.Spec.Containers, sameImage) ||
		!slices.EqualFunc(old.Spec.InitContainers, cur.Spec.InitContainers, sameImage)
}

func sameImage(a, b corev1.Container) bool { return a.Image == b.Image }

func sameStatusImage(a, b corev1.ContainerStatus) bool {
	return a.Name == b.Name && a.Image == b.Image && (a.State.Running == nil) == (b.State.Running == nil) &&
		equality.Semantic.DeepEqual(a.Resources, b.Resources)
}

// restartsChanged reports whether a container's restart count changed:
// while an in-place update is in flight, that is how a real kubelet shows
// the container restarted (it may report the new container running in the
// same status as the old one, under the same image name); otherwise a
// crash loop's restarts change nothing a pass decides.
func restartsChanged(old, cur *corev1.Pod) bool {
	same := func(a, b corev1.ContainerStatus) bool { return a.Name == b.Name && a.RestartCount == b.RestartCount }
	return !slices.EqualFunc(old.Status.ContainerStatuses, cur.Status.ContainerStatuses, same) ||
		!slices.EqualFunc(old.Status.InitContainerStatuses, cur.Status.InitContainerStatuses, same)
}

// conditionChanged reports whether a pod condition's status or reason
// changed.
func conditionChanged(old, cur *corev1.Pod, typ corev1.PodConditionType) bool {
	find := func(pod *corev1.Pod) (corev1.ConditionStatus, string) {
		for _, c := range pod.Status.Conditions {
			if c.Type == typ {
				return c.Status, c.Reason
			}
		}
		return "", ""
	}
	os, or := find(old)
	cs, cr := find(cur)
	return os != cs || or != cr
}

func ptrEqual[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
