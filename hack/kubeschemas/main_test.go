package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFileName(t *testing.T) {
	for _, tc := range []struct{ group, version, kind, want string }{
		{"", "v1", "ConfigMap", "configmap-v1.json"},
		{"apps", "v1", "Deployment", "deployment-apps-v1.json"},
		{"rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterrole-rbac-v1.json"},
		{"podset.dev", "v1alpha1", "PodSet", "podset-podset-v1alpha1.json"},
	} {
		if got := fileName(tc.group, tc.version, tc.kind); got != tc.want {
			t.Errorf("fileName(%q, %q, %q) = %q, want %q (kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json)", tc.group, tc.version, tc.kind, got, tc.want)
		}
	}
}

func TestStrict(t *testing.T) {
	for name, tc := range map[string]struct{ in, want map[string]any }{
		"objects with properties are closed, at every depth": {
			in: map[string]any{"type": "object", "properties": map[string]any{
				"spec": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
				"list": map[string]any{"type": "array", "items": map[string]any{"properties": map[string]any{}}},
			}},
			want: map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"spec": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"a": map[string]any{"type": "string"}}},
				"list": map[string]any{"type": "array", "items": map[string]any{"properties": map[string]any{}, "additionalProperties": false}},
			}},
		},
		"maps and preserved unknown fields stay open": {
			in: map[string]any{"properties": map[string]any{
				"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"raw":    map[string]any{"type": "object", "properties": map[string]any{}, "x-kubernetes-preserve-unknown-fields": true},
			}},
			want: map[string]any{"additionalProperties": false, "properties": map[string]any{
				"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"raw":    map[string]any{"type": "object", "properties": map[string]any{}, "x-kubernetes-preserve-unknown-fields": true},
			}},
		},
		"int-or-string takes both": {
			in:   map[string]any{"x-kubernetes-int-or-string": true},
			want: map[string]any{"x-kubernetes-int-or-string": true, "type": []any{"integer", "string"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			strict(tc.in)
			if diff := cmp.Diff(tc.want, tc.in); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
