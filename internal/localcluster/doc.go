// Package localcluster starts, stops and locates the local Kubernetes
// cluster of `make run`, the end-to-end suite, the benchmark and the real
// node: kwokctl with the binary runtime on the control plane that
// `make controlplane` builds (real kube-apiserver, etcd,
// kube-controller-manager and kube-scheduler, and kwok's fake nodes, on
// which pods are scheduled and become Running and Ready). Nothing is
// downloaded, everything binds 127.0.0.1, and every file lives under the
// repository's bin/kwok-work.
//
// kwok's fake kubelet is its stages: kwok's own node stages, pod-complete
// and pod-delete (embedded in the sigs.k8s.io/kwok module that go.mod
// requires, the version the Makefile builds kwok at), and the pod stages of
// hack/kwok/stages, which make a fake pod follow in-place updates as a
// kubelet does (image changes restart containers, pods/resize is actuated,
// Ready honours readiness gates); each file says what it mirrors.
//
// A Cluster is the whole configuration; hack/cluster is its command.
package localcluster
