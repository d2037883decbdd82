package podset

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
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
	// Pause lists Ready pods whose readiness gate closes, so they drain
	// before the operator stops them: a restart in place (Way.InPlace) or
	// a recreation within maxUnavailable, or a surplus pod (Way.Why says
	// why it is deleted).
	Pause []Step
	// Resume lists pods whose readiness gate opens: new, or their
	// containers run the new images.
	Resume []*corev1.Pod
	// Wake is how long until something a pass waits for is due (a deferred
	// resize counts as stuck, a drained pod may stop), or 0.
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
	// Revision is the template hash a pod to create is made from.
	Revision string
	// Repair: the pod's operator-owned fields drifted from its revision.
	Repair bool
	// Resume: the pod's gate opens.
	Resume bool
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

// Deletions is every pod the plan deletes.
func (p *Plan) Deletions() []*corev1.Pod {
	return slices.Concat(p.Prune, p.ReplaceFinished, p.ReplaceLost, p.Rollout)
}

// Empty reports whether the plan sends no write at all.
func (p *Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Repair) == 0 && len(p.Deletions()) == 0 &&
		len(p.Update) == 0 && len(p.Pause) == 0 && len(p.Resume) == 0
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
	// Now is the time the pass began, to the nanosecond, which the drains
	// are measured against (View.Now is in whole seconds, as conditions
	// store it); zero means View.Now.
	Now time.Time
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
	p.spend(v.PodSet, c, maxUnavailable(v.PodSet)-c.unavailable)
	v.group(&p)
	return p
}

// prune decides for each surplus pod: deleted now, drained first, or
// waited for.
func (v *View) prune(p *Plan, in Input) {
	now := cmp.Or(in.Now, v.Now)
	for _, m := range v.Surplus {
		d := Decision{Name: m.Pod.Name, Ordinal: m.Ordinal, Member: m, State: StateSurplus}
		if !in.InFlight(m.Pod.Name) {
			switch stage, wait := drainFor(v.PodSet, m.Pod, in.Drains[m.Pod.UID], now, in.Endpoints[m.Pod.UID], allPreStop(v.PodSet, m.Pod, nil), true); stage {
			case stopNow:
				d.Action = ActionPrune
			case drainBegin:
				d.Action, d.Way = ActionDrain, UpdateWay{Why: WhySurplus}
			default:
				p.wakeIn(wait)
			}
		}
		p.Decisions = append(p.Decisions, d)
	}
}

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

// spend plans the rollout and records its order. Unready out-of-date pods
// serve nothing: replacing them costs no availability, and it is how a
// broken template is fixed by a new one (classify takes them all, and
// spend puts them first, from the highest ordinal). Available ones go from
// the highest ordinal, as many as the budget allows: a restart in place
// begins by closing the pod's gate.
func (p *Plan) spend(ps *podsetv1alpha1.PodSet, c classified, budget int) {
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
		case hasGate(pod) && !allPreStop(ps, pod, nil):
			// Drained before it is deleted (drainFor).
			d.Action = ActionDrain
		default:
			d.Action = ActionRecreate
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
	step := func(d *Decision) Step { return Step{Pod: d.Member.Pod, Way: d.Way} }
	for i := range surplus {
		switch d := &surplus[i]; d.Action {
		case ActionPrune:
			p.Prune = append(p.Prune, d.Member.Pod)
		case ActionDrain:
			p.Pause = append(p.Pause, step(d))
		}
	}
	var lost, drained []*corev1.Pod
	for i := range slots {
		d := &slots[i]
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
			lost = append(lost, d.Member.Pod)
		}
		if d.stage == stageSpent {
			continue
		}
		switch d.Action {
		case ActionUpdate:
			p.Update = append(p.Update, step(d))
		case ActionRecreate:
			if d.stage == stageUnready {
				p.Rollout = append(p.Rollout, d.Member.Pod)
			} else {
				drained = append(drained, d.Member.Pod)
			}
			p.recreating(d.Member.Pod, d.Way.Why)
		}
	}
	p.Rollout = append(p.Rollout, drained...)
	v.replaceLost(p, lost)
	for i := len(slots) - 1; i >= 0; i-- {
		d := &slots[i]
		if d.stage != stageSpent {
			continue
		}
		switch d.Action {
		case ActionDrain:
			p.Pause = append(p.Pause, step(d))
			if !d.Way.InPlace {
				p.recreating(d.Member.Pod, d.Way.Why)
			}
		case ActionUpdate:
			p.Update = append(p.Update, step(d))
		case ActionRecreate:
			p.Rollout = append(p.Rollout, d.Member.Pod)
			p.recreating(d.Member.Pod, d.Way.Why)
		}
	}
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

// Step is a pod to update where it runs, and how.
type Step struct {
	Pod *corev1.Pod
	Way UpdateWay
}

// wakeIn asks for a pass in d at the latest.
func (p *Plan) wakeIn(d time.Duration) {
	if p.Wake == 0 || d < p.Wake {
		p.Wake = d
	}
}

