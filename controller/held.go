package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// heldRevisions remembers, for each PodSet, which older revision each pod
// that the partition holds back ran when the operator last saw it, so that
// a held-back pod that is deleted or fails is recreated from the revision
// it had, even when three revisions are live at once (the partition was
// moved between two template changes). It holds entries only for pods
// below the partition on a template other than the current one: none at
// all outside a staged rollout.
//
// It is memory, not state: after an operator restart a held-back pod that
// is already gone is recreated from status.currentRevision, the revision
// the oldest pods run, as StatefulSet recreates every such pod.
type heldRevisions struct {
	mu       sync.Mutex
	byPodSet map[types.NamespacedName]map[int]string
}

func newHeldRevisions() *heldRevisions {
	return &heldRevisions{byPodSet: map[types.NamespacedName]map[int]string{}}
}

// remembered returns the revision the pod at an ordinal of the PodSet ran
// when last seen, or "", as of now.
func (h *heldRevisions) remembered(key types.NamespacedName) func(ordinal int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	held := make(map[int]string, len(h.byPodSet[key]))
	for ordinal, hash := range h.byPodSet[key] {
		held[ordinal] = hash
	}
	return func(ordinal int) string { return held[ordinal] }
}

// kept lists the revisions the remembered pods ran: they are not pruned.
func (h *heldRevisions) kept(key types.NamespacedName) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var hashes []string
	for _, hash := range h.byPodSet[key] {
		hashes = append(hashes, hash)
	}
	return hashes
}

// observe records what the held-back pods run now. An ordinal without a pod
// keeps its entry until its pod is back; an ordinal the partition no longer
// holds back loses it.
func (h *heldRevisions) observe(key types.NamespacedName, ps *podsetv1alpha1.PodSet, pods []corev1.Pod, update string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	partition := min(partition(ps), int(replicas(ps)))
	held := h.byPodSet[key]
	for ordinal := range held {
		if ordinal >= partition {
			delete(held, ordinal)
		}
	}
	for i := range pods {
		pod := &pods[i]
		ordinal, ok := podOrdinal(ps.Name, pod.Name)
		if !ok || ordinal >= partition || !metav1.IsControlledBy(pod, ps) {
			continue
		}
		switch hash := pod.Labels[podsetv1alpha1.TemplateHashLabel]; {
		case hash == update:
			delete(held, ordinal)
		case held == nil:
			held = map[int]string{ordinal: hash}
		default:
			held[ordinal] = hash
		}
	}
	if len(held) == 0 {
		delete(h.byPodSet, key)
		return
	}
	h.byPodSet[key] = held
}

func (h *heldRevisions) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byPodSet, key)
}
