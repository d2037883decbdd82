// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with the PodSet CRD and the admission policies of config/
// installed, for the integration tests of every package.
//
// The binaries come from KUBEBUILDER_ASSETS, which `make test` sets to the
// control plane it builds under bin/; run `make envtest-assets` once to use
// plain `go test` afterwards. TEST_LOGS=1 shows the logs of the operators
// under test.
package testenv
