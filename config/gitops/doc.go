// Package gitops holds no code: its tests prove that the GitOps integrations
// in this folder (the Argo CD health check in argocd/ and the Flux health
// checks in flux/) read PodSets the way the operator reports them, on
// objects stored by a real API server.
package gitops
