package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// foreignPod is a pod nobody's PodSet controls.
func foreignPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "nginx:1.27"}}},
	}
}

func TestDriftInOperatorOwnedFieldsIsRestored(t *testing.T) {
	cases := map[string]func(*corev1.Pod){
		"template label removed":        func(p *corev1.Pod) { delete(p.Labels, "app") },
		"ordinal label changed":         func(p *corev1.Pod) { p.Labels[podsetv1alpha1.OrdinalLabel] = "7" },
		"name label removed":            func(p *corev1.Pod) { delete(p.Labels, podsetv1alpha1.NameLabel) },
		"blockOwnerDeletion turned off": func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(false) },
		"image changed":                 func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:1.35" },
	}
	for name, drift := range cases {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t, env.Client, "podset-", nil)
			fixture.PodSet(ns, "web").Create(t, env.Client)
			pod := waitForPods(t, ns, "web-0")["web-0"]
			want := pod.DeepCopy()

			updatePod(t, pod, drift)
			eventually(t, "drift restored", func(context.Context) error {
				got := pods(t, ns)["web-0"]
				if got.UID != want.UID {
					return fmt.Errorf("the pod was replaced, not repaired")
				}
				if !equalStrings(got.Labels, want.Labels) || image(got) != image(*want) ||
					!ptr.Equal(got.OwnerReferences[0].BlockOwnerDeletion, ptr.To(true)) {
					return fmt.Errorf("labels %v, image %s, owner %+v", got.Labels, image(got), got.OwnerReferences)
				}
				return nil
			})
		})
	}
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestForeignPodHoldingANameIsNeverTouched(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	foreign := foreignPod(ns, "web-1", nil)
	if err := env.Client.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	ps := fixture.PodSet(ns, "web").Replicas(2).Create(t, env.Client)

	waitForPods(t, ns, "web-0", "web-1")
	got := waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionTrue || c.Reason != podsetv1alpha1.PodConflictReason {
			return fmt.Errorf("Stalled = %+v, want True/PodConflict", c)
		}
		return nil
	})
	if msg := testenv.Condition(got, podsetv1alpha1.StalledCondition).Message; !strings.Contains(msg, "web-1") {
		t.Errorf("Stalled message %q does not name web-1", msg)
	}
	// Counts follow within StatusInterval; the foreign pod is never one.
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.Replicas != 1 || !slices.Equal(got.Status.PodNames, []string{"web-0"}) {
			return fmt.Errorf("status %+v, want only web-0 counted", got.Status)
		}
		return nil
	})
	eventually(t, "a Warning event", func(context.Context) error {
		for _, e := range warningEvents(t, ps) {
			if strings.HasPrefix(e, podsetv1alpha1.PodConflictReason+":") && strings.Contains(e, "web-1") {
				return nil
			}
		}
		return fmt.Errorf("no PodConflict warning among %v", warningEvents(t, ps))
	})
	after := pods(t, ns)["web-1"]
	if after.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign pod web-1 was modified: labels %v, owners %v", after.Labels, after.OwnerReferences)
	}

	// Once its owner removes it, the PodSet takes the name.
	forceDelete(t, after)
	eventually(t, "web-1 created by the PodSet", func(context.Context) error {
		p, ok := pods(t, ns)["web-1"]
		if !ok || !metav1.IsControlledBy(&p, ps) {
			return fmt.Errorf("web-1 not the PodSet's yet")
		}
		return nil
	})
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionFalse {
			return fmt.Errorf("still stalled: %+v", c)
		}
		return nil
	})
}

func TestStrayPodWithTheLabelIsNeitherCountedNorPruned(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	stray := foreignPod(ns, "web-7", map[string]string{podsetv1alpha1.NameLabel: "web"})
	if err := env.Client.Create(t.Context(), stray); err != nil {
		t.Fatal(err)
	}
	ps := fixture.PodSet(ns, "web").Replicas(1).Create(t, env.Client)
	waitForPods(t, ns, "web-0", "web-7")
	markReady(t, pods(t, ns)["web-0"])
	got := waitForStatus(t, ps, readyStatus(1))
	if !slices.Equal(got.Status.PodNames, []string{"web-0"}) {
		t.Errorf("podNames %v, want [web-0]", got.Status.PodNames)
	}
	if p := pods(t, ns)["web-7"]; p.ResourceVersion != stray.ResourceVersion {
		t.Errorf("the stray pod was modified")
	}
	eventually(t, "a Warning event", func(context.Context) error {
		for _, e := range warningEvents(t, ps) {
			if strings.Contains(e, "web-7") {
				return nil
			}
		}
		return fmt.Errorf("no warning names web-7 among %v", warningEvents(t, ps))
	})
}

