package podset

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// A preview says, before a new template is applied, what the rollout will
// do to every pod and in which order: `kubectl podset rollout preview`
// reads it off a View made from the PodSet as the API server would store
// it (a dry run) and the pods and revisions there are. What it says of
// each pod is the planner's decision for it (Plan.Decisions), and the
// order is the planner's own: Preview follows View.Plan pass after pass,
// as if every pod a pass touched were up to date and available before the
// next one.

// Change is what a rollout does to one pod.
type Change string

// The changes a preview names.
const (
	// ChangeNone: the pod runs the current template already.
	ChangeNone Change = "unchanged"
	// ChangeCreate: there is no pod at the ordinal; one is made.
	ChangeCreate Change = "created"
	// ChangeDelete: the ordinal is at or above replicas; the pod is pruned.
	ChangeDelete Change = "deleted"
	// ChangeMetadata: only labels and annotations change, in place,
	// outside maxUnavailable.
	ChangeMetadata Change = "labels/annotations in place"
	// ChangeImage: images change in place; those containers restart.
	ChangeImage Change = "image in place"
	// ChangeResize: cpu and memory change through pods/resize.
	ChangeResize Change = "resized in place"
	// ChangeRecreate: the pod is deleted and made again; Why says why.
	ChangeRecreate Change = "recreated"
	// ChangeHeldByPartition: the ordinal is below the partition; the pod
	// keeps its revision.
	ChangeHeldByPartition Change = "held by partition"
	// ChangeHeldOnDelete: under OnDelete the pod is updated only once a
	// user deletes it.
	ChangeHeldOnDelete Change = "held until deleted (OnDelete)"
	// ChangeConflict: a pod the PodSet does not control holds the name;
	// it is never touched.
	ChangeConflict Change = "conflict"
)

// PodChange is what a rollout does to the pod at one ordinal.
type PodChange struct {
	Name    string
	Ordinal int
	// Pod is the pod there now, or nil.
	Pod *corev1.Pod
	// Hash is the template hash of the revision the pod runs now.
	Hash   string
	Ready  bool
	Change Change
	// Way is how an out-of-date pod moves: what changes in place and which
	// containers restart.
	Way UpdateWay
	// Why says why a pod is recreated, as the planner's Plan.Why does.
	Why string
	// Fields names the template fields that force a recreation (see
	// RecreateFields), when the template changed beyond what a running pod
	// can take.
	Fields []string
}

// Preview is what a new template does to a PodSet's pods.
type Preview struct {
	// Pods lists every ordinal below replicas, then the surplus pods.
	Pods []PodChange
	// AtOnce lists the pods the first passes change outside maxUnavailable:
	// creations, deletions, replaced finished pods and label and annotation
	// updates.
	AtOnce []string
	// Batches lists the pods the rollout takes within maxUnavailable:
	// unready out-of-date pods first, then from the highest ordinal. The
	// first is what the budget allows at once; the rollout is a rolling
	// window, so each pod of the later ones starts as soon as one before
	// it is available again, not once the whole batch before is: they say
	// the order, not a wait.
	Batches [][]string
	// Waiting lists the out-of-date pods no batch reaches while the other
	// pods that are unavailable stay so.
	Waiting []string
	// MaxUnavailable is the rollout's budget, resolved against replicas.
	MaxUnavailable int
	// NotDrainedByOthers lists the live pods whose containers do not all
	// hold their stop for the drain in a preStop hook (made by an earlier
	// release, or before drainSeconds grew): the operator drains them
	// before it stops them, but a stop by others (an eviction, a delete)
	// does not wait, until they are recreated.
	NotDrainedByOthers []string
}

// Changed reports whether any pod would change.
func (p *Preview) Changed() bool {
	return slices.ContainsFunc(p.Pods, func(c PodChange) bool {
		switch c.Change {
		case ChangeNone, ChangeHeldByPartition, ChangeHeldOnDelete, ChangeConflict:
			return false
		}
		return true
	})
}

