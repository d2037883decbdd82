package podset

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

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

// Status is the status the PodSet should have, given the view, the plan
// of this pass and what its writes did (done: the pods replaced, and what,
// if anything, stalls the PodSet): the counts (counts), then the
// conditions (conditions). A PodSet that is not Ready and made no progress
// for progressDeadlineSeconds is stalled too (ProgressDeadlineExceeded),
// though the operator goes on working on it.
func (v *View) Status(plan *Plan, done *Outcome) podsetv1alpha1.PodSetStatus {
	status, c := v.counts(done)
	v.conditions(&status, c, plan, done.Stall)
	return status
}

// podCounts are what the conditions are decided on besides the status's
// own counts.
type podCounts struct {
	// live is how many controlled pods are not terminating; terminating,
	// how many are.
	live, terminating int32
	// desiredAvailable counts the available pods at wanted ordinals.
	desiredAvailable int32
	// older counts the desired pods on an older revision, and outdated
	// those of them the update strategy updates (once resumed, when
	// spec.paused holds them).
	older, outdated int32
}

// counts fills in the status's counts, revisions and pod names.
func (v *View) counts(done *Outcome) (podsetv1alpha1.PodSetStatus, podCounts) {
	ps, revs := v.PodSet, v.Revs
	status := podsetv1alpha1.PodSetStatus{
		ObservedGeneration: ps.Generation,
		Selector:           selectorString(ps),
		UpdateRevision:     RevisionName(ps, revs.Update),
		// A count over the PodSet's life, carried from status to status.
		LostNodeReplacements: ps.Status.LostNodeReplacements + int32(len(done.ReplacedLost)),
	}
	rule := newStrategyRule(ps)
	var c podCounts
	var live []*Member
	current := revs.Update
	for _, m := range v.Controlled {
		status.Replicas++
		if m.Terminating {
			c.terminating++
			continue
		}
		live = append(live, m)
		wanted := m.HasOrdinal && Wanted(ps, m.Ordinal)
		if m.Ready {
			status.ReadyReplicas++
		}
		if m.Available {
			status.AvailableReplicas++
			if wanted {
				c.desiredAvailable++
			}
		}
		if m.Hash == revs.Update {
			status.UpdatedReplicas++
		} else if wanted {
			c.older++
			if rule.updates(m.Ordinal) {
				c.outdated++
			}
		}
		if wanted && revs.Older(m.Hash, current) {
			current = m.Hash
		}
	}
	c.live = int32(len(live))
	status.CurrentRevision = RevisionName(ps, current)
	slices.SortFunc(live, func(a, b *Member) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
	if len(live) > 0 {
		status.PodNames = make([]string, 0, len(live))
	}
	for _, m := range live {
		status.PodNames = append(status.PodNames, m.Pod.Name)
	}
	return status, c
}

// conditions sets Ready, Reconciling and Stalled, and the time of the last
// progress. Conditions keep their lastTransitionTime unless their status
// changes.
func (v *View) conditions(status *podsetv1alpha1.PodSetStatus, c podCounts, plan *Plan, stalled *Stall) {
	ps, now := v.PodSet, v.stamp()
	desired := Replicas(ps)
	partition := Partition(ps)
	onDelete := ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType
	progress := fmt.Sprintf("%d/%d pods ready, %d/%d available, %d/%d up to date",
		status.ReadyReplicas, desired, status.AvailableReplicas, desired, status.UpdatedReplicas, desired)
	switch {
	case c.older > 0 && onDelete:
		progress += fmt.Sprintf("; %d %s an older template (OnDelete: each is updated once deleted)", c.older, pluralPods(c.older, "runs", "run"))
	case c.older > 0 && partition > 0:
		held := "ordinals below it"
		if start := Start(ps); start > 0 {
			held = fmt.Sprintf("ordinals %d to %d", start, UpdateFrom(ps)-1)
		}
		progress += fmt.Sprintf("; %d %s an older template (partition %d holds back %s)", c.older, pluralPods(c.older, "runs", "run"), partition, held)
	}
	settled := stalled == nil && c.terminating == 0 && c.live == desired && c.desiredAvailable == desired
	ready := settled && c.outdated == 0
	// Paused with changes pending: nothing left to do but the rollout that
	// spec.paused holds back. Not Ready (the pods do not run the spec), not
	// Stalled (nothing is wrong), and no deadline runs.
	held := ps.Spec.Paused && c.outdated > 0
	paused := settled && held
	if held {
		progress += fmt.Sprintf("; %d %s an older template (spec.paused: updated once resumed)", c.outdated, pluralPods(c.outdated, "runs", "run"))
	}
	status.LastProgressTime = lastProgress(ps, status, ready, now)
	if stalled == nil && !ready && !paused && deadlineIn(ps, status.LastProgressTime, v.Now) <= 0 {
		stalled = v.deadlineStall(status.AvailableReplicas)
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
	case paused:
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.PausedReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.PausedReason, progress)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, podsetv1alpha1.PausedReason, progress)
	case stalled != nil:
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, stalled.Reason, stalled.Message)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionTrue, stalled.Reason, stalled.Message)
	default:
		outdated := c.outdated
		if ps.Spec.Paused {
			outdated = 0 // they wait for resume: not what the pass works on
		}
		reason := reconcilingReason(ps, int(c.live), outdated, plan)
		set(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, progress)
		set(podsetv1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, progress)
		set(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, reason, progress)
	}
	status.Conditions = conditions
}

// pluralPods is "1 pod <one>" or "n pods <many>".
func pluralPods(n int32, one, many string) string {
	if n == 1 {
		return "pod " + one
	}
	return "pods " + many
}

// reconcilingReason names what a converging PodSet is doing.
func reconcilingReason(ps *podsetv1alpha1.PodSet, live int, outdated int32, plan *Plan) string {
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
func (v *View) WakeAfter(status *podsetv1alpha1.PodSetStatus) time.Duration {
	ps := v.PodSet
	var wake time.Duration
	minReady := minReadySeconds(ps)
	for _, m := range v.Controlled {
		if !m.Terminating {
			wake = soonest(wake, availableIn(m.Pod, minReady, v.Now))
		}
	}
	if !meta.IsStatusConditionTrue(status.Conditions, podsetv1alpha1.ReadyCondition) &&
		!meta.IsStatusConditionTrue(status.Conditions, podsetv1alpha1.StalledCondition) &&
		!isPaused(status) {
		// A second late rather than early: the stored time has whole
		// seconds.
		wake = soonest(wake, deadlineIn(ps, status.LastProgressTime, v.Now)+time.Second)
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
// True or turning False, or being True for a new generation (and
// lostNodeReplacements growing). kubectl wait,
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
	// The count of lost-node replacements goes out at once too: a pass
	// counts on from the status clients see, so a deferred write would
	// lose it.
	return old.LostNodeReplacements != cur.LostNodeReplacements
}

// isPaused reports whether a status says the PodSet waits only for the
// rollout spec.paused holds back.
func isPaused(status *podsetv1alpha1.PodSetStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, podsetv1alpha1.ReadyCondition)
	return c != nil && c.Reason == podsetv1alpha1.PausedReason
}
