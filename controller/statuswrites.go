package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// StatusInterval is the least time between two status writes of a PodSet
// that do not change a verdict (see significantChange). A PodSet's first
// status write waits for it too: a PodSet that becomes Ready within it costs
// one status write, not two.
const StatusInterval = time.Second

// The operator remembers, for each PodSet, when its status was last written
// and, until the cache shows that write, what was written.
//
// The PodSet in the cache can lag behind the operator's own status write,
// and status writes raise no event the operator watches (generation
// changes only). A pass that compared against the lagging cache could find
// "nothing to write" while the write just sent, already out of date, was
// still on its way to the cache, and that stale status would stay: the
// stuck "3 pods, ScalingDown" after a scale-down that the soak found. So a
// pass compares against the last write until the cache has caught up.
// statusWrite is the last status write of one PodSet.
type statusWrite struct {
	at time.Time
	// resourceVersion is the PodSet's after the write, and status what was
	// written; status is nil once the cache shows the write.
	resourceVersion string
	status          *podsetv1alpha1.PodSetStatus
}

// shownStatus is the status clients see now: the PodSet's, or, while the cache has
// not caught up with the operator's last write, what that write set.
func (m *memory) shownStatus(key types.NamespacedName, ps *podsetv1alpha1.PodSet) podsetv1alpha1.PodSetStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := &m.recordOf(key).status
	if last.status == nil {
		return ps.Status
	}
	if cmp, err := resourceversion.CompareResourceVersion(ps.ResourceVersion, last.resourceVersion); err == nil && cmp < 0 {
		return *last.status
	}
	// The cache has caught up (or the versions do not compare, and the
	// cache is all there is to go by).
	last.status = nil
	return ps.Status
}

// statusWait is how long until the PodSet's status may be written again.
// The first time a PodSet is asked about starts its interval.
func (m *memory) statusWait(key types.NamespacedName) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, now := &m.recordOf(key).status, m.clock.Now()
	if last.at.IsZero() {
		last.at = now
		return StatusInterval
	}
	return max(0, StatusInterval-now.Sub(last.at))
}

// wroteStatus records a status write and the PodSet's resourceVersion
// after it.
func (m *memory) wroteStatus(key types.NamespacedName, resourceVersion string, status podsetv1alpha1.PodSetStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recordOf(key).status = statusWrite{at: m.clock.Now(), resourceVersion: resourceVersion, status: &status}
}
