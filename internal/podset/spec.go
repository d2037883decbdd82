package podset

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// What the spec says, with its defaults: the replicas, the ordinals, the
// budget and the partition, read the same way by every step.

// Replicas is spec.Replicas; the schema defaults it to 1.
func Replicas(ps *podsetv1alpha1.PodSet) int32 {
	if ps.Spec.Replicas == nil {
		return 1
	}
	return *ps.Spec.Replicas
}

// Start is spec.ordinals.start, the ordinal of the first pod; 0 when unset.
func Start(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.Ordinals == nil {
		return 0
	}
	return int(max(0, ps.Spec.Ordinals.Start))
}

// Wanted reports whether an ordinal is one the PodSet wants a pod at:
// from start to start+replicas-1. Pods at any other ordinal are surplus,
// as StatefulSet's podInOrdinalRange condemns them.
//
// So a new spec.ordinals.start moves the set as StatefulSet's
// updateStatefulSet (stateful_set_control.go, v1.37.1) does under
// podManagementPolicy Parallel, which is the only policy a PodSet has: in
// one pass the missing ordinals of the new range are created and every
// condemned pod is deleted, highest ordinal first (its descendingOrdinal
// sort), neither waiting for the other; pods in both ranges stay. Within
// the pass the operator sends the deletes before the creates
// (execute), StatefulSet its creates first; nothing waits in between
// either way. What is not copied is OrderedReady (monotonic): there
// StatefulSet creates one pod at a time in ascending order, each Running
// and Ready before the next, and deletes condemned pods one at a time,
// highest first, only once every pod of the range is Running and
// Available.
func Wanted(ps *podsetv1alpha1.PodSet, ordinal int) bool {
	start := Start(ps)
	return ordinal >= start && ordinal < start+int(Replicas(ps))
}

// maxUnavailable resolves spec.updateStrategy.rollingUpdate.maxUnavailable
// against replicas: a percentage rounds down, and it is never below one, so
// a rollout always progresses.
func maxUnavailable(ps *podsetv1alpha1.PodSet) int {
	value := intstr.FromInt32(1)
	if ru := ps.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		value = *ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&value, int(Replicas(ps)), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Partition is spec.updateStrategy.rollingUpdate.partition: how many pods,
// counted from the first ordinal, a RollingUpdate holds back on their
// revision. OnDelete updates no pod itself, and new pods of either strategy
// start from the current template. UpdateFrom turns it into an ordinal.
func Partition(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType {
		return 0
	}
	if ru := ps.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return int(max(0, *ru.Partition))
	}
	return 0
}

// UpdateFrom is the lowest ordinal a RollingUpdate updates: pods below it
// keep their revision. The partition counts from spec.ordinals.start, as
// StatefulSet's does: its updateStatefulSet compares the partition with the
// index into the pods of the ordinal range (ordinal - start), and
// newVersionedStatefulSetPod creates the pods below start+partition from
// the current revision. So `kubectl rollout status`'s arithmetic,
// replicas - partition pods to update, holds with any start.
func UpdateFrom(ps *podsetv1alpha1.PodSet) int {
	return Start(ps) + Partition(ps)
}

// RolloutFrom is the lowest ordinal this pass moves to the current
// template: UpdateFrom, or, while spec.paused holds every pod on its
// revision, MaxReplicas, above every ordinal. Pods below it that are
// deleted or fail are made again from the revision they ran, and new ones
// from status.currentRevision (heldRevision).
func RolloutFrom(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.Paused {
		return podsetv1alpha1.MaxReplicas
	}
	return UpdateFrom(ps)
}

// ordinalOf is a pod's ordinal, or MaxReplicas for a name that has none, so
// that such pods sort above every real ordinal and are pruned first.
func ordinalOf(ps *podsetv1alpha1.PodSet, pod *corev1.Pod) int {
	return ordinalOr(PodOrdinal(ps.Name, pod.Name))
}

// ordinalOr is n when ok, else MaxReplicas.
func ordinalOr(n int, ok bool) int {
	if ok {
		return n
	}
	return podsetv1alpha1.MaxReplicas
}