func TestUnrelatedPodsNeverEnterTheCache(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	fixture.PodSet(ns, "web").Create(t, env.Client)
	unrelated := foreignPod(ns, "unrelated", map[string]string{"app": "web"})
	if err := env.Client.Create(t.Context(), unrelated); err != nil {
		t.Fatal(err)
	}
	waitForPods(t, ns, "unrelated", "web-0")

	// The PodSet's pod is in the operator's cache; the unrelated pod never is.
	eventually(t, "web-0 in the cache", func(context.Context) error {
		return operatorCache.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-0"}, &corev1.Pod{})
	})
	err := operatorCache.Get(t.Context(), client.ObjectKeyFromObject(unrelated), &corev1.Pod{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("reading the unrelated pod from the operator's cache: %v, want NotFound", err)
	}
	list := &corev1.PodList{}
	if err := operatorCache.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "web-0" {
		t.Errorf("the cache holds %d pods in the namespace, want only web-0", len(list.Items))
	}
	if len(list.Items) == 1 && list.Items[0].ManagedFields != nil {
		t.Errorf("the cache keeps managed fields; they are stripped to save memory")
	}
}

// TestApplyPreconditions pins the API server behaviour that keeps every
// pod write of the operator from being an upsert: an apply that carries
// resourceVersion "1" (the operator's createOnly) creates a missing pod and
// fails with a conflict on an existing one, and an apply that carries a UID
// fails with a conflict when no pod has it.
func TestApplyPreconditions(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	pod := func() *corev1ac.PodApplyConfiguration {
		return corev1ac.Pod("p", ns).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithImage("busybox:1.36")))
	}
	apply := func(ac *corev1ac.PodApplyConfiguration) error {
		return env.Client.Apply(t.Context(), ac, client.FieldOwner("test-preconditions"))
	}

	if err := apply(pod().WithUID("00000000-0000-0000-0000-000000000001")); !apierrors.IsConflict(err) {
		t.Errorf("apply with a UID, no pod: %v, want a conflict (no pod created)", err)
	}
	created := pod().WithResourceVersion("1")
	if err := apply(created); err != nil {
		t.Fatalf("apply with resourceVersion 1, no pod: %v, want the pod created", err)
	}
	got := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "p"}, got); err != nil {
		t.Fatalf("the created pod: %v", err)
	}
	if len(got.ManagedFields) != 1 || got.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("the created pod's managed fields = %+v, want one Apply entry", got.ManagedFields)
	}
	if err := apply(pod().WithResourceVersion("1").WithLabels(map[string]string{"taken": "over"})); !apierrors.IsConflict(err) {
		t.Errorf("apply with resourceVersion 1 over an existing pod: %v, want a conflict", err)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "p"}, got); err != nil || got.Labels["taken"] != "" {
		t.Errorf("the existing pod after a refused create: %v, labels %v; want it unchanged", err, got.Labels)
	}
}

// TestApplyIgnoringFieldValidation pins what lets the operator send its
// applies with field validation off (controller/writer.go's
// WriteOptions): the API server still refuses an apply that names a field
// its schema does not have, of a pod and of a PodSet's status, and
// applies the same body without it.
func TestApplyIgnoringFieldValidation(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	opts := []client.PatchOption{client.FieldOwner("test-validation"), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)}
	pod := func(field string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":%q},"spec":{"containers":[{"name":"app","image":"busybox:1.36"%s}]}}`, ns, field)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
	if err := env.Client.Patch(t.Context(), target, client.RawPatch(types.ApplyPatchType, pod(`,"imagePullPolicyy":"Always"`)), opts...); err == nil || !strings.Contains(err.Error(), "imagePullPolicyy") {
		t.Errorf("pod apply naming an unknown field, validation ignored: %v, want it refused naming the field", err)
	}
	if err := env.Client.Patch(t.Context(), target, client.RawPatch(types.ApplyPatchType, pod("")), opts...); err != nil {
		t.Fatalf("pod apply, validation ignored: %v", err)
	}

	ps := fixture.PodSet(ns, "web").Obj()
	if err := env.Client.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	status := func(field string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":%q,"kind":"PodSet","metadata":{"name":"web","namespace":%q},"status":{"replicas":1%s}}`, podsetv1alpha1.GroupVersion.String(), ns, field)
	}
	if err := env.Client.Status().Patch(t.Context(), ps, client.RawPatch(types.ApplyPatchType, status(`,"readyReplicass":1`)), client.FieldOwner("test-validation"), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)); err == nil || !strings.Contains(err.Error(), "readyReplicass") {
		t.Errorf("PodSet status apply naming an unknown field, validation ignored: %v, want it refused naming the field", err)
	}
	if err := env.Client.Status().Patch(t.Context(), ps, client.RawPatch(types.ApplyPatchType, status("")), client.FieldOwner("test-validation"), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)); err != nil || ps.Status.Replicas != 1 {
		t.Errorf("PodSet status apply, validation ignored: %v, replicas %d; want 1", err, ps.Status.Replicas)
	}
}