// Preview says what the view's PodSet does to its pods, pod by pod, and
// the batches its rollout takes: the planner's decisions for this pass
// (Plan.Decisions), named for a user, and its order pass after pass.
//
// A paused PodSet is previewed as it rolls out once resumed: while paused,
// only creations and deletions happen.
func (v *View) Preview() Preview {
	if v.PodSet.Spec.Paused {
		resumed := *v
		resumed.PodSet = v.PodSet.DeepCopy()
		resumed.PodSet.Spec.Paused = false
		v = &resumed
	}
	plan := v.Plan(Input{Held: Held(nil).Observe(v), InFlight: nothingInFlight, Endpoints: v.assumeServed()})
	p := Preview{MaxUnavailable: maxUnavailable(v.PodSet), Pods: v.podChanges(plan.Decisions)}
	v.previewOrder(&p, plan)
	if DrainSeconds(v.PodSet) > 0 {
		for _, m := range slices.Concat(v.Slots, v.Surplus) {
			if m != nil && m.Controlled && !m.Terminating && !allPreStop(v.PodSet, m.Pod, nil) {
				p.NotDrainedByOthers = append(p.NotDrainedByOthers, m.Pod.Name)
			}
		}
	}
	return p
}

// nothingInFlight is the InFlight of a preview: no write is in flight.
func nothingInFlight(string) bool { return false }

// podChanges names what the rollout does to each pod, from the planner's
// decision for it: where the pod stands, and, for a pod on the current
// revision, whether the planner recreates it all the same (its resize is
// Infeasible, or deferred past the deadline).
func (v *View) podChanges(decisions []Decision) []PodChange {
	revs := v.Revs
	out := make([]PodChange, 0, len(decisions))
	for _, d := range decisions {
		c := PodChange{Name: d.Name, Ordinal: d.Ordinal}
		if m := d.Member; m != nil {
			c.Pod, c.Hash, c.Ready = m.Pod, m.Hash, m.Ready
		}
		switch d.State {
		case StateMissing:
			c.Change = ChangeCreate
		case StateConflict:
			c.Change = ChangeConflict
		case StateTerminating:
			c.Change, c.Why = ChangeCreate, "once its terminating pod is gone"
		case StateFinished:
			c.Change, c.Why = ChangeRecreate, "it has "+string(d.Member.Pod.Status.Phase)
		case StateCurrent:
			c.Change = ChangeNone
			if d.Action == ActionRecreate || d.Action == ActionDrain {
				c.Change, c.Why = ChangeRecreate, d.Way.Why
			}
		case StateHeldOnDelete:
			c.Change = ChangeHeldOnDelete
		case StateHeldByPartition:
			c.Change = ChangeHeldByPartition
		case StateStale:
			c.Way = d.Way
			switch {
			case !c.Way.InPlace:
				c.Change, c.Why = ChangeRecreate, c.Way.Why
				if from := revs.Templates[d.Member.Hash]; from != nil && c.Way.Why == whyTemplate {
					c.Fields = RecreateFields(from, revs.Templates[revs.Update])
				}
			case c.Way.metadataOnly():
				c.Change = ChangeMetadata
			case len(c.Way.Images) > 0:
				c.Change = ChangeImage
			default:
				c.Change = ChangeResize
			}
		case StateSurplus:
			c.Change = ChangeDelete
		}
		out = append(out, c)
	}
	return out
}

// assumeServed is what the preview takes the EndpointSlices to say: that
// they list every Ready pod of the view, as when a Service selects them.
// The preview does not read the slices, and a pod no slice lists is only
// deleted sooner (no drain) than it shows.
func (v *View) assumeServed() Endpoints {
	ep := Endpoints{}
	for _, m := range v.Controlled {
		if podReady(m.Pod) {
			ep[m.Pod.UID] = EndpointState{Listed: true}
		}
	}
	return ep
}

// previewOrder follows the planner pass after pass, from plan, the view's
// first, each time on the pods as the pass before left them, every pod it
// touched up to date and available, until a pass has nothing more to do.
// Each pass's batch is in the planner's own order (Plan.RolloutOrder).
func (v *View) previewOrder(p *Preview, plan Plan) {
	held := Held(nil).Observe(v)
	cur := v
	seen := map[string]bool{}
	// plan is always the plan of cur: the loop plans the pods each pass
	// leaves, and stops when a pass has nothing to do.
	for range len(v.Slots) + len(v.Surplus) + 2 {
		touched, removed := v.effect(&plan, func(name string) {
			if !seen[name] {
				seen[name] = true
				p.AtOnce = append(p.AtOnce, name)
			}
		})
		if len(touched) == 0 && len(removed) == 0 {
			break
		}
		var names []string
		for _, d := range plan.RolloutOrder() {
			if !seen[d.Name] {
				seen[d.Name] = true
				names = append(names, d.Name)
			}
		}
		if len(names) > 0 {
			p.Batches = append(p.Batches, names)
		}
		cur = cur.after(touched, removed)
		held = held.Observe(cur)
		plan = cur.Plan(Input{Held: held, InFlight: nothingInFlight, Endpoints: cur.assumeServed()})
	}
	// Waiting: what the plan of the pods as the passes left them does not
	// reach.
	p.Waiting = plan.Waiting()
}

