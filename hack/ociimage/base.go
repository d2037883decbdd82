package ociimage

import (
	"archive/zip"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CACertificates is where the base puts the CA bundle, as Debian and
// distroless do; the base's environment names it in SSL_CERT_FILE too.
const CACertificates = "etc/ssl/certs/ca-certificates.crt"

// BaseEnv is the environment of images on Base, as distroless static's.
var BaseEnv = []string{Path, "SSL_CERT_FILE=/" + CACertificates}

// BaseWorkingDir is the working directory of distroless' :nonroot images.
const BaseWorkingDir = "/home/nonroot"

// Base is the file tree of distroless static's :nonroot image, made here
// from pinned sources rather than pulled: users and groups (root, nobody,
// nonroot 65532), nsswitch.conf, the Mozilla CA bundle of the Go module
// golang.org/x/crypto/x509roots/fallback (the roots without extra
// constraints, as PEM), the time zone database of the Go toolchain
// building it, a world-writable /tmp and nonroot's home.
func Base(ctx context.Context) ([]File, error) {
	files := []File{
		Dir("etc", 0o755),
		Regular("etc/group", 0o644, []byte(Group)),
		Regular("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		Regular("etc/passwd", 0o644, []byte(Passwd)),
		Dir("etc/ssl", 0o755),
		Dir("etc/ssl/certs", 0o755),
		Regular(CACertificates, 0o644, caBundle()),
		Dir("home", 0o755),
		{Name: "home/nonroot", Mode: 0o700, Dir: true, UID: NonrootUID, GID: NonrootUID},
		Dir("root", 0o700),
		Dir("tmp", 0o1777),
		Dir("usr", 0o755),
		Dir("usr/share", 0o755),
	}
	zoneinfo, err := zoneinfo(ctx)
	if err != nil {
		return nil, err
	}
	return append(files, zoneinfo...), nil
}

// caBundle is the PEM bundle of every root that needs no constraint
// beyond what X.509 encodes (roots NSS distrusts after a date are left
// out: a PEM file cannot say so).
func caBundle() []byte {
	var b strings.Builder
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}))
	}
	return []byte(b.String())
}

// zoneinfo unpacks the time zone database of the go command's toolchain
// (runtime.GOROOT is empty in a program built with -trimpath) into
// usr/share/zoneinfo, where Go programs, and others, look first.
func zoneinfo(ctx context.Context) ([]File, error) {
	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		return nil, fmt.Errorf("the time zone database: %w", err)
	}
	defer func() { _ = zr.Close() }()
	dirs := map[string]bool{}
	var files []File
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		name := path.Join("usr/share/zoneinfo", f.Name)
		for d := path.Dir(name); d != "usr/share" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, err
		}
		files = append(files, Regular(name, 0o644, data))
	}
	for d := range dirs {
		files = append(files, Dir(d, 0o755))
	}
	// Directories before what they hold, then by name: a stable order.
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}
