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
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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

// epoch is every timestamp in the images and the archive, for stable digests.
var epoch = time.Unix(0, 0).UTC()

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
	defer os.RemoveAll(work)

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

	archive, err := tarDir(layoutDir)
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
		writeIfChanged(filepath.Join(outDir, "images.tar"), archive),
		writeIfChanged(filepath.Join(outDir, "images.json"), append(index, '\n')))
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

// Users and groups as in distroless static: root and nonroot.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// newImage makes a one-layer image that runs the binary bin, placed at
// entrypoint, as nonroot.
func newImage(bin, entrypoint string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var fsTar bytes.Buffer
	tw := tar.NewWriter(&fsTar)
	err = errors.Join(
		addDir(tw, "etc/", 0o755),
		addFile(tw, "etc/group", 0o644, []byte(group)),
		addFile(tw, "etc/passwd", 0o644, []byte(passwd)),
		addDir(tw, "tmp/", 0o1777),
		addFile(tw, entrypoint[1:], 0o755, binary),
		tw.Close())
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(fsTar.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "podset-operator test/node/images"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = runtime.GOARCH
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config = v1.Config{
		User:       "65532:65532",
		Entrypoint: []string{entrypoint},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
	return mutate.ConfigFile(img, cfg)
}

// tarDir archives dir with fixed modes and times, so equal directories
// give equal archives.
func tarDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return addDir(tw, rel+"/", 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return addFile(tw, rel, 0o644, data)
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addDir and addFile write entries owned by root, dated epoch.
func addDir(tw *tar.Writer, name string, mode int64) error {
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch})
}

func addFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch})
	if err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

// writeIfChanged leaves a file with the same content alone, so its mtime
// stays put and whatever depends on it is not redone.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
