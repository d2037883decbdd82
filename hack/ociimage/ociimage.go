// Package ociimage builds container images without a container engine or
// a registry: files are written into layers here, shaped like distroless
// static, and the images are written as OCI image layouts. Every timestamp
// is Epoch and every file is owned by root unless said otherwise, so the
// same inputs give the same digests on any machine.
//
// The release image (hack/image) and the real node's test images
// (test/node/images) are both built with it.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is every timestamp in the images and archives.
var Epoch = time.Unix(0, 0).UTC()

// The non-root user of distroless' :nonroot images, which every image
// built here runs as.
const (
	NonrootUID = 65532
	User       = "65532:65532"
)

// Users and groups as in distroless static: root, nobody and nonroot.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// Path is the PATH of distroless images.
const Path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// File is one entry of a layer: a directory when Data is nil and Dir is
// set, else a regular file.
type File struct {
	Name     string // relative path, without a leading slash
	Mode     int64
	Data     []byte
	Dir      bool
	UID, GID int
}

// Dir is a folder of mode, owned by root.
func Dir(name string, mode int64) File { return File{Name: name, Mode: mode, Dir: true} }

// Regular is a file of mode holding data, owned by root.
func Regular(name string, mode int64, data []byte) File {
	return File{Name: name, Mode: mode, Data: data}
}

// Layer makes an uncompressed-tar OCI layer of files, in their order.
func Layer(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := writeEntry(tw, f); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func writeEntry(tw *tar.Writer, f File) error {
	hdr := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: Epoch, Uid: f.UID, Gid: f.GID}
	if f.Dir {
		hdr.Typeflag = tar.TypeDir
		if hdr.Name[len(hdr.Name)-1] != '/' {
			hdr.Name += "/"
		}
	} else {
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(len(f.Data))
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(f.Data)
	return err
}

// Config is what New needs besides the layers.
type Config struct {
	// Architecture is a GOARCH; the OS is always linux.
	Architecture string
	Entrypoint   []string
	// WorkingDir defaults to /.
	WorkingDir string
	// Env defaults to Path alone.
	Env    []string
	Labels map[string]string
}

// Layered is a layer and the history line that describes it.
type Layered struct {
	Layer     v1.Layer
	CreatedBy string
}

// New makes an OCI image of layers that runs cfg.Entrypoint as User.
func New(cfg Config, layers ...Layered) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   l.Layer,
			History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: l.CreatedBy},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = cfg.Architecture
	cf.Created = v1.Time{Time: Epoch}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: cfg.Entrypoint,
		WorkingDir: cfg.WorkingDir,
		Env:        cfg.Env,
		Labels:     cfg.Labels,
	}
	if cf.Config.WorkingDir == "" {
		cf.Config.WorkingDir = "/"
	}
	if cf.Config.Env == nil {
		cf.Config.Env = []string{Path}
	}
	return mutate.ConfigFile(img, cf)
}

// TarDir archives dir (an OCI layout) with fixed modes and times, so equal
// directories give equal archives.
func TarDir(dir string) ([]byte, error) {
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
			return writeEntry(tw, Dir(rel, 0o755))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return writeEntry(tw, Regular(rel, 0o644, data))
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadArchive unpacks an archive of an OCI layout that TarDir wrote into
// dir and returns the layout's index.
func ReadArchive(archive, dir string) (v1.ImageIndex, error) {
	if err := Untar(archive, dir); err != nil {
		return nil, err
	}
	return layout.ImageIndexFromPath(dir)
}

// Untar unpacks an archive that TarDir wrote into dir.
func Untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !filepath.IsLocal(filepath.FromSlash(hdr.Name)) {
			return fmt.Errorf("%s: %s is outside the archive's folder", archive, hdr.Name)
		}
		if hdr.Typeflag == tar.TypeDir {
			err = os.MkdirAll(target, 0o755)
		} else {
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, data, 0o644)
			}
		}
		if err != nil {
			return err
		}
	}
}

// Files reads the file system img unpacks to, by path without a trailing
// slash: what a test compares with what it expects.
func Files(img v1.Image) (map[string]File, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	files := map[string]File{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		f := File{Name: strings.TrimSuffix(hdr.Name, "/"), Mode: hdr.Mode, Dir: hdr.Typeflag == tar.TypeDir, UID: hdr.Uid, GID: hdr.Gid}
		if !f.Dir {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		files[f.Name] = f
	}
}

// WriteIfChanged leaves a file with the same content alone, so its mtime
// stays put and whatever depends on it is not redone.
func WriteIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
