package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// Events. Their reasons are the API's condition and event reasons
// (apis/v1alpha1/conditions.go); their action says what the operator did:
// Create, Delete, Drain, Update, Apply, Observe, Validate or Rollout.
// Every event of a pass is sent from here (outcomeEvents), made from the
// pass's plan and what its writes did (podset.Outcome), never from the
// writes themselves.

// outcomeEvents records what a pass's writes did, one event per kind of
// change (per reason, where pods changed for several), and counts the
// pods replaced on lost nodes. A PodSet stalled on its pods says so
// (record), not that it has strays.
func (r *PodSetReconciler) outcomeEvents(ps *podsetv1alpha1.PodSet, plan *podset.Plan, done *podset.Outcome, revs *podset.Revisions) {
	if len(done.Pruned) > 0 {
		r.note(ps, podsetv1alpha1.ScalingDownReason, "Delete", "deleted surplus pods %s", podset.Summarize(done.Pruned))
	}
	if len(done.ReplacedFinished) > 0 {
		r.note(ps, podsetv1alpha1.ReplacingFinishedReason, "Delete", "deleted finished pods to replace them: %s", podset.Summarize(done.ReplacedFinished))
	}
	r.lostEvents(ps, plan, done)
	for _, why := range slices.Sorted(maps.Keys(done.Recreated)) {
		if why == podset.WhyReplace {
			r.note(ps, podsetv1alpha1.ReplacingRequestedReason, "Delete",
				"deleted pods %s to make them again: %s", podset.Summarize(done.Recreated[why]), why)
			continue
		}
		r.note(ps, podsetv1alpha1.RollingOutReason, "Delete",
			"deleted out-of-date pods %s to recreate them: %s", podset.Summarize(done.Recreated[why]), why)
	}
	for _, what := range slices.Sorted(maps.Keys(done.Updated)) {
		r.note(ps, podsetv1alpha1.UpdatedInPlaceReason, "Update",
			"updated pods %s in place to revision %s: %s", podset.Summarize(done.Updated[what]), podset.RevisionName(ps, revs.Update), what)
	}
	if len(done.Restarting) > 0 {
		r.note(ps, podsetv1alpha1.UpdatedInPlaceReason, "Drain",
			"took pods %s out of Ready to restart their containers in place for revision %s", podset.Summarize(done.Restarting), podset.RevisionName(ps, revs.Update))
	}
	for _, why := range slices.Sorted(maps.Keys(done.Stopping)) {
		reason := podsetv1alpha1.RollingOutReason
		switch why {
		case podset.WhySurplus:
			reason = podsetv1alpha1.ScalingDownReason
		case podset.WhyReplace:
			reason = podsetv1alpha1.ReplacingRequestedReason
		}
		r.note(ps, reason, "Drain", "took pods %s out of Ready to delete them once drained: %s", podset.Summarize(done.Stopping[why]), why)
	}
	if len(done.Created) > 0 {
		r.note(ps, podsetv1alpha1.ScalingUpReason, "Create", "created pods %s", podset.Summarize(done.Created))
	}
	if len(done.Repaired) > 0 {
		r.note(ps, podsetv1alpha1.RepairedReason, "Apply", "restored operator-owned fields of pods %s", podset.Summarize(done.Repaired))
	}
	if len(plan.Strays) > 0 && done.PodStall() == nil {
		r.warn(ps, podsetv1alpha1.StrayPodsReason, "Observe", fmt.Sprintf(
			"pods %s carry the label %s=%s but are not controlled by this PodSet; they are neither counted nor touched",
			podset.Summarize(plan.Strays), podsetv1alpha1.NameLabel, ps.Name))
	}
	r.budgetEvents(ps, done)
}

// lostEvents records the pods of lost nodes: a Warning per node whose
// pods were force-deleted, naming them, with the count in
// podset_operator_lost_node_replacements_total; while replacement is
// paused, a Warning that says why.
func (r *PodSetReconciler) lostEvents(ps *podsetv1alpha1.PodSet, plan *podset.Plan, done *podset.Outcome) {
	if len(plan.LostHeld) > 0 {
		r.warn(ps, podsetv1alpha1.LostNodeReplacementPausedReason, "Observe", fmt.Sprintf(
			"pods %s run on lost nodes but are not replaced: more than half of the cluster's nodes are lost, "+
				"which looks like the control plane cut off from its nodes rather than nodes gone; replacement resumes once at most half are lost",
			podset.Summarize(podNames(plan.LostHeld))))
	}
	if len(done.ReplacedLost) == 0 {
		return
	}
	byNode := map[string][]string{}
	for _, pod := range done.ReplacedLost {
		byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod.Name)
	}
	after := int32(podsetv1alpha1.DefaultLostNodeAfterSeconds)
	if s := ps.Spec.LostNodeReplacement.AfterSeconds; s != nil {
		after = *s
	}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		r.metrics.lostNodeReplacements.WithLabelValues(ps.Namespace, ps.Name).Add(float64(len(byNode[node])))
		r.warn(ps, podsetv1alpha1.ReplacingLostReason, "Delete", fmt.Sprintf(
			"force-deleted pods %s of node %s, lost since %s (spec.lostNodeReplacement.afterSeconds %d), to create them again on a healthy node; "+
				"if the node still runs them, they run twice until it is back",
			podset.Summarize(byNode[node]), node, plan.LostSince[node].UTC().Format(time.RFC3339), after))
	}
}

// note records a Normal event of something the operator did.
func (r *PodSetReconciler) note(ps *podsetv1alpha1.PodSet, reason, action, format string, args ...any) {
	r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, reason, action, format, args...)
}

// warn records a Warning event: something a user must act on.
func (r *PodSetReconciler) warn(ps *podsetv1alpha1.PodSet, reason, action, message string) {
	r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, reason, action, "%s", eventNote(message))
}

// maxEventNote is the longest note the events.k8s.io API accepts, in bytes.
const maxEventNote = 1024

// eventNote is a message as an event's note: whole if it fits, else cut at
// a character boundary with an ellipsis. The API server refuses a longer
// note, and the event would be lost; the condition keeps the whole message.
func eventNote(message string) string {
	if len(message) <= maxEventNote {
		return message
	}
	const ellipsis = "…"
	cut := maxEventNote - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + ellipsis
}
