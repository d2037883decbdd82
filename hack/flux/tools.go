//go:build tools

// Package flux pins Flux's kustomize-controller, which the Makefile builds
// for the GitOps suite (test/gitops), and, through its go.mod, the
// source-controller API whose CRDs the suite installs beside it.
package flux

import (
	_ "github.com/fluxcd/kustomize-controller"
)
