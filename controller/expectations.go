package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// expectationTTL bounds how long a deletion may go unseen by the cache
// before the operator stops waiting for it (a lost watch event must not
// wedge a PodSet).
const expectationTTL = time.Minute

// createTTL bounds how long a creation may go unseen by the cache. It is
// short: a pod whose label is removed before the cache sees it never shows
// up there, and once the wait is over the next create of the name finds
// the pod (a conflict) and restores it. Waiting only saves requests; the
// createOnly precondition, not the wait, is what keeps a name from being
// created twice.
const createTTL = 5 * time.Second

// Expectations: the operator remembers the pod writes of each PodSet that
// the cache has not shown yet. Until it does, a pass leaves those names alone: a cache a
// moment behind would otherwise show a deleted pod as still running (and a
// rollout would take more pods than maxUnavailable allows, or delete the
// same pod twice), or a created pod as missing (and the pass would send a
// create that can only fail). It is the ReplicaSet controller's idea, keyed
// by pod name. The writes in flight are kept in each PodSet's record of
// the operator's memory.

// expectation is one pod write the cache has not shown yet.
type expectation struct {
	// uid is the pod's: the deleted one, or the one created.
	uid     types.UID
	created bool
	// resourceVersion, for an update of an existing pod, is the pod's
	// after the write: the cache has shown it once it shows that or later.
	resourceVersion string
	// gateOpening, for a creation, is set while the new pod's gate is
	// being opened (openGate): the cache cannot show that write yet.
	gateOpening bool
	at          time.Time
}

// expectDeleted records that the pod with the given UID is being deleted.
func (m *memory) expectDeleted(podSet types.NamespacedName, name string, uid types.UID) {
	m.expect(podSet, name, expectation{uid: uid})
}

// expectCreated records that a pod was created under the given name.
func (m *memory) expectCreated(podSet types.NamespacedName, name string, uid types.UID) {
	m.expect(podSet, name, expectation{uid: uid, created: true})
}

// expectGateOpening records that the pod created under the given name is
// having its readiness gate opened: it is in flight until gateOpened or
// gateNotOpened, or createTTL.
func (m *memory) expectGateOpening(podSet types.NamespacedName, name string, uid types.UID) {
	m.expect(podSet, name, expectation{uid: uid, created: true, gateOpening: true})
}

// gateOpened records that the gate of a pod just created opened, the pod
// now at resourceVersion, unless what was expected of the pod has been
// dropped since (its PodSet forgotten or made anew, the wait expired).
func (m *memory) gateOpened(podSet types.NamespacedName, name string, uid types.UID, resourceVersion string) {
	m.replaceGateOpening(podSet, name, uid, expectation{uid: uid, created: true, resourceVersion: resourceVersion})
}

// gateNotOpened records that the gate of a pod just created did not open:
// the pod is then expected as created only, and the next pass that sees
// it opens its gate.
func (m *memory) gateNotOpened(podSet types.NamespacedName, name string, uid types.UID) {
	m.replaceGateOpening(podSet, name, uid, expectation{uid: uid, created: true})
}

func (m *memory) replaceGateOpening(podSet types.NamespacedName, name string, uid types.UID, exp expectation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[podSet]
	if !ok {
		return
	}
	if old, ok := r.writes[name]; !ok || !old.gateOpening || old.uid != uid {
		return
	}
	exp.at = m.clock.Now()
	r.writes[name] = exp
}

// expectUpdated records that the pod with the given UID was written in
// place (its gate, its spec, its resize) and is at resourceVersion now.
func (m *memory) expectUpdated(podSet types.NamespacedName, name string, uid types.UID, resourceVersion string) {
	m.expect(podSet, name, expectation{uid: uid, resourceVersion: resourceVersion})
}

func (m *memory) expect(podSet types.NamespacedName, name string, exp expectation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recordOf(podSet)
	if r.writes == nil {
		r.writes = map[string]expectation{}
	}
	exp.at = m.clock.Now()
	r.writes[name] = exp
}

// inFlight drops the expectations the cache's pods satisfy or that expired,
// and returns whether a pod name still has a write in flight.
//
// A deletion is satisfied once the cache shows the pod gone, terminating,
// or replaced by another UID; a creation once the cache shows any pod
// under the name; an update once it shows the pod at the version written
// or a later one, or the pod gone.
func (m *memory) inFlight(podSet types.NamespacedName, pods []corev1.Pod) func(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pending := m.recordOf(podSet).writes
	if len(pending) == 0 {
		return func(string) bool { return false }
	}
	live := make(map[string]types.UID, len(pods))
	seen := make(map[string]bool, len(pods))
	versions := make(map[string]string, len(pods))
	for i := range pods {
		seen[pods[i].Name] = true
		if pods[i].DeletionTimestamp == nil {
			live[pods[i].Name] = pods[i].UID
			versions[pods[i].Name] = pods[i].ResourceVersion
		}
	}
	now := m.clock.Now()
	inFlight := map[string]bool{}
	for name, exp := range pending {
		ttl, satisfied := expectationTTL, live[name] != exp.uid
		switch {
		case exp.created:
			ttl, satisfied = createTTL, !exp.gateOpening && seen[name] && (exp.resourceVersion == "" || live[name] != exp.uid || atLeast(versions[name], exp.resourceVersion))
		case !satisfied && exp.resourceVersion != "":
			satisfied = atLeast(versions[name], exp.resourceVersion)
		}
		if satisfied || now.Sub(exp.at) > ttl {
			delete(pending, name)
			continue
		}
		inFlight[name] = true
	}
	return func(name string) bool { return inFlight[name] }
}

// atLeast reports whether resourceVersion a is b or later; one that does
// not parse counts as later, so that it never holds a pod back.
func atLeast(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || cmp >= 0
}

// recheck is how long until the first creation of a PodSet that the cache
// has not shown yet expires, or 0 if none is pending. A creation the cache
// never shows raises no event, so the PodSet must be looked at again then.
func (m *memory) recheck(podSet types.NamespacedName) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var soonest time.Duration
	for _, exp := range m.recordOf(podSet).writes {
		if !exp.created {
			continue
		}
		left := max(createTTL-now.Sub(exp.at), 0) + time.Millisecond
		if soonest == 0 || left < soonest {
			soonest = left
		}
	}
	return soonest
}
