package podset

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Plan is what one pass does to the pods: the pass's decisions, one per
// ordinal slot and surplus pod (Decisions), grouped by the write each
// needs. Every pod in it is controlled by the PodSet; pods it does not
// control appear only by name, in conflicts and strays.
type Plan struct {
	// Decisions holds what the pass decided for each ordinal slot, in
	// ordinal order, then for each surplus pod, highest ordinal first. The
	// lists below group them; the preview reads them.
	Decisions []Decision
	// rollout is the decisions the rollout moves this pass, by index into
	// Decisions, in the order spend takes them (RolloutOrder).
	rollout []int
	// Create lists the ordinals that have no pod: apply a new one, from the
	// current template unless Revisions says otherwise.
	Create []int
	// Revisions holds, for ordinals to create that a partition holds back,
	// the template hash of the revision to create them from.
	Revisions map[int]string
	// Repair lists pods whose operator-owned fields drifted from their
	// revision: apply their desired pod again.
	Repair []*corev1.Pod
	// Prune lists pods outside the wanted ordinals, highest first, to
	// delete now: drained, or not Ready (a Ready one is drained first, in
	// Pause).
	Prune []*corev1.Pod
	// ReplaceFinished lists Failed or Succeeded pods, to delete and recreate.
	ReplaceFinished []*corev1.Pod
	// ReplaceLost lists pods whose node has been lost for
	// spec.lostNodeReplacement.afterSeconds, to force-delete (grace period
	// 0) and recreate, within the budget (View.replaceLost); LostSince
	// holds, by node, since when each of their nodes is lost.
	ReplaceLost []*corev1.Pod
	LostSince   map[string]time.Time
	// LostHeld lists the pods due for replacement that are not replaced
	// because too many of the cluster's nodes are lost
	// (Nodes.Partitioned).
	LostHeld []*corev1.Pod
	// Rollout lists out-of-date pods to delete and recreate from the current
	// template: unready ones first, then drained ones.
	Rollout []*corev1.Pod
	// Why says, by pod name, why a pod of Rollout (or one drained to join
	// it, in Pause) is recreated rather than updated in place.
	Why map[string]string
	// Update lists out-of-date pods to bring to the current template where
	// they run: metadata at once, a resize, or new images once their gate is
	// closed and the kubelet took them out of Ready.
	Update []Step
	// Drain lists Ready pods whose drain begins (ActionDrain): their
	// readiness gate closes, so they leave Service endpoints before the
	// operator stops them: a restart in place (Way.InPlace) or a
	// recreation within maxUnavailable, or a surplus pod (Way.Why says
	// why it is deleted). The controller's beginDrains writes it.
	Drain []Step
	// Resume lists pods whose readiness gate opens: new, or their
	// containers run the new images.
	Resume []*corev1.Pod
	// Wake is how long until something a pass waits for is due: the
	// soonest of its decisions' Wake, or the recheck of pods held while
	// the cluster looks partitioned; 0 for none.
	Wake time.Duration
	// Conflicts lists names this PodSet needs that pods it does not control
	// hold. Those pods are never modified or deleted.
	Conflicts []string
	// Strays lists pods that carry this PodSet's name label but are not
	// controlled by it. They are neither counted nor touched.
	Strays []string
}

// SlotState is where the pod of an ordinal slot, or a surplus pod, stands
// against the PodSet's current revision, whatever a pass does about it.
type SlotState int

// The states of a slot's pod.
const (
	// StateMissing: no pod holds the slot's name.
	StateMissing SlotState = iota
	// StateConflict: a pod the PodSet does not control holds the name.
	StateConflict
	// StateTerminating: the slot's pod is being deleted.
	StateTerminating
	// StateFinished: the pod is Failed or Succeeded.
	StateFinished
	// StateCurrent: the pod runs the current revision.
	StateCurrent
	// StateHeldOnDelete: the pod is out of date, and under OnDelete only a
	// user's deletion updates it.
	StateHeldOnDelete
	// StateHeldByPartition: the pod is out of date, below the partition.
	StateHeldByPartition
	// StateHeldByPause: the pod is out of date, and spec.paused holds it
	// on its revision until the PodSet is resumed.
	StateHeldByPause
	// StateStale: the pod is out of date, and the strategy updates it
	// (Decision.Way says how).
	StateStale
	// StateSurplus: the pod is outside the wanted ordinals.
	StateSurplus
)

