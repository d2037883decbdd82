package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// stall says why a PodSet cannot progress until someone changes something.
// Its message must not change from pass to pass while the cause stays the
// same, or every pass would write status.
type stall struct {
	reason  string
	message string
}

// computeStatus is the status a PodSet should have, given its pods as the
// cache shows them, the plan of this pass and what, if anything, stalls it.
// Conditions keep their lastTransitionTime unless their status changes.
func computeStatus(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, hash string, plan *podPlan, stalled *stall, now metav1.Time) podsetv1alpha1.PodSetStatus {
	status := podsetv1alpha1.PodSetStatus{
		ObservedGeneration: ps.Generation,
		Selector:           selectorString(ps),
	}
	var live []*corev1.Pod
	terminating := 0
	for i := range pods {
		pod := &pods[i]
		if !metav1.IsControlledBy(pod, ps) {
			continue
		}
		status.Replicas++
		if pod.DeletionTimestamp != nil {
			terminating++
			continue
		}
		live = append(live, pod)
		if podReady(pod) {
			status.ReadyReplicas++
		}
		if pod.Labels[podsetv1alpha1.TemplateHashLabel] == hash {
			status.UpdatedReplicas++
		}
	}
	status.AvailableReplicas = status.ReadyReplicas
	slices.SortFunc(live, func(a, b *corev1.Pod) int { return cmp.Compare(ordinalOf(ps, a), ordinalOf(ps, b)) })
	for _, pod := range live {
		status.PodNames = append(status.PodNames, pod.Name)
	}

	desired := replicas(ps)
	progress := fmt.Sprintf("%d/%d pods ready, %d/%d up to date", status.ReadyReplicas, desired, status.UpdatedReplicas, desired)
	ready := stalled == nil && terminating == 0 && int32(len(live)) == desired &&
		status.ReadyReplicas == desired && status.UpdatedReplicas == desired

	conditions := slices.Clone(ps.Status.Conditions)
	set := func(typ string, s metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: message,
			ObservedGeneration: ps.Generation, LastTransitionTime: now,
		})
	}
	switch {
	case ready:
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionTrue, podsetv1alpha1.ReadyReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.ConvergedReason, progress)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, podsetv1alpha1.ConvergedReason, progress)
	case stalled != nil:
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, stalled.reason, stalled.message)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionTrue, stalled.reason, stalled.message)
	default:
		reason := reconcilingReason(ps, live, terminating, hash, plan)
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, progress)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, reason, progress)
	}
	status.Conditions = conditions
	return status
}

// reconcilingReason names what a converging PodSet is doing.
func reconcilingReason(ps *podsetv1alpha1.PodSet, live []*corev1.Pod, terminating int, hash string, plan *podPlan) string {
	desired := int(replicas(ps))
	switch {
	case len(live) < desired || len(plan.create) > 0:
		return podsetv1alpha1.ScalingUpReason
	case len(live) > desired || len(plan.prune) > 0:
		return podsetv1alpha1.ScalingDownReason
	case slices.ContainsFunc(live, func(p *corev1.Pod) bool { return p.Labels[podsetv1alpha1.TemplateHashLabel] != hash }):
		return podsetv1alpha1.RollingOutReason
	default:
		return podsetv1alpha1.WaitingForPodsReason
	}
}

// conflictStall is the stall of a PodSet whose pod names are held by pods
// it does not control.
func conflictStall(names []string) *stall {
	slices.Sort(names)
	return &stall{
		reason: podsetv1alpha1.PodConflictReason,
		message: fmt.Sprintf("pods %s exist and are not controlled by this PodSet; it leaves them alone: delete or rename them",
			strings.Join(names, ", ")),
	}
}

// StatusInterval is the least time between two status writes of a PodSet
// that only move counts or messages.
const StatusInterval = time.Second

// significantChange reports whether a new status changes what clients wait
// on: the observed generation or the status of a condition.
func significantChange(old, cur podsetv1alpha1.PodSetStatus) bool {
	if old.ObservedGeneration != cur.ObservedGeneration || len(old.Conditions) != len(cur.Conditions) {
		return true
	}
	for _, c := range cur.Conditions {
		if o := meta.FindStatusCondition(old.Conditions, c.Type); o == nil || o.Status != c.Status {
			return true
		}
	}
	return false
}

// writeTimes remembers when each PodSet's status was last written.
type writeTimes struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// wait is how long until the PodSet's status may be written again.
func (w *writeTimes) wait(key types.NamespacedName, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[key]
	if !ok {
		return 0
	}
	return max(0, StatusInterval-now.Sub(last))
}

func (w *writeTimes) wrote(key types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[key] = now
}

func (w *writeTimes) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}
