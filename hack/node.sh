#!/usr/bin/env bash
# One real node beside the kwok nodes: a real kubelet, containerd, runc, the
# CNI bridge and kube-proxy, joined to a local kwok cluster
# (internal/localcluster, through hack/cluster), for what only a real kubelet and dataplane
# decide: reported images, restarts, resizes, probes, endpoints, traffic.
#
# Everything it starts binds to 127.0.0.1 or to the node's own bridge
# ($BRIDGE, $NODE_IP), writes under bin/node/, and is stopped by its PID.
# What it changes on the host is put back by `down`: the sysctls the
# kubelet rewrites and ip_forward (saved at the first `up`), kube-proxy's
# iptables rules (kube-proxy --cleanup), the containers and their mounts,
# the bridge, its route and the kubelet's cgroups.
#
# The node is tainted and labelled podset.dev/real-node=true: only pods
# that tolerate the taint and select the label run on it, and kwok, told
# to manage only the nodes it made (kwok.x-k8s.io/node=fake), leaves it
# alone.
#
# Usage: hack/node.sh check-host|check|up|down|kubeconfig
#        hack/node.sh pause|resume kubelet|containerd|kube-apiserver
# Environment (the Makefile sets the binaries):
#   CLUSTER_NAME   the kwok cluster to join (default podset-node)
#   CONTROLPLANE   folder with the control plane, kubectl, kubelet, kube-proxy
#   KWOK_DIR       folder with kwok and kwokctl
#   CONTAINERD_DIR folder with containerd, containerd-shim-runc-v2 and ctr
#   RUNC           the runc binary
#   NODE_IMAGES    an OCI archive of images to import (make node-images)
set -Eeuo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
name=${CLUSTER_NAME:-podset-node}
node=podset-node
# The real path: mounts are listed by it, and bin/ may be a link (a git
# worktree sharing another checkout's tools), which would leave the node's
# mounts behind on down.
dir=$(realpath -m "$root/bin/node/$name")
BRIDGE=podset0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
CGROUP_ROOT=podset-node
sock="$dir/containerd/containerd.sock"
kubectl=("${CONTROLPLANE:-}/kubectl")
# The sysctls the kubelet sets (kubelet's setupKernelTunables) and the one
# this script sets for pod traffic: saved before the first start and put
# back when the node stops.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

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
# its PID in $1.pid.
start() {
	local what=$1
	shift
	"$@" >"$dir/$what.log" 2>&1 &
	echo $! >"$dir/$what.pid"
}

