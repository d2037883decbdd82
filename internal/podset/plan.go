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

// Plan is what one pass does to the pods. Every pod in it is controlled
// by the PodSet; pods it does not control appear only by name, in conflicts
// and strays.
type Plan struct {
	// create lists the ordinals that have no pod: apply a new one, from the
	// current template unless revisions says otherwise.
	Create []int
	// revisions holds, for ordinals to create that a partition holds back,
	// the template hash of the revision to create them from.
	Revisions map[int]string
	// repair lists pods whose operator-owned fields drifted from their
	// revision: apply their desired pod again.
	Repair []*corev1.Pod
	// prune lists pods with an ordinal at or above replicas, highest first.
	Prune []*corev1.Pod
	// replaceFinished lists Failed or Succeeded pods, to delete and recreate.
	ReplaceFinished []*corev1.Pod
	// rollout lists out-of-date pods to delete and recreate from the current
	// template: unready ones first, then ready ones from the highest ordinal.
	Rollout []*corev1.Pod
	// why says, by pod name, why a pod of rollout is recreated rather than
	// updated in place.
	Why map[string]string
	// update lists out-of-date pods to bring to the current template where
	// they run: metadata at once, a resize, or new images once their gate is
	// closed and the kubelet took them out of Ready.
	Update []Step
	// pause lists pods whose readiness gate closes: a restart in place
	// begins, within maxUnavailable.
	Pause []*corev1.Pod
	// resume lists pods whose readiness gate opens: new, or their
	// containers run the new images.
	Resume []*corev1.Pod
	// wake is how long until something a pass waits for is due (a deferred
	// resize counts as stuck, a drained pod may restart), or 0.
	Wake time.Duration
	// conflicts lists names this PodSet needs that pods it does not control
	// hold. Those pods are never modified or deleted.
	Conflicts []string
	// strays lists pods that carry this PodSet's name label but are not
	// controlled by it. They are neither counted nor touched.
	Strays []string
}

// deletions is every pod the plan deletes.
func (p *Plan) Deletions() []*corev1.Pod {
	return slices.Concat(p.Prune, p.ReplaceFinished, p.Rollout)
}

// empty reports whether the plan sends no write at all.
func (p *Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Repair) == 0 && len(p.Deletions()) == 0 &&
		len(p.Update) == 0 && len(p.Pause) == 0 && len(p.Resume) == 0
}

// revisionOf is the template hash an ordinal to create is made from.
func (p *Plan) RevisionOf(ordinal int, revs *Revisions) string {
	if h, ok := p.Revisions[ordinal]; ok {
		return h
	}
	return revs.Update
}

// Input is what a pass plans from besides the PodSet and its pods.
type Input struct {
	// revs are the PodSet's revisions.
	Revs *Revisions
	// remembered is the revision the pod at an ordinal ran when the
	// operator last saw it, or "" (see heldRevisions).
	Held Held
	// inFlight reports the pod names with a write the cache has not shown
	// yet: those are left alone this pass.
	InFlight func(name string) bool
	// now decides which Ready pods are available (minReadySeconds).
	Now time.Time
}

