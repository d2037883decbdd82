package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// kinds selects what an observer watches.
type kinds int

const (
	kindPods kinds = 1 << iota
	kindPodSets
	kindReplicaSets
	kindDeployments
	kindStatefulSets
)

// podState is what the benchmark needs to know of a pod.
type podState struct {
	ns, name, set, rev string
	ready              bool
	terminating        bool
	added              time.Time // when its ADDED event arrived (zero for the initial list)
	// image is the spec image of its first container; staleImage means a
	// container's status reports an image other than its spec's (a
	// container not reported yet is not stale).
	image      string
	staleImage bool
	// readyReason is the reason of its Ready condition; restarts is the
	// sum of its containers' restart counts.
	readyReason string
	restarts    int32
	// When the pod last left Ready, became Ready, changed its spec image
	// and came to run its spec image as far as its status says.
	unreadyAt, readyAt, imageAt, runsAt time.Time
}

// setState is what the benchmark needs to know of a PodSet, ReplicaSet,
// Deployment or StatefulSet.
type setState struct {
	generation, observed int64
	statusReplicas       int32
	ready, updated       int32
	readyCondition       bool // PodSet only: the Ready condition is True
}

// done reports whether the workload has caught up with its spec: the spec's
// generation observed and n pods ready.
func (s setState) done(n int32) bool {
	return s.observed >= s.generation && s.generation > 0 && s.ready == n
}

// complete reports whether a workload runs n ready pods of the template of
// its current generation and no others.
func (s setState) complete(n int32) bool {
	return s.done(n) && s.updated == n && s.statusReplicas == n
}

// rolledOut is complete for generation 2 or later: the rollout scenario
// changes the template of a generation-1 object once.
func (s setState) rolledOut(n int32) bool { return s.generation >= 2 && s.complete(n) }

// state is the observer's view, keyed by namespace/name.
type state struct {
	pods        map[string]*podState
	gone        map[types.UID]bool // the UIDs of deleted pods
	podsets     map[string]setState
	replicasets map[string]setState
	deployments map[string]setState
	sts         map[string]setState
}

// tracing logs every event the observers see (BENCH_TRACE=1).
var tracing = os.Getenv("BENCH_TRACE") != ""

// observer watches the benchmark's namespaces and wakes waiters on every
// event: convergence is detected by watches, never by polling.
type observer struct {
	mu     sync.Mutex
	st     state
	wake   chan struct{}
	cache  cache.Cache
	cancel context.CancelFunc
}

// newObserver starts watching the given kinds in the given namespaces and
// returns once the initial lists are in.
func newObserver(ctx context.Context, c *cluster, namespaces []string, what kinds) (*observer, error) {
	cc, err := cache.New(c.cfg, cache.Options{
		Scheme:            c.scheme,
		DefaultNamespaces: namespaceCaches(namespaces),
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	o := &observer{
		st: state{
			pods:        map[string]*podState{},
			gone:        map[types.UID]bool{},
			podsets:     map[string]setState{},
			replicasets: map[string]setState{},
			deployments: map[string]setState{},
			sts:         map[string]setState{},
		},
		wake:  make(chan struct{}),
		cache: cc,
	}
	cctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	go func() { _ = cc.Start(cctx) }()

	type watched struct {
		k   kinds
		obj client.Object
	}
	for _, w := range []watched{
		{kindPods, &corev1.Pod{}}, {kindPodSets, &podsetv1alpha1.PodSet{}},
		{kindReplicaSets, &appsv1.ReplicaSet{}}, {kindDeployments, &appsv1.Deployment{}},
		{kindStatefulSets, &appsv1.StatefulSet{}},
	} {
		if what&w.k == 0 {
			continue
		}
		inf, err := cc.GetInformer(ctx, w.obj)
		if err != nil {
			cancel()
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { o.update(obj, false, initial) },
			UpdateFunc: func(_, obj any) { o.update(obj, false, true) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				o.update(obj, true, true)
			},
		}); err != nil {
			cancel()
			return nil, err
		}
	}
	if !cc.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the observer's caches did not sync")
	}
	return o, nil
}

func (o *observer) stop() { o.cancel() }

// namespaceCaches has a cache of its own for each namespace.
func namespaceCaches(namespaces []string) map[string]cache.Config {
	m := map[string]cache.Config{}
	for _, ns := range namespaces {
		m[ns] = cache.Config{}
	}
	return m
}