// Action is what one pass does to the pod of a slot.
type Action int

// The actions of a pass.
const (
	// ActionNone: nothing this pass. The pod needs nothing, or waits: for a
	// write in flight, its drain, its termination, or the budget.
	ActionNone Action = iota
	// ActionCreate: apply a new pod at the slot (Decision.Revision).
	ActionCreate
	// ActionReplaceFinished: delete a finished pod, to recreate it.
	ActionReplaceFinished
	// ActionReplaceLost: the pod's node has been lost long enough; it is
	// force-deleted within the budget (Plan.ReplaceLost), or held while
	// the cluster looks partitioned (Plan.LostHeld).
	ActionReplaceLost
	// ActionUpdate: update the pod in place (Decision.Way).
	ActionUpdate
	// ActionDrain: close the pod's gate, to restart it in place or delete
	// it once drained.
	ActionDrain
	// ActionRecreate: delete the pod, to recreate it from the current
	// template (Decision.Way.Why says why).
	ActionRecreate
	// ActionPrune: delete a surplus pod.
	ActionPrune
)

// Decision is what a pass decides for one ordinal slot or surplus pod:
// where its pod stands, what the pass does to it, and why.
type Decision struct {
	// Name is the slot's pod name.
	Name    string
	Ordinal int
	// Member is the pod there, or nil.
	Member *Member
	State  SlotState
	Action Action
	// Way is how a StateStale pod moves to the current revision; for any
	// other pod the pass recreates or drains, only Way.Why is set.
	Way UpdateWay
	// Revision is the template hash the slot's pod runs once the action
	// is through: the revision a pod to create is made from, the current
	// one for a pod updated, drained for the rollout or recreated, and for
	// a finished pod replaced, the revision it ran if the partition holds
	// it back (targets). Empty for no action, a prune, a surplus pod's
	// drain and a pod of a lost node.
	Revision string
	// Repair: the pod's operator-owned fields drifted from its revision.
	Repair bool
	// Resume: the pod's gate opens.
	Resume bool
	// drainIfRefused: the pod's resize, if the API server refuses it,
	// recreates it drained first (Step.DrainIfRefused).
	drainIfRefused bool
	// Wake is when to look at the slot again although no event comes: its
	// drain or its node's grace is over, or its resize counts as stuck
	// then. Zero: its next event is enough.
	Wake time.Duration
	// stage is when the planner decided the action: it orders the plan's
	// lists as the pass sends them.
	stage stage
}

// stage is the step of the planner that decided a Decision's action. The
// zero stage is classify's: decided at once, outside the budget.
type stage int

const (
	// an unready out-of-date pod, recreated first, outside the budget.
	stageUnready stage = iota + 1
	// taken by spend, within the budget.
	stageSpent
)

// Waiting lists the out-of-date pods the rollout has not reached
// (StateStale), by ordinal. Pods a partition, OnDelete or spec.paused
// holds back are held, not waiting.
func (p *Plan) Waiting() []string {
	var names []string
	for _, d := range p.Decisions {
		if d.State == StateStale {
			names = append(names, d.Name)
		}
	}
	return names
}

// Deletions is every pod the plan deletes.
func (p *Plan) Deletions() []*corev1.Pod {
	return slices.Concat(p.Prune, p.ReplaceFinished, p.ReplaceLost, p.Rollout)
}

// Empty reports whether the plan sends no write at all.
func (p *Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Repair) == 0 && len(p.Deletions()) == 0 &&
		len(p.Update) == 0 && len(p.Drain) == 0 && len(p.Resume) == 0
}

// RevisionOf is the template hash an ordinal to create is made from.
func (p *Plan) RevisionOf(ordinal int, revs *Revisions) string {
	if h, ok := p.Revisions[ordinal]; ok {
		return h
	}
	return revs.Update
}