// PlanPods decides what a pass does, from the PodSet and its pods as the
// cache shows them.
func PlanPods(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, in Input) Plan {
	var p Plan
	replicas := int(Replicas(ps))
	slots := make([]*corev1.Pod, replicas)

	for i := range pods {
		pod := &pods[i]
		if !metav1.IsControlledBy(pod, ps) {
			if ordinal, ok := PodOrdinal(ps.Name, pod.Name); ok && ordinal < replicas {
				p.Conflicts = append(p.Conflicts, pod.Name)
				slots[ordinal] = pod
			} else {
				p.Strays = append(p.Strays, pod.Name)
			}
			continue
		}
		if in.InFlight(pod.Name) {
			if ordinal, ok := PodOrdinal(ps.Name, pod.Name); ok && ordinal < replicas {
				slots[ordinal] = pod
			}
			continue
		}
		ordinal, ok := PodOrdinal(ps.Name, pod.Name)
		switch {
		case pod.DeletionTimestamp != nil:
			// Wait for it to go before its name is used again.
			if ok && ordinal < replicas {
				slots[ordinal] = pod
			}
		case !ok || ordinal >= replicas:
			p.Prune = append(p.Prune, pod)
		default:
			slots[ordinal] = pod
		}
	}
	slices.SortFunc(p.Prune, func(a, b *corev1.Pod) int { return cmp.Compare(ordinalOf(ps, b), ordinalOf(ps, a)) })

	minReady := minReadySeconds(ps)
	deadline := progressDeadline(ps)
	partition := Partition(ps)
	onDelete := ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType
	var staleReady []staleUpdate
	var staleUnready []*corev1.Pod
	ways := updateWays{}
	unavailable := 0
	for ordinal, pod := range slots {
		switch {
		case pod == nil:
			if !in.InFlight(PodName(ps.Name, ordinal)) {
				p.Create = append(p.Create, ordinal)
				if ordinal < partition {
					if h := heldRevision(ps, in, ordinal); h != in.Revs.Update {
						if p.Revisions == nil {
							p.Revisions = map[int]string{}
						}
						p.Revisions[ordinal] = h
					}
				}
			}
			unavailable++
		case !metav1.IsControlledBy(pod, ps) || in.InFlight(pod.Name) || pod.DeletionTimestamp != nil:
			unavailable++
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			p.ReplaceFinished = append(p.ReplaceFinished, pod)
			unavailable++
		case pod.Labels[podsetv1alpha1.TemplateHashLabel] != in.Revs.Update && ordinal >= partition && !onDelete:
			// Out of date, and the strategy updates it: in place where it
			// can, else by recreating it.
			way := ways.of(ps, in.Revs, pod)
			available := podAvailable(pod, minReady, in.Now)
			switch {
			case way.metadataOnly():
				// Nothing restarts: every such pod at once, outside the
				// budget.
				p.Update = append(p.Update, Step{Pod: pod, Way: way})
			case way.InPlace && gateClosed(pod):
				// Started: the containers restart once the kubelet has
				// taken the pod out of Ready (and so out of endpoints),
				// and the dataplane has had inPlaceDrainSeconds to follow.
				if !kubeletReady(pod) {
					if wait := drainLeft(ps, pod, in.Now); wait > 0 {
						p.wakeIn(wait)
					} else {
						p.Update = append(p.Update, Step{Pod: pod, Way: way})
					}
				}
			case way.InPlace && !podReady(pod):
				// Serves nothing: update it at once, without draining.
				p.Update = append(p.Update, Step{Pod: pod, Way: way})
			case !podReady(pod):
				staleUnready = append(staleUnready, pod)
				p.recreating(pod, way.Why)
			case available:
				staleReady = append(staleReady, staleUpdate{Pod: pod, Way: way})
			}
			if !available {
				unavailable++
			}
		default:
			// Up to date, or held back on the revision it runs (by the
			// partition, or until a user deletes it under OnDelete): keep
			// it, restore what drifted from its revision, and finish an
			// in-place update.
			available := podAvailable(pod, minReady, in.Now)
			if !available {
				unavailable++
			}
			hash := pod.Labels[podsetv1alpha1.TemplateHashLabel]
			tmpl, ok := in.Revs.Templates[hash]
			if ok && drifted(ps, tmpl, pod, ordinal, hash) {
				p.Repair = append(p.Repair, pod)
			}
			if c := gateCondition(pod); hasGate(pod) && (c == nil || c.Status != corev1.ConditionTrue && restarted(pod) && resizeSettled(pod)) {
				p.Resume = append(p.Resume, pod)
			}
			why, wait := "", time.Duration(0)
			if ok && resizeTowards(tmpl, pod) {
				why, wait = resizeStuck(pod, deadline, in.Now)
			}
			switch {
			case wait > 0:
				p.wakeIn(wait)
			case why != "" && available:
				staleReady = append(staleReady, staleUpdate{Pod: pod, Way: UpdateWay{Why: why}})
			case why != "":
				staleUnready = append(staleUnready, pod)
				p.recreating(pod, why)
			}
		}
	}
	// Unready out-of-date pods serve nothing: replacing them costs no
	// availability, and it is how a broken template is fixed by a new one.
	// Available ones go from the highest ordinal, as many as the budget
	// allows: a restart in place begins by closing the pod's gate.
	p.Rollout = staleUnready
	budget := maxUnavailable(ps) - unavailable
	for i := len(staleReady) - 1; i >= 0 && budget > 0; i-- {
		switch s := staleReady[i]; {
		case s.Way.InPlace && s.Way.Restart() && hasGate(s.Pod):
			p.Pause = append(p.Pause, s.Pod)
		case s.Way.InPlace:
			p.Update = append(p.Update, Step{Pod: s.Pod, Way: s.Way})
		default:
			p.Rollout = append(p.Rollout, s.Pod)
			p.recreating(s.Pod, s.Way.Why)
		}
		budget--
	}
	return p
}

// staleUpdate is an available out-of-date pod and how it would be updated.
type staleUpdate struct {
	Pod *corev1.Pod
	Way UpdateWay
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

// heldRevision is the revision to recreate a missing pod from that the
// partition holds back: the one it ran when the operator last saw it, else
// the revision status.currentRevision names (the one the oldest pods run,
// as StatefulSet recreates such pods), else, with no such template known,
// the current one.
func heldRevision(ps *podsetv1alpha1.PodSet, in Input, ordinal int) string {
	if h := in.Held.Remembered(ordinal); h != "" && in.Revs.Known(h) {
		return h
	}
	if h, ok := revisionHash(ps, ps.Status.CurrentRevision); ok && in.Revs.Known(h) {
		return h
	}
	return in.Revs.Update
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

// Partition is the lowest ordinal a RollingUpdate updates: pods below it
// keep their revision. OnDelete updates no pod itself, and new pods of
// either strategy start from the current template.
func Partition(ps *podsetv1alpha1.PodSet) int {
	if ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType {
		return 0
	}
	if ru := ps.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return int(max(0, *ru.Partition))
	}
	return 0
}

// podReady reports whether a pod is running and its Ready condition is
// True, and the operator has not closed its readiness gate: from then on
// the pod is on its way out of Ready, whatever the kubelet said last.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || gateClosed(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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

// ordinalPod is a pod name with its ordinal (ordinalOf), for sorting
// without parsing names again.
type ordinalPod struct {
	ordinal int
	name    string
}
