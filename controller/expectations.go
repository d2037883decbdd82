package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a deletion may go unseen by the cache
// before the operator stops waiting for it (a lost watch event must not
// wedge a PodSet).
const expectationTTL = time.Minute

// expectations remembers the pod deletions of each PodSet that the cache has
// not shown yet. Until it does, a pass leaves those pods alone and counts
// them as unavailable: a cache a moment behind would otherwise show a
// deleted pod as still running, and a rollout would take more pods than
// maxUnavailable allows, or delete the same pod twice. It is the ReplicaSet
// controller's idea, keyed by pod name.
//
// Creations need no expectations: a pod missing from the cache is checked on
// the API server before it is created (see createPods), which finds a pod
// the cache has not caught up with.
type expectations struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]map[string]expectation
	now     func() time.Time
}

// expectation is one pod deletion the cache has not shown yet.
type expectation struct {
	uid types.UID
	at  time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{pending: map[types.NamespacedName]map[string]expectation{}, now: now}
}

// expectDeleted records that the pod with the given UID is being deleted.
func (e *expectations) expectDeleted(podSet types.NamespacedName, name string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[podSet] == nil {
		e.pending[podSet] = map[string]expectation{}
	}
	e.pending[podSet][name] = expectation{uid: uid, at: e.now()}
}

// observe drops the expectations the cache's pods satisfy (the pod is gone,
// terminating, or replaced by another UID) or that expired, and returns
// whether a pod name still has a deletion in flight.
func (e *expectations) observe(podSet types.NamespacedName, pods []corev1.Pod) func(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	pending := e.pending[podSet]
	if len(pending) == 0 {
		return func(string) bool { return false }
	}
	live := make(map[string]types.UID, len(pods))
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			live[pods[i].Name] = pods[i].UID
		}
	}
	now := e.now()
	inFlight := map[string]bool{}
	for name, exp := range pending {
		if live[name] != exp.uid || now.Sub(exp.at) > expectationTTL {
			delete(pending, name)
			continue
		}
		inFlight[name] = true
	}
	if len(pending) == 0 {
		delete(e.pending, podSet)
	}
	return func(name string) bool { return inFlight[name] }
}

// forget drops every expectation of a PodSet that is gone.
func (e *expectations) forget(podSet types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, podSet)
}
