package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// storedBudget is the PodDisruptionBudget DesiredBudget makes, as the API
// server stores it.
func storedBudget(t *testing.T, ps *podsetv1alpha1.PodSet) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	if err := Convert(DesiredBudget(ps), pdb); err != nil {
		t.Fatal(err)
	}
	pdb.UID = "pdb-uid"
	pdb.Generation = 1
	pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, ObservedGeneration: 1}
	return pdb
}

// withBudget is a copy of ps with spec.disruptionBudget.
func withBudget(ps *podsetv1alpha1.PodSet, maxUnavailable, minAvailable *intstr.IntOrString) *podsetv1alpha1.PodSet {
	ps = ps.DeepCopy()
	ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: maxUnavailable, MinAvailable: minAvailable}
	return ps
}

func TestPlanBudget(t *testing.T) {
	plain := makePodSet("web").Replicas(3).Obj()
	maxOne := withBudget(plain, ptr.To(intstr.FromInt32(1)), nil)
	maxZero := withBudget(plain, ptr.To(intstr.FromInt32(0)), nil)
	minAll := withBudget(plain, nil, ptr.To(intstr.FromString("100%")))
	ours := storedBudget(t, maxOne)
	foreign := ours.DeepCopy()
	foreign.OwnerReferences = nil
	otherOwner := ours.DeepCopy()
	otherOwner.OwnerReferences[0].UID = "another-podset-uid"
	labelLost := ours.DeepCopy()
	delete(labelLost.Labels, podsetv1alpha1.NameLabel)
	widened := ours.DeepCopy()
	widened.Spec.Selector.MatchLabels["tier"] = "web"
	othersField := ours.DeepCopy()
	othersField.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	othersField.Labels["team"] = "a"

	// want is what a plan does, in short.
	type want struct {
		Apply, Create, Conflict bool
		UID                     types.UID
		Delete                  string
	}
	cases := map[string]struct {
		ps       *podsetv1alpha1.PodSet
		observed *policyv1.PodDisruptionBudget
		want     want
	}{
		"no field, none observed: nothing":        {ps: plain, want: want{}},
		"no field, ours observed: deleted":        {ps: plain, observed: ours, want: want{Delete: "web"}},
		"no field, a foreign one: left alone":     {ps: plain, observed: foreign, want: want{}},
		"field, none observed: created":           {ps: maxOne, want: want{Apply: true, Create: true}},
		"field, ours as wanted: nothing to send":  {ps: maxOne, observed: ours, want: want{}},
		"others' fields on ours: nothing to send": {ps: maxOne, observed: othersField, want: want{}},
		"maxUnavailable changed: updated":         {ps: maxZero, observed: ours, want: want{Apply: true, UID: "pdb-uid"}},
		"switched to minAvailable: updated":       {ps: minAll, observed: ours, want: want{Apply: true, UID: "pdb-uid"}},
		"our label removed: restored":             {ps: maxOne, observed: labelLost, want: want{Apply: true, UID: "pdb-uid"}},
		"selector widened: restored":              {ps: maxOne, observed: widened, want: want{Apply: true, UID: "pdb-uid"}},
		"field, a foreign one: conflict":          {ps: maxOne, observed: foreign, want: want{Conflict: true}},
		"field, another PodSet's: conflict":       {ps: maxOne, observed: otherOwner, want: want{Conflict: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := PlanBudget(tc.ps, tc.observed)
			got := want{Apply: plan.Apply != nil, Create: plan.Create, Conflict: plan.Conflict}
			if plan.Apply != nil {
				got.UID = ptr.Deref(plan.Apply.UID, "")
			}
			if plan.Delete != nil {
				got.Delete = plan.Delete.Name
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDesiredBudget checks the whole PodDisruptionBudget applied: the
// PodSet's name, its pods' selector, exactly one bound, the controller
// reference, and the label the operator's cache selects on.
func TestDesiredBudget(t *testing.T) {
	ps := withBudget(makePodSet("web").Replicas(3).Obj(), nil, ptr.To(intstr.FromString("50%")))
	got := storedBudget(t, ps)
	want := policyv1.PodDisruptionBudgetSpec{
		Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{podsetv1alpha1.NameLabel: "web"}},
		MinAvailable: ptr.To(intstr.FromString("50%")),
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if got.Name != "web" || got.Namespace != testNamespace || got.Labels[podsetv1alpha1.NameLabel] != "web" {
		t.Errorf("name %s/%s, labels %v", got.Namespace, got.Name, got.Labels)
	}
	if !metav1.IsControlledBy(got, ps) {
		t.Errorf("not controlled by the PodSet: %+v", got.OwnerReferences)
	}
}

// TestSlimBudget checks that the cache keeps a PodDisruptionBudget's spec
// and metadata and drops its status: what PlanBudget reads.
func TestSlimBudget(t *testing.T) {
	ps := withBudget(makePodSet("web").Obj(), ptr.To(intstr.FromInt32(1)), nil)
	pdb := storedBudget(t, ps)
	pdb.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "podset-operator"}}
	slim, err := SlimBudget(pdb.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := slim.(*policyv1.PodDisruptionBudget)
	if got.ManagedFields != nil || got.Status.DisruptionsAllowed != 0 || got.Status.ObservedGeneration != 0 {
		t.Errorf("slimmed budget keeps managed fields or status: %+v", got)
	}
	if PlanBudget(ps, got) != (BudgetPlan{}) {
		t.Errorf("a slimmed converged budget plans %+v, want nothing", PlanBudget(ps, got))
	}
}
