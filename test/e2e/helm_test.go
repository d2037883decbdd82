//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestHelmInstallUpgradeUninstall installs the chart the way the README
// says on a fresh cluster of its own, runs the operator under the chart's
// RBAC until the sample PodSet is Ready, upgrades the release with a
// changed value, and uninstalls it: the CRD, the PodSet and its pods stay.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	useNewCluster(t, clusterName+"-helm")

	// The release namespace, created and labelled beforehand as the README
	// says: the operator's pod passes Pod Security "restricted".
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := suite.client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}

	out := runHelm(t, "install", releaseName, chartPath, "--namespace", operatorNamespace,
		"--set", "image.tag="+e2eVersion, "--wait", "--timeout", waitTimeout.String())
	t.Logf("helm install:\n%s", out)
	eventually(t, "the PodSet CRD is Established", checkCRDEstablished)
	eventually(t, "Deployment podset-system/podset-operator is Available", checkOperatorDeploymentAvailable)
	checkOperatorImage(t, "ghcr.io/podset-dev/podset-operator:"+e2eVersion)
	eventually(t, "the hardening policy refuses a privileged PodSet", checkPolicyEnforced)
	eventually(t, "kubectl explain describes the fields of the embedded pod template", checkExplain)
	checkAppliedServerSide(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", client.ObjectKey{Name: crdName})
	checkAppliedServerSide(t, "apps/v1", "Deployment", client.ObjectKey{Namespace: operatorNamespace, Name: operatorName})

	// The Deployment's pod runs no code in kwok: the built binary runs
	// instead, as the chart's service account.
	op := startOperator(t)
	eventually(t, "the operator holds the leader-election Lease", checkLeaseHeld)
	podsets := newNamespace(t, "podset-helm-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	ps := applySample(t, podsets)
	installed := waitForPodSet(t, ps, 3)

	out = runHelm(t, "upgrade", releaseName, chartPath, "--namespace", operatorNamespace,
		"--set", "image.tag="+e2eVersion, "--set", "podAnnotations.example\\.com/upgraded=yes",
		"--wait", "--timeout", waitTimeout.String())
	t.Logf("helm upgrade:\n%s", out)
	eventually(t, "the Deployment's pods carry the new annotation", func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &d); err != nil {
			return err
		}
		if got := d.Spec.Template.Annotations["example.com/upgraded"]; got != "yes" {
			return fmt.Errorf("pod template annotation example.com/upgraded is %q, want yes", got)
		}
		return checkOperatorDeploymentAvailable(ctx)
	})
	upgraded := waitForPodSet(t, ps, 3)
	checkUnchanged(t, installed, upgraded)

	if err := op.stop(t); err != nil {
		t.Errorf("the operator exited with %v after SIGTERM, want status 0", err)
	}
	if lines := grepLines(op.log(t), "forbidden"); len(lines) > 0 {
		t.Errorf("the chart's RBAC is not enough: the operator log has %d forbidden lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}

	out = runHelm(t, "uninstall", releaseName, "--namespace", operatorNamespace, "--wait", "--timeout", waitTimeout.String())
	t.Logf("helm uninstall:\n%s", out)
	eventually(t, "the operator's Deployment and ClusterRole are gone", func(ctx context.Context) error {
		if err := checkGone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorName}}); err != nil {
			return err
		}
		return checkGone(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: operatorName}})
	})
	if err := checkCRDEstablished(t.Context()); err != nil {
		t.Errorf("after helm uninstall: %v", err)
	}
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), &podsetv1alpha1.PodSet{}); err != nil {
		t.Errorf("after helm uninstall, PodSet %s: %v", client.ObjectKeyFromObject(ps), err)
	}
	pods, err := listPods(t.Context(), podsets, client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(pods)); !slices.Equal(got, podNames(ps.Name, 0, 3)) {
		t.Errorf("after helm uninstall the PodSet's pods are %v, want %v", got, podNames(ps.Name, 0, 3))
	}
}

// useNewCluster starts a fresh kwok cluster called name and points the
// suite's kubeconfig and client, which every helper uses, at it until the
// test ends; then it deletes the cluster. The tests of this suite do not
// run in parallel, so only the calling test sees the switch.
func useNewCluster(t *testing.T, name string) {
	t.Helper()
	cluster := localCluster(suite.env, name)
	if err := cluster.Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cluster.Up(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := testenv.NewClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	clusterBefore, kubeconfigBefore, clientBefore := suite.cluster, suite.kubeconfig, suite.client
	suite.cluster, suite.kubeconfig, suite.client = name, kubeconfig, c
	t.Logf("cluster %s is up, kubeconfig %s", name, kubeconfig)
	t.Cleanup(func() {
		suite.cluster, suite.kubeconfig, suite.client = clusterBefore, kubeconfigBefore, clientBefore
		// t.Context() is already canceled when cleanups run.
		if err := cluster.Down(context.Background()); err != nil {
			t.Errorf("deleting cluster %s: %v", name, err)
		}
	})
}

// runHelm runs helm against the suite's current cluster and returns its
// standard output, failing the test with its standard error when it fails.
func runHelm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helm(t, append(args, "--kubeconfig", suite.kubeconfig)...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, out, describeCluster(operatorNamespace))
	}
	return out
}

// helm runs helm from the repository root with its cache, configuration
// and data in a temporary folder, and returns its standard output, or its
// standard error when it fails.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), suite.helm, args...)
	cmd.Dir = suite.root
	cmd.Env = append(cmd.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.Bytes(), err
	}
	return stdout.Bytes(), nil
}

// checkOperatorImage fails the test unless the operator's Deployment runs
// image.
func checkOperatorImage(t *testing.T, image string) {
	t.Helper()
	var d appsv1.Deployment
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("the operator's Deployment runs %s, want %s", got, image)
	}
}

// checkAppliedServerSide fails the test unless the object's fields were
// written by a server-side apply (an Apply entry in managedFields), not by
// a client-side apply or an update.
func checkAppliedServerSide(t *testing.T, apiVersion, kind string, key client.ObjectKey) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	if err := suite.client.Get(t.Context(), key, obj); err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, mf := range obj.GetManagedFields() {
		if mf.Operation == metav1.ManagedFieldsOperationApply {
			return
		}
		managers = append(managers, fmt.Sprintf("%s (%s)", mf.Manager, mf.Operation))
	}
	t.Errorf("%s %s was not applied server-side: its field managers are %v", kind, key, managers)
}
