package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// budget reads the PodDisruptionBudget named like the PodSet straight from
// the API server; nil when there is none.
func budget(t *testing.T, ps *podsetv1alpha1.PodSet) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), pdb)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return pdb
}

// waitForBudget waits until the PodSet's PodDisruptionBudget is the one it
// controls with exactly these bounds, selecting its pods.
func waitForBudget(t *testing.T, ps *podsetv1alpha1.PodSet, maxUnavailable, minAvailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	t.Helper()
	want := policyv1.PodDisruptionBudgetSpec{
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{podsetv1alpha1.NameLabel: ps.Name}},
		MaxUnavailable: maxUnavailable,
		MinAvailable:   minAvailable,
	}
	var pdb *policyv1.PodDisruptionBudget
	eventually(t, "PodDisruptionBudget "+ps.Name, func(context.Context) error {
		pdb = budget(t, ps)
		switch {
		case pdb == nil:
			return fmt.Errorf("no PodDisruptionBudget %s", ps.Name)
		case !metav1.IsControlledBy(pdb, ps):
			return fmt.Errorf("PodDisruptionBudget %s not controlled by the PodSet: %+v", ps.Name, pdb.OwnerReferences)
		case pdb.Labels[podsetv1alpha1.NameLabel] != ps.Name:
			return fmt.Errorf("PodDisruptionBudget %s labels %v", ps.Name, pdb.Labels)
		}
		if diff := cmp.Diff(want, pdb.Spec); diff != "" {
			return fmt.Errorf("spec (-want +got):\n%s", diff)
		}
		return nil
	})
	return pdb
}

// setBudget sets or, with nil, removes spec.disruptionBudget.
func setBudget(t *testing.T, ps *podsetv1alpha1.PodSet, b *podsetv1alpha1.PodSetDisruptionBudget) {
	t.Helper()
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.DisruptionBudget = b })
}

// TestDisruptionBudgetFollowsTheField checks the PodDisruptionBudget of
// spec.disruptionBudget: created with the PodSet, applied by the
// operator's field manager, controlled by the PodSet, never written again
// by a converged pass, updated when the field changes, restored when its
// label is removed, deleted when the field is removed and created again
// when it comes back.
func TestDisruptionBudgetFollowsTheField(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	one := ptr.To(intstr.FromInt32(1))
	ps := createReady(t, fixture.PodSet(ns, "web").Replicas(2).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: one}
	}))
	pdb := waitForBudget(t, ps, one, nil)
	managers := map[string]bool{}
	for _, m := range pdb.ManagedFields {
		managers[m.Manager] = true
	}
	if !managers[controller.FieldManager] || len(managers) != 1 {
		t.Errorf("managed by %v, want only %s", managers, controller.FieldManager)
	}
	if ref := metav1.GetControllerOf(pdb); ref == nil || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v, want blockOwnerDeletion (garbage collected with the PodSet)", ref)
	}

	// A converged pass sends nothing to the PodDisruptionBudget.
	repairPass(t, pods(t, ns)["web-0"])
	budgetWrites := requests.writes(ns, "poddisruptionbudgets", "")
	pokeForAPass(t, pods(t, ns)["web-0"])
	if d := requests.writes(ns, "poddisruptionbudgets", "") - budgetWrites; d != 0 {
		t.Errorf("a converged pass sent %d PodDisruptionBudget writes, want 0", d)
	}
	if got := budget(t, ps); got.ResourceVersion != pdb.ResourceVersion {
		t.Errorf("the PodDisruptionBudget changed on a converged pass: resourceVersion %s, was %s", got.ResourceVersion, pdb.ResourceVersion)
	}

	// The field changes: the same PodDisruptionBudget is updated.
	all := ptr.To(intstr.FromString("100%"))
	setBudget(t, ps, &podsetv1alpha1.PodSetDisruptionBudget{MinAvailable: all})
	if got := waitForBudget(t, ps, nil, all); got.UID != pdb.UID {
		t.Errorf("the PodDisruptionBudget was recreated (UID %s, was %s); want it updated", got.UID, pdb.UID)
	}

	// Someone removes the label the operator's cache selects on: restored.
	labelled := budget(t, ps)
	delete(labelled.Labels, podsetv1alpha1.NameLabel)
	if err := env.Client.Update(t.Context(), labelled); err != nil {
		t.Fatal(err)
	}
	if got := waitForBudget(t, ps, nil, all); got.UID != pdb.UID {
		t.Errorf("the PodDisruptionBudget was recreated (UID %s, was %s); want its label restored", got.UID, pdb.UID)
	}

	// The field is removed: deleted.
	setBudget(t, ps, nil)
	eventually(t, "PodDisruptionBudget web deleted", func(context.Context) error {
		if budget(t, ps) != nil {
			return fmt.Errorf("PodDisruptionBudget web still exists")
		}
		return nil
	})

	// And back: a new one.
	setBudget(t, ps, &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: one})
	if got := waitForBudget(t, ps, one, nil); got.UID == pdb.UID {
		t.Errorf("the deleted PodDisruptionBudget is back with its UID %s", got.UID)
	}
	waitForStatus(t, ps, healthy(2, 2))
}

// TestDisruptionBudgetNeverTakesOverAForeignOne checks that a
// PodDisruptionBudget named like the PodSet that it does not control is
// left alone, and stalls the PodSet with a Warning event until it is
// deleted; then the operator makes its own.
func TestDisruptionBudgetNeverTakesOverAForeignOne(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	foreign := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MinAvailable: ptr.To(intstr.FromInt32(1)),
		},
	}
	if err := env.Client.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	zero := ptr.To(intstr.FromInt32(0))
	ps := fixture.PodSet(ns, "web").Replicas(2).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: zero}
	}).Create(t, env.Client)

	// The pods are made all the same; the PodSet is Stalled.
	waitForPods(t, ns, "web-0", "web-1")
	markAllReady(t, ns)
	got := waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || c.Reason != podsetv1alpha1.DisruptionBudgetConflictReason {
			return fmt.Errorf("Stalled = %+v, want True/%s", c, podsetv1alpha1.DisruptionBudgetConflictReason)
		}
		return nil
	})
	if msg := testenv.Condition(got, podsetv1alpha1.StalledCondition).Message; !strings.Contains(msg, "PodDisruptionBudget web") {
		t.Errorf("Stalled message %q does not name PodDisruptionBudget web", msg)
	}
	if c := testenv.Condition(got, podsetv1alpha1.ReadyCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v while stalled, want False", c)
	}
	eventually(t, "a Warning event", func(context.Context) error {
		for _, e := range warningEvents(t, ps) {
			if strings.HasPrefix(e, podsetv1alpha1.DisruptionBudgetConflictReason+":") {
				return nil
			}
		}
		return fmt.Errorf("no %s warning among %v", podsetv1alpha1.DisruptionBudgetConflictReason, warningEvents(t, ps))
	})
	after := budget(t, ps)
	if after.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign PodDisruptionBudget was modified: labels %v, owners %v, spec %+v", after.Labels, after.OwnerReferences, after.Spec)
	}

	// Once its owner removes it, the PodSet makes its own.
	if err := env.Client.Delete(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	waitForBudget(t, ps, zero, nil)
	waitForStatus(t, ps, healthy(2, 2))
}
