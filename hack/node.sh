#!/usr/bin/env bash
# Real nodes beside the kwok nodes: each a real kubelet, containerd, runc,
# the CNI bridge and kube-proxy, joined to a local kwok cluster
# (internal/localcluster, through hack/cluster), for what only a real
# kubelet and dataplane decide: reported images, restarts, resizes,
# probes, endpoints, traffic, and (with two) topology spread and lost nodes.
#
# REAL_NODES (1 to 9, default 1) says how many. Node 1, podset-node, runs
# in the host's network namespace: the suite's client sends its requests
# from the host through node 1's kube-proxy, reads its rules
# (iptables-save) and the kernel's conntrack entries of those requests, so
# it must share their namespace; moving node 1 would move the suite with
# it. Node i > 1, podset-node-i, runs in a network namespace of its own,
# as kind gives each node a container: a veth pair $VETH (host end,
# 10.244.255.x/30) to eth0 inside, the node's bridge and InternalIP
# 10.244.(i-1).1 inside, pods in 10.244.(i-1).0/24, and a host route to
# that range through the veth, so that the host and node 1's pods reach
# its pods and its kubelet (kube-apiserver, at its InternalIP) and its
# pods reach node 1's through the host. Its kubelet and kube-proxy reach
# kube-apiserver, which binds the host's 127.0.0.1, through a pair of
# socat forwarders joined by a unix socket, each bound to its own
# namespace's loopback. It shares the host's mount and PID namespaces and
# cgroup hierarchies (under a cgroup root of its own), so that its mounts
# and processes are found and removed by down like node 1's.
#
# Everything it starts binds to 127.0.0.1, to node 1's bridge ($BRIDGE,
# $NODE_IP) or to addresses inside the namespaces it made, writes under
# bin/node/, and is stopped by its PID. What it changes on the host is put
# back by `down`: the sysctls the kubelet rewrites and ip_forward (saved at
# the first `up`), kube-proxy's iptables rules (kube-proxy --cleanup), the
# containers, their processes and mounts, the bridge and its route, the
# namespaces with their veths and routes (and the sysctls set inside
# them), the kubelets' cgroups and their log links in /var/log/containers.
#
# Each node is tainted and labelled podset.dev/real-node=true: only pods
# that tolerate the taint and select the label run on it, and kwok, told
# to manage only the nodes it made (kwok.x-k8s.io/node=fake), leaves it
# alone. kube-controller-manager loses a node whose heartbeats stop after
# 50 s (heartbeat factor 1.25 of kwokctl's 40 s: Kubernetes' own default
# node-monitor-grace-period), not kwokctl's default 200 s.
#
# Usage: hack/node.sh check-host|check|up|down|kubeconfig
#        hack/node.sh pause|resume kubelet|containerd|kube-apiserver
#        hack/node.sh kill-node|revive-node N
# kill-node N kills node N's kubelet and containerd with SIGKILL, as a
# crash would (its containers run on, through their shims); revive-node
# N starts them again as they ran.
# Environment (the Makefile sets the binaries):
#   CLUSTER_NAME   the kwok cluster to join (default podset-node)
#   REAL_NODES     how many real nodes up starts (default 1)
#   NODES          how many fake (kwok) nodes the cluster keeps (default 1)
#   CONTROLPLANE   folder with the control plane, kubectl, kubelet, kube-proxy
#   KWOK_DIR       folder with kwok and kwokctl
#   CONTAINERD_DIR folder with containerd, containerd-shim-runc-v2 and ctr
#   RUNC           the runc binary
#   NODE_IMAGES    an OCI archive of images to import (make node-images)
#   COREDNS        a CoreDNS binary with the kubernetes plugin (hack/coredns):
#                  when set, up runs it as the cluster's DNS on node 1's
#                  bridge address and 127.0.0.1, port 53, and every kubelet
#                  gives pods that address as their nameserver
#                  (clusterDNS, clusterDomain cluster.local)
set -Eeuo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
name=${CLUSTER_NAME:-podset-node}
REAL_NODES=${REAL_NODES:-1}
# The real path: mounts are listed by it, and bin/ may be a link (a git
# worktree sharing another checkout's tools), which would leave the node's
# mounts behind on down. $dir is node 1's folder, and holds what the run
# saves for all nodes (the host's sysctls).
dir=$(realpath -m "$root/bin/node/$name")
# The pod range of all nodes (kube-proxy's clusterCIDR).
CLUSTER_CIDR=10.244.0.0/16
# The cluster's DNS (COREDNS): node 1's bridge address, which node 1's
# pods reach on their own link and other nodes' pods through the host,
# and the domain it answers.
CLUSTER_DNS=10.244.0.1
CLUSTER_DOMAIN=cluster.local
kubectl=("${CONTROLPLANE:-}/kubectl")
# The sysctls the kubelet sets (kubelet's setupKernelTunables) and the one
# this script sets for pod traffic: saved before the first start and put
# back when the node stops.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

