//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
)

// TestDisruptionBudgetRefusesEvictions runs the operator under its shipped
// RBAC with a PodSet whose spec.disruptionBudget is maxUnavailable 0: the
// operator keeps a PodDisruptionBudget, kube-controller-manager's
// disruption controller computes its status (disruptionsAllowed 0, the
// expected pods read through the PodSet's scale subresource), and an
// eviction through the pods/eviction subresource is refused with 429 Too
// Many Requests. Raised to maxUnavailable 1, the operator updates the
// PodDisruptionBudget, the disruption controller allows one disruption,
// and the same eviction goes through; the operator then recreates the
// evicted pod under its name.
func TestDisruptionBudgetRefusesEvictions(t *testing.T) {
	requireInstalled(t)
	scaleOperatorDeploymentToZero(t)
	op := startOperator(t)

	ns := newNamespace(t, "podset-pdb-", nil)
	ps := fixture.PodSet(ns, "web").Replicas(2).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(0))}
	}).Obj()
	if err := suite.client.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	before := waitForPodSet(t, ps, 2)
	pdb := waitForBudgetStatus(t, ps, 0)
	t.Logf("PodDisruptionBudget %s: maxUnavailable %s, status %+v", pdb.Name, pdb.Spec.MaxUnavailable, pdb.Status)

	// Refused: the budget allows no disruption.
	err := evict(t.Context(), ns, "web-0")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting web-0 under maxUnavailable 0: %v; want 429 Too Many Requests", err)
	}
	t.Logf("eviction refused: %v", err)
	if !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("the refusal does not name the disruption budget: %v", err)
	}
	if pod := getPod(t, ns, "web-0"); pod == nil || pod.UID != before["web-0"] || pod.DeletionTimestamp != nil {
		t.Errorf("web-0 was evicted after all: %+v", pod)
	}

	// The budget permits one disruption: the same eviction goes through.
	patch := []byte(`{"spec":{"disruptionBudget":{"maxUnavailable":1}}}`)
	if err := suite.client.Patch(t.Context(), ps, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	pdb = waitForBudgetStatus(t, ps, 1)
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget spec %+v, want maxUnavailable 1 only", pdb.Spec)
	}
	eventually(t, "evicting web-0 under maxUnavailable 1", func(ctx context.Context) error {
		return evict(ctx, ns, "web-0")
	})
	eventually(t, "web-0 evicted and recreated by the operator", func(context.Context) error {
		pod := getPod(t, ns, "web-0")
		if pod == nil || pod.UID == before["web-0"] {
			return fmt.Errorf("web-0 is still the pod that was evicted, or gone")
		}
		return checkRunningAndReady(pod)
	})
	waitForPodSet(t, ps, 2)

	if err := op.stop(t); err != nil {
		t.Errorf("the operator exited with %v after SIGTERM, want status 0", err)
	}
	if lines := grepLines(op.log(t), "forbidden: User "); len(lines) > 0 {
		t.Errorf("the shipped RBAC is not enough: the operator log has %d authorization denials:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// waitForBudgetStatus waits until the PodSet's PodDisruptionBudget is
// controlled by it, selects its pods, and the disruption controller has
// computed its status for its current generation: every pod healthy and
// allowed disruptions allowed.
//
// The disruption controller finds the expected number of pods through the
// PodSet's scale subresource, which its RESTMapper knows only once
// kube-controller-manager's discovery has seen the CRD (it refreshes every
// 30 seconds; the suite installs the CRD moments before). Until then it
// records SyncFailed ("no matches for kind PodSet") and syncs the budget
// again only on an event of it or of its pods: the wait gives it one, an
// annotation on a pod, which nothing here reads.
func waitForBudgetStatus(t *testing.T, ps *podsetv1alpha1.PodSet, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	replicas := ptr.Deref(ps.Spec.Replicas, 1)
	nudges, lastNudge := 0, time.Time{}
	eventually(t, fmt.Sprintf("PodDisruptionBudget %s allows %d disruptions", ps.Name, allowed), func(ctx context.Context) error {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), pdb); err != nil {
			return err
		}
		s := pdb.Status
		if c := meta.FindStatusCondition(s.Conditions, policyv1.DisruptionAllowedCondition); c != nil && c.Reason == policyv1.SyncFailedReason {
			if time.Since(lastNudge) < 5*time.Second {
				return fmt.Errorf("the disruption controller failed to sync: %s", c.Message)
			}
			nudges, lastNudge = nudges+1, time.Now()
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"e2e.podset.dev/resync":"%d"}}}`, nudges)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ps.Namespace, Name: ps.Name + "-0"}}
			if err := suite.client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return err
			}
			return fmt.Errorf("the disruption controller failed to sync: %s", c.Message)
		}
		switch {
		case !metav1.IsControlledBy(pdb, ps):
			return fmt.Errorf("not controlled by the PodSet: %+v", pdb.OwnerReferences)
		case pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels[podsetv1alpha1.NameLabel] != ps.Name:
			return fmt.Errorf("selector %+v", pdb.Spec.Selector)
		case s.ObservedGeneration != pdb.Generation:
			return fmt.Errorf("status for generation %d, generation %d", s.ObservedGeneration, pdb.Generation)
		case s.ExpectedPods != replicas || s.CurrentHealthy != replicas || s.DisruptionsAllowed != allowed:
			return fmt.Errorf("status expected %d, healthy %d, allowed %d; want %d, %d, %d",
				s.ExpectedPods, s.CurrentHealthy, s.DisruptionsAllowed, replicas, replicas, allowed)
		}
		return nil
	})
	return pdb
}

// evict asks the API server to evict a pod through its pods/eviction
// subresource, as kubectl drain does.
func evict(ctx context.Context, ns, name string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return suite.client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	})
}

// getPod reads a pod; nil when it does not exist.
func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return pod
}
