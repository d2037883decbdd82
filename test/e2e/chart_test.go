//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// The chart, and the release the tests render it as: with this name and
// namespace its objects have the names config/default gives them.
const (
	chartPath   = "charts/podset-operator"
	releaseName = "podset-operator"
)

// helmLabels are the labels the chart adds to every object on top of
// config/default's: its declared templating points, checked for their value
// and then ignored when the chart is compared with config/.
func helmLabels(t *testing.T) map[string]string {
	t.Helper()
	chart := readChartMetadata(t)
	return map[string]string{
		"helm.sh/chart":                chart.Name + "-" + chart.Version,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/instance":   releaseName,
		"app.kubernetes.io/version":    chart.AppVersion,
	}
}

// TestChartLint runs `helm lint --strict` on the chart with its defaults
// and with every optional part turned on.
func TestChartLint(t *testing.T) {
	for name, values := range map[string][]string{
		"defaults":      nil,
		"every option":  everyOption,
		"existing cert": {"--set", "metrics.certificate.existingSecret=my-cert", "--set", "metrics.serviceMonitor.enabled=true"},
		"metrics off":   {"--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chartPath}, values...)...)
			if err != nil {
				t.Fatalf("helm lint --strict %s: %v\n%s", strings.Join(values, " "), err, out)
			}
			t.Logf("helm lint:\n%s", out)
		})
	}
}

// everyOption turns on the chart's optional objects: those of the
// config/certmanager overlay, config/prometheus (the ServiceMonitor with
// its scraper's token, the alerts, the Grafana dashboard) and
// config/network-policy.
var everyOption = []string{
	"--set", "metrics.certificate.certManager.enabled=true",
	"--set", "metrics.serviceMonitor.enabled=true",
	"--set", "metrics.prometheusRule.enabled=true",
	"--set", "metrics.grafanaDashboard.enabled=true",
	"--set", "networkPolicy.enabled=true",
}

// TestChartRendersConfigDefault compares `helm template` with default values
// and `kustomize build config/default`, object by object. The only
// differences allowed are the chart's declared templating points: Helm's
// labels on every object, helm.sh/resource-policy: keep on the CRD, and no
// Namespace (Helm installs into an existing release namespace).
func TestChartRendersConfigDefault(t *testing.T) {
	chart := helmTemplate(t)
	config := kustomizeBuild(t, "config/default")
	delete(config, "/v1, Kind=Namespace /"+operatorNamespace)
	checkSameObjects(t, config, chart)
}

// TestChartRendersOptionalConfig does the same with every option on,
// against config/certmanager (config/default with a cert-manager
// certificate for the metrics endpoint), config/prometheus and
// config/network-policy.
func TestChartRendersOptionalConfig(t *testing.T) {
	chart := helmTemplate(t, everyOption...)
	config := kustomizeBuild(t, "config/certmanager")
	maps.Copy(config, kustomizeBuild(t, "config/prometheus"))
	maps.Copy(config, kustomizeBuild(t, "config/network-policy"))
	delete(config, "/v1, Kind=Namespace /"+operatorNamespace)
	checkSameObjects(t, config, chart)
}

