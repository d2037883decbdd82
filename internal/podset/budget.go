package podset

import (
	"maps"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// BudgetPlan is what a pass does to the PodDisruptionBudget of
// spec.disruptionBudget: at most one of apply, delete and conflict.
type BudgetPlan struct {
	// Apply is the whole PodDisruptionBudget to apply, or nil when the one
	// observed is already what the PodSet wants (or none is wanted). It
	// names the UID of the observed one when it updates it; Create says
	// when it must create one instead.
	Apply *policyv1ac.PodDisruptionBudgetApplyConfiguration
	// Create: the cache shows no PodDisruptionBudget of the name; Apply
	// must create one, never update one it has not seen.
	Create bool
	// Delete is the PodDisruptionBudget the PodSet controls and no longer
	// wants.
	Delete *policyv1.PodDisruptionBudget
	// Conflict: one is wanted and a PodDisruptionBudget of the name exists
	// that the PodSet does not control. It is left alone.
	Conflict bool
}

// PlanBudget decides what to do about a PodSet's PodDisruptionBudget given
// the one of its name the cache shows (nil: none). A converged PodSet
// plans nothing: the budget is applied only when what is observed differs
// from what is wanted.
func PlanBudget(ps *podsetv1alpha1.PodSet, observed *policyv1.PodDisruptionBudget) BudgetPlan {
	controlled := observed != nil && metav1.IsControlledBy(observed, ps)
	switch {
	case ps.Spec.DisruptionBudget == nil && controlled:
		return BudgetPlan{Delete: observed}
	case ps.Spec.DisruptionBudget == nil:
		return BudgetPlan{}
	case observed == nil:
		return BudgetPlan{Apply: DesiredBudget(ps), Create: true}
	case !controlled:
		return BudgetPlan{Conflict: true}
	case budgetConverged(ps, observed):
		return BudgetPlan{}
	default:
		return BudgetPlan{Apply: DesiredBudget(ps).WithUID(observed.UID)}
	}
}

// DesiredBudget is the whole PodDisruptionBudget a PodSet with
// spec.disruptionBudget wants: named like the PodSet, selecting its pods
// by the name label, controlled by it, with exactly the one bound the spec
// gives.
func DesiredBudget(ps *podsetv1alpha1.PodSet) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(budgetSelector(ps)))
	if b := ps.Spec.DisruptionBudget; b.MaxUnavailable != nil {
		spec.WithMaxUnavailable(*b.MaxUnavailable)
	} else if b.MinAvailable != nil {
		spec.WithMinAvailable(*b.MinAvailable)
	}
	return policyv1ac.PodDisruptionBudget(ps.Name, ps.Namespace).
		WithLabels(budgetLabels(ps)).
		WithOwnerReferences(ControllerReference(ps)).
		WithSpec(spec)
}

// budgetConverged reports whether the PodDisruptionBudget the PodSet
// controls holds everything DesiredBudget applies. Fields others set (an
// unhealthyPodEvictionPolicy, their own labels) are theirs and do not
// count.
func budgetConverged(ps *podsetv1alpha1.PodSet, pdb *policyv1.PodDisruptionBudget) bool {
	want := ps.Spec.DisruptionBudget
	sel := pdb.Spec.Selector
	ref := metav1.GetControllerOfNoCopy(pdb)
	return pdb.Labels[podsetv1alpha1.NameLabel] == ps.Name &&
		ref != nil && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion &&
		sel != nil && len(sel.MatchExpressions) == 0 && maps.Equal(sel.MatchLabels, budgetSelector(ps)) &&
		sameIntOrString(want.MaxUnavailable, pdb.Spec.MaxUnavailable) &&
		sameIntOrString(want.MinAvailable, pdb.Spec.MinAvailable)
}

// budgetSelector selects exactly the PodSet's pods: those its cache and
// status.selector select.
func budgetSelector(ps *podsetv1alpha1.PodSet) map[string]string {
	return map[string]string{podsetv1alpha1.NameLabel: ps.Name}
}

// budgetLabels are the PodDisruptionBudget's labels: the name label, by
// which the operator's cache selects the PodDisruptionBudgets it keeps.
func budgetLabels(ps *podsetv1alpha1.PodSet) map[string]string {
	return map[string]string{podsetv1alpha1.NameLabel: ps.Name}
}

func sameIntOrString(a, b *intstr.IntOrString) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// SlimBudget keeps of a PodDisruptionBudget what the operator reads: all
// but its status, which the disruption controller rewrites as pods come
// and go, and the managed fields. It is a cache transform.
func SlimBudget(obj any) (any, error) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return obj, nil
	}
	pdb.ManagedFields = nil
	pdb.Status = policyv1.PodDisruptionBudgetStatus{}
	return pdb, nil
}