# use_node sets what differs between real nodes for node $1: its name,
# folder, cgroup root, addresses and, for a node in a namespace of its
# own, the namespace, the host end of its veth, and in_node, the command
# prefix that runs a command in its network namespace.
use_node() {
	local i=$1
	POD_CIDR=10.244.$((i - 1)).0/24
	NODE_IP=10.244.$((i - 1)).1
	BRIDGE=podset0
	if ((i == 1)); then
		node=podset-node
		ndir=$dir
		netns=""
		in_node=()
	else
		node=podset-node-$i
		ndir=$(realpath -m "$root/bin/node/$name-$i")
		netns=$node
		in_node=(nsenter "--net=/run/netns/$netns")
		VETH=podset-n$i
		LINK_HOST=10.244.255.$((4 * (i - 2) + 1))
		LINK_NODE=10.244.255.$((4 * (i - 2) + 2))
	fi
	CGROUP_ROOT=$node
	sock="$ndir/containerd/containerd.sock"
}

# nodes lists the real nodes down must look at: node 1, and every other
# that has a folder or a namespace, whatever REAL_NODES is now.
nodes() {
	local i
	for ((i = 9; i >= 2; i--)); do
		if [[ -d $root/bin/node/$name-$i || -e /run/netns/podset-node-$i ]]; then echo "$i"; fi
	done
	echo 1
}

die() {
	echo "hack/node.sh: $*" >&2
	exit 1
}

# host_missing lists what this machine lacks to run the node at all,
# before anything is installed or built.
host_missing() {
	[[ $(uname -s) == Linux ]] || echo "Linux"
	[[ $(id -u) == 0 ]] || echo "root (the kubelet and containerd run as root)"
	command -v apt-get >/dev/null || command -v runc >/dev/null || echo "apt-get (Debian's packages: make node-deps)"
	local c
	for c in cpu cpuacct cpuset memory pids devices freezer; do
		[[ -d /sys/fs/cgroup/$c || -f /sys/fs/cgroup/cgroup.controllers ]] || echo "the cgroup v1 controller $c (/sys/fs/cgroup/$c)"
	done
	grep -qw overlay /proc/filesystems || echo "the overlay filesystem (kernel)"
	[[ -d /proc/sys/net/bridge ]] || echo "bridge netfilter (kernel: br_netfilter)"
	[[ -e /proc/net/ip_tables_names || -d /proc/sys/net/netfilter ]] || echo "netfilter (kernel)"
	return 0
}