// TestChartValues checks that values a platform team sets land where they
// should, and that the schema refuses a misspelt one.
func TestChartValues(t *testing.T) {
	chart := helmTemplate(t,
		"--set", "image.tag=v9.9.9",
		"--set", "replicaCount=2",
		"--set", "nodeSelector.pool=system",
		"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
		"--set", "podAnnotations.team=platform",
		"--set", "crds.enabled=false",
		"--set", "admissionPolicies.enabled=false",
		"--set", "watchNamespaces={a,b}",
	)
	d := chart["apps/v1, Kind=Deployment "+operatorNamespace+"/"+operatorName]
	if d == nil {
		t.Fatal("no Deployment")
	}
	for path, want := range map[string]any{
		"spec.replicas":                                    float64(2), // testenv.ReadManifests decodes numbers as JSON does
		"spec.template.spec.containers[0].image":           "ghcr.io/podset-dev/podset-operator:v9.9.9",
		"spec.template.spec.nodeSelector":                  map[string]any{"pool": "system"},
		"spec.template.spec.tolerations":                   []any{map[string]any{"key": "dedicated", "operator": "Exists"}},
		"spec.template.metadata.annotations":               map[string]any{"kubectl.kubernetes.io/default-container": "manager", "team": "platform"},
		"spec.template.spec.containers[0].args":            []any{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--namespaces=a,b"},
		"spec.template.spec.containers[0].securityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}}},
	} {
		if diff := cmp.Diff(want, field(t, d, path)); diff != "" {
			t.Errorf("Deployment %s (-want +got):\n%s", path, diff)
		}
	}
	for key := range chart {
		for _, gone := range []string{"CustomResourceDefinition", "ValidatingAdmissionPolicy"} {
			if strings.Contains(key, gone) {
				t.Errorf("%s is rendered although it is turned off", key)
			}
		}
	}

	out, err := helmTemplateErr(t, "--set", "replicas=2")
	if err == nil || !strings.Contains(out, "replicas") {
		t.Errorf("helm template --set replicas=2 (not a value of the chart): err %v, want the schema to refuse it:\n%s", err, out)
	}
	out, err = helmTemplateErr(t, "--set", "replicaCount=2", "--set", "leaderElection.enabled=false")
	if err == nil || !strings.Contains(out, "leaderElection.enabled") {
		t.Errorf("two replicas without leader election: err %v, want a message naming leaderElection.enabled:\n%s", err, out)
	}
	out, err = helmTemplateErr(t, "--set", "metrics.serviceMonitor.enabled=true")
	if err == nil || !strings.Contains(out, "metrics.certificate") {
		t.Errorf("a ServiceMonitor without a certificate to verify: err %v, want a message naming metrics.certificate:\n%s", err, out)
	}
}

// TestChartPlatformValues checks the values platform teams ask of charts
// like cert-manager's: labels on everything, pull secrets and a registry
// mirror, the disruption budget, the ServiceMonitor's relabelings and
// credentials, and the Grafana dashboard's placement.
func TestChartPlatformValues(t *testing.T) {
	deployment := "apps/v1, Kind=Deployment " + operatorNamespace + "/" + operatorName
	pdb := "policy/v1, Kind=PodDisruptionBudget " + operatorNamespace + "/" + operatorName
	monitor := "monitoring.coreos.com/v1, Kind=ServiceMonitor " + operatorNamespace + "/" + operatorName + "-metrics"
	certificate := []string{"--set", "metrics.certificate.existingSecret=my-cert", "--set", "metrics.serviceMonitor.enabled=true"}

	chart := helmTemplate(t, append(everyOption, "--set", "commonLabels.team=platform")...)
	for key, obj := range chart {
		if got := obj.GetLabels()["team"]; got != "platform" {
			t.Errorf("%s: label team=%q, want commonLabels' platform", key, got)
		}
	}
	if got := field(t, chart[deployment], "spec.template.metadata.labels.team"); got != "platform" {
		t.Errorf("the operator's pods: label team=%v, want commonLabels' platform", got)
	}
	if got := field(t, chart[deployment], "spec.selector.matchLabels.team"); got != nil {
		t.Errorf("commonLabels reached the Deployment's selector (team=%v), which cannot change after install", got)
	}

	chart = helmTemplate(t, "--set", "global.imageRegistry=mirror.example.com:5000",
		"--set", "global.imagePullSecrets[0].name=global", "--set", "imagePullSecrets[0].name=own")
	for path, want := range map[string]any{
		"spec.template.spec.containers[0].image": "mirror.example.com:5000/podset-dev/podset-operator:" + readChartMetadata(t).AppVersion,
		"spec.template.spec.imagePullSecrets":    []any{map[string]any{"name": "global"}, map[string]any{"name": "own"}},
	} {
		if diff := cmp.Diff(want, field(t, chart[deployment], path)); diff != "" {
			t.Errorf("Deployment %s (-want +got):\n%s", path, diff)
		}
	}

	if chart := helmTemplate(t, "--set", "replicaCount=1"); chart[pdb] != nil {
		t.Error("replicaCount=1 renders a PodDisruptionBudget, which would block every drain")
	}
	chart = helmTemplate(t, "--set", "replicaCount=3", "--set", "podDisruptionBudget.maxUnavailable=1")
	if diff := cmp.Diff(map[string]any{"maxUnavailable": float64(1), "selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "podset-operator"}}}, field(t, chart[pdb], "spec")); diff != "" {
		t.Errorf("PodDisruptionBudget spec (-want +got):\n%s", diff)
	}

	chart = helmTemplate(t, append(certificate,
		"--set", "metrics.serviceMonitor.authorization.credentials.name=prometheus-token",
		"--set", "metrics.serviceMonitor.authorization.credentials.key=token",
		"--set", "metrics.serviceMonitor.relabelings[0].targetLabel=cluster",
		"--set", "metrics.serviceMonitor.relabelings[0].replacement=east",
		"--set", "metrics.serviceMonitor.metricRelabelings[0].action=drop",
		"--set", "metrics.serviceMonitor.metricRelabelings[0].sourceLabels[0]=__name__",
		"--set", "metrics.serviceMonitor.metricRelabelings[0].regex=go_.*",
		"--set", "metrics.grafanaDashboard.enabled=true",
		"--set", "metrics.grafanaDashboard.namespace=monitoring",
		"--set", "metrics.grafanaDashboard.annotations.grafana_folder=Operators")...)
	for path, want := range map[string]any{
		"spec.endpoints[0].authorization":     map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}},
		"spec.endpoints[0].relabelings":       []any{map[string]any{"targetLabel": "cluster", "replacement": "east"}},
		"spec.endpoints[0].metricRelabelings": []any{map[string]any{"action": "drop", "sourceLabels": []any{"__name__"}, "regex": "go_.*"}},
		"spec.endpoints[0].bearerTokenFile":   nil,
	} {
		if diff := cmp.Diff(want, field(t, chart[monitor], path)); diff != "" {
			t.Errorf("ServiceMonitor %s (-want +got):\n%s", path, diff)
		}
	}
	for key := range chart {
		if strings.Contains(key, "metrics-scraper") || strings.Contains(key, "metrics-token") {
			t.Errorf("%s is rendered although metrics.serviceMonitor.authorization names credentials", key)
		}
	}
	dashboard := chart["/v1, Kind=ConfigMap monitoring/"+operatorName+"-dashboard"]
	if dashboard == nil {
		t.Fatal("no dashboard ConfigMap in namespace monitoring")
	}
	if got := dashboard.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("the dashboard ConfigMap is labelled grafana_dashboard=%q, want the sidecar's 1", got)
	}
	if got := dashboard.GetAnnotations()["grafana_folder"]; got != "Operators" {
		t.Errorf("the dashboard ConfigMap's grafana_folder is %q, want Operators", got)
	}

	for _, refused := range [][]string{
		{"--set", "podDisruptionBudget.minAvalable=1"},
		{"--set", "metrics.serviceMonitor.authorization.credentials.name=only-a-name"},
		{"--set", "global.imageRegistry=https://mirror.example.com"},
	} {
		if out, err := helmTemplateErr(t, refused...); err == nil {
			t.Errorf("helm template %s: accepted, want the schema to refuse it:\n%s", strings.Join(refused, " "), out)
		}
	}
}

