package podset

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Stall says why a PodSet cannot progress until someone changes something.
// Its message must not change from pass to pass while the cause stays the
// same, or every pass would write status.
type Stall struct {
	Reason  string
	Message string
}

// ComputeStatus is the status a PodSet should have, given its pods as the
// cache shows them, its revisions, the plan of this pass and what, if
// anything, stalls it. A PodSet that is not Ready and made no progress for
// progressDeadlineSeconds is stalled too (ProgressDeadlineExceeded), though
// the operator goes on working on it. Conditions keep their
// lastTransitionTime unless their status changes.
func ComputeStatus(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, revs *Revisions, plan *Plan, stalled *Stall, now metav1.Time) podsetv1alpha1.PodSetStatus {
	status := podsetv1alpha1.PodSetStatus{
		ObservedGeneration: ps.Generation,
		Selector:           selectorString(ps),
		UpdateRevision:     RevisionName(ps, revs.Update),
	}
	desired := Replicas(ps)
	minReady := minReadySeconds(ps)
	partition := Partition(ps)
	onDelete := ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType
	var live []ordinalPod
	var terminating, desiredAvailable, outdated, older int32
	current := revs.Update
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
		ordinal, ok := PodOrdinal(ps.Name, pod.Name)
		live = append(live, ordinalPod{ordinal: ordinalOr(ordinal, ok), name: pod.Name})
		wanted := ok && ordinal < int(desired)
		hash := pod.Labels[podsetv1alpha1.TemplateHashLabel]
		if podReady(pod) {
			status.ReadyReplicas++
		}
		if podAvailable(pod, minReady, now.Time) {
			status.AvailableReplicas++
			if wanted {
				desiredAvailable++
			}
		}
		if hash == revs.Update {
			status.UpdatedReplicas++
		} else if wanted {
			older++
			if !onDelete && ordinal >= partition {
				outdated++
			}
		}
		if wanted && revs.Older(hash, current) {
			current = hash
		}
	}
	status.CurrentRevision = RevisionName(ps, current)
	slices.SortFunc(live, func(a, b ordinalPod) int { return cmp.Compare(a.ordinal, b.ordinal) })
	if len(live) > 0 {
		status.PodNames = make([]string, 0, len(live))
	}
	for _, pod := range live {
		status.PodNames = append(status.PodNames, pod.name)
	}

	progress := fmt.Sprintf("%d/%d pods ready, %d/%d available, %d/%d up to date",
		status.ReadyReplicas, desired, status.AvailableReplicas, desired, status.UpdatedReplicas, desired)
	switch {
	case older > 0 && onDelete:
		progress += fmt.Sprintf("; %d %s an older template (OnDelete: each is updated once deleted)", older, pluralPods(older, "runs", "run"))
	case older > 0 && partition > 0:
		progress += fmt.Sprintf("; %d %s an older template (partition %d holds back ordinals below it)", older, pluralPods(older, "runs", "run"), partition)
	}
	ready := stalled == nil && terminating == 0 && int32(len(live)) == desired && desiredAvailable == desired && outdated == 0
	status.LastProgressTime = lastProgress(ps, &status, ready, now)
	if stalled == nil && !ready && deadlineIn(ps, status.LastProgressTime, now.Time) <= 0 {
		stalled = deadlineStall(ps, pods, revs, status.AvailableReplicas, now.Time)
	}

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
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, stalled.Reason, stalled.Message)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionTrue, stalled.Reason, stalled.Message)
	default:
		reason := reconcilingReason(ps, len(live), terminating, outdated, plan)
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, progress)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, reason, progress)
	}
	status.Conditions = conditions
	return status
}

// pluralPods is "1 pod <one>" or "n pods <many>".
func pluralPods(n int32, one, many string) string {
	if n == 1 {
		return "pod " + one
	}
	return "pods " + many
}

// reconcilingReason names what a converging PodSet is doing.
func reconcilingReason(ps *podsetv1alpha1.PodSet, live int, terminating, outdated int32, plan *Plan) string {
	desired := int(Replicas(ps))
	switch {
	case live < desired || len(plan.Create) > 0:
		return podsetv1alpha1.ScalingUpReason
	case live > desired || len(plan.Prune) > 0:
		return podsetv1alpha1.ScalingDownReason
	case outdated > 0:
		return podsetv1alpha1.RollingOutReason
	default:
		return podsetv1alpha1.WaitingForPodsReason
	}
}

// WakeAfter is when a pass must look at a PodSet again although no event
// may come: when its next Ready pod becomes available (minReadySeconds), or
// when its progress deadline passes. 0: no such moment.
func WakeAfter(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, status *podsetv1alpha1.PodSetStatus, now time.Time) time.Duration {
	var wake time.Duration
	soonest := func(d time.Duration) {
		if d > 0 && (wake == 0 || d < wake) {
			wake = d
		}
	}
	minReady := minReadySeconds(ps)
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && metav1.IsControlledBy(&pods[i], ps) {
			soonest(availableIn(&pods[i], minReady, now))
		}
	}
	if !meta.IsStatusConditionTrue(status.Conditions, podsetv1alpha1.ReadyCondition) &&
		!meta.IsStatusConditionTrue(status.Conditions, podsetv1alpha1.StalledCondition) {
		// A second late rather than early: the stored time has whole
		// seconds.
		soonest(deadlineIn(ps, status.LastProgressTime, now) + time.Second)
	}
	return wake
}

// ConflictStall is the stall of a PodSet whose pod names are held by pods
// it does not control.
func ConflictStall(names []string) *Stall {
	slices.Sort(names)
	return &Stall{
		Reason: podsetv1alpha1.PodConflictReason,
		Message: fmt.Sprintf("pods %s exist and are not controlled by this PodSet; it leaves them alone: delete or rename them",
			strings.Join(names, ", ")),
	}
}

// SignificantChange reports whether a new status changes a verdict that
// clients wait on, which they must see at once: Ready or Stalled turning
// True or turning False, or being True for a new generation. kubectl wait,
// Argo CD, Flux and alerts act on those. Everything else (counts, messages,
// Reconciling, a PodSet's first status, on which neither is True) is
// progress, which the operator writes at most once a StatusInterval.
func SignificantChange(old, cur podsetv1alpha1.PodSetStatus) bool {
	for _, typ := range []string{podsetv1alpha1.ReadyCondition, podsetv1alpha1.StalledCondition} {
		was, is := meta.IsStatusConditionTrue(old.Conditions, typ), meta.IsStatusConditionTrue(cur.Conditions, typ)
		if was != is || is && old.ObservedGeneration != cur.ObservedGeneration {
			return true
		}
	}
	return false
}
