package podset

import (
	"cmp"
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
	ps, revs, now := v.PodSet, v.Revs, v.Now
	deadline := progressDeadline(ps)
	partition, holdFrom := UpdateFrom(ps), RolloutFrom(ps)
	onDelete := ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType
	var c classified
	ways := updateWays{}
	for i, m := range v.Slots {
		ordinal := v.Start + i
		d := Decision{Name: PodName(ps.Name, ordinal), Ordinal: ordinal, Member: m, State: slotState(m, revs, ordinal, partition, onDelete, ps.Spec.Paused)}
		if m == nil {
			if !in.InFlight(d.Name) {
				d.Action, d.Revision = ActionCreate, revs.Update
				if ordinal < holdFrom {
					d.Revision = heldRevision(ps, revs, in.Held, ordinal)
				}
			}
			c.unavailable++
			p.Decisions = append(p.Decisions, d)
			continue
		}
		pod := m.Pod
		replace := ReplaceRequested(pod)
		if d.State == StateStale {
			d.Way = ways.of(ps, revs, pod)
			if replace {
				// Recreated, not updated in place.
				d.Way = UpdateWay{Why: WhyReplace}
			}
		}
		if wait, lost := v.lostFor(m); lost && !in.InFlight(pod.Name) {
			if wait <= 0 {
				// Terminating or not: only a force deletion frees the
				// name of a pod whose node does not answer.
				d.Action = ActionReplaceLost
				c.unavailable++
				p.Decisions = append(p.Decisions, d)
				continue
			}
			p.wakeIn(wait + time.Second) // a second late: the node's times are whole seconds
		}
		switch {
		case !m.Controlled || in.InFlight(pod.Name) || m.Terminating:
			c.unavailable++
		case d.State == StateFinished:
			d.Action = ActionReplaceFinished
			c.unavailable++
		case d.State == StateStale:
			// Out of date, and the strategy updates it: in place where it
			// can, else by recreating it.
			way := d.Way
			switch {
			case way.metadataOnly():
				// Nothing restarts: every such pod at once, outside the
				// budget.
				d.Action = ActionUpdate
			case gateClosed(pod):
				// Draining: once the kubelet has taken the pod out of
				// Ready (and so out of endpoints), and the dataplane has
				// had drainSeconds to follow, its containers restart in
				// place, or it is deleted to be recreated.
				stage, wait := drainFor(ps, pod, in.Drains[pod.UID], cmp.Or(in.Now, now), in.Endpoints[pod.UID], stopsWithPreStop(ps, pod, way), !way.InPlace)
				switch {
				case stage != stopNow:
					p.wakeIn(wait)
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
				c.staleReady = append(c.staleReady, len(p.Decisions))
			}
			if !m.Available {
				c.unavailable++
			}
		default:
			// Up to date, or held back on the revision it runs (by the
			// partition, or until a user deletes it under OnDelete): keep
			// it, restore what drifted from its revision, and finish an
			// in-place update.
			if !m.Available {
				c.unavailable++
			}
			tmpl, ok := revs.Templates[m.Hash]
			d.Repair = ok && drifted(ps, tmpl, pod, ordinal, m.Hash)
			why, wait := "", time.Duration(0)
			if ok && resizeTowards(tmpl, pod) {
				why, wait = resizeStuck(pod, deadline, now)
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
				p.wakeIn(wait)
			case why != "" && gateClosed(pod):
				// Draining, to be recreated.
				if stage, wait := drainFor(ps, pod, in.Drains[pod.UID], cmp.Or(in.Now, now), in.Endpoints[pod.UID], allPreStop(ps, pod, nil), true); stage != stopNow {
					p.wakeIn(wait)
				} else {
					d.Action = ActionRecreate
				}
			case why != "" && m.Available:
				c.staleReady = append(c.staleReady, len(p.Decisions))
			case why != "":
				d.Action, d.stage = ActionRecreate, stageUnready
			}
		}
		if d.moves() {
			c.unready = append(c.unready, len(p.Decisions))
		}
		p.Decisions = append(p.Decisions, d)
	}
	return c
}

// slotState is where the pod of a slot stands (nil: none).
func slotState(m *Member, revs *Revisions, ordinal, partition int, onDelete, paused bool) SlotState {
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
	case onDelete:
		return StateHeldOnDelete
	case ordinal < partition:
		return StateHeldByPartition
	case paused:
		return StateHeldByPause
	}
	return StateStale
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