// TestImagesPinned checks what kube-linter's latest-tag and Polaris'
// tagNotSpecified check: every container that config/ and the chart run
// names a release, never :latest or no tag at all.
func TestImagesPinned(t *testing.T) {
	rendered := map[string]map[string]*unstructured.Unstructured{
		"config/default":           kustomizeBuild(t, "config/default"),
		"config/certmanager":       kustomizeBuild(t, "config/certmanager"),
		"the chart":                helmTemplate(t),
		"the chart, every option":  helmTemplate(t, everyOption...),
		"the chart, with a digest": helmTemplate(t, "--set", "image.digest=sha256:"+strings.Repeat("0", 64)),
	}
	for source, objs := range rendered {
		images := 0
		for key, obj := range objs {
			if obj.GetKind() != "Deployment" {
				continue
			}
			for _, c := range field(t, obj, "spec.template.spec.containers").([]any) {
				image, _ := c.(map[string]any)["image"].(string)
				images++
				ref, _, _ := strings.Cut(image, "@")
				tag := ""
				if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
					tag = ref[i+1:]
				}
				if tag == "" || tag == "latest" {
					t.Errorf("%s: %s runs %q, want a release tag", source, key, image)
				}
			}
		}
		if images == 0 {
			t.Errorf("%s: no container found", source)
		}
	}
}

