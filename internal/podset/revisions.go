package podset

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Template revisions are kept as StatefulSet keeps them: one
// ControllerRevision per template, owned by the PodSet, named
// "<podset>-<template hash>", numbered in the order the templates were
// introduced, and holding the template itself. Pods say which revision
// they run by their template-hash label. The revisions let a partitioned
// rollout recreate a held-back pod from the template it ran, and are what a
// rollback (kubectl podset rollout undo) applies.

// revisionData is what a ControllerRevision of a PodSet holds: a patch of
// the PodSet that restores the template, as StatefulSet's revisions hold
// one of the StatefulSet.
type revisionData struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// RevisionTemplate is the pod template a ControllerRevision of a PodSet
// holds: the one definition of the revision format, which the operator
// writes (newRevision) and reads, and the kubectl plugin reads.
func RevisionTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var data revisionData
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("decoding ControllerRevision %s: %w", cr.Name, err)
	}
	return &data.Spec.Template, nil
}

// RevisionSpec is the spec.template and spec.serviceName that give a
// revision's template back (PodTemplate's inverse), for a rollback: a
// template's subdomain is the serviceName it was made with.
func RevisionSpec(tmpl *corev1.PodTemplateSpec) (corev1.PodTemplateSpec, string) {
	out := *tmpl.DeepCopy()
	serviceName := out.Spec.Subdomain
	out.Spec.Subdomain = ""
	return out, serviceName
}

// RevisionName is the name of the ControllerRevision of a template hash.
func RevisionName(ps *podsetv1alpha1.PodSet, hash string) string {
	return ps.Name + "-" + hash
}

// Revisions is what a pass knows of a PodSet's revisions: the current
// template's and every one a ControllerRevision of the PodSet holds.
type Revisions struct {
	// Update is the hash of the current template.
	Update string
	// Templates holds the template of every known revision, by hash.
	Templates map[string]*corev1.PodTemplateSpec
	// Numbers holds the revision number of every revision with a
	// ControllerRevision, by hash. A larger number is a newer revision.
	Numbers map[string]int64
	// Objects are the PodSet's ControllerRevisions, by hash.
	Objects map[string]*appsv1.ControllerRevision
}

// NewRevisions reads a PodSet's revisions from its ControllerRevisions
// (those it controls, with the PodSet label). A revision whose data does not
// decode is left out, as if it were not there.
func NewRevisions(ps *podsetv1alpha1.PodSet, history []appsv1.ControllerRevision) *Revisions {
	revs := &Revisions{
		Update:    TemplateHash(ps),
		Templates: map[string]*corev1.PodTemplateSpec{},
		Numbers:   map[string]int64{},
		Objects:   map[string]*appsv1.ControllerRevision{},
	}
	for i := range history {
		cr := &history[i]
		hash := cr.Labels[podsetv1alpha1.TemplateHashLabel]
		if !metav1.IsControlledBy(cr, ps) || hash == "" || cr.Name != RevisionName(ps, hash) {
			continue
		}
		tmpl, err := RevisionTemplate(cr)
		if err != nil {
			continue
		}
		revs.Templates[hash] = tmpl
		revs.Numbers[hash] = cr.Revision
		revs.Objects[hash] = cr
	}
	// The current template is always known, written down or not yet.
	revs.Templates[revs.Update] = PodTemplate(ps)
	return revs
}

// Latest is the highest revision number of any ControllerRevision.
func (r *Revisions) Latest() int64 {
	var n int64
	for _, v := range r.Numbers {
		n = max(n, v)
	}
	return n
}

// Known reports whether the template of a revision is known.
func (r *Revisions) Known(hash string) bool {
	_, ok := r.Templates[hash]
	return ok
}

// Older reports whether revision a was introduced before revision b. The
// current template's is the newest (a rollback makes an old revision the
// newest again); a revision without a ControllerRevision (pods made before
// the operator kept revisions) is older than every revision with one.
func (r *Revisions) Older(a, b string) bool {
	switch {
	case a == b || a == r.Update:
		return false
	case b == r.Update:
		return true
	}
	na, okA := r.Numbers[a]
	nb, okB := r.Numbers[b]
	switch {
	case okA != okB:
		return !okA
	case na != nb:
		return na < nb
	default:
		return a < b
	}
}

