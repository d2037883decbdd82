//go:build tools

// Package kwok pins kwok and kwokctl, the local cluster's fake nodes and
// its control, that the Makefile builds.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
