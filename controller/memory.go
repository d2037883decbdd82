package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// memory is everything the operator keeps of each PodSet between passes:
// one record per PodSet, behind one lock, read with one clock. A record is
// made by the PodSet's first pass, starts afresh when the name comes back
// with a new UID, and is dropped once the PodSet is gone (with the
// PodSet's metric series: PodSetReconciler.forget).
//
// It is memory, not state: an operator restart loses all of it, which
// costs requests and a rollout's timing, never correctness. What a pass
// must not lose lives on the objects (pods' labels and conditions, the
// PodSet's status).
type memory struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	records map[types.NamespacedName]*record
}

// record is what the operator remembers of one PodSet.
type record struct {
	// uid is the PodSet's: a new one starts a new record.
	uid types.UID
	// writes are the pod writes the cache has not shown yet, by pod name
	// (expectations.go).
	writes map[string]expectation
	// status is the last status write (statuswrites.go).
	status statusWrite
	// held is what the pods the partition holds back ran (podset.Held).
	held podset.Held
	// drains is when the pods whose gate is closed were first seen not
	// Ready (podset.Drains).
	drains podset.Drains
	// passEnded is when the last pass ended (spacing.go).
	passEnded time.Time
	// shown is the status clients see, as the last pass left it, for the
	// metrics; nil before the first pass publishes one (metrics.go).
	shown *shownStatus
	// rollout is the spec generation being rolled out, and since when.
	rollout *rollout
}

func newMemory(c clock.PassiveClock) *memory {
	return &memory{clock: c, records: map[types.NamespacedName]*record{}}
}

// recordOf is the record of a PodSet, made if it has none. The caller
// holds m.mu.
func (m *memory) recordOf(key types.NamespacedName) *record {
	r, ok := m.records[key]
	if !ok {
		r = &record{}
		m.records[key] = r
	}
	return r
}

// begin starts a pass over a PodSet: a PodSet deleted and created again
// under its name (a new UID) starts from a new record.
func (m *memory) begin(ps *podsetv1alpha1.PodSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recordOf(keyOf(ps))
	if r.uid != ps.UID {
		*r = record{uid: ps.UID}
	}
}

// forget drops everything remembered of a PodSet that is gone.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.records, key)
	m.mu.Unlock()
}

// observeHeld records what the pods the partition holds back run now and
// returns what is remembered of them (podset.Held).
func (m *memory) observeHeld(key types.NamespacedName, v *podset.View) podset.Held {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recordOf(key)
	r.held = r.held.Observe(v)
	return r.held
}

// movedEndpoints records that a draining pod left Ready at at (left), or
// went back into it (podset.Drains.Moved).
func (m *memory) movedEndpoints(key types.NamespacedName, uid types.UID, left bool, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recordOf(key)
	r.drains = r.drains.Moved(uid, left, at)
}

// observeDrains records the pods of v that drain, first seen at at, and
// returns when each was first seen (podset.Drains).
func (m *memory) observeDrains(key types.NamespacedName, v *podset.View, at time.Time) podset.Drains {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recordOf(key)
	r.drains = r.drains.Observe(v, at)
	return r.drains
}
