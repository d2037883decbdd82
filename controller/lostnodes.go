package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// spec.lostNodeReplacement: the operator watches nodes (slimmed to their
// Ready condition and lost-node taints, podset.SlimNode), a pass of a
// PodSet with the field reads the nodes its pods run on from the cache, and
// a node turning lost or found brings a pass of every such PodSet with pods
// on it. The decision is the pure core's (podset.View.Plan); the force
// deletions go through deletePod.

// byNode is the cache index of pods by spec.nodeName.
const byNode = "spec.nodeName"

// podNode is the byNode index function.
func podNode(o client.Object) []string {
	if pod, ok := o.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}
	}
	return nil
}

// nodeReachabilityChanged passes the node updates that change whether a
// node is lost or since when (podset.NodeLostSince): its Ready condition
// or the unreachable taint. A node's heartbeats are dropped. New nodes are
// not lost yet, and the pods of a deleted node are the pod garbage
// collector's, which deletes them.
var nodeReachabilityChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okNew := e.ObjectNew.(*corev1.Node)
		if !okOld || !okNew {
			return true
		}
		oldSince, oldLost := podset.NodeLostSince(old)
		curSince, curLost := podset.NodeLostSince(cur)
		return oldLost != curLost || !oldSince.Equal(curSince)
	},
}

// podSetsOnNode maps a node to the PodSets with spec.lostNodeReplacement
// that have pods on it, from the cache.
func (r *PodSetReconciler) podSetsOnNode() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, node client.Object) []reconcile.Request {
		pods := &corev1.PodList{}
		if err := r.Client.List(ctx, pods, client.MatchingFields{byNode: node.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		keys := map[types.NamespacedName]bool{}
		for i := range pods.Items {
			name := pods.Items[i].Labels[podsetv1alpha1.NameLabel]
			key := types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: name}
			if name == "" || keys[key] {
				continue
			}
			ps := &podsetv1alpha1.PodSet{}
			keys[key] = r.Client.Get(ctx, key, ps) == nil && ps.Spec.LostNodeReplacement != nil
		}
		var reqs []reconcile.Request
		for key, on := range keys {
			if on {
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
		return reqs
	})
}

// lostNodes reads from the cache what a pass of a PodSet with
// spec.lostNodeReplacement needs to know of nodes: which of its pods'
// nodes are lost and since when, and, only when one is, how many of the
// cluster's nodes are lost. A PodSet without the field reads no node.
func (r *PodSetReconciler) lostNodes(ctx context.Context, ps *podsetv1alpha1.PodSet, pods []corev1.Pod) (podset.Nodes, error) {
	var nodes podset.Nodes
	if ps.Spec.LostNodeReplacement == nil {
		return nodes, nil
	}
	seen := map[string]bool{}
	for i := range pods {
		name := pods[i].Spec.NodeName
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		node := &corev1.Node{}
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); {
		case apierrors.IsNotFound(err):
			continue // the pod garbage collector deletes the pods of a deleted node
		case err != nil:
			return nodes, fmt.Errorf("reading node %s: %w", name, err)
		}
		if since, lost := podset.NodeLostSince(node); lost {
			if nodes.Lost == nil {
				nodes.Lost = map[string]time.Time{}
			}
			nodes.Lost[name] = since
		}
	}
	if len(nodes.Lost) == 0 {
		return nodes, nil
	}
	all := &corev1.NodeList{}
	if err := r.Client.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
		return nodes, fmt.Errorf("listing nodes: %w", err)
	}
	nodes.Total = len(all.Items)
	for i := range all.Items {
		if _, lost := podset.NodeLostSince(&all.Items[i]); lost {
			nodes.LostInCluster++
		}
	}
	return nodes, nil
}

// forceDelete is how a pod of a lost node is deleted: at once, without
// waiting for its kubelet to confirm, which a lost node never does.
var forceDelete = client.GracePeriodSeconds(0)

// replaceLost force-deletes the plan's pods of lost nodes, each with its
// UID as a precondition, and returns those actually deleted, in the
// plan's order: the status counts them, and the events name them by node
// (record).
func (r *PodSetReconciler) replaceLost(ctx context.Context, ps *podsetv1alpha1.PodSet, due []*corev1.Pod, errs *[]error) []*corev1.Pod {
	if len(due) == 0 {
		return nil
	}
	var mu sync.Mutex
	deleted := map[string]bool{}
	err := parallel(len(due), r.Workers, func(i int) error {
		pod := due[i]
		err := r.deletePod(ctx, ps, pod, forceDelete)
		switch {
		case err == nil:
			mu.Lock()
			deleted[pod.Name] = true
			mu.Unlock()
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			return fmt.Errorf("force-deleting pod %s: %w", pod.Name, err)
		}
		return nil // gone already, or replaced since: not this pass's
	})
	if err != nil {
		*errs = append(*errs, err)
	}
	return slices.DeleteFunc(slices.Clone(due), func(pod *corev1.Pod) bool { return !deleted[pod.Name] })
}

// podNames is the names of pods.
func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, pod := range pods {
		names[i] = pod.Name
	}
	return names
}
