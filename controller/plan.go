package controller

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// podPlan is what one pass does to the pods. Every pod in it is controlled
// by the PodSet; pods it does not control appear only by name, in conflicts
// and strays.
type podPlan struct {
	// create lists the ordinals that have no pod: apply a new one.
	create []int
	// repair lists up-to-date pods whose operator-owned fields drifted:
	// apply the desired pod again.
	repair []*corev1.Pod
	// prune lists pods with an ordinal at or above replicas, highest first.
	prune []*corev1.Pod
	// replaceFinished lists Failed or Succeeded pods, to delete and recreate.
	replaceFinished []*corev1.Pod
	// rollout lists out-of-date pods to delete and recreate from the current
	// template: unready ones first, then ready ones from the highest ordinal.
	rollout []*corev1.Pod
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
	return len(p.create) == 0 && len(p.repair) == 0 && len(p.deletions()) == 0
}

// planPods decides what a pass does, from the PodSet, its pods as the cache
// shows them, and the names of pods with a write in flight that the cache
// has not caught up with yet (those are left alone this pass).
func planPods(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, hash string, inFlight func(name string) bool) podPlan {
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
		if inFlight(pod.Name) {
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

	var staleReady, staleUnready []*corev1.Pod
	unavailable := 0
	for ordinal, pod := range slots {
		switch {
		case pod == nil:
			if !inFlight(podName(ps.Name, ordinal)) {
				p.create = append(p.create, ordinal)
			}
			unavailable++
		case !metav1.IsControlledBy(pod, ps) || inFlight(pod.Name) || pod.DeletionTimestamp != nil:
			unavailable++
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			p.replaceFinished = append(p.replaceFinished, pod)
			unavailable++
		case pod.Labels[podsetv1alpha1.TemplateHashLabel] != hash:
			if !podReady(pod) {
				staleUnready = append(staleUnready, pod)
				unavailable++
			} else {
				staleReady = append(staleReady, pod)
			}
		default:
			if !podReady(pod) {
				unavailable++
			}
			if drifted(ps, pod, ordinal, hash) {
				p.repair = append(p.repair, pod)
			}
		}
	}
	if ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType {
		return p
	}
	// Unready out-of-date pods serve nothing: replacing them costs no
	// availability, and it is how a broken template is fixed by a new one.
	p.rollout = staleUnready
	budget := maxUnavailable(ps) - unavailable
	for i := len(staleReady) - 1; i >= 0 && budget > 0; i-- {
		p.rollout = append(p.rollout, staleReady[i])
		budget--
	}
	return p
}

// drifted reports whether a pod lost what the operator owns on it and can
// restore in place: its labels and annotations from the template, the
// operator's labels, the controller reference, or a container image.
// Everything else in a pod's spec is immutable.
func drifted(ps *podsetv1alpha1.PodSet, pod *corev1.Pod, ordinal int, hash string) bool {
	for k, v := range podLabels(ps, ordinal, hash) {
		if got, ok := pod.Labels[k]; !ok || got != v {
			return true
		}
	}
	for k, v := range ps.Spec.Template.Annotations {
		if got, ok := pod.Annotations[k]; !ok || got != v {
			return true
		}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		return true
	}
	return imagesDiffer(ps.Spec.Template.Spec.Containers, pod.Spec.Containers) ||
		imagesDiffer(ps.Spec.Template.Spec.InitContainers, pod.Spec.InitContainers)
}

func imagesDiffer(want, got []corev1.Container) bool {
	images := make(map[string]string, len(got))
	for _, c := range got {
		images[c.Name] = c.Image
	}
	for _, c := range want {
		if images[c.Name] != c.Image {
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

// podReady reports whether a pod is running and its Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
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
	if n, ok := podOrdinal(ps.Name, pod.Name); ok {
		return n
	}
	return podsetv1alpha1.MaxReplicas
}