# check_host fails at once, naming what is missing, on a machine that
# cannot run the node, before anything is installed or built.
check_host() {
	local missing
	mapfile -t missing < <(host_missing)
	if ((${#missing[@]})); then
		printf 'hack/node.sh: this machine cannot run the real node; missing:\n' >&2
		printf '  - %s\n' "${missing[@]}" >&2
		exit 1
	fi
}

# check fails at once, naming what is missing, on a machine that cannot run
# the node.
check() {
	local missing=()
	mapfile -t missing < <(host_missing)
	local c
	for c in iptables iptables-restore conntrack ip openssl; do
		command -v "$c" >/dev/null || missing+=("the command $c (make node-deps)")
	done
	[[ $REAL_NODES =~ ^[1-9]$ ]] || missing+=("REAL_NODES=$REAL_NODES: 1 to 9 real nodes")
	if [[ $REAL_NODES != 1 ]]; then
		for c in socat nsenter; do
			command -v "$c" >/dev/null || missing+=("the command $c, for a second node (make node-deps)")
		done
	fi
	for c in bridge host-local loopback; do
		[[ -x /usr/lib/cni/$c ]] || missing+=("the CNI plugin /usr/lib/cni/$c (make node-deps)")
	done
	for c in kubelet kube-proxy kubectl; do
		[[ -x ${CONTROLPLANE:-/nonexistent}/$c ]] || missing+=("$c in CONTROLPLANE (make node-bins)")
	done
	for c in containerd containerd-shim-runc-v2 ctr; do
		[[ -x ${CONTAINERD_DIR:-/nonexistent}/$c ]] || missing+=("$c in CONTAINERD_DIR (make node-bins)")
	done
	[[ -x ${RUNC:-/nonexistent} ]] || missing+=("runc at RUNC (make node-bins)")
	if ((${#missing[@]})); then
		printf 'hack/node.sh: this machine cannot run the real node; missing:\n' >&2
		printf '  - %s\n' "${missing[@]}" >&2
		exit 1
	fi
}

# running reports whether the process of pid file $1 runs.
running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# start runs a command in the background with its output in log $1.log and
# its PID in $1.pid, in the folder of the current node (use_node).
start() {
	local what=$1
	shift
	"$@" >"$ndir/$what.log" 2>&1 &
	echo $! >"$ndir/$what.pid"
}

# log_end prints the end of log $1: its last 30 distinct messages, each
# once, where it last appeared (a klog line's message is the line without
# its severity, time and thread), so that a message repeated ten times a
# second does not hide the one that says what failed.
log_end() {
	tail -n 3000 "$1" 2>/dev/null | awk '
		{
			key[NR] = $0
			if ($0 ~ /^[IWEF][0-9][0-9][0-9][0-9] [0-9:.]+ +[0-9]+ /) sub(/^[IWEF][0-9]+ [0-9:.]+ +[0-9]+ [^ ]+ /, "", key[NR])
			last[key[NR]] = NR
			line[NR] = $0
		}
		END { for (i = 1; i <= NR; i++) if (last[key[i]] == i) print line[i] }' | tail -n 30
}

# wait_for runs a command until it succeeds, for up to $1 seconds; on
# failure, or at once when the process of log $2 (started by start) has
# exited, it prints the end of that log and fails.
wait_for() {
	local seconds=$1 log=$2 i pidfile
	shift 2
	pidfile="$ndir/${log%.log}.pid"
	for ((i = 0; i < seconds * 4; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		if [[ -f $pidfile ]] && ! running "$pidfile"; then
			echo "hack/node.sh: $node: ${log%.log} exited; $ndir/$log ends:" >&2
			log_end "$ndir/$log" >&2
			return 1
		fi
		sleep 0.25
	done
	echo "hack/node.sh: $node: timed out after ${seconds}s waiting for: $*; $ndir/$log ends (each message once):" >&2
	log_end "$ndir/$log" >&2
	return 1
}

up() {
	check
	use_node 1
	if running "$dir/kubelet.pid"; then
		kubeconfig
		return
	fi
	mkdir -p "$dir"
	# A node that failed half-way is taken down before a new start.
	# (set -E: the trap also fires for a failure inside a function.)
	trap 'trap - ERR; echo "hack/node.sh: the nodes did not start; stopping what did" >&2; down >&2; exit 1' ERR
	local kubeconfig i
	kubeconfig=$(go -C "$root" run ./hack/cluster -controlplane "$CONTROLPLANE" -kwok "${KWOK_DIR:-}" -name "$name" \
		-nodes "${NODES:-1}" -heartbeat-factor 1.25 up)
	kubectl+=(--kubeconfig "$kubeconfig")
	save_sysctls
	# Folders the kubelets, the shims and ip netns make on the host, and
	# down removes when they were not there before.
	local made
	for made in /var/log/containers /run/containerd /run/netns; do
		[[ -d $made ]] || echo "$made" >>"$dir/host-folders.made"
	done
	for ((i = 1; i <= REAL_NODES; i++)); do
		use_node "$i"
		start_node "$kubeconfig"
	done
	# kube-proxy serves its health only once its node is registered: a
	# node that does not join fails with its kubelet's log.
	for ((i = 1; i <= REAL_NODES; i++)); do
		use_node "$i"
		wait_for 120 kubelet.log "${kubectl[@]}" wait --for=condition=Ready "node/$node" --timeout=1s
		wait_for 60 kube-proxy.log "${in_node[@]}" curl -sf http://127.0.0.1:10256/healthz
	done
	use_node 1
	start_dns "$kubeconfig"
	trap - ERR
	echo "$kubeconfig"
}

# start_node starts the current node (use_node): its network, containerd
# with the test images, its kubelet and kube-proxy; up waits until they
# serve.
start_node() {
	local kubeconfig=$1
	mkdir -p "$ndir"
	if [[ -n $netns ]]; then
		network_namespace
		forward_apiserver "$kubeconfig"
	else
		network
	fi
	cni_config
	start_containerd
	import_images
	credentials "$kubeconfig"
	start_kubelet
	start_kube_proxy
}

save_sysctls() {
	[[ -f $dir/sysctl.saved ]] && return
	local s
	for s in "${SYSCTLS[@]}"; do
		echo "$s=$(sysctl -n "$s")"
	done >"$dir/sysctl.saved.new"
	mv "$dir/sysctl.saved.new" "$dir/sysctl.saved"
}

restore_sysctls() {
	[[ -f $dir/sysctl.saved ]] || return 0
	local line
	while read -r line; do
		sysctl -q -w "$line" >/dev/null || echo "hack/node.sh: could not restore $line" >&2
	done <"$dir/sysctl.saved"
	rm -f "$dir/sysctl.saved"
}

# network makes node 1's bridge with its address (the node's InternalIP)
# and routes the Service range to it, so that Service traffic from the
# host never leaves the machine, even before kube-proxy has programmed it.
network() {
	sysctl -q -w net.ipv4.ip_forward=1
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip addr add "$NODE_IP/24" dev "$BRIDGE"
	fi
	ip link set "$BRIDGE" up
	ip route replace "$(service_cidr)" dev "$BRIDGE" src "$NODE_IP"
}

# network_namespace makes the network namespace of a node other than node
# 1, its veth pair to the host, its bridge with the node's address inside,
# and the routes between them: the host routes the node's pod range to the
# namespace, the namespace sends the rest to the host (ip_forward is on in
# both). The Service range follows the default route, after the node's own
# kube-proxy has translated it.
network_namespace() {
	sysctl -q -w net.ipv4.ip_forward=1
	[[ -e /run/netns/$netns ]] || ip netns add "$netns"
	if ! ip -n "$netns" link show eth0 >/dev/null 2>&1; then
		# A host end left by a namespace that is going away goes first.
		ip link del "$VETH" 2>/dev/null || true
		ip link add "$VETH" type veth peer name eth0 netns "$netns"
		ip addr add "$LINK_HOST/30" dev "$VETH"
	fi
	ip link set "$VETH" up
	ip route replace "$POD_CIDR" via "$LINK_NODE" dev "$VETH"
	ip -n "$netns" link set lo up
	ip -n "$netns" addr replace "$LINK_NODE/30" dev eth0
	ip -n "$netns" link set eth0 up
	ip -n "$netns" route replace default via "$LINK_HOST" dev eth0
	if ! ip -n "$netns" link show "$BRIDGE" >/dev/null 2>&1; then
		ip -n "$netns" link add "$BRIDGE" type bridge
		ip -n "$netns" addr add "$NODE_IP/24" dev "$BRIDGE"
	fi
	ip -n "$netns" link set "$BRIDGE" up
	# These belong to the namespace, and go with it.
	"${in_node[@]}" sysctl -q -w net.ipv4.ip_forward=1
	if "${in_node[@]}" test -e /proc/sys/net/bridge/bridge-nf-call-iptables; then
		"${in_node[@]}" sysctl -q -w net.bridge.bridge-nf-call-iptables=1
	fi
}

# forward_apiserver lets the node's namespace reach kube-apiserver, which
# binds only the host's 127.0.0.1, at the same address and port inside:
# a socat in the host listens on a unix socket in the node's folder and
# connects to kube-apiserver; one in the namespace listens on its
# 127.0.0.1 and connects to that socket. The kubeconfigs, and the
# certificate kube-apiserver serves, stay those of node 1.
forward_apiserver() {
	local kubeconfig=$1 server port
	server=$("${kubectl[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
	port=${server##*:}
	[[ $server == https://127.0.0.1:* && $port =~ ^[0-9]+$ ]] || die "kube-apiserver is at $server, not https://127.0.0.1:PORT"
	start apiserver-host socat "UNIX-LISTEN:$ndir/apiserver.sock,fork,unlink-early,mode=600" "TCP:127.0.0.1:$port"
	wait_for 10 apiserver-host.log test -S "$ndir/apiserver.sock"
	start apiserver-node "${in_node[@]}" socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$ndir/apiserver.sock"
	wait_for 10 apiserver-node.log "${in_node[@]}" curl -sk -o /dev/null "https://127.0.0.1:$port/healthz"
}

# cni_config writes the node's CNI configuration: its bridge, its pod
# range, its own host-local data folder.
cni_config() {
	mkdir -p "$ndir/cni/net.d" "$ndir/cni/networks"
	cat >"$ndir/cni/net.d/10-podset.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "podset",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$ndir/cni/networks",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
CNI
}

# service_cidr is kube-apiserver's Service range (kwokctl's default).
service_cidr() { echo 10.0.0.0/24; }

# restrict_oom is true when this process may not lower an OOM score
# (these machines drop CAP_SYS_RESOURCE): the kubelet asks for -998 for a
# pod's sandbox and -997 for Guaranteed pods, which runc then fails to set
# ("failed to update /proc/self/oom_score_adj: Permission denied");
# containerd then keeps scores at or above its own, as it does rootless.
restrict_oom() {
	local cap
	cap=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
	if (((0x$cap >> 24) & 1)); then echo false; else echo true; fi
}

start_containerd() {
	mkdir -p "$ndir/containerd"
	cat >"$ndir/containerd/config.toml" <<TOML
version = 3
root = "$ndir/containerd/root"
state = "$ndir/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/podset-test/pause:3.10"

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = $(restrict_oom)
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$ndir/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC"
        # runc's state in the node's folder, not /run/containerd/runc,
        # where a killed node's would stay.
        Root = "$ndir/containerd/runc"
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
	# The shim is found on PATH.
	PATH="$CONTAINERD_DIR:$PATH" start containerd "${in_node[@]}" "$CONTAINERD_DIR/containerd" --config "$ndir/containerd/config.toml"
	wait_for 30 containerd.log "$CONTAINERD_DIR/ctr" --address "$sock" version
}

ctr() { "$CONTAINERD_DIR/ctr" --address "$sock" --namespace k8s.io "$@"; }

import_images() {
	[[ -n ${NODE_IMAGES:-} ]] || return 0
	[[ -f $NODE_IMAGES ]] || die "NODE_IMAGES=$NODE_IMAGES does not exist (make node-images)"
	ctr images import "$NODE_IMAGES" >/dev/null
	# Each image is also named by its digest, as a pull by digest names it
	# (ctr's --digests names only the archive's index): images.json, beside
	# the archive, maps every reference to its manifest digest.
	local ref digest src
	while read -r ref digest; do
		[[ $ref == *@* ]] || continue
		src=$(sed -n 's/^ *"\([^"@]*\)": "'"$digest"'",\{0,1\}$/\1/p' "$(dirname "$NODE_IMAGES")/images.json" | head -n 1)
		[[ -n $src ]] || die "images.json names no tag for $ref"
		ctr images tag --force "$src" "$ref" >/dev/null
	done < <(sed -n 's/^ *"\([^"]*\)": "\([^"]*\)",\{0,1\}$/\1 \2/p' "$(dirname "$NODE_IMAGES")/images.json")
}

# credentials gives the kubelet and kube-proxy client certificates of their
# own, signed by the cluster's CA: system:node:<node> in system:nodes (the
# Node authorizer and NodeRestriction apply) and system:kube-proxy (bound
# to system:node-proxier).
credentials() {
	local kubeconfig=$1 pki server
	pki="$root/bin/kwok-work/clusters/$name/pki"
	[[ -f $pki/ca.crt && -f $pki/ca.key ]] || die "cannot find the CA of cluster $name in $pki"
	server=$("${kubectl[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
	local who cn org
	for who in kubelet kube-proxy; do
		if [[ $who == kubelet ]]; then cn="system:node:$node" org="/O=system:nodes"; else cn=system:kube-proxy org=""; fi
		# New every start: the cluster, and so its CA, may be new.
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$ndir/$who.key" \
			-subj "$org/CN=$cn" -out "$ndir/$who.csr" 2>/dev/null
		openssl x509 -req -in "$ndir/$who.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
			-CAserial "$ndir/ca.srl" -days 30 -out "$ndir/$who.crt" 2>/dev/null
		cat >"$ndir/$who.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: $who
  user: {client-certificate: "$ndir/$who.crt", client-key: "$ndir/$who.key"}
contexts:
- name: $who
  context: {cluster: $name, user: $who}
current-context: $who
KUBECONFIG
	done
	cp "$pki/ca.crt" "$ndir/ca.crt"
}

start_kubelet() {
	local c
	# The kubelet keeps its pods' cgroups under one root of its own in
	# every v1 hierarchy, which `down` removes.
	for c in /sys/fs/cgroup/*/; do
		[[ -d $c && $c != */unified/ ]] || continue
		mkdir -p "$c$CGROUP_ROOT"
		if [[ $c == */cpuset/ ]]; then
			cat "${c}cpuset.cpus" >"$c$CGROUP_ROOT/cpuset.cpus"
			cat "${c}cpuset.mems" >"$c$CGROUP_ROOT/cpuset.mems"
		fi
	done
	mkdir -p "$ndir/kubelet"
	grep -v '^nameserver 127\.' /etc/resolv.conf >"$ndir/resolv.conf" || true
	cat >"$ndir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 (these machines' hybrid layout) is refused unless allowed.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
containerRuntimeEndpoint: unix://$sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$ndir/ca.crt"}
authorization: {mode: Webhook}
# With no registry a collected image cannot come back (kind does the same).
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
failSwapOn: false
resolvConf: "$ndir/resolv.conf"
$(if [[ -n ${COREDNS:-} ]]; then printf 'clusterDNS: [%s]\nclusterDomain: %s\n' "$CLUSTER_DNS" "$CLUSTER_DOMAIN"; fi)
# Each kubelet keeps its pods' logs in its own folder: a kubelet removes
# the log folders of pods it does not know (container GC), so two sharing
# /var/log/pods would remove each other's.
podLogsDir: "$ndir/pod-logs"
maxPods: 40
serializeImagePulls: false
# Status reaches the API server as soon as it changes.
nodeStatusReportFrequency: 10s
YAML
	start kubelet "${in_node[@]}" "$CONTROLPLANE/kubelet" --config "$ndir/kubelet.yaml" \
		--kubeconfig "$ndir/kubelet.kubeconfig" --root-dir "$ndir/kubelet" --cert-dir "$ndir/kubelet/pki" \
		--hostname-override "$node" --node-ip "$NODE_IP" \
		--node-labels podset.dev/real-node=true --register-with-taints podset.dev/real-node=true:NoSchedule
	wait_for 60 kubelet.log "${in_node[@]}" curl -sf http://127.0.0.1:10248/healthz
}

# start_dns runs CoreDNS (COREDNS, when set) in node 1's folder as the
# cluster's DNS: the kubernetes plugin answers the names of Services and,
# from their EndpointSlices, <hostname>.<service>.<namespace>.svc.cluster.local
# for pods with a hostname and subdomain (a PodSet's spec.serviceName). It
# reads the API with the cluster's admin kubeconfig and caches nothing, so
# an answer follows a pod's IP as soon as the EndpointSlice does. Names
# outside cluster.local are refused: the pods have no other DNS here.
start_dns() {
	[[ -n ${COREDNS:-} ]] || return 0
	[[ -x $COREDNS ]] || die "COREDNS=$COREDNS is not an executable (make $COREDNS)"
	cat >"$ndir/Corefile" <<COREFILE
$CLUSTER_DOMAIN:53 {
	bind 127.0.0.1 $CLUSTER_DNS
	errors
	log
	kubernetes $CLUSTER_DOMAIN {
		kubeconfig $1
	}
}
COREFILE
	start coredns "$COREDNS" -conf "$ndir/Corefile"
	# CoreDNS prints its version once it serves (after the kubernetes
	# plugin's first sync of Services and EndpointSlices).
	wait_for 30 coredns.log grep -q '^CoreDNS-' "$ndir/coredns.log"
}

start_kube_proxy() {
	cat >"$ndir/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: "$ndir/kube-proxy.kubeconfig"}
hostnameOverride: $node
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $CLUSTER_CIDR
nodePortAddresses: ["$NODE_IP/32"]
# Leave the host's conntrack sysctls and route_localnet alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
YAML
	# --v=4: each sync, its endpoints and how long it took, to line a failed
	# request of the suites up with (about 150 kB a suite).
	start kube-proxy "${in_node[@]}" "$CONTROLPLANE/kube-proxy" --config "$ndir/kube-proxy.yaml" --v=4
}

# stop sends SIGTERM to the process of pid file $1 and waits for it, then
# SIGKILL.
stop() {
	local pidfile=$1 pid i
	[[ -f $pidfile ]] || return 0
	pid=$(cat "$pidfile")
	if kill -TERM "$pid" 2>/dev/null; then
		for ((i = 0; i < 40; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.25
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

# pid_file is the PID file of component $1: the current node's own
# (kubelet, containerd) or, for kube-apiserver, the one kwokctl's binary
# runtime keeps for the cluster it runs.
pid_file() {
	case $1 in
	kubelet | containerd) echo "$ndir/$1.pid" ;;
	kube-apiserver) echo "$root/bin/kwok-work/clusters/$name/pids/$1.pid" ;;
	*) die "cannot pause or resume $1: kubelet, containerd or kube-apiserver" ;;
	esac
}

# pause stops component $1 of the current node by its PID with signal $2
# (SIGTERM, as systemd or a node shutdown would, unless told) after saving
# its command line, environment and working folder, so that resume starts
# it again exactly as it ran. What it ran keeps running: containers
# outlive the kubelet and, through their shims, containerd; etcd and the
# other control-plane processes outlive kube-apiserver.
pause() {
	local what=$1 signal=${2:-TERM} pidfile pid
	pidfile=$(pid_file "$what")
	running "$pidfile" || die "$node: $what does not run"
	pid=$(cat "$pidfile")
	cp "/proc/$pid/cmdline" "$ndir/$what.cmdline.new"
	cp "/proc/$pid/environ" "$ndir/$what.environ"
	readlink "/proc/$pid/cwd" >"$ndir/$what.cwd"
	mv "$ndir/$what.cmdline.new" "$ndir/$what.cmdline"
	if [[ $signal == TERM ]]; then
		stop "$pidfile"
		return
	fi
	kill "-$signal" "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	rm -f "$pidfile"
}

# resume starts component $1 of the current node, paused by pause, with
# the command line, environment and folder it had (and in the node's
# network namespace), its output appended to its log, and waits until it
# serves.
resume() {
	local what=$1 pidfile log cmd env cwd
	pidfile=$(pid_file "$what")
	[[ -f $ndir/$what.cmdline ]] || die "$node: $what is not paused"
	log="$ndir/$what.log"
	[[ $what == kube-apiserver ]] && log="$root/bin/kwok-work/clusters/$name/logs/$what.log"
	mapfile -d '' -t cmd <"$ndir/$what.cmdline"
	mapfile -d '' -t env <"$ndir/$what.environ"
	cwd=$(cat "$ndir/$what.cwd")
	(cd "$cwd" && exec "${in_node[@]}" env -i "${env[@]}" "${cmd[@]}") >>"$log" 2>&1 &
	# No newline: kwokctl reads its PID files with strconv.Atoi.
	printf '%s' $! >"$pidfile"
	rm -f "$ndir/$what.cmdline" "$ndir/$what.environ" "$ndir/$what.cwd"
	case $what in
	kubelet) wait_for 60 kubelet.log "${in_node[@]}" curl -sf http://127.0.0.1:10248/healthz ;;
	containerd) wait_for 30 containerd.log "$CONTAINERD_DIR/ctr" --address "$sock" version ;;
	kube-apiserver)
		wait_for 60 "$what.log" "${kubectl[@]}" --kubeconfig "$root/bin/kwok-work/$name.kubeconfig" get --raw /readyz
		supervise 60
		;;
	esac
}

# node_number checks that $1 names a real node that runs (or was killed)
# and makes it the current node.
node_number() {
	[[ $1 =~ ^[1-9]$ ]] || die "no real node '$1': 1 to 9"
	use_node "$1"
	[[ -f $ndir/kubelet.pid || -f $ndir/kubelet.cmdline ]] || die "$node does not run"
}

# kill_node kills node $1's kubelet and containerd with SIGKILL, as a
# crash would; its containers run on through their shims, unwatched.
kill_node() {
	node_number "$1"
	pause kubelet KILL
	pause containerd KILL
	echo "killed the kubelet and containerd of $node"
}

# revive_node starts node $1's kubelet and containerd again, killed by
# kill_node, as they ran.
revive_node() {
	node_number "$1"
	resume containerd
	resume kubelet
	echo "started the kubelet and containerd of $node again"
}

# supervise does for up to $1 seconds what a kubelet (static pods) or
# systemd does for a control plane and kwokctl does not: it starts again
# the cluster's components that exit, until kube-controller-manager and
# kube-scheduler lead again (each has renewed its leader lease since
# supervise began). They exit when they cannot renew their lease for 10 s
# (--leader-elect-renew-deadline), which may be after kube-apiserver
# serves again; one started again takes the lease once it has seen the
# old holder's expire (--leader-elect-lease-duration, 15 s, from when it
# first reads it).
supervise() {
	local seconds=$1 since i c t renewed
	since=$(date +%s)
	for ((i = 0; i < seconds * 2; i++)); do
		restart_exited
		renewed=0
		for c in kube-controller-manager kube-scheduler; do
			t=$("${kubectl[@]}" --kubeconfig "$root/bin/kwok-work/$name.kubeconfig" get lease -n kube-system "$c" \
				-o jsonpath='{.spec.renewTime}' 2>/dev/null) || continue
			[[ -n $t ]] && (($(date -d "$t" +%s) >= since)) && renewed=$((renewed + 1))
		done
		if ((renewed == 2)); then
			echo "kube-controller-manager and kube-scheduler lead $(($(date +%s) - since)) s after kube-apiserver serves"
			return 0
		fi
		sleep 0.5
	done
	echo "hack/node.sh: kube-controller-manager and kube-scheduler do not lead ${seconds}s after kube-apiserver serves" >&2
	return 1
}

# restart_exited starts again the cluster's components that have exited,
# and names them. kwokctl's start starts what does not run, with its own
# arguments.
restart_exited() {
	local pidfile exited=false
	for pidfile in "$root/bin/kwok-work/clusters/$name/pids/"*.pid; do
		running "$pidfile" && continue
		echo "restarted $(basename "$pidfile" .pid) at $(date +%T.%3N)"
		exited=true
	done
	if [[ $exited == true ]]; then
		KWOK_WORKDIR="$root/bin/kwok-work" "$KWOK_DIR/kwokctl" --name "$name" start cluster >&2
	fi
}

# resume_paused resumes whatever pause left stopped on node 1 (a test that
# ended half-way), so that down finds it whole. A node killed by
# kill_node is not revived: down_node removes what it left.
resume_paused() {
	local what
	use_node 1
	for what in kube-apiserver containerd kubelet; do
		[[ -f $dir/$what.cmdline ]] && resume "$what"
	done
	return 0
}

down() {
	set +e
	resume_paused
	local kubeconfig="$root/bin/kwok-work/$name.kubeconfig" i deletes=()
	if [[ -f $kubeconfig ]]; then
		# Pods go the kubelet's way first: their sandboxes' networks are
		# torn down by containerd. Every node's at once (waiting for those
		# deletions only: up's trap runs down beside the nodes' processes).
		for i in $(nodes); do
			use_node "$i"
			running "$ndir/kubelet.pid" || continue
			"${kubectl[@]}" --kubeconfig "$kubeconfig" delete pods --all-namespaces --field-selector "spec.nodeName=$node" \
				--grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 &
			deletes+=($!)
		done
		((${#deletes[@]} == 0)) || wait "${deletes[@]}"
	fi
	stop "$dir/coredns.pid"
	for i in $(nodes); do
		use_node "$i"
		down_node
		if [[ -f $kubeconfig ]]; then
			"${kubectl[@]}" --kubeconfig "$kubeconfig" delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1
		fi
	done
	restore_sysctls
	remove_host_folders
	if [[ ${KEEP_CLUSTER:-false} != true ]]; then
		go -C "$root" run ./hack/cluster -kwok "${KWOK_DIR:-}" -name "$name" down >/dev/null 2>&1
	fi
	set -e
	return 0
}

# down_node stops the current node and removes what it made: its
# processes (by PID, and whatever is left in its cgroups), containers,
# mounts, network (node 1's bridge and kube-proxy's and the kubelet's
# iptables rules; another node's namespace, which takes its veth, routes,
# rules and sysctls with it), cgroups and log links.
down_node() {
	local m
	stop "$ndir/kube-proxy.pid"
	if [[ -z $netns && -x ${CONTROLPLANE:-}/kube-proxy ]]; then
		"$CONTROLPLANE/kube-proxy" --cleanup >/dev/null 2>&1
	fi
	stop "$ndir/kubelet.pid"
	[[ -z $netns ]] && kubelet_iptables_cleanup
	if running "$ndir/containerd.pid"; then
		local id
		for id in $(ctr tasks ls -q 2>/dev/null); do
			ctr tasks kill --signal SIGKILL "$id" >/dev/null 2>&1
		done
		sleep 0.5
		for id in $(ctr tasks ls -q 2>/dev/null); do
			ctr tasks delete --force "$id" >/dev/null 2>&1
		done
		for id in $(ctr containers ls -q 2>/dev/null); do
			ctr containers delete "$id" >/dev/null 2>&1
		done
	fi
	stop "$ndir/containerd.pid"
	# Containers whose containerd was killed (kill-node) run on: their
	# processes are those left in the node's cgroups.
	kill_cgroup_processes
	# Shims outlive containerd by design; theirs are ours. Each keeps its
	# socket in /run/containerd/s, and its address in its bundle (address,
	# bootstrap.json): a shim killed leaves its socket.
	pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null
	for m in $(find "$ndir/containerd/state" -maxdepth 4 -type f \( -name address -o -name bootstrap.json \) \
		-exec grep -hoaE '/run/containerd/s/[0-9a-f]{64}' {} + 2>/dev/null | sort -u); do
		rm -f "$m"
	done
	stop "$ndir/apiserver-node.pid"
	stop "$ndir/apiserver-host.pid"
	rm -f "$ndir"/*.cmdline "$ndir"/*.environ "$ndir"/*.cwd
	# Mounts under the node's folder (rootfs, netns, kubelet volumes),
	# deepest first.
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done < <(awk -v d="$ndir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
	if [[ -n $netns ]]; then
		[[ -e /run/netns/$netns ]] && ip netns del "$netns"
		ip link show "$VETH" >/dev/null 2>&1 && ip link del "$VETH"
	elif ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip route del "$(service_cidr)" dev "$BRIDGE" 2>/dev/null
		for m in $(ip -o link show master "$BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do
			ip link del "$m" 2>/dev/null
		done
		ip link del "$BRIDGE"
	fi
	local c
	for c in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
		[[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	[[ -d /var/log/containers ]] && find /var/log/containers -maxdepth 1 -lname "$ndir/*" -delete
	rm -rf "$ndir/containerd/state" "$ndir/cni/networks"
}

# remove_host_folders removes the folders up recorded it made on the host
# (host-folders.made), when nothing is left in them: /run/netns is ip
# netns's mount of itself.
remove_host_folders() {
	[[ -f $dir/host-folders.made ]] || return 0
	local f
	while read -r f; do
		[[ -d $f ]] || continue
		find "$f" -mindepth 1 -depth -type d -empty -delete 2>/dev/null
		[[ -z $(ls -A "$f") ]] || continue
		if [[ $f == /run/netns ]] && mountpoint -q "$f"; then umount "$f"; fi
		rmdir "$f"
	done <"$dir/host-folders.made"
	rm -f "$dir/host-folders.made"
}

# kill_cgroup_processes kills, with SIGKILL, every process left in the
# current node's cgroups.
kill_cgroup_processes() {
	local pids
	pids=$(find /sys/fs/cgroup/*/"$CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
	[[ -n $pids ]] || return 0
	# shellcheck disable=SC2086 # one PID a word
	kill -KILL $pids 2>/dev/null
	sleep 0.5
}

# kubelet_iptables_cleanup removes the chains the kubelet makes (the
# localnet firewall and its canaries; kube-proxy --cleanup removes the
# proxy's own), and the rules that jump to them, in IPv4 and IPv6.
kubelet_iptables_cleanup() {
	local cmd table chain
	for cmd in iptables ip6tables; do
		command -v "$cmd" >/dev/null || continue
		for table in filter nat mangle; do
			for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
				"$cmd" -w -t "$table" -S "$chain" >/dev/null 2>&1 || continue
				while read -r rule; do
					# shellcheck disable=SC2086 # a rule is words
					"$cmd" -w -t "$table" ${rule/-A/-D}
				done < <("$cmd" -w -t "$table" -S | grep -E "^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j $chain( |$)")
				"$cmd" -w -t "$table" -F "$chain"
				"$cmd" -w -t "$table" -X "$chain"
			done
		done
	done
}

kubeconfig() { go -C "$root" run ./hack/cluster -name "$name" kubeconfig; }

case "${1:-}" in
check-host) check_host ;;
check) check ;;
up) up ;;
down) down ;;
kubeconfig) kubeconfig ;;
pause | resume)
	use_node 1
	"$1" "${2:-}"
	;;
kill-node) kill_node "${2:-}" ;;
revive-node) revive_node "${2:-}" ;;
*)
	echo "usage: $0 check-host|check|up|down|kubeconfig|pause NAME|resume NAME|kill-node N|revive-node N" >&2
	exit 2
	;;
esac
