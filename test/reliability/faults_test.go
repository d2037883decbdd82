package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// livePods lists the live pods of the namespace.
func livePods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// waitForPodCount waits until at least n pods exist in the namespace.
func waitForPodCount(t *testing.T, ns string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d pods", n), func(context.Context) error {
		if got := len(livePods(t, ns)); got < n {
			return fmt.Errorf("%d pods", got)
		}
		return nil
	})
}

func TestTransientAPIErrors(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	faults := &faultyTransport{rng: rand.New(rand.NewPCG(1, 2)), rate: 0.2}
	faults.on.Store(true)
	op := startOperator(t, ns, operatorOptions{transport: faults.wrap})
	kubelet(t, ns)
	ps := fixture.PodSet(ns, "web").Replicas(20).Create(t, env.Client)
	key := types.NamespacedName{Namespace: ns, Name: ps.Name}
	converged(t, ns)
	update(t, key, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 7 })
	update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" })
	update(t, key, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 15 })
	converged(t, ns)
	faults.on.Store(false) // see TestModelBasedRandomSteps
	checkInvariants(t, ns, nil, op)
	t.Logf("faults injected (429, 500, lost answers): %d", faults.injected.Load())
	if faults.injected.Load() == 0 {
		t.Error("no fault was injected; the test proves nothing")
	}
}

func TestLeaderFailoverMidScaleUp(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	leader := startOperator(t, ns, operatorOptions{leaderElection: true, identity: "a"})
	eventually(t, "a leader", func(context.Context) error {
		return env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "podset-operator.podset.dev"}, &coordinationv1.Lease{})
	})
	standby := startOperator(t, ns, operatorOptions{leaderElection: true, identity: "b"})
	kubelet(t, ns)
	fixture.PodSet(ns, "web").Replicas(60).Create(t, env.Client)
	waitForPodCount(t, ns, 1)
	leader.stop() // a crash: the lease is not released
	checkInvariants(t, ns, nil, standby)
	if got := len(livePods(t, ns)); got != 60 {
		t.Errorf("%d pods after failover, want 60", got)
	}
}

func TestAPIServerRestartMidScaleUp(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	op := startOperator(t, ns, operatorOptions{})
	fixture.PodSet(ns, "web").Replicas(60).Create(t, env.Client)
	waitForPodCount(t, ns, 1)
	if err := env.RestartAPIServer(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	kubelet(t, ns)
	checkInvariants(t, ns, nil, op)
}

func TestAnotherFieldManagerFightsOverPodFields(t *testing.T) {
	ns, op := newScene(t)
	fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)
	converged(t, ns)
	for round := range 5 {
		// kubectl apply --server-side --force-conflicts, by hand.
		fight := corev1ac.Pod("web-1", ns).
			WithLabels(map[string]string{podsetv1alpha1.OrdinalLabel: "9", "app": "stolen"})
		if err := env.Client.Apply(t.Context(), fight, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("round %d restored", round), func(context.Context) error {
			p := &corev1.Pod{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-1"}, p); err != nil {
				return err
			}
			if p.Labels[podsetv1alpha1.OrdinalLabel] != "1" || p.Labels["app"] != "web" {
				return fmt.Errorf("labels %v", p.Labels)
			}
			return nil
		})
	}
	checkInvariants(t, ns, nil, op)
}

func TestRandomPodDeletionsWhileScaling(t *testing.T) {
	ns, op := newScene(t)
	ps := fixture.PodSet(ns, "web").Replicas(40).Create(t, env.Client)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 25 {
		if pods := livePods(t, ns); len(pods) > 0 {
			p := pods[rng.IntN(len(pods))]
			_ = env.Client.Delete(t.Context(), &p)
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	update(t, types.NamespacedName{Namespace: ns, Name: ps.Name}, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 25 })
	checkInvariants(t, ns, nil, op)
}

func TestPodSetRecreatedWhileOldPodsExist(t *testing.T) {
	ns, op := newScene(t)
	old := fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)
	converged(t, ns)
	if err := env.Client.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	// envtest runs no garbage collector: the old pods stay, owned by a
	// PodSet that no longer exists, until this test removes them.
	foreign := foreignPods{}
	for _, p := range livePods(t, ns) {
		foreign[p.Name] = p.ResourceVersion
	}
	ps := fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)
	stalled(t, client.ObjectKeyFromObject(ps), podsetv1alpha1.PodConflictReason)
	for _, p := range livePods(t, ns) {
		if rv, ok := foreign[p.Name]; !ok || rv != p.ResourceVersion {
			t.Errorf("old pod %s was touched by the new PodSet", p.Name)
		}
	}
	// The garbage collector's turn.
	for _, p := range livePods(t, ns) {
		_ = env.Client.Delete(t.Context(), &p)
	}
	checkInvariants(t, ns, nil, op)
}

func TestPodStuckTerminatingBehindAFinalizer(t *testing.T) {
	ns, op := newScene(t)
	ps := fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)
	key := types.NamespacedName{Namespace: ns, Name: ps.Name}
	converged(t, ns)

	stuck := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-2"}, stuck); err != nil {
		t.Fatal(err)
	}
	stuck.Finalizers = append(stuck.Finalizers, "test.podset.dev/hold")
	if err := env.Client.Update(t.Context(), stuck); err != nil {
		t.Fatal(err)
	}
	update(t, key, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 2 })
	eventually(t, "web-2 terminating", func(context.Context) error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(stuck), stuck); err != nil {
			return err
		}
		if stuck.DeletionTimestamp == nil {
			return fmt.Errorf("not deleted yet")
		}
		return nil
	})
	// Scaling back up must wait for the old web-2, not duplicate it.
	update(t, key, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 3 })
	// The operator has run a pass over the scale-up: its status shows the
	// new generation.
	eventually(t, "the scale-up observed", func(context.Context) error {
		cur := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(t.Context(), key, cur); err != nil {
			return err
		}
		if *cur.Spec.Replicas != 3 || cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Errorf("status at generation %d, spec (%d replicas) at %d", cur.Status.ObservedGeneration, *cur.Spec.Replicas, cur.Generation)
		}
		return nil
	})
	got := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(stuck), got); err != nil || got.UID != stuck.UID {
		t.Fatalf("web-2 while its predecessor terminates: %v, uid %s (want the old %s)", err, got.UID, stuck.UID)
	}
	got.Finalizers = nil
	if err := env.Client.Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, ns, nil, op)
}

func TestPodsRefusedByAnAdmissionPolicy(t *testing.T) {
	ns, op := newScene(t)
	policy, binding := denyPodsPolicy(ns)
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	// A policy is enforced once the API server's informer has it.
	eventually(t, "the policy enforced", func(context.Context) error {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if err := env.Client.Create(t.Context(), probe, client.DryRunAll); err == nil {
			return fmt.Errorf("a pod is still admitted")
		}
		return nil
	})
	ps := fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)
	stalled(t, client.ObjectKeyFromObject(ps), podsetv1alpha1.PodRejectedReason)
	if err := env.Client.Delete(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), policy); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, ns, nil, op)
}

// denyPodsPolicy is a ValidatingAdmissionPolicy, and its binding, that
// refuses every pod created in the namespace: a stand-in for a cluster's own
// policies (Kyverno, Gatekeeper, quotas).
func denyPodsPolicy(ns string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	name := "deny-pods-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "pods are not allowed here"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}

func ptrTo[T any](v T) *T { return &v }