# wait_for runs a command until it succeeds, for up to $1 seconds; on
# failure, or at once when the process of log $2 (started by start) has
# exited, it prints the end of that log and fails.
wait_for() {
	local seconds=$1 log=$2 i pidfile
	shift 2
	pidfile="$dir/${log%.log}.pid"
	for ((i = 0; i < seconds * 4; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		if [[ -f $pidfile ]] && ! running "$pidfile"; then
			echo "hack/node.sh: ${log%.log} exited; $log ends:" >&2
			tail -n 30 "$dir/$log" >&2 || true
			return 1
		fi
		sleep 0.25
	done
	echo "hack/node.sh: timed out after ${seconds}s waiting for: $*; $log ends:" >&2
	tail -n 30 "$dir/$log" >&2 || true
	return 1
}

up() {
	check
	if running "$dir/kubelet.pid"; then
		kubeconfig
		return
	fi
	mkdir -p "$dir"
	# A node that failed half-way is taken down before a new start.
	# (set -E: the trap also fires for a failure inside a function.)
	trap 'trap - ERR; echo "hack/node.sh: the node did not start; stopping what did" >&2; down >&2; exit 1' ERR
	local kubeconfig
	kubeconfig=$(go -C "$root" run ./hack/cluster -controlplane "$CONTROLPLANE" -kwok "${KWOK_DIR:-}" -name "$name" -nodes "${NODES:-1}" up)
	kubectl+=(--kubeconfig "$kubeconfig")
	save_sysctls
	network
	start_containerd
	import_images
	credentials "$kubeconfig"
	start_kubelet
	start_kube_proxy
	wait_for 120 kubelet.log "${kubectl[@]}" wait --for=condition=Ready "node/$node" --timeout=1s
	trap - ERR
	echo "$kubeconfig"
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

# network makes the node's bridge with its address (the node's InternalIP)
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
	mkdir -p "$dir/cni/net.d" "$dir/cni/networks"
	cat >"$dir/cni/net.d/10-podset.conflist" <<CNI
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
        "dataDir": "$dir/cni/networks",
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
	mkdir -p "$dir/containerd"
	cat >"$dir/containerd/config.toml" <<TOML
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
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
    conf_dir = "$dir/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC"
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
	# The shim is found on PATH.
	PATH="$CONTAINERD_DIR:$PATH" start containerd "$CONTAINERD_DIR/containerd" --config "$dir/containerd/config.toml"
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
		openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/$who.key" \
			-subj "$org/CN=$cn" -out "$dir/$who.csr" 2>/dev/null
		openssl x509 -req -in "$dir/$who.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
			-CAserial "$dir/ca.srl" -days 30 -out "$dir/$who.crt" 2>/dev/null
		cat >"$dir/$who.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: $who
  user: {client-certificate: "$dir/$who.crt", client-key: "$dir/$who.key"}
contexts:
- name: $who
  context: {cluster: $name, user: $who}
current-context: $who
KUBECONFIG
	done
	cp "$pki/ca.crt" "$dir/ca.crt"
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
	mkdir -p "$dir/kubelet"
	grep -v '^nameserver 127\.' /etc/resolv.conf >"$dir/resolv.conf" || true
	cat >"$dir/kubelet.yaml" <<YAML
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
  x509: {clientCAFile: "$dir/ca.crt"}
authorization: {mode: Webhook}
# With no registry a collected image cannot come back (kind does the same).
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
failSwapOn: false
resolvConf: "$dir/resolv.conf"
maxPods: 40
serializeImagePulls: false
# Status reaches the API server as soon as it changes.
nodeStatusReportFrequency: 10s
YAML
	start kubelet "$CONTROLPLANE/kubelet" --config "$dir/kubelet.yaml" \
		--kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
		--hostname-override "$node" --node-ip "$NODE_IP" \
		--node-labels podset.dev/real-node=true --register-with-taints podset.dev/real-node=true:NoSchedule
	wait_for 60 kubelet.log curl -sf http://127.0.0.1:10248/healthz
}

start_kube_proxy() {
	cat >"$dir/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: "$dir/kube-proxy.kubeconfig"}
hostnameOverride: $node
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $POD_CIDR
nodePortAddresses: ["$NODE_IP/32"]
# Leave the host's conntrack sysctls and route_localnet alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
YAML
	# --v=4: each sync, its endpoints and how long it took, to line a failed
	# request of the suites up with (about 150 kB a suite).
	start kube-proxy "$CONTROLPLANE/kube-proxy" --config "$dir/kube-proxy.yaml" --v=4
	wait_for 60 kube-proxy.log curl -sf http://127.0.0.1:10256/healthz
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

# pid_file is the PID file of component $1: the node's own (kubelet,
# containerd) or, for kube-apiserver, the one kwokctl's binary runtime
# keeps for the cluster it runs.
pid_file() {
	case $1 in
	kubelet | containerd) echo "$dir/$1.pid" ;;
	kube-apiserver) echo "$root/bin/kwok-work/clusters/$name/pids/$1.pid" ;;
	*) die "cannot pause or resume $1: kubelet, containerd or kube-apiserver" ;;
	esac
}

