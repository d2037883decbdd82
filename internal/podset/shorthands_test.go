package podset

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The tests call the View's decisions through these shorthands, each
// making the view from a PodSet and its pods as a pass does.

// planArgs is a pass's plan input with the revisions and time its view
// is made with.
type planArgs struct {
	Input
	Revs *Revisions
	Now  time.Time
}

// PlanPods is the plan of a pass over pods.
func PlanPods(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, in planArgs) Plan {
	return NewView(ps, in.Revs, pods, in.Now).Plan(in.Input)
}

// ComputeStatus is the status a pass over pods writes, every write of the
// plan through.
func ComputeStatus(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, revs *Revisions, plan *Plan, stalled *Stall, now metav1.Time) podsetv1alpha1.PodSetStatus {
	return NewView(ps, revs, pods, now.Time).Status(plan, &Outcome{ReplacedLost: plan.ReplaceLost, Stall: stalled})
}

// deadlineStall is the stall of a pass over pods past the deadline.
func deadlineStall(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, revs *Revisions, available int32, now time.Time) *Stall {
	return NewView(ps, revs, pods, now).deadlineStall(available)
}

// WakeAfter is when a pass over pods wants to look again.
func WakeAfter(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, status *podsetv1alpha1.PodSetStatus, now time.Time) time.Duration {
	return NewView(ps, NewRevisions(ps, nil), pods, now).WakeAfter(status)
}

// PlanRevisions is the revision plan of a pass over pods.
func PlanRevisions(ps *podsetv1alpha1.PodSet, revs *Revisions, pods []corev1.Pod, kept []string) RevisionPlan {
	return NewView(ps, revs, pods, time.Time{}).PlanRevisions(kept)
}

// observe is Held.Observe of a pass over pods.
func (h Held) observe(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, update string) Held {
	revs := NewRevisions(ps, nil)
	revs.Update = update
	return h.Observe(NewView(ps, revs, pods, time.Time{}))
}
