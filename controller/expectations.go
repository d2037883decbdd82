package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a write may go unseen by the cache before
// the operator stops waiting for it (a lost watch event must not wedge a
// PodSet).
const expectationTTL = time.Minute

// expectations remembers the pod writes of each PodSet that the cache has
// not shown yet. Until it does, a pass leaves those pod names alone, so that
// a cache a moment behind never makes the operator create or delete a pod
// twice. It is the ReplicaSet controller's idea, keyed by pod name.
type expectations struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]map[string]expectation
	now     func() time.Time
}

type expectation struct {
	// uid is the pod the cache must show (created) or stop showing as live
	// (deleted).
	uid     types.UID
	deleted bool
	at      time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{pending: map[types.NamespacedName]map[string]expectation{}, now: now}
}

// expectCreated records that the pod name now has the given UID.
func (e *expectations) expectCreated(podSet types.NamespacedName, name string, uid types.UID) {
	e.set(podSet, name, expectation{uid: uid})
}

// expectDeleted records that the pod with the given UID is being deleted.
func (e *expectations) expectDeleted(podSet types.NamespacedName, name string, uid types.UID) {
	e.set(podSet, name, expectation{uid: uid, deleted: true})
}

func (e *expectations) set(podSet types.NamespacedName, name string, exp expectation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[podSet] == nil {
		e.pending[podSet] = map[string]expectation{}
	}
	exp.at = e.now()
	e.pending[podSet][name] = exp
}

// observe drops the expectations the cache's pods satisfy (or that expired)
// and returns whether a pod name still has a write in flight.
func (e *expectations) observe(podSet types.NamespacedName, pods []corev1.Pod) func(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	pending := e.pending[podSet]
	if len(pending) == 0 {
		return func(string) bool { return false }
	}
	seen := make(map[string]*corev1.Pod, len(pods))
	for i := range pods {
		seen[pods[i].Name] = &pods[i]
	}
	now := e.now()
	for name, exp := range pending {
		pod := seen[name]
		var satisfied bool
		if exp.deleted {
			satisfied = pod == nil || pod.UID != exp.uid || pod.DeletionTimestamp != nil
		} else {
			satisfied = pod != nil && pod.UID == exp.uid
		}
		if satisfied || now.Sub(exp.at) > expectationTTL {
			delete(pending, name)
		}
	}
	if len(pending) == 0 {
		delete(e.pending, podSet)
		return func(string) bool { return false }
	}
	inFlight := make(map[string]bool, len(pending))
	for name := range pending {
		inFlight[name] = true
	}
	return func(name string) bool { return inFlight[name] }
}

// forget drops every expectation of a PodSet that is gone.
func (e *expectations) forget(podSet types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, podSet)
}
