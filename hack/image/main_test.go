package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/podset-dev/podset-operator/hack/ociimage"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestImageMatchesDockerfile builds the image for the host's architecture
// and compares it with what the Dockerfile describes: the binary built by
// the same command, copied to the same path, the same user and entrypoint,
// and the files and configuration of the distroless static :nonroot base.
func TestImageMatchesDockerfile(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	df := readDockerfile(t, filepath.Join(root, "Dockerfile"))

	const version = "v0.0.0-imagetest"
	out := t.TempDir()
	digest, err := build(t.Context(), options{version: version, repo: "example.com/podset-operator", out: out, platforms: []string{"linux/" + runtime.GOARCH}})
	if err != nil {
		t.Fatal(err)
	}
	img := readImage(t, out, version, digest)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}

	// The Dockerfile's build line, with its variables as this build sets them.
	wantBuild := strings.Join(append([]string{"CGO_ENABLED=0", "go"}, buildArgs("${VERSION}", "/out/podset-operator")...), " ")
	wantBuild = strings.Replace(wantBuild, " -buildvcs=false", "", 1)
	wantBuild = strings.Replace(wantBuild, "-ldflags -X main.version=${VERSION}", `-ldflags "-X main.version=${VERSION}"`, 1)
	if df.build != wantBuild {
		t.Errorf("the Dockerfile builds with\n  %s\nthe image builder with\n  %s", df.build, wantBuild)
	}
	if df.copyTo != entrypoint {
		t.Errorf("the Dockerfile copies the binary to %s, the image has it at %s", df.copyTo, entrypoint)
	}
	// What distroless static :nonroot sets, and what the Dockerfile adds.
	want := v1.Config{
		User:       df.user,
		Entrypoint: df.entrypoint,
		WorkingDir: "/home/nonroot",
		Env:        []string{ociimage.Path, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
	}
	got := cfg.Config
	got.Labels = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image configuration (-Dockerfile and distroless +image):\n%s", diff)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != version {
		t.Errorf("label org.opencontainers.image.version = %q, want %s", cfg.Config.Labels["org.opencontainers.image.version"], version)
	}
	if !strings.HasSuffix(df.base, "distroless/static-debian12:nonroot") {
		t.Errorf("the Dockerfile's runtime stage is FROM %s; this test compares with distroless static :nonroot", df.base)
	}

	files, err := ociimage.Files(img)
	if err != nil {
		t.Fatal(err)
	}
	type fileInfo struct {
		mode     int64
		uid, gid int
		dir      bool
	}
	for name, want := range map[string]fileInfo{
		"etc/passwd":                        {mode: 0o644},
		"etc/group":                         {mode: 0o644},
		"etc/nsswitch.conf":                 {mode: 0o644},
		"etc/ssl/certs/ca-certificates.crt": {mode: 0o644},
		"home/nonroot":                      {mode: 0o700, uid: 65532, gid: 65532, dir: true},
		"root":                              {mode: 0o700, dir: true},
		"tmp":                               {mode: 0o1777, dir: true},
		"podset-operator":                   {mode: 0o755},
		"usr/share/zoneinfo/Europe/Berlin":  {mode: 0o644},
	} {
		f, ok := files[name]
		if !ok {
			t.Errorf("no /%s in the image", name)
			continue
		}
		if got := (fileInfo{mode: f.Mode, uid: f.UID, gid: f.GID, dir: f.Dir}); got != want {
			t.Errorf("/%s: %+v, want %+v", name, got, want)
		}
	}
	if !strings.Contains(string(files["etc/passwd"].Data), "nonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", files["etc/passwd"].Data)
	}
	if !strings.Contains(string(files["etc/group"].Data), "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group 65532:\n%s", files["etc/group"].Data)
	}
	if n := countCertificates(t, files["etc/ssl/certs/ca-certificates.crt"].Data); n < 100 {
		t.Errorf("the CA bundle has %d certificates, want the Mozilla roots (over 100)", n)
	}
	if _, err := time.LoadLocationFromTZData("Europe/Berlin", files["usr/share/zoneinfo/Europe/Berlin"].Data); err != nil {
		t.Errorf("/usr/share/zoneinfo/Europe/Berlin: %v", err)
	}

	// The binary is the operator of this version.
	bin := filepath.Join(t.TempDir(), "podset-operator")
	if err := os.WriteFile(bin, files["podset-operator"].Data, 0o755); err != nil {
		t.Fatal(err)
	}
	printed, err := exec.CommandContext(t.Context(), bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(printed), version) {
		t.Errorf("podset-operator --version: %v, %q, want %s", err, printed, version)
	}

	again, err := build(t.Context(), options{version: version, repo: "example.com/podset-operator", out: t.TempDir(), platforms: []string{"linux/" + runtime.GOARCH}})
	if err != nil {
		t.Fatal(err)
	}
	if again != digest {
		t.Errorf("a second build has digest %s, the first %s: the build is not reproducible", again, digest)
	}
}

// dockerfile is what the test reads from the Dockerfile.
type dockerfile struct {
	build      string // the RUN line that runs go build, without RUN
	base       string // the last FROM
	copyTo     string // where the last COPY puts the binary
	user       string
	entrypoint []string
}

func readDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	entrypoint := regexp.MustCompile(`^ENTRYPOINT \["([^"]+)"\]$`)
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "RUN ") && strings.Contains(line, " go build "):
			df.build = strings.TrimPrefix(line, "RUN ")
			// The output path is the Dockerfile's; the rest must match.
		case strings.HasPrefix(line, "FROM "):
			df.base = fields[len(fields)-1]
			if len(fields) > 2 && fields[len(fields)-2] == "AS" {
				df.base = fields[len(fields)-3]
			}
		case strings.HasPrefix(line, "COPY --from="):
			df.copyTo = fields[len(fields)-1]
		case strings.HasPrefix(line, "USER "):
			df.user = fields[1]
		case entrypoint.MatchString(line):
			df.entrypoint = []string{entrypoint.FindStringSubmatch(line)[1]}
		}
	}
	return df
}

// readImage reads the image of the host's platform from the archive that
// build wrote.
func readImage(t *testing.T, out, version string, digest v1.Hash) v1.Image {
	t.Helper()
	written, err := os.ReadFile(filepath.Join(out, strings.TrimSuffix(archiveName(version), ".tar")+".digest"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(written)) != digest.String() {
		t.Errorf("the digest file says %s, the build returned %s", written, digest)
	}
	root, err := ociimage.ReadArchive(filepath.Join(out, archiveName(version)), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := root.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Platform == nil || manifest.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("the index lists %+v, want one image for linux/%s", manifest.Manifests, runtime.GOARCH)
	}
	img, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func countCertificates(t *testing.T, bundle []byte) int {
	t.Helper()
	n := 0
	for block, rest := pem.Decode(bundle); block != nil; block, rest = pem.Decode(rest) {
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("certificate %d of the CA bundle: %v", n, err)
		}
		n++
	}
	return n
}
