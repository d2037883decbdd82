//go:build tools

// Package tools pins the small tools that the Makefile builds for
// generating and checking: controller-gen, kustomize, kubeconform and
// actionlint.
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
	_ "github.com/yannh/kubeconform/cmd/kubeconform"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
