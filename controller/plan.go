package controller

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

// podPlan is what one pass does to the pods. Every pod in it is controlled
// by the PodSet; pods it does not control appear only by name, in conflicts
// and strays.
type podPlan struct {
	// create lists the ordinals that have no pod: apply a new one, from the
	// current template unless revisions says otherwise.
	create []int
	// revisions holds, for ordinals to create that a partition holds back,
	// the template hash of the revision to create them from.
	revisions map[int]string
	// repair lists pods whose operator-owned fields drifted from their
	// revision: apply their desired pod again.
	repair []*corev1.Pod
	// prune lists pods with an ordinal at or above replicas, highest first.
	prune []*corev1.Pod
	// replaceFinished lists Failed or Succeeded pods, to delete and recreate.
	replaceFinished []*corev1.Pod
	// rollout lists out-of-date pods to delete and recreate from the current
	// template: unready ones first, then ready ones from the highest ordinal.
	rollout []*corev1.Pod
	// why says, by pod name, why a pod of rollout is recreated rather than
	// updated in place.
	why map[string]string
	// update lists out-of-date pods to bring to the current template where
	// they run: metadata at once, a resize, or new images once their gate is
	// closed and the kubelet took them out of Ready.
	update []podStep
	// pause lists pods whose readiness gate closes: a restart in place
	// begins, within maxUnavailable.
	pause []*corev1.Pod
	// resume lists pods whose readiness gate opens: new, or their
	// containers run the new images.
	resume []*corev1.Pod
	// wake is how long until something a pass waits for is due (a deferred
	// resize counts as stuck, a drained pod may restart), or 0.
	wake time.Duration
	// conflicts lists names this PodSet needs that pods it does not control
	// hold. Those pods are never modified or deleted.
	conflicts []string
	// strays lists pods that carry this PodSet's name label but are not
	// controlled by it. They are neither counted nor touched.
	strays []string
}

// deletions is every pod the plan deletes.
func (p *podPlan) deletions() []*corev1.Pod {
	return slices.Concat(p.prune, p.replaceFinished, p.rollout)
}

// empty reports whether the plan sends no write at all.
func (p *podPlan) empty() bool {
	return len(p.create) == 0 && len(p.repair) == 0 && len(p.deletions()) == 0 &&
		len(p.update) == 0 && len(p.pause) == 0 && len(p.resume) == 0
}

// revisionOf is the template hash an ordinal to create is made from.
func (p *podPlan) revisionOf(ordinal int, revs *revisionSet) string {
	if h, ok := p.revisions[ordinal]; ok {
		return h
	}
	return revs.update
}

// planInput is what a pass plans from besides the PodSet and its pods.
type planInput struct {
	// revs are the PodSet's revisions.
	revs *revisionSet
	// remembered is the revision the pod at an ordinal ran when the
	// operator last saw it, or "" (see heldRevisions).
	remembered func(ordinal int) string
	// inFlight reports the pod names with a write the cache has not shown
	// yet: those are left alone this pass.
	inFlight func(name string) bool
	// now decides which Ready pods are available (minReadySeconds).
	now time.Time
}

