// Package gitops holds no code: its tests prove that the GitOps integrations
// in this folder (the Argo CD health check and restart action in argocd/,
// also in Argo CD's resource_customizations layout, and the Flux health
// checks in flux/) read and write PodSets the way the operator reports and
// reads them, on objects stored by a real API server, and that every
// example installs one pinned release.
package gitops
