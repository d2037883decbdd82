package gitops_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// gitopsExamples are the Argo CD and Flux examples that install the
// operator or PodSets from this repository.
var gitopsExamples = []string{
	filepath.Join("argocd", "application.yaml"),
	filepath.Join("argocd", "application-helm.yaml"),
	filepath.Join("flux", "podset-operator.yaml"),
	filepath.Join("flux", "podset-operator-helm.yaml"),
}

// release is a released version: a Git tag and an image tag.
var release = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// examplePins is every version the GitOps examples pin, by where: an Argo
// CD Application's revision and images, a Flux source's tag or branch, a
// Kustomization's images, a HelmRelease's image tag.
func examplePins(t *testing.T) map[string]string {
	t.Helper()
	pinning := []struct {
		kind, field string
		path        []string
	}{
		{"Application", "source.targetRevision", []string{"spec", "source", "targetRevision"}},
		{"Application", "source.kustomize.images", []string{"spec", "source", "kustomize", "images"}},
		{"Application", "source.helm.valuesObject.image.tag", []string{"spec", "source", "helm", "valuesObject", "image", "tag"}},
		{"GitRepository", "ref.tag", []string{"spec", "ref", "tag"}},
		{"GitRepository", "ref.branch", []string{"spec", "ref", "branch"}}, // a branch is never a release
		{"Kustomization", "images", []string{"spec", "images"}},
		{"HelmRelease", "values.image.tag", []string{"spec", "values", "image", "tag"}},
	}
	pins := map[string]string{}
	for _, file := range gitopsExamples {
		for _, obj := range readConfigManifests(t, "gitops", file) {
			for _, p := range pinning {
				if obj.GetKind() != p.kind {
					continue
				}
				value, found, _ := unstructured.NestedFieldNoCopy(obj.Object, p.path...)
				if !found {
					continue
				}
				for i, v := range versionsIn(value) {
					pins[fmt.Sprintf("%s: %s %s %s[%d]", file, p.kind, obj.GetName(), p.field, i)] = v
				}
			}
		}
	}
	return pins
}

// TestGitOpsExamplesPinOneRelease checks that every example installs a
// release, never a branch: each Git revision and each image tag it sets is
// one and the same vX.Y.Z, which `make release` rewrites, and the one that
// config/manager and the chart name.
func TestGitOpsExamplesPinOneRelease(t *testing.T) {
	pins := examplePins(t) // where -> version
	if len(pins) == 0 {
		t.Fatal("no pinned versions found in the GitOps examples")
	}
	// What a checkout installs names the same release: config/manager's
	// image tag and the chart's appVersion (and version, without the v).
	for _, obj := range readConfigManifests(t, "manager", "kustomization.yaml") {
		images, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "images")
		for i, v := range versionsIn(images) {
			pins[fmt.Sprintf("config/manager/kustomization.yaml: images[%d].newTag", i)] = v
		}
	}
	raw, err := os.ReadFile(repoPath(t, "charts", "podset-operator", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	pins["charts/podset-operator/Chart.yaml: appVersion"] = chart.AppVersion
	pins["charts/podset-operator/Chart.yaml: v + version"] = "v" + chart.Version
	var first string
	for where, v := range pins {
		if !release.MatchString(v) {
			t.Errorf("%s is %q, not a release vX.Y.Z", where, v)
		}
		if first == "" {
			first = v
		}
		if v != first {
			t.Errorf("the examples pin different releases: %s is %s, another pin is %s", where, v, first)
		}
	}
	t.Logf("%d pins, all %s", len(pins), first)
}

// imageTag is the tag of an image reference.
var imageTag = regexp.MustCompile(`:([^:/]+)$`)

// versionsIn returns the versions a pinning field holds: a string itself,
// the tag of each "image:tag" of Argo CD's kustomize.images, and each newTag
// of Flux's images.
func versionsIn(value any) []string {
	switch v := value.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, item := range v {
			switch i := item.(type) {
			case string: // Argo CD: image:tag
				if m := imageTag.FindStringSubmatch(i); m != nil {
					out = append(out, m[1])
				} else {
					out = append(out, "(no tag in "+i+")")
				}
			case map[string]any: // Flux: {name, newTag}
				tag, _ := i["newTag"].(string)
				out = append(out, tag)
			}
		}
		return out
	}
	return nil
}

// TestFluxSamplesLeaveReplicasToTheScaler applies the patches of the Flux
// example's podset-samples Kustomization to config/samples/podset.yaml, as
// kustomize-controller does: the PodSet comes out without spec.replicas
// (so an HPA or `kubectl scale` owns the count) and otherwise unchanged.
func TestFluxSamplesLeaveReplicasToTheScaler(t *testing.T) {
	var patches []any
	for _, obj := range readConfigManifests(t, "gitops", filepath.Join("flux", "podset-operator.yaml")) {
		if obj.GetKind() == "Kustomization" && obj.GetName() == "podset-samples" {
			patches, _, _ = unstructured.NestedSlice(obj.Object, "spec", "patches")
		}
	}
	if len(patches) != 1 {
		t.Fatalf("the podset-samples Kustomization has %d patches, want 1", len(patches))
	}
	samples := readConfigManifests(t, "samples", "podset.yaml")
	if len(samples) != 1 {
		t.Fatalf("config/samples/podset.yaml: want one PodSet, got %d objects", len(samples))
	}
	sample := samples[0]
	target, _ := patches[0].(map[string]any)["target"].(map[string]any)
	if target["group"] != "podset.dev" || target["kind"] != sample.GetKind() {
		t.Fatalf("the patch targets %v, not PodSets", target)
	}
	patchJSON, err := yaml.YAMLToJSON([]byte(patches[0].(map[string]any)["patch"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(sample.Object)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ops.Apply(in)
	if err != nil {
		t.Fatalf("the patch does not apply to config/samples/podset.yaml: %v", err)
	}
	patched := &unstructured.Unstructured{}
	if err := json.Unmarshal(out, &patched.Object); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(patched.Object, "spec", "replicas"); found {
		t.Error("the patched sample still sets spec.replicas")
	}
	unstructured.RemoveNestedField(sample.Object, "spec", "replicas")
	if diff := cmp.Diff(sample.Object, patched.Object); diff != "" {
		t.Errorf("the patch changed more than spec.replicas (-sample without replicas +patched):\n%s", diff)
	}
}