// RevisionPlan is what a pass writes to a PodSet's ControllerRevisions.
type RevisionPlan struct {
	// Write is the revision of the current template to write, with its new
	// number: it is missing (created), or an older template came back (a
	// rollback), which makes it the newest again (renumbered), as
	// StatefulSet does. Nil: nothing.
	Write *appsv1.ControllerRevision
	// prune lists revisions beyond revisionHistoryLimit that nothing uses.
	Prune []*appsv1.ControllerRevision
}

// PlanRevisions decides what to write to the ControllerRevisions: the
// current template's revision, and the old ones to prune. A revision in use
// is never pruned: one a pod runs (terminating pods included), and, under a
// partition, the ones held for recreating held-back pods (kept) and the one
// status.currentRevision names. Of the others, the newest revisionHistoryLimit stay.
func (v *View) PlanRevisions(kept []string) RevisionPlan {
	ps, revs := v.PodSet, v.Revs
	var p RevisionPlan
	if cr, ok := revs.Objects[revs.Update]; !ok || cr.Revision < revs.Latest() {
		p.Write = newRevision(ps, revs.Update, revs.Latest()+1)
	}

	inUse := map[string]bool{revs.Update: true}
	last := revs.Update
	for _, m := range v.Controlled {
		// Most pods run the same revision or two: look up a hash only
		// when it differs from the pod before.
		if m.Hash != last {
			inUse[m.Hash], last = true, m.Hash
		}
	}
	for _, hash := range kept {
		inUse[hash] = true
	}
	if cur, ok := revisionHash(ps, ps.Status.CurrentRevision); ok && (Partition(ps) > 0 || ps.Spec.Paused) {
		// What a held-back pod is recreated from after a restart.
		inUse[cur] = true
	}
	var unused []*appsv1.ControllerRevision
	for hash, cr := range revs.Objects {
		if !inUse[hash] {
			unused = append(unused, cr)
		}
	}
	slices.SortFunc(unused, func(a, b *appsv1.ControllerRevision) int {
		return cmp.Or(cmp.Compare(a.Revision, b.Revision), cmp.Compare(a.Name, b.Name))
	})
	if surplus := len(unused) - int(revisionHistoryLimit(ps)); surplus > 0 {
		p.Prune = unused[:surplus]
	}
	return p
}

// newRevision is the ControllerRevision of a PodSet's current template.
func newRevision(ps *podsetv1alpha1.PodSet, hash string, number int64) *appsv1.ControllerRevision {
	var data revisionData
	data.Spec.Template = *PodTemplate(ps)
	raw, err := json.Marshal(data)
	if err != nil {
		// A PodTemplateSpec always marshals; this is unreachable.
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      RevisionName(ps, hash),
			Namespace: ps.Namespace,
			Labels: map[string]string{
				podsetv1alpha1.NameLabel:         ps.Name,
				podsetv1alpha1.TemplateHashLabel: hash,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ps, podsetv1alpha1.GroupVersion.WithKind("PodSet"))},
		},
		Revision: number,
	}
	cr.Data.Raw = raw
	return cr
}

// revisionHash is the template hash of a revision name of the PodSet.
func revisionHash(ps *podsetv1alpha1.PodSet, name string) (string, bool) {
	hash, ok := strings.CutPrefix(name, ps.Name+"-")
	return hash, ok && hash != ""
}

// revisionHistoryLimit is spec.revisionHistoryLimit; the schema defaults it.
func revisionHistoryLimit(ps *podsetv1alpha1.PodSet) int32 {
	if ps.Spec.RevisionHistoryLimit == nil {
		return podsetv1alpha1.DefaultRevisionHistoryLimit
	}
	return max(0, *ps.Spec.RevisionHistoryLimit)
}
