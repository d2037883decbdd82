package controller

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// loadBudget reads the PodDisruptionBudget named like the PodSet from the
// cache, which holds only those with the PodSet name label (shared with
// the cache: read only). nil: the cache shows none.
func (r *PodSetReconciler) loadBudget(ctx context.Context, ps *podsetv1alpha1.PodSet) (*policyv1.PodDisruptionBudget, error) {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(ps), pdb, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the PodDisruptionBudget of PodSet %s: %w", ps.Name, err)
	}
	return pdb, nil
}

// syncBudget carries out the PodDisruptionBudget's plan. A create is an
// apply that can only create (createOnly), so a PodDisruptionBudget of the
// name that the cache does not show (it lacks the label) is never taken
// over: the API server is asked who holds the name, and one this PodSet
// does not control stalls it, as a pod holding one of its names does. It
// returns that stall, if any, and the errors worth a retry, and leaves
// what it did in done.
func (r *PodSetReconciler) syncBudget(ctx context.Context, ps *podsetv1alpha1.PodSet, plan podset.BudgetPlan, done *podset.Outcome) (*podset.Stall, error) {
	switch {
	case plan.Conflict:
		return budgetConflict(ps), nil
	case plan.Delete != nil:
		if err := r.deleteBudget(ctx, plan.Delete); err != nil {
			return nil, fmt.Errorf("deleting PodDisruptionBudget %s: %w", plan.Delete.Name, err)
		}
		done.BudgetDeleted = plan.Delete.Name
		return nil, nil
	case plan.Apply == nil:
		return nil, nil
	}
	ac := plan.Apply
	if plan.Create {
		ac.WithResourceVersion(createOnly)
	}
	_, err := r.send(ctx, ps, writeBudget, "", ac)
	if plan.Create && apierrors.IsConflict(err) {
		// The name is taken. Find out by whom: the API server, not the
		// cache, which holds only labelled PodDisruptionBudgets.
		existing := &policyv1.PodDisruptionBudget{}
		switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ps), existing); {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("PodDisruptionBudget %s was deleted while being created, retrying", ps.Name)
		case err != nil:
			return nil, fmt.Errorf("checking who holds PodDisruptionBudget name %s: %w", ps.Name, err)
		case !metav1.IsControlledBy(existing, ps):
			return budgetConflict(ps), nil
		case existing.Labels[podsetv1alpha1.NameLabel] == ps.Name:
			// Ours, and the cache is behind: its event is on its way.
			return nil, nil
		}
		// Ours, and someone removed the label the cache selects on, so
		// the cache cannot see it: restore it in place.
		ac.ResourceVersion = nil
		_, err = r.send(ctx, ps, writeBudget, "", ac.WithUID(existing.UID))
	}
	if err != nil {
		return nil, fmt.Errorf("applying PodDisruptionBudget %s: %w", ps.Name, err)
	}
	done.BudgetApplied = true
	return nil, nil
}

// budgetConflict is the stall of a PodSet whose PodDisruptionBudget name is
// held by one it does not control.
func budgetConflict(ps *podsetv1alpha1.PodSet) *podset.Stall {
	return &podset.Stall{
		Reason: podsetv1alpha1.DisruptionBudgetConflictReason,
		Message: fmt.Sprintf("PodDisruptionBudget %s exists and is not controlled by this PodSet; it leaves it alone: "+
			"delete or rename it, or remove spec.disruptionBudget", ps.Name),
	}
}

// budgetBound is the bound of spec.disruptionBudget, for events.
func budgetBound(ps *podsetv1alpha1.PodSet) string {
	if b := ps.Spec.DisruptionBudget; b.MaxUnavailable != nil {
		return "maxUnavailable " + b.MaxUnavailable.String()
	} else if b.MinAvailable != nil {
		return "minAvailable " + b.MinAvailable.String()
	}
	return ""
}
