package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPodChangedPassesCreateAndDelete checks that the pod watch never drops
// a pod appearing or disappearing, nor an update it cannot read.
func TestPodChangedPassesCreateAndDelete(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}}
	if !podChanged.Create(event.CreateEvent{Object: pod}) {
		t.Error("podChanged.Create() = false, want true")
	}
	if !podChanged.Delete(event.DeleteEvent{Object: pod}) {
		t.Error("podChanged.Delete() = false, want true")
	}
	if !podChanged.Generic(event.GenericEvent{Object: pod}) {
		t.Error("podChanged.Generic() = false, want true")
	}
	notAPod := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}
	if !podChanged.Update(event.UpdateEvent{ObjectOld: notAPod, ObjectNew: notAPod}) {
		t.Error("podChanged.Update() on objects that are not pods = false, want true")
	}
}

// TestBudgetChanged checks which PodDisruptionBudget updates start a pass:
// what the operator owns on it, not the disruption controller's status.
func TestBudgetChanged(t *testing.T) {
	base := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "default", Generation: 1, ResourceVersion: "1",
		Labels:          map[string]string{"podset.dev/name": "web"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "PodSet", Name: "web", UID: "uid", Controller: ptr.To(true)}},
	}}
	cases := map[string]struct {
		change func(*policyv1.PodDisruptionBudget)
		want   bool
	}{
		"status only (a new resourceVersion)": {change: func(p *policyv1.PodDisruptionBudget) { p.ResourceVersion = "2" }},
		"spec (a new generation)":             {change: func(p *policyv1.PodDisruptionBudget) { p.Generation = 2 }, want: true},
		"label removed":                       {change: func(p *policyv1.PodDisruptionBudget) { p.Labels = nil }, want: true},
		"owner removed":                       {change: func(p *policyv1.PodDisruptionBudget) { p.OwnerReferences = nil }, want: true},
		"being deleted": {change: func(p *policyv1.PodDisruptionBudget) {
			p.DeletionTimestamp = &metav1.Time{}
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			if got := budgetChanged.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: cur}); got != tc.want {
				t.Errorf("budgetChanged.Update() = %v, want %v", got, tc.want)
			}
		})
	}
	if !budgetChanged.Create(event.CreateEvent{Object: base}) || !budgetChanged.Delete(event.DeleteEvent{Object: base}) {
		t.Error("budgetChanged drops a create or a delete")
	}
}