// effect is what one pass of plan does to the pods, read off its
// decisions: the revision each pod it moves runs next (touched:
// Decision.Revision), and the pods it removes. It calls atOnce with each
// pod changed at once rather than in the rollout's batches: created,
// pruned, replaced when finished, updated in its labels and annotations
// only, or drained to be deleted as surplus. A pod of a lost node is left
// as it is.
func (v *View) effect(plan *Plan, atOnce func(name string)) (touched map[string]string, removed map[string]bool) {
	touched, removed = map[string]string{}, map[string]bool{}
	// At once, in this order: created, pruned, replaced when finished,
	// relabelled, drained as surplus.
	var now [5][]string
	for _, d := range plan.Decisions {
		switch {
		case d.Action == ActionPrune:
			removed[d.Name] = true
			now[1] = append(now[1], d.Name)
		case d.Action == ActionDrain && d.State == StateSurplus:
			// Drained, then deleted: at once, as a scale-down.
			removed[d.Name] = true
			now[4] = append(now[4], d.Name)
		case d.Revision == "" || d.Action == ActionReplaceLost:
		default:
			touched[d.Name] = d.Revision
			switch {
			case d.Action == ActionCreate:
				now[0] = append(now[0], d.Name)
			case d.Action == ActionReplaceFinished:
				now[2] = append(now[2], d.Name)
			case d.Action == ActionUpdate && d.Way.metadataOnly():
				now[3] = append(now[3], d.Name)
			}
		}
	}
	for _, name := range slices.Concat(now[:]...) {
		atOnce(name)
	}
	return touched, removed
}

// after is the view once every pod in touched runs the revision it names,
// Ready and available (created where it was missing), and the pods in
// removed are gone.
func (v *View) after(touched map[string]string, removed map[string]bool) *View {
	var pods []corev1.Pod
	for _, m := range v.Controlled {
		if removed[m.Pod.Name] {
			continue
		}
		if hash, ok := touched[m.Pod.Name]; ok {
			pods = append(pods, v.upToDatePod(m.Pod.Name, m.Pod.UID, hash))
			delete(touched, m.Pod.Name)
			continue
		}
		pods = append(pods, *m.Pod)
	}
	for _, m := range v.Slots {
		if m != nil && !m.Controlled {
			pods = append(pods, *m.Pod)
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range touched {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		pods = append(pods, v.upToDatePod(name, types.UID("preview-"+name), touched[name]))
	}
	return NewView(v.PodSet, v.Revs, pods, v.Now)
}

// upToDatePod is the pod of a name as the revision hash makes it, Running,
// Ready and available at the view's time.
func (v *View) upToDatePod(name string, uid types.UID, hash string) corev1.Pod {
	ps := v.PodSet
	ordinal := ordinalOf(ps, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}})
	var pod corev1.Pod
	tmpl := v.Revs.Templates[hash]
	if tmpl == nil {
		tmpl = PodTemplate(ps)
	}
	if ac, err := PodFromTemplate(ps, tmpl, ordinal, hash); err == nil {
		_ = Convert(ac, &pod)
	}
	pod.Name, pod.Namespace, pod.UID = name, ps.Namespace, uid
	if pod.Labels == nil {
		pod.Labels = podLabels(ps, tmpl, ordinal, hash)
	}
	if len(pod.OwnerReferences) == 0 {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ps, podsetv1alpha1.GroupVersion.WithKind("PodSet"))}
	}
	since := metav1.NewTime(v.Now.Add(-minReadySeconds(ps) - time.Second))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
	}}
	if hasGate(&pod) {
		pod.Status.Conditions = append(pod.Status.Conditions,
			corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue, LastTransitionTime: since})
	}
	return pod
}