// checkSameObjects fails the test for every object that is only in one of
// config and chart, and for every difference between the two versions of
// an object beyond the chart's declared templating points.
func checkSameObjects(t *testing.T, config, chart map[string]*unstructured.Unstructured) {
	t.Helper()
	if diff := cmp.Diff(slices.Sorted(maps.Keys(config)), slices.Sorted(maps.Keys(chart))); diff != "" {
		t.Errorf("objects (-kustomize build +helm template):\n%s", diff)
	}
	want := helmLabels(t)
	for key, c := range chart {
		labels := c.GetLabels()
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", key, k, labels[k], v)
			}
			delete(labels, k)
		}
		c.SetLabels(labels)
		if c.GetKind() == "CustomResourceDefinition" {
			annotations := c.GetAnnotations()
			if annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s: no annotation helm.sh/resource-policy: keep, so helm uninstall would delete every PodSet", key)
			}
			delete(annotations, "helm.sh/resource-policy")
			c.SetAnnotations(annotations)
		}
		k, ok := config[key]
		if !ok {
			continue
		}
		if diff := cmp.Diff(k.Object, c.Object); diff != "" {
			t.Errorf("%s differs beyond the declared templating points (-kustomize build +helm template):\n%s", key, diff)
		}
	}
}

// helmTemplate renders the chart as release podset-operator in
// podset-system with the given flags and returns its objects by key.
func helmTemplate(t *testing.T, flags ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := helmTemplateErr(t, flags...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return decodeObjects(t, []byte(out))
}

// helmTemplateErr runs helm template and returns its output (standard error
// instead, when it fails).
func helmTemplateErr(t *testing.T, flags ...string) (string, error) {
	t.Helper()
	out, err := helm(t, append([]string{"template", releaseName, chartPath, "--namespace", operatorNamespace}, flags...)...)
	return string(out), err
}

// kustomizeBuild returns the objects `kustomize build dir` prints, by key.
func kustomizeBuild(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	return decodeObjects(t, runTool(t, nil, suite.kustomize, "build", filepath.Join(suite.root, dir)))
}

// decodeObjects decodes a multi-document manifest into objects keyed by
// group, version, kind, namespace and name, failing on duplicates.
func decodeObjects(t *testing.T, manifest []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.ReadManifests(path)
	if err != nil {
		t.Fatal(err)
	}
	byKey := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		key := fmt.Sprintf("%s %s/%s", o.GroupVersionKind(), o.GetNamespace(), o.GetName())
		if _, dup := byKey[key]; dup {
			t.Errorf("%s appears twice", key)
		}
		byKey[key] = o
	}
	return byKey
}

// field returns the value at a dotted path of obj, where a segment may end
// in [i] to index a list.
func field(t *testing.T, obj *unstructured.Unstructured, path string) any {
	t.Helper()
	var v any = obj.Object
	for seg := range strings.SplitSeq(path, ".") {
		name, index, indexed := strings.Cut(strings.TrimSuffix(seg, "]"), "[")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
		if indexed {
			list, ok := v.([]any)
			var i int
			if _, err := fmt.Sscan(index, &i); err != nil || !ok || i >= len(list) {
				return nil
			}
			v = list[i]
		}
	}
	return v
}

// chartMetadata is what the tests read from Chart.yaml.
type chartMetadata struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func readChartMetadata(t *testing.T) chartMetadata {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, chartPath, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m chartMetadata
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s/Chart.yaml: %v", chartPath, err)
	}
	return m
}
