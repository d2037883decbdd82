package controller

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/podset-dev/podset-operator/internal/podset"
)

// podChanged passes the pod events that can change what a pass does or the
// status it writes: creation, deletion, and updates of the phase, the Ready
// condition, the deletion timestamp, labels, annotations (the template's are
// restored on drift), owners or container images, and for in-place updates
// the InPlaceUpdateReady condition, a resize pending or in progress, and
// the images and resources the containers report while an update waits for
// them. Everything else (a
// kubelet's status heartbeat, a new pod IP) is dropped.
//
// It is used on the pod watch only, never as a global event filter: a
// generation filter on pods would drop readiness changes, the tutorial's bug.
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Pod)
		cur, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return true
		}
		return podset.PodOutcomeChanged(old, cur)
	},
}

// budgetChanged passes the PodDisruptionBudget events that can change what
// a pass does: creation, deletion, and updates of the spec (its
// generation), the labels, the owners or the deletion timestamp. The
// disruption controller's status updates, one per pod that comes, goes or
// turns ready, are dropped.
var budgetChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, cur := e.ObjectOld, e.ObjectNew
		return old.GetGeneration() != cur.GetGeneration() ||
			!maps.Equal(old.GetLabels(), cur.GetLabels()) ||
			!equality.Semantic.DeepEqual(old.GetOwnerReferences(), cur.GetOwnerReferences()) ||
			(old.GetDeletionTimestamp() == nil) != (cur.GetDeletionTimestamp() == nil)
	},
}
