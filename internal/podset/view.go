package podset

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// View is a PodSet's pods as one pass sees them, sorted once: by ordinal
// slot, controlled or foreign, live or terminating, surplus or stray, with
// the revision each runs and whether it is Ready and available. The plan
// (View.Plan), the revisions to keep (View.PlanRevisions), what the
// partition holds back (Held.Observe), the status (View.Status) and the
// wake-up time (View.WakeAfter) are all read off it, as StatefulSet's
// control loop reads its actions and status off one sort into ordinal
// slots.
type View struct {
	// PodSet is the PodSet, with the status clients see.
	PodSet *podsetv1alpha1.PodSet
	// Revs are its revisions.
	Revs *Revisions
	// Now is the pass's one clock, to the nanosecond: which Ready pods
	// are available (minReadySeconds), where drains and deadlines stand
	// and when to look again are measured against it. The status records
	// it in whole seconds, as the API server stores times (View.stamp).
	Now time.Time
	// Nodes is what the pass knows of lost nodes; set it after NewView,
	// for a PodSet with spec.lostNodeReplacement only.
	Nodes Nodes

	// Start is the ordinal of Slots[0]: spec.ordinals.start.
	Start int
	// Slots holds, for each wanted ordinal (Start+i at index i, up to
	// start+replicas-1), the pod that holds its name (controlled, foreign
	// or terminating), or nil.
	Slots []*Member
	// Controlled lists every pod the PodSet controls, live or terminating,
	// in the order the cache listed them.
	Controlled []*Member
	// Surplus lists the live controlled pods outside the wanted ordinals
	// (below start, or at or above start+replicas), or without an ordinal,
	// highest ordinal first: they are pruned.
	Surplus []*Member
	// Conflicts lists the wanted names that pods the PodSet does
	// not control hold. Those pods are never modified or deleted.
	Conflicts []string
	// Strays lists the pods that carry the PodSet's name label but are not
	// controlled by it and hold no name it needs. They are neither counted
	// nor touched.
	Strays []string
}

// Member is one pod of a View.
type Member struct {
	Pod *corev1.Pod
	// Ordinal is the pod's ordinal, or MaxReplicas for a name that has
	// none, so that such pods sort above every real ordinal.
	Ordinal    int
	HasOrdinal bool
	// Controlled: the PodSet is the pod's controller.
	Controlled bool
	// Terminating: the pod has a deletion timestamp.
	Terminating bool
	// Hash is the template hash of the revision the pod runs.
	Hash string
	// Ready: running and Ready, its readiness gate not closed (podReady).
	Ready bool
	// Available: Ready for minReadySeconds at the view's time.
	Available bool
}

// NewView sorts a PodSet's pods, as the cache shows them, into a View.
func NewView(ps *podsetv1alpha1.PodSet, revs *Revisions, pods []corev1.Pod, now time.Time) *View {
	start, replicas := Start(ps), int(Replicas(ps))
	minReady := minReadySeconds(ps)
	v := &View{PodSet: ps, Revs: revs, Now: now, Start: start, Slots: make([]*Member, replicas)}
	members := make([]Member, len(pods))
	for i := range pods {
		pod := &pods[i]
		ordinal, ok := PodOrdinal(ps.Name, pod.Name)
		m := &members[i]
		*m = Member{
			Pod: pod, Ordinal: ordinalOr(ordinal, ok), HasOrdinal: ok,
			Controlled:  metav1.IsControlledBy(pod, ps),
			Terminating: pod.DeletionTimestamp != nil,
			Hash:        pod.Labels[podsetv1alpha1.TemplateHashLabel],
		}
		wanted := ok && ordinal >= start && ordinal < start+replicas
		if !m.Controlled {
			if wanted {
				v.Conflicts = append(v.Conflicts, pod.Name)
				v.Slots[ordinal-start] = m
			} else {
				v.Strays = append(v.Strays, pod.Name)
			}
			continue
		}
		m.Ready = podReady(pod)
		m.Available = m.Ready && podAvailable(pod, minReady, now)
		v.Controlled = append(v.Controlled, m)
		switch {
		case wanted:
			v.Slots[ordinal-start] = m
		case !m.Terminating:
			v.Surplus = append(v.Surplus, m)
		}
	}
	slices.SortFunc(v.Surplus, func(a, b *Member) int { return cmp.Compare(b.Ordinal, a.Ordinal) })
	return v
}

// live reports a controlled pod that is not terminating.
func (m *Member) live() bool { return m.Controlled && !m.Terminating }

// stamp is Now as the status records it: in whole seconds, as the API
// server stores times, so that a status written is read back equal and
// a pass with nothing new sends nothing.
func (v *View) stamp() metav1.Time { return metav1.NewTime(v.Now).Rfc3339Copy() }
