package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// PodEventSpacing is the least time between the end of a pass over a
// PodSet and a next pass that its pods' events start. A pass reads all of
// a PodSet's pods, so while a thousand of them start, one pass per
// PodEventSpacing sees every event that arrived meanwhile, instead of one
// pass per event, whose CPU the operator would take from the API server
// (docs/benchmarks.md, "The CPU column"). The first pod event after a
// quiet spell starts a pass at once, and changes of the PodSet itself (its
// spec) are never held back.
const PodEventSpacing = 100 * time.Millisecond

// passEnded records the end of a pass over key.
func (m *memory) passEnded(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recordOf(key).passEnded = m.clock.Now()
}

// passWait is how long a pod event must wait before the pass it starts
// over key: what is left of PodEventSpacing since the last pass ended.
func (m *memory) passWait(key types.NamespacedName) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[key]
	if !ok || r.passEnded.IsZero() {
		return 0
	}
	return max(0, r.passEnded.Add(PodEventSpacing).Sub(m.clock.Now()))
}

// podEvents enqueues the PodSet that controls a pod, as
// handler.EnqueueRequestForOwner with OnlyControllerOwner does (both the old
// and the new owner of an update), after what memory.passWait says;
// at once for an update of a pod whose gate is closed: it is on its way
// to being stopped or restarted, and the pass its kubelet's report starts
// (the pod not Ready, its containers restarted) is on the pod's critical
// path, which a rolling window waits for.
func (r *PodSetReconciler) podEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	add := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		pod, ok := obj.(*corev1.Pod)
		urgent := ok && podset.Draining(pod)
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || ref.Kind != "PodSet" {
			return
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != podsetv1alpha1.GroupVersion.Group {
			return
		}
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}
		if d := r.memory.passWait(req.NamespacedName); d > 0 && !urgent {
			q.AddAfter(req, d)
		} else {
			q.Add(req)
		}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) { add(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			r.observeEndpoints(e.ObjectOld, e.ObjectNew)
			add(e.ObjectOld, q)
			add(e.ObjectNew, q)
		},
		DeleteFunc:  func(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) { add(e.Object, q) },
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) { add(e.Object, q) },
	}
}

// observeEndpoints records, from every update of a pod whose gate is
// closed, when it left Ready (and so Service endpoints) or went back: a
// drain counts from the last time the pod left. The handler sees each
// update, where a pass reads the cache as it is when the pass runs and
// may miss a pod that was Ready again for a moment (a kubelet that has
// not seen the closed gate yet writes back the Ready it had).
func (r *PodSetReconciler) observeEndpoints(oldObj, newObj client.Object) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	ref := metav1.GetControllerOfNoCopy(newObj)
	if !ok1 || !ok2 || ref == nil || ref.Kind != "PodSet" || !podset.Draining(cur) {
		return
	}
	key := types.NamespacedName{Namespace: cur.Namespace, Name: ref.Name}
	if left, back := podset.EndpointsMove(old, cur); left || back {
		r.memory.movedEndpoints(key, cur.UID, left, r.Clock.Now())
	}
}
