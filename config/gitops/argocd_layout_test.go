package gitops_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// healthTests is a health_test.yaml of Argo CD's resource_customizations.
type healthTests struct {
	Tests []struct {
		HealthStatus argoHealth `json:"healthStatus"`
		InputPath    string     `json:"inputPath"`
	} `json:"tests"`
}

// TestArgoCDResourceCustomizations runs every case of every health_test.yaml
// under argocd/resource_customizations through the health.lua beside it,
// the way Argo CD tests its built-in health checks (TestLuaHealthScript in
// argoproj/argo-cd util/lua): the input decoded from YAML, the script run,
// its status and message compared with the expected ones.
func TestArgoCDResourceCustomizations(t *testing.T) {
	forEachCustomization(t, "health.lua", func(path, dir string) error {
		script, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
		if err != nil {
			return err
		}
		var tests healthTests
		if err := yaml.UnmarshalStrict(data, &tests); err != nil {
			return err
		}
		if len(tests.Tests) == 0 {
			t.Errorf("%s has no tests", filepath.Join(dir, "health_test.yaml"))
		}
		for _, tc := range tests.Tests {
			t.Run(filepath.Join(filepath.Base(filepath.Dir(dir)), filepath.Base(dir), tc.InputPath), func(t *testing.T) {
				got, err := runArgoHealthCheck(t.Context(), string(script), readObject(t, dir, tc.InputPath))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.HealthStatus, got); diff != "" {
					t.Errorf("health (-health_test.yaml +health.lua):\n%s", diff)
				}
			})
		}
		return nil
	})
}

// TestArgoCDResourceCustomizationIsHealthLua keeps one source of the
// script: the health.lua in Argo CD's layout (a symbolic link) reads as
// config/gitops/argocd/health.lua, which the other tests run and the
// argocd-cm snippet embeds.
func TestArgoCDResourceCustomizationIsHealthLua(t *testing.T) {
	want := readConfig(t, "gitops", "argocd", "health.lua")
	got, err := os.ReadFile(filepath.Join(customizationsRoot(t), "podset.dev", "PodSet", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("resource_customizations/podset.dev/PodSet/health.lua differs from argocd/health.lua (-argocd/health.lua +resource_customizations):\n%s", diff)
	}
}

// forEachCustomization calls fn with the path and the folder of every file
// named name under argocd/resource_customizations, and fails the test if fn
// fails or there is no such file.
func forEachCustomization(t *testing.T, name string, fn func(path, dir string) error) {
	t.Helper()
	root := customizationsRoot(t)
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != name {
			return err
		}
		found++
		return fn(path, filepath.Dir(path))
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatalf("no %s under %s", name, root)
	}
}

func customizationsRoot(t *testing.T) string {
	t.Helper()
	return configPath(t, "gitops", "argocd", "resource_customizations")
}
