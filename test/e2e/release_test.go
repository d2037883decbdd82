//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestReleaseFiles runs `make release` into a temporary folder (leaving the
// GitOps examples alone) and checks what a user downloads: install.yaml is
// config/default with the image pinned to the release, and the packaged
// chart has the release's version and renders the same image.
func TestReleaseFiles(t *testing.T) {
	const version = "v9.8.7"
	const image = "ghcr.io/podset-dev/podset-operator:" + version
	dist := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "make", "release", "VERSION="+version, "DIST="+dist, "GITOPS_EXAMPLES=",
		"KUSTOMIZE="+suite.kustomize, "HELM="+suite.helm)
	cmd.Dir = suite.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}

	manifest, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	installYAML := decodeObjects(t, manifest)
	config := kustomizeBuild(t, "config/default")
	deployment := "apps/v1, Kind=Deployment " + operatorNamespace + "/" + operatorName
	for _, objs := range []map[string]*unstructured.Unstructured{installYAML, config} {
		if objs[deployment] == nil {
			t.Fatalf("no %s", deployment)
		}
	}
	if got := field(t, installYAML[deployment], "spec.template.spec.containers[0].image"); got != image {
		t.Errorf("install.yaml runs %v, want %s", got, image)
	}
	containers := field(t, config[deployment], "spec.template.spec.containers").([]any)
	containers[0].(map[string]any)["image"] = image
	if diff := cmp.Diff(config, installYAML); diff != "" {
		t.Errorf("install.yaml is not config/default with the image pinned (-config/default +install.yaml):\n%s", diff)
	}

	chart := filepath.Join(dist, "podset-operator-"+version[1:]+".tgz")
	out, err := helm(t, "template", releaseName, chart, "--namespace", operatorNamespace)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", chart, err, out)
	}
	rendered := decodeObjects(t, out)
	if got := field(t, rendered[deployment], "spec.template.spec.containers[0].image"); got != image {
		t.Errorf("the packaged chart runs %v, want %s", got, image)
	}
	if got := rendered[deployment].GetLabels()["helm.sh/chart"]; got != "podset-operator-"+version[1:] {
		t.Errorf("the packaged chart's objects are labelled helm.sh/chart=%s, want podset-operator-%s", got, version[1:])
	}
}
