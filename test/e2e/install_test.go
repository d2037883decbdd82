//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// What config/default installs.
const (
	operatorNamespace  = "podset-system"
	operatorName       = "podset-operator"
	crdName            = "podsets.podset.dev"
	hardeningPolicy    = "podset-hardening.podset.dev"
	leaderElectionName = "podset-operator.podset.dev"
)

// installation is the result of the one install of the run, shared by the
// tests that need the operator installed.
var installation struct {
	once sync.Once
	// objects are the objects `kustomize build config/default` printed.
	objects []*unstructured.Unstructured
	err     error
}

// TestInstallWithKustomize installs config/default the documented way and
// checks that it comes up: every object is there, the CRD is established,
// the admission policy refuses a privileged template, and the operator's
// Deployment becomes Available.
func TestInstallWithKustomize(t *testing.T) {
	objects := install(t)

	for _, want := range objects {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(want), got); err != nil {
			t.Errorf("%s %s from the build is not in the cluster: %v", want.GetKind(), client.ObjectKeyFromObject(want), err)
		}
	}

	eventually(t, "the PodSet CRD is Established", checkCRDEstablished)
	eventually(t, "kubectl explain describes the fields of the embedded pod template", checkExplain)

	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := suite.client.Get(t.Context(), client.ObjectKey{Name: hardeningPolicy}, &binding); err != nil {
		t.Fatalf("the policy binding: %v", err)
	}
	if binding.Spec.PolicyName != hardeningPolicy {
		t.Errorf("the binding %s binds policy %q, want %q", binding.Name, binding.Spec.PolicyName, hardeningPolicy)
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	if err := suite.client.Get(t.Context(), client.ObjectKey{Name: hardeningPolicy}, &policy); err != nil {
		t.Fatalf("the ValidatingAdmissionPolicy: %v", err)
	}
	eventually(t, "the hardening policy refuses a privileged PodSet", checkPolicyEnforced)

	eventually(t, "Deployment podset-system/podset-operator is Available", checkOperatorDeploymentAvailable)
}

// install runs `kustomize build config/default | kubectl apply
// --server-side` once per run (the tests that need the operator installed
// share it) and returns the objects of the build.
func install(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	installation.once.Do(func() {
		manifest := runTool(t, nil, suite.kustomize, "build", filepath.Join(suite.root, "config", "default"))
		path := filepath.Join(t.TempDir(), "install.yaml")
		if installation.err = os.WriteFile(path, manifest, 0o644); installation.err != nil {
			return
		}
		if installation.objects, installation.err = testenv.ReadManifests(path); installation.err != nil {
			return
		}
		if len(installation.objects) == 0 {
			installation.err = errors.New("kustomize build config/default printed no objects")
			return
		}
		out := runTool(t, nil, suite.kubectl, "--kubeconfig", suite.kubeconfig,
			"apply", "--server-side", "--field-manager=podset-install", "-f", path)
		t.Logf("kubectl apply --server-side:\n%s", out)
	})
	if installation.err != nil {
		t.Fatalf("installing config/default: %v", installation.err)
	}
	if installation.objects == nil {
		t.Fatal("installing config/default failed in an earlier test")
	}
	return installation.objects
}

// requireInstalled installs config/default if no test has, and waits until
// the PodSet API is served.
func requireInstalled(t *testing.T) {
	t.Helper()
	install(t)
	eventually(t, "the PodSet CRD is Established", checkCRDEstablished)
}

// checkCRDEstablished is nil once the PodSet CRD has the condition
// Established=True, that is once the API server serves PodSets.
func checkCRDEstablished(ctx context.Context) error {
	return testenv.CRDEstablished(ctx, suite.client, crdName)
}

// checkExplain is nil once `kubectl explain` prints the description of a
// field deep in the PodSet's pod template (the CRD keeps every description;
// the API server publishes the schema a moment after the CRD is Established).
func checkExplain(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, suite.kubectl, "--kubeconfig", suite.kubeconfig,
		"explain", "podset.spec.template.spec.containers.image").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl explain: %w\n%s", err, out)
	}
	// The description core/v1 gives Container.image.
	const want = "Container image name."
	if !strings.Contains(string(out), want) {
		return fmt.Errorf("kubectl explain podset.spec.template.spec.containers.image does not say %q:\n%s", want, out)
	}
	return nil
}

// checkPolicyEnforced is nil once a dry-run create of a privileged PodSet is
// refused: the API server enforces a new policy only after its informers
// have seen it.
func checkPolicyEnforced(ctx context.Context) error {
	ps := &podsetv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: "default"},
		Spec: podsetv1alpha1.PodSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
		}}},
	}
	err := suite.client.Create(ctx, ps, client.DryRunAll)
	switch {
	case err == nil:
		return errors.New("a privileged PodSet was admitted")
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		return nil
	default:
		return err
	}
}

// checkOperatorDeploymentAvailable is nil once the operator's Deployment
// has rolled out its current generation and is Available.
func checkOperatorDeploymentAvailable(ctx context.Context) error {
	var d appsv1.Deployment
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &d); err != nil {
		return err
	}
	if d.Status.ObservedGeneration != d.Generation {
		return fmt.Errorf("observed generation %d of %d", d.Status.ObservedGeneration, d.Generation)
	}
	if d.Status.AvailableReplicas != ptr.Deref(d.Spec.Replicas, 1) {
		return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1))
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("not Available: conditions %+v", d.Status.Conditions)
}
