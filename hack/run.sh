#!/usr/bin/env bash
# `make run`: the operator in the foreground against a cluster, with the CRD,
# the admission policies and the sample PodSet installed.
#
# Usage: hack/run.sh [hack/cluster's flags] [-- the operator's flags]
#
# With CLUSTER_KUBECONFIG unset (the default) it uses a local kwok cluster
# (hack/cluster, with the flags given), started if needed. Set
# CLUSTER_KUBECONFIG to a kubeconfig to run against that cluster instead: an
# explicit choice, never a fallback to whatever $KUBECONFIG or ~/.kube/config
# points at.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
: "${CONTROLPLANE:?set CONTROLPLANE (run through make)}"
kubectl_bin="$CONTROLPLANE/kubectl"
cluster_flags=()
while (($#)) && [[ $1 != -- ]]; do
	cluster_flags+=("$1")
	shift
done
if (($#)); then shift; fi

if [ -n "${CLUSTER_KUBECONFIG:-}" ]; then
	kubeconfig=$CLUSTER_KUBECONFIG
	echo "Running against the cluster of $kubeconfig (CLUSTER_KUBECONFIG)."
else
	kubeconfig=$(go -C "$root" run ./hack/cluster "${cluster_flags[@]}" up)
fi
kubectl=("$kubectl_bin" --kubeconfig "$kubeconfig")

"${kubectl[@]}" apply --server-side --field-manager=podset-install -f "$root/config/crd/bases" >/dev/null
"${kubectl[@]}" apply --server-side --field-manager=podset-install -k "$root/config/policy" >/dev/null
"${kubectl[@]}" wait --for=condition=Established crd/podsets.podset.dev --timeout=60s >/dev/null
"${kubectl[@]}" apply --server-side --field-manager=podset-install -n default -k "$root/config/samples" >/dev/null

cat <<MSG

podset-operator is starting against $("${kubectl[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}').
The sample PodSet "web" is applied in the namespace "default". In another terminal:

  export KUBECONFIG=$kubeconfig
  alias kubectl=$kubectl_bin
  kubectl get podsets
  kubectl get pods -l podset.dev/name=web -o wide
  kubectl scale podset web --replicas 5
  kubectl wait podset web --for=condition=Ready --timeout=60s
  kubectl describe podset web

Ctrl-C stops the operator; the cluster keeps running for the next 'make run'.
'make cluster-down' stops and deletes the local cluster.

MSG
exec "$root/bin/podset-operator" --kubeconfig "$kubeconfig" --log-format console \
	--metrics-bind-address "${METRICS_ADDR:-127.0.0.1:8443}" --health-probe-bind-address "${PROBE_ADDR:-127.0.0.1:8081}" "$@"
