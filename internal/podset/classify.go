package podset

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The plan's first step (View.Plan): classify decides slot by slot what
// needs no budget, and slotState says where each slot stands.

// classified is what classify leaves for spend: the out-of-date pods that
// are available, by index into Plan.Decisions, and how many desired pods
// are unavailable now.
type classified struct {
	// unready are the out-of-date pods classify restarts or recreates at
	// once, without budget: they serve nothing.
	unready     []int
	staleReady  []int
	unavailable int
}

// classify decides, slot by slot, what needs no budget: pods to create,
// repair, replace or update at once, gates to open, and the out-of-date
// pods to weigh against the budget.
func (v *View) classify(p *Plan, in Input) classified {
	ps := v.PodSet
	s := slotClassifier{
		v: v, p: p, in: in, ways: updateWays{},
		deadline: progressDeadline(ps),
		rule:     newStrategyRule(ps), holdFrom: RolloutFrom(ps),
	}
	for i, m := range v.Slots {
		ordinal := v.Start + i
		d := Decision{Name: PodName(ps.Name, ordinal), Ordinal: ordinal, Member: m, State: slotState(m, v.Revs, ordinal, s.rule)}
		s.decide(&d)
		if d.moves() {
			s.c.unready = append(s.c.unready, len(p.Decisions))
		}
		p.Decisions = append(p.Decisions, d)
	}
	return s.c
}

// slotClassifier is what classify reads for every slot, and what it
// leaves for spend (c).
type slotClassifier struct {
	v    *View
	p    *Plan
	in   Input
	ways updateWays
	// deadline is the progress deadline (a resize stuck for longer is
	// recreated); holdFrom is RolloutFrom.
	deadline time.Duration
	rule     strategyRule
	holdFrom int
	c        classified
}

// decide fills in the decision of one slot: a pod to create, one to
// replace (its node lost, or finished), one out of date (stale), or one to
// keep (kept).
func (s *slotClassifier) decide(d *Decision) {
	ps, revs, in, m := s.v.PodSet, s.v.Revs, s.in, d.Member
	if m == nil {
		if !in.InFlight(d.Name) {
			d.Action, d.Revision = ActionCreate, revs.Update
			if d.Ordinal < s.holdFrom {
				d.Revision = heldRevision(ps, revs, in.Held, d.Ordinal)
			}
		}
		s.c.unavailable++
		return
	}
	pod := m.Pod
	replace := ReplaceRequested(pod)
	if d.State == StateStale {
		d.Way = s.ways.of(ps, revs, pod)
		if replace {
			// Recreated, not updated in place.
			d.Way = UpdateWay{Why: WhyReplace}
		}
	}
	if wait, lost := s.v.lostFor(m); lost && !in.InFlight(pod.Name) {
		if wait <= 0 {
			// Terminating or not: only a force deletion frees the
			// name of a pod whose node does not answer.
			d.Action = ActionReplaceLost
			s.c.unavailable++
			return
		}
		d.wakeIn(wait + time.Second) // a second late: the node's times are whole seconds
	}
	switch {
	case !m.Controlled || in.InFlight(pod.Name) || m.Terminating:
		s.c.unavailable++
	case d.State == StateFinished:
		// Made again from the current revision, or the one it ran if
		// the partition holds it back.
		d.Action, d.Revision = ActionReplaceFinished, revs.Update
		if d.Ordinal < s.rule.partition {
			d.Revision = m.Hash
		}
		s.c.unavailable++
	case d.State == StateStale:
		s.stale(d)
	default:
		s.kept(d, replace)
	}
}

// stale decides for a pod out of date that the strategy updates: in
// place where it can, else by recreating it.
func (s *slotClassifier) stale(d *Decision) {
	m, way := d.Member, d.Way
	switch {
	case way.metadataOnly():
		// Nothing restarts: every such pod at once, outside the
		// budget.
		d.Action = ActionUpdate
	case gateClosed(m.Pod):
		// Draining: once the kubelet has taken the pod out of
		// Ready (and so out of endpoints), and the dataplane has
		// had drainSeconds to follow, its containers restart in
		// place, or it is deleted to be recreated.
		stage, wait := s.v.drain(s.in, m.Pod, stopsWithPreStop(s.v.PodSet, m.Pod, way), !way.InPlace)
		switch {
		case stage != stopNow:
			d.wakeIn(wait)
		case way.InPlace:
			d.Action = ActionUpdate
		default:
			d.Action = ActionRecreate
		}
	case way.InPlace && !m.Ready:
		// Serves nothing: update it at once, without draining.
		d.Action = ActionUpdate
	case !m.Ready:
		d.Action, d.stage = ActionRecreate, stageUnready
	case m.Available:
		s.c.staleReady = append(s.c.staleReady, len(s.p.Decisions))
	}
	if !m.Available {
		s.c.unavailable++
	}
}

