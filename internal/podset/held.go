package podset

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Held is which older revision each pod that the partition holds back ran
// when the operator last saw it, by ordinal, so that a held-back pod that
// is deleted or fails is recreated from the revision it had, even when
// three revisions are live at once (the partition was moved between two
// template changes). It holds entries only for pods below the partition
// on a template other than the current one: none at all outside a staged
// rollout.
//
// It is memory, not state: after an operator restart a held-back pod that
// is already gone is recreated from status.currentRevision, the revision
// the oldest pods run, as StatefulSet recreates every such pod.
type Held map[int]string

// Observe is what the held-back pods run now, given what was held before.
// An ordinal without a pod keeps its entry until its pod is back; an
// ordinal the partition no longer holds back loses it. It returns nil when
// nothing is held.
func (h Held) Observe(ps *podsetv1alpha1.PodSet, pods []corev1.Pod, update string) Held {
	partition := min(Partition(ps), int(Replicas(ps)))
	var held Held
	for ordinal, hash := range h {
		if ordinal < partition {
			held = held.with(ordinal, hash)
		}
	}
	for i := range pods {
		pod := &pods[i]
		ordinal, ok := PodOrdinal(ps.Name, pod.Name)
		if !ok || ordinal >= partition || !metav1.IsControlledBy(pod, ps) {
			continue
		}
		if hash := pod.Labels[podsetv1alpha1.TemplateHashLabel]; hash == update {
			delete(held, ordinal)
		} else {
			held = held.with(ordinal, hash)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return held
}

func (h Held) with(ordinal int, hash string) Held {
	if h == nil {
		h = Held{}
	}
	h[ordinal] = hash
	return h
}

// Remembered is the revision the pod at an ordinal ran when last seen, or
// "".
func (h Held) Remembered(ordinal int) string { return h[ordinal] }

// Kept lists the revisions the remembered pods ran: they are not pruned.
func (h Held) Kept() []string {
	var hashes []string
	for _, hash := range h {
		hashes = append(hashes, hash)
	}
	return hashes
}
