// Package integration holds the operator's envtest suites: the operator,
// built by controller.NewManager, against a real kube-apiserver and etcd
// (no kubelet, no scheduler: the tests play the kubelet's part where they
// need one). The pure decisions have their own fast tests beside the code.
package integration
