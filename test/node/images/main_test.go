package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/podset-dev/podset-operator/hack/ociimage"
)

// imageSummary is what a node test relies on for one name in the archive.
type imageSummary struct {
	Tag        string
	User       string
	Entrypoint []string
}

func TestWriteImages(t *testing.T) {
	out := t.TempDir()
	if err := writeImages(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	images := readArchive(t, filepath.Join(out, "images.tar"))

	app := imageSummary{User: "65532:65532", Entrypoint: []string{"/app"}}
	withTag := func(s imageSummary, tag string) imageSummary { s.Tag = tag; return s }
	want := map[string]imageSummary{
		"localhost/podset-test/app:v1":     withTag(app, "v1"),
		"localhost/podset-test/app:v2":     withTag(app, "v2"),
		"localhost/podset-test/app:v3":     withTag(app, "v3"),
		"localhost/podset-test/app:stable": withTag(app, "stable"),
		"localhost/podset-test/app:crash":  withTag(app, "crash"),
		"localhost/podset-test/pause:3.10": {Tag: "3.10", User: "65532:65532", Entrypoint: []string{"/pause"}},
	}
	got := map[string]imageSummary{}
	for ref, a := range images {
		got[ref] = summarize(t, a)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("images in the archive (-want +got):\n%s", diff)
	}

	digests := map[string]string{}
	for ref, a := range images {
		d, err := a.image.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[ref] = d.String()
	}
	versions := []string{
		digests["localhost/podset-test/app:v1"],
		digests["localhost/podset-test/app:v2"],
		digests["localhost/podset-test/app:v3"],
		digests["localhost/podset-test/app:crash"],
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(versions))); len(distinct) != len(versions) {
		t.Errorf("v1, v2, v3 and crash share digests: %v", versions)
	}
	if stable, v2 := digests["localhost/podset-test/app:stable"], digests["localhost/podset-test/app:v2"]; stable != v2 {
		t.Errorf("stable is %s, want v2's digest %s", stable, v2)
	}

	wantJSON := map[string]string{}
	for ref, d := range digests {
		repo, _, _ := strings.Cut(ref, ":")
		wantJSON[ref] = d
		wantJSON[repo+"@"+d] = d
	}
	gotJSON := readDigests(t, out)
	if diff := cmp.Diff(wantJSON, gotJSON); diff != "" {
		t.Errorf("images.json (-want +got):\n%s", diff)
	}

	// A nonroot process needs a writable /tmp and an executable binary.
	wantFiles := map[string]int64{
		"etc":        0o755,
		"etc/group":  0o644,
		"etc/passwd": 0o644,
		"tmp":        0o1777,
		"app":        0o755,
	}
	if diff := cmp.Diff(wantFiles, fileModes(t, images["localhost/podset-test/app:v1"].image)); diff != "" {
		t.Errorf("files in app:v1 (-want +got):\n%s", diff)
	}

	again := t.TempDir()
	if err := writeImages(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gotJSON, readDigests(t, again)); diff != "" {
		t.Errorf("a second build changed digests (-first +second):\n%s", diff)
	}
}

func summarize(t *testing.T, a archived) imageSummary {
	t.Helper()
	cfg, err := a.image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return imageSummary{Tag: a.tag, User: cfg.Config.User, Entrypoint: cfg.Config.Entrypoint}
}

// fileModes lists img's files with their modes; it fails on any file
// not owned by root.
func fileModes(t *testing.T, img v1.Image) map[string]int64 {
	t.Helper()
	files, err := ociimage.Files(img)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int64{}
	for name, f := range files {
		if f.UID != 0 || f.GID != 0 {
			t.Errorf("%s is owned by %d:%d, want root", name, f.UID, f.GID)
		}
		modes[name] = f.Mode
	}
	return modes
}

func readDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	var digests map[string]string
	if err := json.Unmarshal(data, &digests); err != nil {
		t.Fatal(err)
	}
	return digests
}

// archived is one entry of the archive's index.
type archived struct {
	tag   string
	image v1.Image
}

// readArchive unpacks an OCI layout archive and returns its entries by
// the name ctr import gives them.
func readArchive(t *testing.T, path string) map[string]archived {
	t.Helper()
	idx, err := ociimage.ReadArchive(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]archived{}
	for _, desc := range manifest.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		images[desc.Annotations[imageNameAnnotation]] = archived{tag: desc.Annotations[refNameAnnotation], image: img}
	}
	return images
}
