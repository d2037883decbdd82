// Command images builds the container images that node tests run and
// writes them to -out as images.tar, one OCI image layout for
// `ctr -n k8s.io images import`, and images.json, which maps each image
// reference, by tag and by digest, to its manifest digest.
//
// The test node's containerd has no registry, so nothing is pulled: the
// binaries are compiled here, each into a single layer shaped like
// distroless static, and the references are under "localhost" so that
// containerd never tries to pull them. The same sources give the same
// digests, so a test can compare a pod's image ID with images.json.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/podset-dev/podset-operator/hack/ociimage"
)

const (
	appPkg    = "github.com/podset-dev/podset-operator/test/node/app"
	pausePkg  = "github.com/podset-dev/podset-operator/test/node/pause"
	appRepo   = "localhost/podset-test/app"
	pauseRepo = "localhost/podset-test/pause"

	// imageNameAnnotation is the name ctr import gives the image.
	imageNameAnnotation = "io.containerd.image.name"
	// refNameAnnotation is the OCI layout's name for the image, its tag.
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

// program is one build of a test binary and where its image puts it.
// Equal programs give the same image.
type program struct {
	pkg        string // main package to build
	entrypoint string // path of the binary in the image
	version    string // main.version, if not empty
	crash      bool   // sets main.crash, so the binary exits 1 at start
}

func app(version string) program {
	return program{pkg: appPkg, entrypoint: "/app", version: version}
}

// imageSet is every image the node tests use. stable is an alias of v2:
// the same program, so the same digest.
var imageSet = []struct {
	ref     string
	program program
}{
	{appRepo + ":v1", app("v1")},
	{appRepo + ":v2", app("v2")},
	{appRepo + ":v3", app("v3")},
	{appRepo + ":stable", app("v2")},
	{appRepo + ":crash", program{pkg: appPkg, entrypoint: "/app", version: "crash", crash: true}},
	{pauseRepo + ":3.10", program{pkg: pausePkg, entrypoint: "/pause"}},
}

func main() {
	out := flag.String("out", "", "directory to write images.tar and images.json to")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "images: -out is required")
		os.Exit(2)
	}
	if err := writeImages(context.Background(), *out); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

// writeImages builds imageSet and writes images.tar and images.json to outDir.
func writeImages(ctx context.Context, outDir string) error {
	work, err := os.MkdirTemp("", "podset-test-images-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()

	layoutDir := filepath.Join(work, "layout")
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating OCI layout: %w", err)
	}
	built := map[program]v1.Image{}
	digests := map[string]string{}
	for _, entry := range imageSet {
		tag, err := name.NewTag(entry.ref)
		if err != nil {
			return err
		}
		img, ok := built[entry.program]
		if !ok {
			bin := filepath.Join(work, fmt.Sprintf("bin%d", len(built)))
			if err := compile(ctx, entry.program, bin); err != nil {
				return err
			}
			if img, err = newImage(bin, entry.program.entrypoint); err != nil {
				return fmt.Errorf("building %s: %w", entry.ref, err)
			}
			built[entry.program] = img
		}
		err = lp.AppendImage(img,
			layout.WithAnnotations(map[string]string{
				imageNameAnnotation: tag.Name(),
				refNameAnnotation:   tag.TagStr(),
			}),
			layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
		if err != nil {
			return fmt.Errorf("writing %s: %w", entry.ref, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		digests[tag.Name()] = digest.String()
		digests[tag.Context().Digest(digest.String()).Name()] = digest.String()
	}

	archive, err := ociimage.TarDir(layoutDir)
	if err != nil {
		return fmt.Errorf("archiving OCI layout: %w", err)
	}
	index, err := json.MarshalIndent(digests, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	return errors.Join(
		ociimage.WriteIfChanged(filepath.Join(outDir, "images.tar"), archive),
		ociimage.WriteIfChanged(filepath.Join(outDir, "images.json"), append(index, '\n')))
}

// compile builds p as a static binary for the host's architecture.
func compile(ctx context.Context, p program, out string) error {
	ldflags := "-s -w"
	if p.version != "" {
		ldflags += " -X main.version=" + p.version
	}
	if p.crash {
		ldflags += " -X main.crash=1"
	}
	// -buildvcs=false: the git state would otherwise be stamped into the
	// binary, and every commit would change every digest.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, p.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (%s): %w", p.pkg, ldflags, err)
	}
	return nil
}

// newImage makes a one-layer image that runs the binary bin, placed at
// entrypoint, as nonroot.
func newImage(bin, entrypoint string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := ociimage.Layer([]ociimage.File{
		ociimage.Dir("etc", 0o755),
		ociimage.Regular("etc/group", 0o644, []byte(ociimage.Group)),
		ociimage.Regular("etc/passwd", 0o644, []byte(ociimage.Passwd)),
		ociimage.Dir("tmp", 0o1777),
		ociimage.Regular(entrypoint[1:], 0o755, binary),
	})
	if err != nil {
		return nil, err
	}
	return ociimage.New(ociimage.Config{Architecture: runtime.GOARCH, Entrypoint: []string{entrypoint}},
		ociimage.Layered{Layer: layer, CreatedBy: "podset-operator test/node/images"})
}
