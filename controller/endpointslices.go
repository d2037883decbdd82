package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podset-dev/podset-operator/internal/podset"
)

// A pod the operator drains has left Ready, but it leaves Service
// endpoints only when the EndpointSlice controller writes its slices: a
// kube-controller-manager that is down or not leading (after an API
// server outage it leads again 15 to 20 seconds later) keeps a pod the
// kubelet reports not Ready in the slices that kube-proxy programs. So the
// drain also waits for the slices (podset.Input.Endpoints), and counts
// from the time the last slice dropped the pod. The operator watches
// EndpointSlices from its cache, slimmed to the pods they list as ready
// (SlimEndpointSlice), and keeps which pods are listed where.

// endpoints is which pods the EndpointSlices list as ready, and when each
// pod that was listed stopped being listed.
type endpoints struct {
	mu sync.Mutex
	// slices is the pods each slice lists as ready.
	slices map[types.NamespacedName][]podRef
	// listed is how many slices list each pod as ready.
	listed map[types.UID]int
	// left is when each pod stopped being listed, kept for
	// endpointsMemory.
	left map[types.UID]time.Time
	// pruned is when left was last swept of what it need not keep: at
	// most once a minute, not on every slice event.
	pruned time.Time
}

// endpointsMemory is how long endpoints remembers when a pod left the
// slices: longer than the longest drain (300 s) and its waits.
const endpointsMemory = 10 * time.Minute

func newEndpoints() *endpoints {
	return &endpoints{
		slices: map[types.NamespacedName][]podRef{},
		listed: map[types.UID]int{},
		left:   map[types.UID]time.Time{},
	}
}

// podRef is a pod an EndpointSlice lists.
type podRef struct {
	uid  types.UID
	name string
}

// set records that the slice now lists the pods ready (none: the slice is
// gone), at now, and returns the pods whose listing changed: listed for
// the first time, or no longer listed anywhere.
func (e *endpoints) set(slice types.NamespacedName, ready []podRef, now time.Time) []podRef {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.slices[slice]
	for _, p := range old {
		e.listed[p.uid]--
	}
	for _, p := range ready {
		e.listed[p.uid]++
	}
	var changed []podRef
	for _, p := range old {
		if e.listed[p.uid] <= 0 {
			delete(e.listed, p.uid)
			e.left[p.uid] = now
			changed = append(changed, p)
		}
	}
	for _, p := range ready {
		if e.listed[p.uid] == 1 && !slices.Contains(old, p) {
			delete(e.left, p.uid)
			changed = append(changed, p)
		}
	}
	if len(ready) == 0 {
		delete(e.slices, slice)
	} else {
		e.slices[slice] = ready
	}
	if now.Sub(e.pruned) >= time.Minute {
		e.pruned = now
		for uid, at := range e.left {
			if now.Sub(at) > endpointsMemory {
				delete(e.left, uid)
			}
		}
	}
	return changed
}

// state is what the slices say of the pods of uids: listed as ready by
// some slice, or when the last one stopped listing them.
func (e *endpoints) state(uids []types.UID) podset.Endpoints {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out podset.Endpoints
	for _, uid := range uids {
		var s podset.EndpointState
		if e.listed[uid] > 0 {
			s.Listed = true
		} else if at, ok := e.left[uid]; ok {
			s.Left = at
		} else {
			continue
		}
		if out == nil {
			out = podset.Endpoints{}
		}
		out[uid] = s
	}
	return out
}

// readyPods is the UIDs of the pods a slice lists as ready (a nil ready
// condition means ready, as kube-proxy reads it).
func readyPods(s *discoveryv1.EndpointSlice) []podRef {
	var pods []podRef
	for _, ep := range s.Endpoints {
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.TargetRef.UID == "" {
			continue
		}
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		pods = append(pods, podRef{uid: ep.TargetRef.UID, name: ep.TargetRef.Name})
	}
	return pods
}

// sliceEvents records each EndpointSlice's ready pods (endpoints) and
// queues the PodSets of the pods whose listing changed: a draining pod
// that left the slices moves its drain on.
func (r *PodSetReconciler) sliceEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	set := func(ctx context.Context, obj client.Object, gone bool, q queue) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		var ready []podRef
		if !gone {
			ready = readyPods(s)
		}
		changed := r.endpoints.set(client.ObjectKeyFromObject(s), ready, r.Clock.Now())
		if len(changed) == 0 {
			return
		}
		for _, p := range changed {
			pod := &corev1.Pod{}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: p.name}, pod); err != nil || pod.UID != p.uid {
				continue // not a pod of a PodSet (the cache holds only those), or gone
			}
			if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "PodSet" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}})
			}
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
			set(ctx, e.Object, false, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
			set(ctx, e.ObjectNew, false, q)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
			set(ctx, e.Object, true, q)
		},
	}
}

// SlimEndpointSlice is the cache's transform of EndpointSlices: of each,
// its name and the pods its endpoints point at with their ready
// condition; addresses, ports, hints, labels and the rest are dropped.
func SlimEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	slim := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		},
		AddressType: s.AddressType,
	}
	for _, ep := range s.Endpoints {
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			continue
		}
		slim.Endpoints = append(slim.Endpoints, discoveryv1.Endpoint{
			Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: ep.TargetRef.Name, UID: ep.TargetRef.UID},
		})
	}
	return slim, nil
}
