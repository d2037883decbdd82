// Command image builds the operator's image without a container engine:
// the static binary of the Dockerfile's `go build` line, for each
// platform, on a base shaped like distroless static :nonroot that is made
// here (hack/ociimage), as one multi-platform image index in an OCI image
// layout archived to <out>/podset-operator_<version>_oci.tar. The index's
// digest, which a push keeps, is written beside it to
// <out>/podset-operator_<version>_oci.digest.
//
//	go run ./hack/image -version v0.2.0 -out dist
//
// The same commit, version and Go toolchain give the same digests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/podset-dev/podset-operator/hack/ociimage"
)

// The Dockerfile's runtime stage: where the binary goes and what runs.
const entrypoint = "/podset-operator"

// Annotations of the layout's index entry: the tag, and the name that
// `ctr images import` gives the image.
const (
	refNameAnnotation   = "org.opencontainers.image.ref.name"
	imageNameAnnotation = "io.containerd.image.name"
)

// options are the command's flags.
type options struct {
	version, repo, revision, out string
	platforms                    []string
}

func main() {
	var o options
	var platforms string
	flag.StringVar(&o.version, "version", "", "release stamped into the binary (main.version) and the image's tag")
	flag.StringVar(&o.repo, "repo", "ghcr.io/podset-dev/podset-operator", "image repository")
	flag.StringVar(&o.revision, "revision", "", "Git commit, for the org.opencontainers.image.revision label (empty: no label)")
	flag.StringVar(&o.out, "out", "dist", "directory to write the archive and its digest to")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	if o.version == "" {
		fmt.Fprintln(os.Stderr, "image: -version is required")
		os.Exit(2)
	}
	digest, err := build(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s@%s\n", o.repo, o.version, digest)
}

// archiveName is the file name of the image's OCI layout archive.
func archiveName(version string) string { return "podset-operator_" + version + "_oci.tar" }

// build writes the image index of o into o.out and returns its digest.
func build(ctx context.Context, o options) (v1.Hash, error) {
	tag, err := name.NewTag(o.repo + ":" + o.version)
	if err != nil {
		return v1.Hash{}, err
	}
	work, err := os.MkdirTemp("", "podset-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(work) }()

	baseFiles, err := ociimage.Base(ctx)
	if err != nil {
		return v1.Hash{}, err
	}
	base, err := ociimage.Layer(baseFiles)
	if err != nil {
		return v1.Hash{}, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return v1.Hash{}, err
		}
		if platform.OS != "linux" {
			return v1.Hash{}, fmt.Errorf("platform %s: the image is for linux only", p)
		}
		bin := filepath.Join(work, "podset-operator-"+platform.Architecture)
		if err := compile(ctx, o.version, platform.Architecture, bin); err != nil {
			return v1.Hash{}, err
		}
		img, err := newImage(o, base, bin, platform.Architecture)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("platform %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: platform.Architecture}},
		})
	}

	layoutDir := filepath.Join(work, "layout")
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	err = lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		refNameAnnotation:   tag.TagStr(),
		imageNameAnnotation: tag.Name(),
	}))
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	archive, err := ociimage.TarDir(layoutDir)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return v1.Hash{}, err
	}
	archivePath := filepath.Join(o.out, archiveName(o.version))
	return digest, errors.Join(
		ociimage.WriteIfChanged(archivePath, archive),
		ociimage.WriteIfChanged(strings.TrimSuffix(archivePath, ".tar")+".digest", []byte(digest.String()+"\n")))
}

// buildArgs is the Dockerfile's build command (`CGO_ENABLED=0 go build
// -trimpath -ldflags "-X main.version=${VERSION}" -o ... .`) with
// -buildvcs=false, which Docker gets from .dockerignore leaving .git out.
func buildArgs(version, out string) []string {
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", "-X main.version=" + version, "-o", out, "."}
}

// compile builds the operator for linux/arch into out.
func compile(ctx context.Context, version, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", buildArgs(version, out)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s (GOARCH=%s): %w", strings.Join(buildArgs(version, out), " "), arch, err)
	}
	return nil
}

// newImage is the Dockerfile's runtime stage: the base, the binary at
// entrypoint, run as nonroot.
func newImage(o options, base v1.Layer, bin, arch string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	app, err := ociimage.Layer([]ociimage.File{ociimage.Regular(entrypoint[1:], 0o755, binary)})
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "podset-operator",
		"org.opencontainers.image.description": "PodSet operator: N pods with stable names from one template, hardened to Pod Security restricted",
		"org.opencontainers.image.source":      "https://github.com/podset-dev/podset-operator",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     o.version,
	}
	if o.revision != "" {
		labels["org.opencontainers.image.revision"] = o.revision
	}
	return ociimage.New(ociimage.Config{
		Architecture: arch,
		Entrypoint:   []string{entrypoint},
		WorkingDir:   ociimage.BaseWorkingDir,
		Env:          ociimage.BaseEnv,
		Labels:       labels,
	},
		ociimage.Layered{Layer: base, CreatedBy: "podset-operator hack/ociimage: distroless static :nonroot layout"},
		ociimage.Layered{Layer: app, CreatedBy: "COPY " + entrypoint + " (go " + strings.Join(buildArgs(o.version, entrypoint), " ") + ")"})
}
