//go:build e2e

package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestReleaseFiles runs `make release` into a temporary folder (leaving the
// GitOps examples, the release pins and the repository's krew manifest
// alone) and checks what a user downloads: the image archive with its
// digest, install.yaml is config/default with the image pinned to the
// release's tag and digest, the packaged chart has the release's version
// and renders the same image, the krew manifest names the release's plugin
// archives with their digests, and checksums.txt lists every file.
func TestReleaseFiles(t *testing.T) {
	const version = "v9.8.7"
	dist := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "make", "release", "VERSION="+version, "DIST="+dist,
		"GITOPS_EXAMPLES=", "KREW_MANIFEST=", "RELEASE_PINS=",
		// One platform's plugin archive and image: cross-builds cost CI
		// minutes and test nothing more (hack/image's test checks the
		// image). No SBOMs: syft takes about 13 minutes to build on a cold
		// cache, and its step is the one `make image` runs.
		"PLUGIN_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH,
		"IMAGE_PLATFORMS=linux/"+runtime.GOARCH, "SBOM=0",
		"KUSTOMIZE="+suite.kustomize, "HELM="+suite.helm)
	cmd.Dir = suite.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	status := exec.CommandContext(t.Context(), "git", "status", "--porcelain", "--", "plugins", "config", "charts")
	status.Dir = suite.root
	if out, err := status.Output(); err != nil || len(out) != 0 {
		t.Errorf("make release with GITOPS_EXAMPLES= KREW_MANIFEST= RELEASE_PINS= changed the work tree (%v):\n%s", err, out)
	}
	checkKrewManifest(t, dist, version)
	checkChecksums(t, dist)

	digest, err := os.ReadFile(filepath.Join(dist, "podset-operator_"+version+"_oci.digest"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dist, "podset-operator_"+version+"_oci.tar")); err != nil {
		t.Errorf("the image archive: %v", err)
	}
	image := "ghcr.io/podset-dev/podset-operator:" + version + "@" + strings.TrimSpace(string(digest))

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
	out, err = helm(t, "show", "chart", chart)
	if err != nil {
		t.Fatalf("helm show chart %s: %v\n%s", chart, err, out)
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(out, &meta); err != nil {
		t.Fatal(err)
	}
	if images := meta.Annotations["artifacthub.io/images"]; !strings.Contains(images, "image: "+image+"\n") {
		t.Errorf("the packaged chart's artifacthub.io/images does not name %s:\n%s", image, images)
	}
}

// checkChecksums checks that dist/checksums.txt lists every other file of
// dist with its sha256, as `sha256sum --check` reads it.
func checkChecksums(t *testing.T, dist string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		sum, file, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Errorf("checksums.txt: line %q is not <sha256>  <file>", line)
			continue
		}
		listed[file] = sum
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "checksums.txt" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if sum := fmt.Sprintf("%x", sha256.Sum256(data)); listed[e.Name()] != sum {
			t.Errorf("checksums.txt lists %s with sha256 %q, the file has %s", e.Name(), listed[e.Name()], sum)
		}
		delete(listed, e.Name())
	}
	for file := range listed {
		t.Errorf("checksums.txt lists %s, which is not in dist", file)
	}
}

// checkKrewManifest checks the krew manifest that `make release` wrote into
// dist: the release's version and URIs for every platform, and for the
// platform built, an archive in dist whose sha256 is the one named.
func checkKrewManifest(t *testing.T, dist, version string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dist, "podset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plugin struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &plugin); err != nil {
		t.Fatalf("dist/podset.yaml: %v", err)
	}
	if plugin.Spec.Version != version {
		t.Errorf("the krew manifest names version %q, want %s", plugin.Spec.Version, version)
	}
	if len(plugin.Spec.Platforms) == 0 {
		t.Fatal("the krew manifest lists no platform")
	}
	built := 0
	for _, p := range plugin.Spec.Platforms {
		archive := path.Base(p.URI)
		if !strings.Contains(p.URI, "/download/"+version+"/") || !strings.HasPrefix(archive, "kubectl-podset_"+version+"_") {
			t.Errorf("platform URI %s is not the %s release's", p.URI, version)
		}
		if archive != "kubectl-podset_"+version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz" {
			continue
		}
		built++
		data, err := os.ReadFile(filepath.Join(dist, archive))
		if err != nil {
			t.Errorf("the krew manifest names %s, which the release did not write: %v", archive, err)
			continue
		}
		if sum := fmt.Sprintf("%x", sha256.Sum256(data)); sum != p.SHA256 {
			t.Errorf("%s: the krew manifest says sha256 %s, the archive has %s", archive, p.SHA256, sum)
		}
	}
	if built != 1 {
		t.Errorf("the krew manifest lists %s/%s %d times, want once", runtime.GOOS, runtime.GOARCH, built)
	}
}
