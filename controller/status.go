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
	"k8s.io/apimachinery/pkg/util/resourceversion"

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
// that do not change a verdict (see significantChange). A PodSet's first
// status write waits for it too: a PodSet that becomes Ready within it costs
// one status write, not two.
const StatusInterval = time.Second

// significantChange reports whether a new status changes a verdict that
// clients wait on, which they must see at once: Ready or Stalled turning
// True or turning False, or being True for a new generation. kubectl wait,
// Argo CD, Flux and alerts act on those. Everything else (counts, messages,
// Reconciling, a PodSet's first status, on which neither is True) is
// progress, written at most once per StatusInterval.
func significantChange(old, cur podsetv1alpha1.PodSetStatus) bool {
	for _, typ := range []string{podsetv1alpha1.ReadyCondition, podsetv1alpha1.StalledCondition} {
		was, is := meta.IsStatusConditionTrue(old.Conditions, typ), meta.IsStatusConditionTrue(cur.Conditions, typ)
		if was != is || is && old.ObservedGeneration != cur.ObservedGeneration {
			return true
		}
	}
	return false
}

// statusWrites remembers, for each PodSet, when its status was last written
// and, until the cache shows that write, what was written.
//
// The PodSet in the cache can lag behind the operator's own status write,
// and status writes raise no event the operator watches (generation
// changes only). A pass that compared against the lagging cache could find
// "nothing to write" while the write just sent, already out of date, was
// still on its way to the cache, and that stale status would stay: the
// stuck "3 pods, ScalingDown" after a scale-down that the soak found. So a
// pass compares against the last write until the cache has caught up.
type statusWrites struct {
	mu   sync.Mutex
	last map[types.NamespacedName]statusWrite
}

// statusWrite is the last status write of one PodSet.
type statusWrite struct {
	at time.Time
	// resourceVersion is the PodSet's after the write, and status what was
	// written; status is nil once the cache shows the write.
	resourceVersion string
	status          *podsetv1alpha1.PodSetStatus
}

func newStatusWrites() *statusWrites {
	return &statusWrites{last: map[types.NamespacedName]statusWrite{}}
}

// shown is the status clients see now: the PodSet's, or, while the cache has
// not caught up with the operator's last write, what that write set.
func (w *statusWrites) shown(key types.NamespacedName, ps *podsetv1alpha1.PodSet) podsetv1alpha1.PodSetStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[key]
	if !ok || last.status == nil {
		return ps.Status
	}
	if cmp, err := resourceversion.CompareResourceVersion(ps.ResourceVersion, last.resourceVersion); err == nil && cmp < 0 {
		return *last.status
	}
	// The cache has caught up (or the versions do not compare, and the
	// cache is all there is to go by).
	last.status = nil
	w.last[key] = last
	return ps.Status
}

// wait is how long until the PodSet's status may be written again. The
// first time a PodSet is asked about starts its interval.
func (w *statusWrites) wait(key types.NamespacedName, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[key]
	if !ok {
		w.last[key] = statusWrite{at: now}
		return StatusInterval
	}
	return max(0, StatusInterval-now.Sub(last.at))
}

// wrote records a status write and the PodSet's resourceVersion after it.
func (w *statusWrites) wrote(key types.NamespacedName, now time.Time, resourceVersion string, status podsetv1alpha1.PodSetStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[key] = statusWrite{at: now, resourceVersion: resourceVersion, status: &status}
}

func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}
