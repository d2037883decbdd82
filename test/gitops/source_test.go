//go:build gitops

package gitops

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sourceManager is the field manager of the GitRepository's status: the
// one source-controller uses, as Flux's own controller tests write it.
const sourceManager = "source-controller"

// artifactServer serves the revisions' tarballs over HTTP on 127.0.0.1, as
// source-controller serves its artifacts (and fluxcd/pkg/testserver in
// Flux's tests).
type artifactServer struct {
	dir string
	*httptest.Server
}

// newArtifactServer serves the files of dir, which it makes.
func newArtifactServer(dir string) (*artifactServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// httptest listens on 127.0.0.1.
	return &artifactServer{dir: dir, Server: httptest.NewServer(http.FileServer(http.Dir(dir)))}, nil
}

// artifact is what source-controller writes into a source's
// status.artifact.
type artifact struct {
	url, revision, digest string
}

// publish writes files (name to content) as a gzipped tarball, the format
// of source-controller's artifacts, and returns the artifact: its URL, a
// Git revision made from the content (branch@sha1:<digest>) and the
// tarball's sha256 digest, which the kustomize-controller verifies.
func (s *artifactServer) publish(name string, files map[string]string) (artifact, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	commit := sha1.New()
	for _, file := range slices.Sorted(maps.Keys(files)) {
		body := files[file]
		_, _ = fmt.Fprintf(commit, "%s\x00%s\x00", file, body) // a hash's Write never fails
		hdr := &tar.Header{Name: file, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return artifact{}, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return artifact{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return artifact{}, err
	}
	if err := gz.Close(); err != nil {
		return artifact{}, err
	}
	revision := fmt.Sprintf("main@sha1:%x", commit.Sum(nil))
	file := fmt.Sprintf("%s-%x.tar.gz", name, commit.Sum(nil)[:6])
	if err := os.WriteFile(filepath.Join(s.dir, file), buf.Bytes(), 0o644); err != nil {
		return artifact{}, err
	}
	return artifact{
		url:      s.URL + "/" + file,
		revision: revision,
		digest:   fmt.Sprintf("sha256:%x", sha256.Sum256(buf.Bytes())),
	}, nil
}

// publishRevision publishes files as the new revision of the GitRepository
// ns/name, creating it if needed, as source-controller does after a fetch:
// the artifact's tarball on the server, then the GitRepository's
// status.artifact and Ready condition. It returns the revision.
func publishRevision(t *testing.T, ns, name string, files map[string]string) string {
	t.Helper()
	a, err := suite.source.publish(ns+"-"+name, files)
	if err != nil {
		t.Fatal(err)
	}
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "GitRepository",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"url":      "https://git.invalid/podset/" + name,
			"interval": "1h",
			"ref":      map[string]any{"branch": "main"},
		},
	}}
	if err := suite.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(repo), client.FieldOwner(testManager), client.ForceOwnership); err != nil {
		t.Fatalf("applying GitRepository %s/%s: %v", ns, name, err)
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "GitRepository",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"status": map[string]any{
			"conditions": []any{map[string]any{
				"type": "Ready", "status": "True", "reason": "Succeeded",
				"message":            "stored artifact for revision '" + a.revision + "'",
				"lastTransitionTime": now,
			}},
			"artifact": map[string]any{
				"path":           a.url,
				"url":            a.url,
				"revision":       a.revision,
				"digest":         a.digest,
				"lastUpdateTime": now,
			},
		},
	}}
	if err := suite.client.Status().Apply(t.Context(), client.ApplyConfigurationFromUnstructured(status), client.FieldOwner(sourceManager), client.ForceOwnership); err != nil {
		t.Fatalf("writing the artifact of GitRepository %s/%s: %v", ns, name, err)
	}
	t.Logf("GitRepository %s/%s: revision %s at %s (%s)", ns, name, a.revision, a.url, a.digest)
	return a.revision
}
