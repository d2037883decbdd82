package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
