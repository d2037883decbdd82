// Package v1alpha1 holds the podset.dev/v1alpha1 API: the PodSet kind, which
// keeps a number of pods with stable names running from one pod template.
//
// The schema's markers are the API's contract: defaults live in the CRD (the
// controller never writes them, so GitOps tools see no drift), and every spec
// the API server accepts yields pods it will accept too.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../../applyconfig
// +groupName=podset.dev
package v1alpha1
