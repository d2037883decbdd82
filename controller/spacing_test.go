package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func TestPassTimesSpacePodEvents(t *testing.T) {
	p, clock := newTestMemory()
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	if d := p.passWait(key); d != 0 {
		t.Errorf("before any pass: wait %v, want 0", d)
	}
	p.passEnded(key)
	if d := p.passWait(key); d != PodEventSpacing {
		t.Errorf("right after a pass: wait %v, want %v", d, PodEventSpacing)
	}
	clock.advance(PodEventSpacing / 4)
	if d := p.passWait(key); d != PodEventSpacing*3/4 {
		t.Errorf("a quarter of the spacing after a pass: wait %v, want %v", d, PodEventSpacing*3/4)
	}
	if d := p.passWait(types.NamespacedName{Namespace: "ns", Name: "other"}); d != 0 {
		t.Errorf("another PodSet: wait %v, want 0", d)
	}
	clock.advance(PodEventSpacing)
	if d := p.passWait(key); d != 0 {
		t.Errorf("after the spacing: wait %v, want 0", d)
	}
	p.passEnded(key)
	p.forget(key)
	if d := p.passWait(key); d != 0 {
		t.Errorf("a forgotten PodSet: wait %v, want 0", d)
	}
}

// TestPodEventsEnqueueTheControllingPodSet: a pod event enqueues the PodSet
// that controls the pod, at once after a quiet spell and after the rest of
// the spacing right after a pass; pods of other owners enqueue nothing.
func TestPodEventsEnqueueTheControllingPodSet(t *testing.T) {
	r := &PodSetReconciler{memory: newMemory(clock.RealClock{})}
	h := r.podEvents()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	pod := func(name, apiVersion, kind, owner string) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: owner, UID: "u", Controller: ptr.To(true),
		}}}}
	}
	ctx := context.Background()
	web := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}

	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: pod("rs-x", "apps/v1", "ReplicaSet", "rs")}, q)
	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: pod("other-0", "other.dev/v1", "PodSet", "other")}, q)
	if q.Len() != 0 {
		t.Fatalf("pods of a ReplicaSet and of another group's PodSet enqueued %d requests, want none", q.Len())
	}

	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: pod("web-0", podsetv1alpha1.GroupVersion.String(), "PodSet", "web")}, q)
	if q.Len() != 1 {
		t.Fatalf("after a quiet spell a pod event enqueued %d requests, want 1 at once", q.Len())
	}
	if got, _ := q.Get(); got != web {
		t.Fatalf("enqueued %v, want %v", got, web)
	}
	q.Done(web)

	r.memory.passEnded(web.NamespacedName)
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{
		ObjectOld: pod("web-0", podsetv1alpha1.GroupVersion.String(), "PodSet", "web"),
		ObjectNew: pod("web-0", podsetv1alpha1.GroupVersion.String(), "PodSet", "web"),
	}, q)
	if q.Len() != 0 {
		t.Fatalf("right after a pass a pod event enqueued %d requests at once, want them held back", q.Len())
	}
	start := time.Now()
	got, _ := q.Get() // the AddAfter fires after what is left of the spacing
	if got != web {
		t.Fatalf("enqueued %v, want %v", got, web)
	}
	if waited := time.Since(start); waited < PodEventSpacing/2 {
		t.Errorf("the held-back request came after %v, want about %v", waited, PodEventSpacing)
	}
	q.Done(web)
	if q.Len() != 0 {
		t.Errorf("an update whose old and new pod have one owner left %d more requests, want none", q.Len())
	}

	// A pod whose gate is closed is on its way to a stop or a restart:
	// its kubelet's reports are on its critical path, never held back.
	r.memory.passEnded(web.NamespacedName)
	draining := pod("web-0", podsetv1alpha1.GroupVersion.String(), "PodSet", "web").(*corev1.Pod)
	draining.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	draining.Status.Conditions = []corev1.PodCondition{{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse}}
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: draining, ObjectNew: draining}, q)
	if q.Len() != 1 {
		t.Fatalf("right after a pass an update of a draining pod enqueued %d requests at once, want 1", q.Len())
	}
}