# pause stops component $1 by its PID (SIGTERM, as systemd or a node
# shutdown would) after saving its command line, environment and working
# folder, so that resume starts it again exactly as it ran. What it ran
# keeps running: containers outlive the kubelet and, through their shims,
# containerd; etcd and the other control-plane processes outlive
# kube-apiserver.
pause() {
	local what=$1 pidfile pid
	pidfile=$(pid_file "$what")
	running "$pidfile" || die "$what does not run"
	pid=$(cat "$pidfile")
	cp "/proc/$pid/cmdline" "$dir/$what.cmdline.new"
	cp "/proc/$pid/environ" "$dir/$what.environ"
	readlink "/proc/$pid/cwd" >"$dir/$what.cwd"
	mv "$dir/$what.cmdline.new" "$dir/$what.cmdline"
	stop "$pidfile"
}

# resume starts component $1, paused by pause, with the command line,
# environment and folder it had, its output appended to its log, and waits
# until it serves.
resume() {
	local what=$1 pidfile log cmd env cwd
	pidfile=$(pid_file "$what")
	[[ -f $dir/$what.cmdline ]] || die "$what is not paused"
	log="$dir/$what.log"
	[[ $what == kube-apiserver ]] && log="$root/bin/kwok-work/clusters/$name/logs/$what.log"
	mapfile -d '' -t cmd <"$dir/$what.cmdline"
	mapfile -d '' -t env <"$dir/$what.environ"
	cwd=$(cat "$dir/$what.cwd")
	(cd "$cwd" && exec env -i "${env[@]}" "${cmd[@]}") >>"$log" 2>&1 &
	# No newline: kwokctl reads its PID files with strconv.Atoi.
	printf '%s' $! >"$pidfile"
	rm -f "$dir/$what.cmdline" "$dir/$what.environ" "$dir/$what.cwd"
	case $what in
	kubelet) wait_for 60 kubelet.log curl -sf http://127.0.0.1:10248/healthz ;;
	containerd) wait_for 30 containerd.log "$CONTAINERD_DIR/ctr" --address "$sock" version ;;
	kube-apiserver)
		wait_for 60 "$what.log" "${kubectl[@]}" --kubeconfig "$root/bin/kwok-work/$name.kubeconfig" get --raw /readyz
		supervise 60
		;;
	esac
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

# resume_paused resumes whatever pause left stopped (a test that ended
# half-way), so that down finds the node whole.
resume_paused() {
	local what
	for what in kube-apiserver containerd kubelet; do
		[[ -f $dir/$what.cmdline ]] && resume "$what"
	done
	return 0
}

down() {
	set +e
	resume_paused
	local kubeconfig="$root/bin/kwok-work/$name.kubeconfig"
	if running "$dir/kubelet.pid" && [[ -f $kubeconfig ]]; then
		# Pods go the kubelet's way first: their sandboxes' networks are
		# torn down by containerd.
		"${kubectl[@]}" --kubeconfig "$kubeconfig" delete pods --all-namespaces --field-selector "spec.nodeName=$node" \
			--grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1
	fi
	stop "$dir/kube-proxy.pid"
	[[ -x ${CONTROLPLANE:-}/kube-proxy ]] && "$CONTROLPLANE/kube-proxy" --cleanup >/dev/null 2>&1
	stop "$dir/kubelet.pid"
	kubelet_iptables_cleanup
	if running "$dir/containerd.pid"; then
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
	stop "$dir/containerd.pid"
	# Shims outlive containerd by design; theirs are ours.
	pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null
	# Mounts under the node's folder (rootfs, netns, kubelet volumes),
	# deepest first.
	local m
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done < <(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
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
	restore_sysctls
	if [[ -f $kubeconfig ]]; then
		"${kubectl[@]}" --kubeconfig "$kubeconfig" delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1
	fi
	if [[ ${KEEP_CLUSTER:-false} != true ]]; then
		go -C "$root" run ./hack/cluster -kwok "${KWOK_DIR:-}" -name "$name" down >/dev/null 2>&1
	fi
	rm -rf "$dir/containerd/state" "$dir/cni/networks"
	set -e
	return 0
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
pause | resume) "$1" "${2:-}" ;;
*)
	echo "usage: $0 check-host|check|up|down|kubeconfig|pause NAME|resume NAME" >&2
	exit 2
	;;
esac
