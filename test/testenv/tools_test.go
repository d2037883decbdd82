package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolDirsAreTheMakefiles checks that the folders ToolDirs names are
// the Makefile's: its default CONTROLPLANE and KWOK_DIR, which it also
// reads from the go.mod files of hack/.
func TestToolDirsAreTheMakefiles(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	controlplane, kwok, err := ToolDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{controlplane, kwok} {
		base := filepath.Base(dir)
		if strings.Contains(base, "--") || strings.HasSuffix(base, "-") || !strings.Contains(base, "-v") {
			t.Errorf("tool folder %s has no version", dir)
		}
	}
	if want := os.Getenv("KUBEBUILDER_ASSETS"); want != "" && want != controlplane {
		t.Errorf("ToolDirs says the control plane is in %s; the Makefile's KUBEBUILDER_ASSETS is %s", controlplane, want)
	}
	if want := os.Getenv("KWOK_DIR"); want != "" && want != kwok {
		t.Errorf("ToolDirs says kwok is in %s; the Makefile's KWOK_DIR is %s", kwok, want)
	}
}

func TestGoModVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "go.mod")
	mod := "module m\n\nrequire example.com/one v1.2.3\n\nrequire (\n\texample.com/two v0.4.0 // indirect\n)\n"
	if err := os.WriteFile(path, []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	for module, want := range map[string]string{"example.com/one": "v1.2.3", "example.com/two": "v0.4.0"} {
		if got, err := goModVersion(path, module); err != nil || got != want {
			t.Errorf("goModVersion(%s) = %q, %v; want %q", module, got, err, want)
		}
	}
	if _, err := goModVersion(path, "example.com/three"); err == nil {
		t.Error("goModVersion of a module not required: no error")
	}
}