// recreating records why a pod in the rollout is recreated.
func (p *Plan) recreating(pod *corev1.Pod, why string) {
	if p.Why == nil {
		p.Why = map[string]string{}
	}
	p.Why[pod.Name] = why
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

// drifted reports whether a pod lost what the operator owns on it and can
// restore in place: the labels and annotations of its revision's template,
// the operator's labels, the controller reference, or a container image.
// Everything else in a pod's spec is immutable.
func drifted(ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, pod *corev1.Pod, ordinal int, hash string) bool {
	// The labels podLabels makes, checked without making them: this runs
	// for every running pod in every pass.
	var buf [20]byte
	if got, ok := pod.Labels[podsetv1alpha1.NameLabel]; !ok || got != ps.Name {
		return true
	}
	if got, ok := pod.Labels[podsetv1alpha1.OrdinalLabel]; !ok || got != string(strconv.AppendInt(buf[:0], int64(ordinal), 10)) {
		return true
	}
	if got, ok := pod.Labels[podsetv1alpha1.TemplateHashLabel]; !ok || got != hash {
		return true
	}
	for k, v := range tmpl.Labels {
		if k == podsetv1alpha1.NameLabel || k == podsetv1alpha1.OrdinalLabel || k == podsetv1alpha1.TemplateHashLabel {
			continue // podLabels sets these itself
		}
		if got, ok := pod.Labels[k]; !ok || got != v {
			return true
		}
	}
	for k, v := range tmpl.Annotations {
		if got, ok := pod.Annotations[k]; !ok || got != v {
			return true
		}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		return true
	}
	return imagesDiffer(tmpl.Spec.Containers, pod.Spec.Containers) ||
		imagesDiffer(tmpl.Spec.InitContainers, pod.Spec.InitContainers)
}

func imagesDiffer(want, got []corev1.Container) bool {
	for i := range want {
		c := &want[i]
		j := i // a pod's containers are in its template's order
		if j >= len(got) || got[j].Name != c.Name {
			j = slices.IndexFunc(got, func(g corev1.Container) bool { return g.Name == c.Name })
		}
		if j < 0 {
			if c.Image != "" {
				return true
			}
			continue
		}
		if got[j].Image != c.Image {
			return true
		}
	}
	return false
}

// Replicas is spec.Replicas; the schema defaults it to 1.
func Replicas(ps *podsetv1alpha1.PodSet) int32 {
	if ps.Spec.Replicas == nil {
		return 1
	}
	return *ps.Spec.Replicas
}

// Start is spec.ordinals.start, the ordinal of the first pod; 0 when unset.
func Start(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.Ordinals == nil {
		return 0
	}
	return int(max(0, ps.Spec.Ordinals.Start))
}

// Wanted reports whether an ordinal is one the PodSet wants a pod at:
// from start to start+replicas-1. Pods at any other ordinal are surplus,
// as StatefulSet's podInOrdinalRange condemns them.
//
// So a new spec.ordinals.start moves the set as StatefulSet's
// updateStatefulSet (stateful_set_control.go, v1.37.1) does under
// podManagementPolicy Parallel, which is the only policy a PodSet has: in
// one pass the missing ordinals of the new range are created and every
// condemned pod is deleted, highest ordinal first (its descendingOrdinal
// sort), neither waiting for the other; pods in both ranges stay. Within
// the pass the operator sends the deletes before the creates
// (execute), StatefulSet its creates first; nothing waits in between
// either way. What is not copied is OrderedReady (monotonic): there
// StatefulSet creates one pod at a time in ascending order, each Running
// and Ready before the next, and deletes condemned pods one at a time,
// highest first, only once every pod of the range is Running and
// Available.
func Wanted(ps *podsetv1alpha1.PodSet, ordinal int) bool {
	start := Start(ps)
	return ordinal >= start && ordinal < start+int(Replicas(ps))
}

// maxUnavailable resolves spec.updateStrategy.rollingUpdate.maxUnavailable
// against replicas: a percentage rounds down, and it is never below one, so
// a rollout always progresses.
func maxUnavailable(ps *podsetv1alpha1.PodSet) int {
	value := intstr.FromInt32(1)
	if ru := ps.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		value = *ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&value, int(Replicas(ps)), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Partition is spec.updateStrategy.rollingUpdate.partition: how many pods,
// counted from the first ordinal, a RollingUpdate holds back on their
// revision. OnDelete updates no pod itself, and new pods of either strategy
// start from the current template. UpdateFrom turns it into an ordinal.
func Partition(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType {
		return 0
	}
	if ru := ps.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return int(max(0, *ru.Partition))
	}
	return 0
}

// UpdateFrom is the lowest ordinal a RollingUpdate updates: pods below it
// keep their revision. The partition counts from spec.ordinals.start, as
// StatefulSet's does: its updateStatefulSet compares the partition with the
// index into the pods of the ordinal range (ordinal - start), and
// newVersionedStatefulSetPod creates the pods below start+partition from
// the current revision. So `kubectl rollout status`'s arithmetic,
// replicas - partition pods to update, holds with any start.
func UpdateFrom(ps *podsetv1alpha1.PodSet) int {
	return Start(ps) + Partition(ps)
}

// RolloutFrom is the lowest ordinal this pass moves to the current
// template: UpdateFrom, or, while spec.paused holds every pod on its
// revision, MaxReplicas, above every ordinal. Pods below it that are
// deleted or fail are made again from the revision they ran, and new ones
// from status.currentRevision (heldRevision).
func RolloutFrom(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.Paused {
		return podsetv1alpha1.MaxReplicas
	}
	return UpdateFrom(ps)
}

// ordinalOf is a pod's ordinal, or MaxReplicas for a name that has none, so
// that such pods sort above every real ordinal and are pruned first.
func ordinalOf(ps *podsetv1alpha1.PodSet, pod *corev1.Pod) int {
	return ordinalOr(PodOrdinal(ps.Name, pod.Name))
}

// ordinalOr is n when ok, else MaxReplicas.
func ordinalOr(n int, ok bool) int {
	if ok {
		return n
	}
	return podsetv1alpha1.MaxReplicas
}
