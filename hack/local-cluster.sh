#!/usr/bin/env bash
# A local Kubernetes cluster for `make run`, the end-to-end tests and the
# benchmark: kwokctl with the binary runtime on the control plane that
# `make controlplane` builds (real kube-apiserver, etcd,
# kube-controller-manager and kube-scheduler, and kwok's fake nodes, on which
# pods are scheduled and become Running and Ready). Nothing is downloaded,
# everything binds 127.0.0.1, and every file lives under bin/.
#
# Usage: hack/local-cluster.sh up|down|kubeconfig
# Environment (the Makefile sets the binaries):
#   CLUSTER_NAME   cluster name (default podset)
#   NODES          fake nodes to keep (default 3; 110 pods each)
#   CONTROLPLANE   folder with kube-apiserver, etcd, kube-controller-manager,
#                  kube-scheduler and kubectl
#   KWOK_DIR       folder with kwok and kwokctl
#   DISABLE_QPS_LIMITS  true to lift client QPS limits (the benchmark)
#   KWOK_POD_DELETE     false to leave out kwok's pod-delete stage (the
#                  benchmark, whose pods have a grace period of 0; see
#                  test/bench/pods.go); kwok's other default stages stay
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
name=${CLUSTER_NAME:-podset}
nodes=${NODES:-3}
: "${CONTROLPLANE:?set CONTROLPLANE (run through make)}" "${KWOK_DIR:?set KWOK_DIR (run through make)}"

export KWOK_WORKDIR="$root/bin/kwok-work"
export KUBECACHEDIR="$KWOK_WORKDIR/cache"
kubeconfig="$KWOK_WORKDIR/$name.kubeconfig"
kwokctl=("$KWOK_DIR/kwokctl" --name "$name")
kubectl=("$CONTROLPLANE/kubectl" --kubeconfig "$kubeconfig")

exists() { "$KWOK_DIR/kwokctl" get clusters 2>/dev/null | grep -qx "$name"; }

up() {
	mkdir -p "$KWOK_WORKDIR"
	if exists; then
		"${kwokctl[@]}" start cluster >/dev/null 2>&1 || true
		if "${kubectl[@]}" get --raw /readyz >/dev/null 2>&1; then
			scale_nodes
			echo "$kubeconfig"
			return
		fi
		echo "cluster $name does not answer; recreating it" >&2
		"${kwokctl[@]}" delete cluster >/dev/null 2>&1 || true
	fi
	cat >"$KWOK_WORKDIR/$name.yaml" <<CONFIG
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeApiserverBinary: $CONTROLPLANE/kube-apiserver
  kubeControllerManagerBinary: $CONTROLPLANE/kube-controller-manager
  kubeSchedulerBinary: $CONTROLPLANE/kube-scheduler
  kubectlBinary: $CONTROLPLANE/kubectl
  etcdBinary: $CONTROLPLANE/etcd
  kwokControllerBinary: $KWOK_DIR/kwok
  disableQPSLimits: ${DISABLE_QPS_LIMITS:-false}
CONFIG
	if [[ ${KWOK_POD_DELETE:-true} == false ]]; then
		# Stages in the configuration replace all of kwok's defaults: give
		# them back from kwok's own module, but for pod-delete.
		stages=$(go mod download -json "sigs.k8s.io/kwok@$("$KWOK_DIR/kwok" --version 2>/dev/null | grep -o 'v[0-9][^ ]*' | head -1)" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
			pod/fast/pod-ready pod/fast/pod-complete; do
			printf -- '---\n' >>"$KWOK_WORKDIR/$name.yaml"
			cat "$stages/kustomize/stage/$stage.yaml" >>"$KWOK_WORKDIR/$name.yaml"
		done
	fi
	"${kwokctl[@]}" create cluster --config "$KWOK_WORKDIR/$name.yaml" \
		--kubeconfig "$kubeconfig" --wait 2m >&2
	scale_nodes
	echo "$kubeconfig"
}

# scale_nodes keeps the number of fake, Ready nodes at $nodes.
scale_nodes() {
	"${kwokctl[@]}" scale node --replicas "$nodes" >&2
	"${kubectl[@]}" wait --for=condition=Ready node --all --timeout=60s >&2
}

case "${1:-}" in
up) up ;;
down)
	if exists; then "${kwokctl[@]}" delete cluster >&2; fi
	rm -f "$kubeconfig" "$KWOK_WORKDIR/$name.yaml"
	;;
kubeconfig) echo "$kubeconfig" ;;
*)
	echo "usage: $0 up|down|kubeconfig" >&2
	exit 2
	;;
esac
