//go:build gitops

// Package gitops runs a real GitOps controller against PodSets: Flux's
// kustomize-controller, built from its Go module (hack/flux, `make flux`),
// applies a PodSet from a source revision, waits on its health, corrects
// drift on it and prunes it, on a local kwok cluster with the operator
// running as the end-to-end suite runs it.
//
// Flux's source-controller is not run. The suite serves each revision as
// Flux's own controller tests do: a tarball on an HTTP server on 127.0.0.1,
// and a GitRepository whose status.artifact (URL, revision, sha256 digest)
// the suite writes itself, with the field manager source-controller uses.
// Everything the kustomize-controller does from there is its own: it
// fetches and verifies the artifact, builds it with kustomize, applies it
// with server-side apply, waits with kstatus, prunes, and reports through
// the Kustomization's status and Kubernetes events, which the tests read.
//
// The kube-apiserver writes an audit log of every request on PodSets
// (kwokctl's KWOK_KUBE_AUDIT_POLICY), so a test can count the writes a
// reconcile sent: dry runs apart, a reconcile of an unchanged revision must
// send none.
//
// Every file carries the build constraint gitops, so `go test ./...` skips
// the suite. `make test-gitops` runs it with the binaries it needs; by
// hand, once it has built them:
//
//	eval "$(make -s tool-env)"
//	go test -tags gitops ./test/gitops/ -count=1 -v
package gitops
