package podset

import (
	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The plan's second and third steps (View.Plan): spend weighs the
// out-of-date pods against the budget, and group lists the decisions by
// the write each needs.

// spend plans the rollout and records its order. Unready out-of-date pods
// serve nothing: replacing them costs no availability, and it is how a
// broken template is fixed by a new one (classify takes them all, and
// spend puts them first, from the highest ordinal). Available ones go from
// the highest ordinal, as many as the budget allows: a restart in place
// begins by closing the pod's gate; a recreation too, where the pod has
// something to be drained from (drainFor, as for a surplus pod): one no
// EndpointSlice lists is recreated at once, as a ReplicaSet's would be.
func (v *View) spend(p *Plan, in Input, c classified, budget int) {
	for i := len(c.unready) - 1; i >= 0; i-- {
		p.rollout = append(p.rollout, c.unready[i])
	}
	for i := len(c.staleReady) - 1; i >= 0 && budget > 0; i-- {
		d := &p.Decisions[c.staleReady[i]]
		switch pod := d.Member.Pod; {
		case d.Way.InPlace && d.Way.Restart() && hasGate(pod):
			d.Action = ActionDrain
		case d.Way.InPlace:
			d.Action = ActionUpdate
			if d.Way.Resize {
				// A resize the API server refuses recreates the pod.
				stage, _ := v.drain(in, pod, allPreStop(v.PodSet, pod, nil), true)
				d.drainIfRefused = stage != stopNow
			}
		default:
			// Drained before it is deleted, unless nothing can route to
			// it; a pod Ready too briefly to tell is drained.
			d.Action = ActionDrain
			if stage, _ := v.drain(in, pod, allPreStop(v.PodSet, pod, nil), true); stage == stopNow {
				d.Action = ActionRecreate
			}
		}
		d.stage = stageSpent
		p.rollout = append(p.rollout, c.staleReady[i])
		budget--
	}
}

// moves reports whether the decision moves its pod within the rollout:
// updated in place beyond labels and annotations, drained for the
// rollout, or recreated.
func (d *Decision) moves() bool {
	switch {
	case d.Action == ActionUpdate && !d.Way.metadataOnly(),
		d.Action == ActionDrain && d.State != StateSurplus,
		d.Action == ActionRecreate:
		return true
	}
	return false
}

// RolloutOrder is the order in which the rollout takes the pods a pass
// moves within it, as spend took them: unready pods first, then from the
// highest ordinal.
func (p *Plan) RolloutOrder() []*Decision {
	out := make([]*Decision, 0, len(p.rollout))
	for _, i := range p.rollout {
		out = append(out, &p.Decisions[i])
	}
	return out
}

// group sorts the decisions into the plan's lists, each in the order the
// pass sends them: the surplus pods first, then the slots in ordinal
// order, then what spend took, highest ordinal first; in the rollout,
// unready pods before the drained ones.
func (v *View) group(p *Plan) {
	slots, surplus := p.Decisions[:len(v.Slots)], p.Decisions[len(v.Slots):]
	for i := range surplus {
		switch d := &surplus[i]; d.Action {
		case ActionPrune:
			p.Prune = append(p.Prune, d.Member.Pod)
		case ActionDrain:
			p.Drain = append(p.Drain, d.step())
		}
	}
	var later slotLists
	for i := range slots {
		v.groupSlot(p, &slots[i], &later)
	}
	p.Rollout = append(p.Rollout, later.drained...)
	v.replaceLost(p, later.lost)
	for i := len(slots) - 1; i >= 0; i-- {
		if d := &slots[i]; d.stage == stageSpent {
			p.groupSpent(d)
		}
	}
}

// slotLists are the pods group lists after every slot's: those of lost
// nodes (View.replaceLost decides which go this pass) and those drained
// to be recreated, which follow the unready ones in the rollout.
type slotLists struct {
	lost, drained []*corev1.Pod
}

// groupSlot lists a slot's decision that needs no budget; what spend took
// waits for groupSpent.
func (v *View) groupSlot(p *Plan, d *Decision, later *slotLists) {
	if d.Repair {
		p.Repair = append(p.Repair, d.Member.Pod)
	}
	if d.Resume {
		p.Resume = append(p.Resume, d.Member.Pod)
	}
	switch d.Action {
	case ActionCreate:
		p.Create = append(p.Create, d.Ordinal)
		if d.Revision != v.Revs.Update {
			if p.Revisions == nil {
				p.Revisions = map[int]string{}
			}
			p.Revisions[d.Ordinal] = d.Revision
		}
	case ActionReplaceFinished:
		p.ReplaceFinished = append(p.ReplaceFinished, d.Member.Pod)
	case ActionReplaceLost:
		later.lost = append(later.lost, d.Member.Pod)
	}
	if d.stage == stageSpent {
		return
	}
	switch d.Action {
	case ActionUpdate:
		p.Update = append(p.Update, d.step())
	case ActionRecreate:
		if d.stage == stageUnready {
			p.Rollout = append(p.Rollout, d.Member.Pod)
		} else {
			later.drained = append(later.drained, d.Member.Pod)
		}
		p.recreating(d.Member.Pod, d.Way.Why)
	}
}

// groupSpent lists a decision that spend took from the budget.
func (p *Plan) groupSpent(d *Decision) {
	switch d.Action {
	case ActionDrain:
		p.Drain = append(p.Drain, d.step())
		if !d.Way.InPlace {
			p.recreating(d.Member.Pod, d.Way.Why)
		}
	case ActionUpdate:
		p.Update = append(p.Update, d.step())
	case ActionRecreate:
		p.Rollout = append(p.Rollout, d.Member.Pod)
		p.recreating(d.Member.Pod, d.Way.Why)
	}
}

// step is the decision's pod and way, for the writes.
func (d *Decision) step() Step {
	return Step{Pod: d.Member.Pod, Way: d.Way, DrainIfRefused: d.drainIfRefused}
}

// stopsWithPreStop reports whether every container an update stops has a
// preStop hook: all of the pod's to recreate it, those that restart to
// update it in place.
func stopsWithPreStop(ps *podsetv1alpha1.PodSet, pod *corev1.Pod, way UpdateWay) bool {
	if way.InPlace && way.Restart() {
		return allPreStop(ps, pod, way.Restarts)
	}
	return allPreStop(ps, pod, nil)
}