// planPods decides what a pass does, from the PodSet and its pods as the
// cache shows them.
func planPods(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, in planInput) podPlan {
	var p podPlan
	replicas := int(replicas(ps))
	slots := make([]*corev1.Pod, replicas)

	for i := range pods {
		pod := &pods[i]
		if !metav1.IsControlledBy(pod, ps) {
			if ordinal, ok := podOrdinal(ps.Name, pod.Name); ok && ordinal < replicas {
				p.conflicts = append(p.conflicts, pod.Name)
				slots[ordinal] = pod
			} else {
				p.strays = append(p.strays, pod.Name)
			}
			continue
		}
		if in.inFlight(pod.Name) {
			if ordinal, ok := podOrdinal(ps.Name, pod.Name); ok && ordinal < replicas {
				slots[ordinal] = pod
			}
			continue
		}
		ordinal, ok := podOrdinal(ps.Name, pod.Name)
		switch {
		case pod.DeletionTimestamp != nil:
			// Wait for it to go before its name is used again.
			if ok && ordinal < replicas {
				slots[ordinal] = pod
			}
		case !ok || ordinal >= replicas:
			p.prune = append(p.prune, pod)
		default:
			slots[ordinal] = pod
		}
	}
	slices.SortFunc(p.prune, func(a, b *corev1.Pod) int { return cmp.Compare(ordinalOf(ps, b), ordinalOf(ps, a)) })

	minReady := minReadySeconds(ps)
	deadline := progressDeadline(ps)
	partition := partition(ps)
	onDelete := ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType
	var staleReady []staleUpdate
	var staleUnready []*corev1.Pod
	ways := updateWays{}
	unavailable := 0
	for ordinal, pod := range slots {
		switch {
		case pod == nil:
			if !in.inFlight(podName(ps.Name, ordinal)) {
				p.create = append(p.create, ordinal)
				if ordinal < partition {
					if h := heldRevision(ps, in, ordinal); h != in.revs.update {
						if p.revisions == nil {
							p.revisions = map[int]string{}
						}
						p.revisions[ordinal] = h
					}
				}
			}
			unavailable++
		case !metav1.IsControlledBy(pod, ps) || in.inFlight(pod.Name) || pod.DeletionTimestamp != nil:
			unavailable++
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			p.replaceFinished = append(p.replaceFinished, pod)
			unavailable++
		case pod.Labels[podsetv1alpha1.TemplateHashLabel] != in.revs.update && ordinal >= partition && !onDelete:
			// Out of date, and the strategy updates it: in place where it
			// can, else by recreating it.
			way := ways.of(ps, in.revs, pod)
			available := podAvailable(pod, minReady, in.now)
			switch {
			case way.metadataOnly():
				// Nothing restarts: every such pod at once, outside the
				// budget.
				p.update = append(p.update, podStep{pod: pod, way: way})
			case way.inPlace && gateClosed(pod):
				// Started: the containers restart once the kubelet has
				// taken the pod out of Ready (and so out of endpoints),
				// and the dataplane has had inPlaceDrainSeconds to follow.
				if !kubeletReady(pod) {
					if wait := drainLeft(ps, pod, in.now); wait > 0 {
						p.wakeIn(wait)
					} else {
						p.update = append(p.update, podStep{pod: pod, way: way})
					}
				}
			case way.inPlace && !podReady(pod):
				// Serves nothing: update it at once, without draining.
				p.update = append(p.update, podStep{pod: pod, way: way})
			case !podReady(pod):
				staleUnready = append(staleUnready, pod)
				p.recreating(pod, way.why)
			case available:
				staleReady = append(staleReady, staleUpdate{pod: pod, way: way})
			}
			if !available {
				unavailable++
			}
		default:
			// Up to date, or held back on the revision it runs (by the
			// partition, or until a user deletes it under OnDelete): keep
			// it, restore what drifted from its revision, and finish an
			// in-place update.
			available := podAvailable(pod, minReady, in.now)
			if !available {
				unavailable++
			}
			hash := pod.Labels[podsetv1alpha1.TemplateHashLabel]
			tmpl, ok := in.revs.templates[hash]
			if ok && drifted(ps, tmpl, pod, ordinal, hash) {
				p.repair = append(p.repair, pod)
			}
			if c := gateCondition(pod); hasGate(pod) && (c == nil || c.Status != corev1.ConditionTrue && restarted(pod) && resizeSettled(pod)) {
				p.resume = append(p.resume, pod)
			}
			why, wait := "", time.Duration(0)
			if ok && resizeTowards(tmpl, pod) {
				why, wait = resizeStuck(pod, deadline, in.now)
			}
			switch {
			case wait > 0:
				p.wakeIn(wait)
			case why != "" && available:
				staleReady = append(staleReady, staleUpdate{pod: pod, way: updateWay{why: why}})
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
	p.rollout = staleUnready
	budget := maxUnavailable(ps) - unavailable
	for i := len(staleReady) - 1; i >= 0 && budget > 0; i-- {
		switch s := staleReady[i]; {
		case s.way.inPlace && s.way.restart() && hasGate(s.pod):
			p.pause = append(p.pause, s.pod)
		case s.way.inPlace:
			p.update = append(p.update, podStep{pod: s.pod, way: s.way})
		default:
			p.rollout = append(p.rollout, s.pod)
			p.recreating(s.pod, s.way.why)
		}
		budget--
	}
	return p
}

// staleUpdate is an available out-of-date pod and how it would be updated.
type staleUpdate struct {
	pod *corev1.Pod
	way updateWay
}

// podStep is a pod to update where it runs, and how.
type podStep struct {
	pod *corev1.Pod
	way updateWay
}

// wakeIn asks for a pass in d at the latest.
func (p *podPlan) wakeIn(d time.Duration) {
	if p.wake == 0 || d < p.wake {
		p.wake = d
	}
}

// recreating records why a pod in the rollout is recreated.
func (p *podPlan) recreating(pod *corev1.Pod, why string) {
	if p.why == nil {
		p.why = map[string]string{}
	}
	p.why[pod.Name] = why
}

// heldRevision is the revision to recreate a missing pod from that the
// partition holds back: the one it ran when the operator last saw it, else
// the revision status.currentRevision names (the one the oldest pods run,
// as StatefulSet recreates such pods), else, with no such template known,
// the current one.
func heldRevision(ps *podsetv1alpha1.PodSet, in planInput, ordinal int) string {
	if h := in.remembered(ordinal); h != "" && in.revs.known(h) {
		return h
	}
	if h, ok := revisionHash(ps, ps.Status.CurrentRevision); ok && in.revs.known(h) {
		return h
	}
	return in.revs.update
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

// replicas is spec.replicas; the schema defaults it to 1.
func replicas(ps *podsetv1alpha1.PodSet) int32 {
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
	n, err := intstr.GetScaledValueFromIntOrPercent(&value, int(replicas(ps)), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// partition is the lowest ordinal a RollingUpdate updates: pods below it
// keep their revision. OnDelete updates no pod itself, and new pods of
// either strategy start from the current template.
func partition(ps *podsetv1alpha1.PodSet) int {
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
	return ordinalOr(podOrdinal(ps.Name, pod.Name))
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
