package testenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ToolDirs are the folders the Makefile builds the control plane
// (kube-apiserver, etcd, kube-controller-manager, kube-scheduler,
// kubectl) and kwok into under root's bin/, named by the versions that
// the go.mod files of hack/ pin, read as the Makefile reads them
// (go_mod_version): no version is written twice.
func ToolDirs(root string) (controlplane, kwok string, err error) {
	k8s, err := goModVersion(filepath.Join(root, "hack/controlplane/go.mod"), "k8s.io/kubernetes")
	if err != nil {
		return "", "", err
	}
	etcd, err := goModVersion(filepath.Join(root, "hack/etcd/go.mod"), "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", "", err
	}
	kwokVersion, err := goModVersion(filepath.Join(root, "hack/kwok/go.mod"), "sigs.k8s.io/kwok")
	if err != nil {
		return "", "", err
	}
	return filepath.Join(root, "bin", "controlplane", "k8s-"+k8s+"_etcd-"+etcd), filepath.Join(root, "bin", "kwok-"+kwokVersion), nil
}

// goModVersion is the version of module that the go.mod file at path
// requires, in a require block or on a require line of its own.
func goModVersion(path, module string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) > 0 && fields[0] == "require" {
			fields = fields[1:]
		}
		if len(fields) >= 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	if err := lines.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s requires no %s", path, module)
}
