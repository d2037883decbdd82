#!/usr/bin/env bash
# A local Kubernetes cluster for `make run`, the end-to-end tests and the
# benchmark: kwokctl with the binary runtime on the control plane that
# `make controlplane` builds (real kube-apiserver, etcd,
# kube-controller-manager and kube-scheduler, and kwok's fake nodes, on which
# pods are scheduled and become Running and Ready). Nothing is downloaded,
# everything binds 127.0.0.1, and every file lives under bin/.
#
# kwok's fake kubelet is its stages: kwok's own node stages, pod-complete and
# pod-delete (from its module), and the pod stages of hack/kwok/stages, which
# make a fake pod follow in-place updates as a kubelet does (image changes
# restart containers, pods/resize is actuated, Ready honours readiness
# gates); each file says what it mirrors.
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
#                  test/bench/pods.go); the other stages stay
#   KCM_CONTROLLERS     the kube-controller-manager's --controllers (default:
#                  all); the benchmark runs only those it measures
#   HEARTBEAT_FACTOR    kwokctl's heartbeatFactor (default: kwokctl's, 5):
#                  scales kwok's node Lease duration and kube-controller-
#                  manager's --node-monitor-period and
#                  --node-monitor-grace-period (40s at 1). The end-to-end
#                  suite sets 0.5, so that a node whose heartbeat stops is
#                  lost within about 20 seconds, not 200.
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
	local config="$KWOK_WORKDIR/$name.yaml"
	write_config "$config.new"
	if exists; then
		if ! cmp -s "$config.new" "$config"; then
			# A cluster made by an older version of this script (other
			# stages, other binaries) would not behave as this one says.
			echo "cluster $name was made with another configuration; recreating it" >&2
			"${kwokctl[@]}" delete cluster >/dev/null 2>&1 || true
		else
			"${kwokctl[@]}" start cluster >/dev/null 2>&1 || true
			if "${kubectl[@]}" get --raw /readyz >/dev/null 2>&1; then
				rm -f "$config.new"
				scale_nodes
				echo "$kubeconfig"
				return
			fi
			echo "cluster $name does not answer; recreating it" >&2
			"${kwokctl[@]}" delete cluster >/dev/null 2>&1 || true
		fi
	fi
	mv "$config.new" "$config"
	create
	if ! controllers_run; then
		# Seen once in CI: a new cluster whose controllers never acted (a
		# Deployment stayed at 0 of 1 replicas for minutes). Its logs say
		# why; a second cluster is made instead of failing the caller.
		echo "the kube-controller-manager of cluster $name does not run its controllers; its log ends:" >&2
		"${kwokctl[@]}" logs kube-controller-manager 2>&1 | tail -n 20 >&2 || true
		echo "recreating cluster $name" >&2
		"${kwokctl[@]}" delete cluster >/dev/null 2>&1 || true
		create
		if ! controllers_run; then
			echo "the kube-controller-manager of cluster $name does not run its controllers" >&2
			return 1
		fi
	fi
	scale_nodes
	echo "$kubeconfig"
}

create() {
	"${kwokctl[@]}" create cluster --config "$KWOK_WORKDIR/$name.yaml" \
		--kubeconfig "$kubeconfig" --wait 2m >&2
}

# controllers_run waits up to a minute for the kube-controller-manager to
# run its controllers: its service account controller gives every
# namespace, default included, a ServiceAccount named default.
controllers_run() {
	local i
	for i in $(seq 60); do
		if "${kubectl[@]}" get serviceaccount default --namespace default >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	return 1
}

# write_config writes the kwokctl configuration of the cluster to file $1.
write_config() {
	cat >"$1" <<CONFIG
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
	if [[ -n ${HEARTBEAT_FACTOR:-} ]]; then
		echo "  heartbeatFactor: $HEARTBEAT_FACTOR" >>"$1"
	fi
	# kwok manages only the nodes it makes (kwokctl marks them
	# kwok.x-k8s.io/node=fake), so that a real kubelet can join the cluster
	# (hack/node.sh) without kwok taking its node over.
	cat >>"$1" <<CONFIG
componentsPatches:
- name: kwok-controller
  extraArgs:
  - key: manage-all-nodes
    value: "false"
  - key: manage-nodes-with-annotation-selector
    value: kwok.x-k8s.io/node=fake
CONFIG
	if [[ -n ${KCM_CONTROLLERS:-} ]]; then
		cat >>"$1" <<CONFIG
- name: kube-controller-manager
  extraArgs:
  - key: controllers
    value: $KCM_CONTROLLERS
CONFIG
	fi
	# Stages in the configuration replace all of kwok's defaults: the node
	# stages, pod-complete and pod-delete come from kwok's own module, the
	# pod stages that act as a kubelet from hack/kwok/stages.
	local version module
	version=$("$KWOK_DIR/kwok" --version 2>/dev/null | grep -o 'v[0-9][^ ]*' | head -1)
	module=$(go mod download -json "sigs.k8s.io/kwok@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [[ ! -d $module/kustomize/stage ]]; then
		echo "cannot find the stages of sigs.k8s.io/kwok@$version in the Go module cache" >&2
		return 1
	fi
	local stages=("$module"/kustomize/stage/{node/fast/node-initialize,node/heartbeat-with-lease/node-heartbeat-with-lease,pod/fast/pod-complete}.yaml)
	if [[ ${KWOK_POD_DELETE:-true} != false ]]; then
		stages+=("$module/kustomize/stage/pod/fast/pod-delete.yaml")
	fi
	stages+=("$root"/hack/kwok/stages/*.yaml)
	local stage
	for stage in "${stages[@]}"; do
		printf -- '---\n' >>"$1"
		cat "$stage" >>"$1"
	done
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
	rm -f "$kubeconfig" "$KWOK_WORKDIR/$name.yaml" "$KWOK_WORKDIR/$name.yaml.new"
	;;
kubeconfig) echo "$kubeconfig" ;;
*)
	echo "usage: $0 up|down|kubeconfig" >&2
	exit 2
	;;
esac
