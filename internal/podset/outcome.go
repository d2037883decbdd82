package podset

import (
	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Outcome is what a pass's writes did, as the controller's write phase
// reports it: the status (View.Status), the events and the metrics of the
// pass are all made from it (and from the plan), in one place each, never
// from the writes themselves. Names are of pods, in the order their writes
// returned.
type Outcome struct {
	// Created lists the pods created.
	Created []string
	// Pruned lists the surplus pods deleted.
	Pruned []string
	// ReplacedFinished lists the finished pods deleted to be recreated.
	ReplacedFinished []string
	// ReplacedLost lists the pods of lost nodes force-deleted to be
	// recreated, as the plan had them (their node is the one they ran on).
	ReplacedLost []*corev1.Pod
	// Recreated lists the out-of-date pods deleted to be recreated, by why.
	Recreated map[string][]string
	// Updated lists the pods updated in place, by what changed
	// (UpdateWay.Describe).
	Updated map[string][]string
	// Restarting lists the pods whose gates closed to restart their
	// containers in place.
	Restarting []string
	// Stopping lists the pods whose gates closed to delete them once
	// drained, by why.
	Stopping map[string][]string
	// Repaired lists the pods whose operator-owned fields were restored.
	Repaired []string
	// Conflicts lists the pod names held by pods the PodSet does not
	// control: those the plan knew, and those a create found taken.
	Conflicts []string
	// BudgetDeleted names the PodDisruptionBudget deleted, if any;
	// BudgetApplied says the PodSet's was applied.
	BudgetDeleted string
	BudgetApplied bool
	// Rejection is the API server's refusal of a pod made from the
	// template, if any: its reason and message.
	Rejection *Rejection
	// Stall is what stalls the PodSet after the pass, if anything
	// (PodStall, or another phase's stall).
	Stall *Stall
}

// Rejection is a write the API server refused in a way a retry of the same
// request cannot fix.
type Rejection struct {
	// Reason is the API server's reason (Invalid, Forbidden, BadRequest).
	Reason string
	// Message is the API server's message, which names the pod and the
	// field; it is stable from pass to pass, so status does not churn.
	Message string
}

// Recreating records that pods were deleted to be recreated, each for the
// why whyOf says (WhyPolicy where it says nothing).
func (o *Outcome) Recreating(names []string, whyOf func(name string) string) {
	for _, name := range names {
		why := whyOf(name)
		if why == "" {
			why = WhyPolicy
		}
		if o.Recreated == nil {
			o.Recreated = map[string][]string{}
		}
		o.Recreated[why] = append(o.Recreated[why], name)
	}
}

// PodStall is what the pod writes stall the PodSet on: names held by pods
// it does not control, else a pod the API server refused; nil when neither.
func (o *Outcome) PodStall() *Stall {
	switch {
	case len(o.Conflicts) > 0:
		return ConflictStall(o.Conflicts)
	case o.Rejection != nil:
		return &Stall{Reason: podsetv1alpha1.PodRejectedReason,
			Message: "the API server refused a pod made from the template: " + o.Rejection.Reason + ": " + o.Rejection.Message}
	}
	return nil
}