// update records one event and wakes the waiters. initial is true for
// updates and for adds from the initial list, which carry no ADDED time.
func (o *observer) update(obj any, deleted, initial bool) {
	now := time.Now()
	o.mu.Lock()
	defer func() {
		close(o.wake)
		o.wake = make(chan struct{})
		o.mu.Unlock()
	}()
	mo, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := mo.GetNamespace() + "/" + mo.GetName()
	switch obj := obj.(type) {
	case *corev1.Pod:
		o.updatePod(obj, key, now, deleted, initial)
	case *podsetv1alpha1.PodSet:
		if tracing {
			logf("trace podset %s gen=%d observed=%d replicas=%d ready=%d updated=%d", key, obj.Generation, obj.Status.ObservedGeneration, obj.Status.Replicas, obj.Status.ReadyReplicas, obj.Status.UpdatedReplicas)
		}
		st := workloadState(obj.Generation, obj.Status.ObservedGeneration, obj.Status.Replicas, obj.Status.ReadyReplicas, obj.Status.UpdatedReplicas)
		ready := meta.FindStatusCondition(obj.Status.Conditions, podsetv1alpha1.ReadyCondition)
		st.readyCondition = ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == obj.Generation
		putSet(o.st.podsets, key, deleted, st)
	case *appsv1.ReplicaSet:
		// A ReplicaSet's pods are all of its one template.
		putSet(o.st.replicasets, key, deleted, workloadState(obj.Generation, obj.Status.ObservedGeneration, obj.Status.Replicas, obj.Status.ReadyReplicas, obj.Status.Replicas))
	case *appsv1.Deployment:
		putSet(o.st.deployments, key, deleted, workloadState(obj.Generation, obj.Status.ObservedGeneration, obj.Status.Replicas, obj.Status.ReadyReplicas, obj.Status.UpdatedReplicas))
	case *appsv1.StatefulSet:
		putSet(o.st.sts, key, deleted, workloadState(obj.Generation, obj.Status.ObservedGeneration, obj.Status.Replicas, obj.Status.ReadyReplicas, obj.Status.UpdatedReplicas))
	}
}

// updatePod records a pod's event, under o.mu: the pod's state, and when it
// was added, left or came back into Ready, changed its image, and ran it.
func (o *observer) updatePod(obj *corev1.Pod, key string, now time.Time, deleted, initial bool) {
	if tracing {
		gate := "none"
		for _, c := range obj.Status.Conditions {
			if c.Type == podsetv1alpha1.InPlaceUpdateReadyCondition {
				gate = string(c.Status)
			}
		}
		logf("trace pod %s deleted=%v node=%s phase=%s ready=%v gate=%s terminating=%v image=%s stale=%v rv=%s", key, deleted, obj.Spec.NodeName, obj.Status.Phase, testenv.PodReady(obj), gate, obj.DeletionTimestamp != nil, specImage(obj), staleImage(obj), obj.ResourceVersion)
	}
	if deleted {
		delete(o.st.pods, key)
		o.st.gone[obj.UID] = true
		return
	}
	p := o.st.pods[key]
	if p == nil {
		p = &podState{ns: obj.Namespace, name: obj.Name}
		if !initial {
			p.added = now
		}
		o.st.pods[key] = p
	}
	was := *p
	p.set, p.rev = obj.Labels[setLabel], obj.Labels[revLabel]
	p.image, p.staleImage = specImage(obj), staleImage(obj)
	p.ready = obj.Status.Phase == corev1.PodRunning && testenv.PodReady(obj)
	p.terminating = obj.DeletionTimestamp != nil
	p.readyReason, p.restarts = "", 0
	for _, c := range obj.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.readyReason = c.Reason
		}
	}
	for _, c := range obj.Status.ContainerStatuses {
		p.restarts += c.RestartCount
	}
	switch {
	case was.ready && !p.ready:
		p.unreadyAt = now
	case !was.ready && p.ready:
		p.readyAt = now
	}
	if p.image != was.image {
		p.imageAt = now
	}
	if !p.staleImage && (was.staleImage || p.image != was.image) {
		p.runsAt = now
	}
}

// putSet records the state of a set, or forgets a deleted one.
func putSet(sets map[string]setState, key string, deleted bool, s setState) {
	if deleted {
		delete(sets, key)
		return
	}
	sets[key] = s
}

// workloadState is the state of a built-in workload, from its generations
// and status counts.
func workloadState(generation, observed int64, statusReplicas, ready, updated int32) setState {
	return setState{generation: generation, observed: observed, statusReplicas: statusReplicas, ready: ready, updated: updated}
}

// waitFor blocks until cond holds, re-checking it after every event, or
// until ctx ends.
func (o *observer) waitFor(ctx context.Context, what string, cond func(*state) bool) error {
	for {
		o.mu.Lock()
		ok := cond(&o.st)
		wake := o.wake
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, errTimeout)
		}
	}
}

// read runs f on the current state.
func (o *observer) read(f func(*state)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(&o.st)
}

// firstAddAfter is the earliest ADDED event of a pod in ns after t, zero
// for none.
func (s *state) firstAddAfter(ns string, t time.Time) time.Time {
	var first time.Time
	for _, p := range s.pods {
		if p.ns == ns && p.added.After(t) && (first.IsZero() || p.added.Before(first)) {
			first = p.added
		}
	}
	return first
}

// specImage is the image of a pod's first container.
func specImage(pod *corev1.Pod) string {
	if len(pod.Spec.Containers) == 0 {
		return ""
	}
	return pod.Spec.Containers[0].Image
}

// staleImage reports whether a container's status names an image other
// than its spec's: the pod does not run its spec yet. A container the
// status does not list yet is not stale, so a pod whose status never
// reports images is judged by its spec and readiness alone.
func staleImage(pod *corev1.Pod) bool {
	for _, st := range pod.Status.ContainerStatuses {
		for _, c := range pod.Spec.Containers {
			if c.Name == st.Name && !sameImage(st.Image, c.Image) {
				return true
			}
		}
	}
	return false
}

// sameImage compares a status image with a spec image: kwok reports the
// spec's reference as it is, a container runtime the fully qualified one
// (docker.io/library/busybox:1.37 for busybox:1.37).
func sameImage(status, spec string) bool {
	return status == spec || status == "docker.io/library/"+spec || status == "docker.io/"+spec
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
