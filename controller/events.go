package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// Events. Their reasons are the API's condition and event reasons
// (apis/v1alpha1/conditions.go); their action says what the operator did:
// Create, Delete, Drain, Update, Apply, Observe, Validate or Rollout.
// Every event of a pass is made here (passEvents), from the pass's plan,
// what its writes did (podset.Outcome) and the status it wrote, never
// from the writes themselves, and record sends them through the writer.

// eventList is the events of a pass, in the order they are sent.
type eventList []podSetEvent

// note adds a Normal event of something the operator did.
func (l *eventList) note(reason, action, format string, args ...any) {
	*l = append(*l, podSetEvent{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Note: eventNote(fmt.Sprintf(format, args...))})
}

// warn adds a Warning event: something a user must act on.
func (l *eventList) warn(reason, action, message string) {
	*l = append(*l, podSetEvent{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Note: eventNote(message)})
}

// passEvents is the events of a pass: what its writes did
// (outcomeEvents), then a stall (which recurs each pass while it lasts,
// as the stall's backoff spaces the passes), then, once the status is
// written (statusErr nil), the progress deadline passing (once: the
// status before, old, had not passed it).
func passEvents(ps *podsetv1alpha1.PodSet, plan *podset.Plan, done *podset.Outcome, revs *podset.Revisions, old, status *podsetv1alpha1.PodSetStatus, statusErr error) eventList {
	events := outcomeEvents(ps, plan, done, revs)
	if s := done.Stall; s != nil {
		action := "Create"
		if s.Reason == podsetv1alpha1.InvalidTemplateReason {
			action = "Validate"
		}
		events.warn(s.Reason, action, s.Message)
	}
	if statusErr == nil && deadlineExceeded(status) && !deadlineExceeded(old) {
		c := meta.FindStatusCondition(status.Conditions, podsetv1alpha1.StalledCondition)
		events.warn(c.Reason, "Rollout", c.Message)
	}
	return events
}

// outcomeEvents is what a pass's writes did, one event per kind of
// change (per reason, where pods changed for several). A PodSet stalled
// on its pods says so (passEvents), not that it has strays.
func outcomeEvents(ps *podsetv1alpha1.PodSet, plan *podset.Plan, done *podset.Outcome, revs *podset.Revisions) eventList {
	var events eventList
	if len(done.Pruned) > 0 {
		events.note(podsetv1alpha1.ScalingDownReason, "Delete", "deleted surplus pods %s", podset.Summarize(done.Pruned))
	}
	if len(done.ReplacedFinished) > 0 {
		events.note(podsetv1alpha1.ReplacingFinishedReason, "Delete", "deleted finished pods to replace them: %s", podset.Summarize(done.ReplacedFinished))
	}
	events.lost(ps, plan, done)
	for _, why := range slices.Sorted(maps.Keys(done.Recreated)) {
		if why == podset.WhyReplace {
			events.note(podsetv1alpha1.ReplacingRequestedReason, "Delete",
				"deleted pods %s to make them again: %s", podset.Summarize(done.Recreated[why]), why)
			continue
		}
		events.note(podsetv1alpha1.RollingOutReason, "Delete",
			"deleted out-of-date pods %s to recreate them: %s", podset.Summarize(done.Recreated[why]), why)
	}
	for _, what := range slices.Sorted(maps.Keys(done.Updated)) {
		events.note(podsetv1alpha1.UpdatedInPlaceReason, "Update",
			"updated pods %s in place to revision %s: %s", podset.Summarize(done.Updated[what]), podset.RevisionName(ps, revs.Update), what)
	}
	if len(done.Restarting) > 0 {
		events.note(podsetv1alpha1.UpdatedInPlaceReason, "Drain",
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
		events.note(reason, "Drain", "took pods %s out of Ready to delete them once drained: %s", podset.Summarize(done.Stopping[why]), why)
	}
	if len(done.Created) > 0 {
		events.note(podsetv1alpha1.ScalingUpReason, "Create", "created pods %s", podset.Summarize(done.Created))
	}
	if len(done.Repaired) > 0 {
		events.note(podsetv1alpha1.RepairedReason, "Apply", "restored operator-owned fields of pods %s", podset.Summarize(done.Repaired))
	}
	if len(plan.Strays) > 0 && done.PodStall() == nil {
		events.warn(podsetv1alpha1.StrayPodsReason, "Observe", fmt.Sprintf(
			"pods %s carry the label %s=%s but are not controlled by this PodSet; they are neither counted nor touched",
			podset.Summarize(plan.Strays), podsetv1alpha1.NameLabel, ps.Name))
	}
	events.budget(ps, done)
	return events
}

// lost adds the events of the pods of lost nodes: a Warning per node
// whose pods were force-deleted, naming them; while replacement is
// paused, a Warning that says why.
func (l *eventList) lost(ps *podsetv1alpha1.PodSet, plan *podset.Plan, done *podset.Outcome) {
	if len(plan.LostHeld) > 0 {
		l.warn(podsetv1alpha1.LostNodeReplacementPausedReason, "Observe", fmt.Sprintf(
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
		l.warn(podsetv1alpha1.ReplacingLostReason, "Delete", fmt.Sprintf(
			"force-deleted pods %s of node %s, lost since %s (spec.lostNodeReplacement.afterSeconds %d), to create them again on a healthy node; "+
				"if the node still runs them, they run twice until it is back",
			podset.Summarize(byNode[node]), node, plan.LostSince[node].UTC().Format(time.RFC3339), after))
	}
}

// budget adds the events of what the PodDisruptionBudget's writes did.
func (l *eventList) budget(ps *podsetv1alpha1.PodSet, done *podset.Outcome) {
	if done.BudgetDeleted != "" {
		l.note(podsetv1alpha1.DisruptionBudgetDeletedReason, "Delete",
			"deleted PodDisruptionBudget %s: spec.disruptionBudget was removed", done.BudgetDeleted)
	}
	if done.BudgetApplied {
		l.note(podsetv1alpha1.DisruptionBudgetAppliedReason, "Apply", "applied PodDisruptionBudget %s: %s", ps.Name, budgetBound(ps))
	}
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