// Input is what a pass plans from besides its View: what the operator
// remembers of the PodSet.
type Input struct {
	// Held is what the pods the partition holds back ran when the operator
	// last saw them (Held.Observe).
	Held Held
	// InFlight reports the pod names with a write the cache has not shown
	// yet: those are left alone this pass.
	InFlight func(name string) bool
	// Drains is when the operator first saw pods drain (Drains.Observe).
	Drains Drains
	// Endpoints is what the EndpointSlices say of the pods.
	Endpoints Endpoints
}

// Plan decides what a pass does: it decides for every ordinal slot
// (classify) and surplus pod (prune), spends the maxUnavailable budget on
// the out-of-date pods that are available (spend), and groups the
// decisions by write (group).
func (v *View) Plan(in Input) Plan {
	var p Plan
	p.Conflicts, p.Strays = v.Conflicts, v.Strays
	c := v.classify(&p, in)
	v.prune(&p, in)
	v.spend(&p, in, c, maxUnavailable(v.PodSet)-c.unavailable)
	p.targets(v.Revs)
	v.group(&p)
	for i := range p.Decisions {
		p.wakeIn(p.Decisions[i].Wake)
	}
	return p
}

// targets sets the revision each decision moves its pod to
// (Decision.Revision) once the actions are decided: the current one for
// an update, a drain for the rollout and a recreation. Creates and
// replacements of finished pods have theirs from classify.
func (p *Plan) targets(revs *Revisions) {
	for i := range p.Decisions {
		switch d := &p.Decisions[i]; {
		case d.Action == ActionUpdate, d.Action == ActionRecreate,
			d.Action == ActionDrain && d.State != StateSurplus:
			d.Revision = revs.Update
		}
	}
}

// prune decides for each surplus pod: deleted now, drained first, or
// waited for.
func (v *View) prune(p *Plan, in Input) {
	for _, m := range v.Surplus {
		d := Decision{Name: m.Pod.Name, Ordinal: m.Ordinal, Member: m, State: StateSurplus}
		if !in.InFlight(m.Pod.Name) {
			switch stage, wait := v.drain(in, m.Pod, allPreStop(v.PodSet, m.Pod, nil), true); stage {
			case stopNow:
				d.Action = ActionPrune
			case beginDrain:
				d.Action, d.Way = ActionDrain, UpdateWay{Why: WhySurplus}
			default:
				d.wakeIn(wait)
			}
		}
		p.Decisions = append(p.Decisions, d)
	}
}

// drain is where the drain of a pod the plan means to stop stands
// (drainFor), with what the pass knows of it: when it was first seen
// draining, what the EndpointSlices say, measured on the pass's clock
// (View.Now).
func (v *View) drain(in Input, pod *corev1.Pod, preStop, deleting bool) (drainStage, time.Duration) {
	return drainFor(v.PodSet, pod, in.Drains[pod.UID], v.Now, in.Endpoints[pod.UID], preStop, deleting)
}

// Step is a pod to update where it runs, and how.
type Step struct {
	Pod *corev1.Pod
	Way UpdateWay
	// DrainIfRefused says, for a resize (Way.Resize), what becomes of the
	// pod if the API server refuses it: it is recreated instead, drained
	// first when true (its gate closes: ResizeDenied), at once when false,
	// as drainFor decides for any pod to delete (one no EndpointSlice
	// lists has nothing to drain from).
	DrainIfRefused bool
}

// wakeIn asks for a pass in d at the latest; d <= 0 asks for none.
func (p *Plan) wakeIn(d time.Duration) { p.Wake = soonest(p.Wake, d) }

// wakeIn asks for a look at the slot in w at the latest; w <= 0 asks for
// none.
func (d *Decision) wakeIn(w time.Duration) { d.Wake = soonest(d.Wake, w) }

// soonest is the sooner of two waits, of which 0 is none.
func soonest(a, b time.Duration) time.Duration {
	if b > 0 && (a == 0 || b < a) {
		return b
	}
	return a
}

// recreating records why a pod in the rollout is recreated.
func (p *Plan) recreating(pod *corev1.Pod, why string) {
	if p.Why == nil {
		p.Why = map[string]string{}
	}
	p.Why[pod.Name] = why
}