// kept decides for a pod up to date, or held back on the revision it runs
// (by the partition, or until a user deletes it under OnDelete): keep it,
// restore what drifted from its revision, and finish an in-place update;
// recreate it where its resize is stuck or a replacement was asked for.
func (s *slotClassifier) kept(d *Decision, replace bool) {
	ps, m := s.v.PodSet, d.Member
	pod := m.Pod
	if !m.Available {
		s.c.unavailable++
	}
	tmpl, ok := s.v.Revs.Templates[m.Hash]
	d.Repair = ok && drifted(ps, tmpl, pod, d.Ordinal, m.Hash)
	why, wait := "", time.Duration(0)
	if ok && resizeTowards(tmpl, pod) {
		why, wait = resizeStuck(pod, s.deadline, s.v.Now)
	}
	if why == "" && replace {
		why, wait = WhyReplace, 0
	}
	// New, or its containers restarted for its revision, or the
	// stop its gate closed for is no longer wanted.
	d.Resume = why == "" && GateOpens(pod)
	if why != "" {
		d.Way = UpdateWay{Why: why}
	}
	switch {
	case wait > 0:
		d.wakeIn(wait)
	case why != "" && gateClosed(pod):
		// Draining, to be recreated.
		if stage, wait := s.v.drain(s.in, pod, allPreStop(ps, pod, nil), true); stage != stopNow {
			d.wakeIn(wait)
		} else {
			d.Action = ActionRecreate
		}
	case why != "" && m.Available:
		s.c.staleReady = append(s.c.staleReady, len(s.p.Decisions))
	case why != "":
		d.Action, d.stage = ActionRecreate, stageUnready
	}
}

// slotState is where the pod of a slot stands (nil: none).
func slotState(m *Member, revs *Revisions, ordinal int, rule strategyRule) SlotState {
	switch {
	case m == nil:
		return StateMissing
	case !m.Controlled:
		return StateConflict
	case m.Terminating:
		return StateTerminating
	case m.Pod.Status.Phase == corev1.PodFailed || m.Pod.Status.Phase == corev1.PodSucceeded:
		return StateFinished
	case m.Hash == revs.Update:
		return StateCurrent
	}
	return rule.outOfDate(ordinal)
}

// strategyRule is the update strategy's rule for a pod out of date: the
// one rule the plan (slotState) and the status (counts) both read.
type strategyRule struct {
	// partition is UpdateFrom: the lowest ordinal a RollingUpdate updates.
	partition        int
	onDelete, paused bool
}

// newStrategyRule is the rule of the PodSet's spec.updateStrategy and
// spec.paused.
func newStrategyRule(ps *podsetv1alpha1.PodSet) strategyRule {
	return strategyRule{
		partition: UpdateFrom(ps),
		onDelete:  ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType,
		paused:    ps.Spec.Paused,
	}
}

// outOfDate is where a pod out of date at ordinal stands: held back
// until a user deletes it (OnDelete), by the partition, or by spec.paused,
// or StateStale: the strategy updates it now.
func (r strategyRule) outOfDate(ordinal int) SlotState {
	switch {
	case r.onDelete:
		return StateHeldOnDelete
	case ordinal < r.partition:
		return StateHeldByPartition
	case r.paused:
		return StateHeldByPause
	}
	return StateStale
}

// updates reports whether the strategy updates a pod out of date at
// ordinal, now or once spec.paused is lifted.
func (r strategyRule) updates(ordinal int) bool {
	state := r.outOfDate(ordinal)
	return state == StateStale || state == StateHeldByPause
}

// ReplaceRequested reports whether a pod carries ReplaceLabel=true: the
// operator drains, deletes and makes it again, within maxUnavailable.
func ReplaceRequested(pod *corev1.Pod) bool {
	return pod.Labels[podsetv1alpha1.ReplaceLabel] == "true"
}

// heldRevision is the revision to recreate a missing pod from that the
// partition holds back: the one it ran when the operator last saw it, else
// the revision status.currentRevision names (the one the oldest pods run,
// as StatefulSet recreates such pods), else, with no such template known,
// the current one.
func heldRevision(ps *podsetv1alpha1.PodSet, revs *Revisions, held Held, ordinal int) string {
	if h := held.Remembered(ordinal); h != "" && revs.Known(h) {
		return h
	}
	if h, ok := revisionHash(ps, ps.Status.CurrentRevision); ok && revs.Known(h) {
		return h
	}
	return revs.Update
}
