# podset-operator. `make help` lists the targets.
#
# Every tool is built from pinned Go modules into bin/ (gitignored), keyed by
# version, and skipped when already there: nothing is downloaded from
# anywhere but the Go module proxy.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local

# Every Go build here uses the Dockerfile's flags (static, trimmed paths), so
# the test binaries, helm, and the operator binary that the end-to-end suite
# builds with the Dockerfile's own command share one set of compiled
# packages. Measured from a cold cache on 2 cores, after the unit suites
# compiled: the e2e operator build took 2m45s with go test's default flags,
# 6s with these. (TESTFLAGS=-race needs CGO_ENABLED=1.)
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

BIN := $(CURDIR)/bin

# STEP prints a step's name (a test layer, a tool's build) when it starts
# and its duration when it ends (hack/step.sh); `make test` prints a table
# of them all at the end, from STEPS_FILE.
STEP := $(CURDIR)/hack/step.sh
export STEPS_FILE := $(CURDIR)/.steps
# build runs the build of tool $(1) as a step (its command not echoed: the
# step prints its name), with TOOL_NICE in front: make test builds tools
# beside its layers at a lower priority than theirs.
build = @$(TOOL_NICE) $(STEP) run "build $(1)"
TOOL_NICE :=

# Versions. Every tool is built from a tools module under hack/ (or, helm,
# from go.mod's `tool` line), so the go.mod files are the one place to bump
# them. The go.mod files require every shared module at one version (make
# verify checks it: go run ./hack/modsync), so that no package is compiled
# twice at two versions: run `go run ./hack/modsync -fix` after a bump.
# go_mod_version is the version of module $(2) that go.mod file $(1) requires.
go_mod_version = $(shell awk '$$1 == "require" {$$1 = ""; $$0 = $$0} $$1 == "$(2)" {print $$2; exit}' $(1))
K8S_VERSION  := $(call go_mod_version,hack/controlplane/go.mod,k8s.io/kubernetes)
ETCD_VERSION := $(call go_mod_version,hack/etcd/go.mod,go.etcd.io/etcd/server/v3)
CONTAINERD_VERSION := $(call go_mod_version,hack/containerd/go.mod,github.com/containerd/containerd/v2)
# kwok: the version whose stages and configuration types internal/localcluster
# compiles in (go.mod requires the same; modsync checks it).
KWOK_VERSION := $(call go_mod_version,hack/kwok/go.mod,sigs.k8s.io/kwok)
CONTROLLER_TOOLS_VERSION := $(call go_mod_version,hack/tools/go.mod,sigs.k8s.io/controller-tools)
KUSTOMIZE_VERSION := $(call go_mod_version,hack/tools/go.mod,sigs.k8s.io/kustomize/kustomize/v5)# v5.8.3 needs Go 1.27

# The control plane: kube-apiserver and etcd are what envtest needs
# (KUBEBUILDER_ASSETS); the rest is for the local kwok cluster.
CONTROLPLANE := $(BIN)/controlplane/k8s-$(K8S_VERSION)_etcd-$(ETCD_VERSION)
KUBE_APISERVER := $(CONTROLPLANE)/kube-apiserver
ETCD := $(CONTROLPLANE)/etcd
KUBE_CONTROLLER_MANAGER := $(CONTROLPLANE)/kube-controller-manager
KUBE_SCHEDULER := $(CONTROLPLANE)/kube-scheduler
KUBECTL := $(CONTROLPLANE)/kubectl
# The real node (hack/node.sh): kubelet and kube-proxy from the control
# plane's module set, containerd from its own tools module, runc and the
# CNI plugins from Debian's packages.
KUBELET := $(CONTROLPLANE)/kubelet
KUBE_PROXY := $(CONTROLPLANE)/kube-proxy
CONTAINERD_DIR := $(BIN)/containerd-$(CONTAINERD_VERSION)
# runc is built here (cgo, with seccomp): Debian 12's runc 1.1.5 fails to
# start any container on these kernels ("can't get final child's PID from
# pipe") and its crun 1.8.1 refuses containerd 2's OCI spec version.
RUNC_VERSION := v1.4.0
RUNC := $(BIN)/runc-$(RUNC_VERSION)/runc
# iproute2 (ip netns), util-linux (nsenter) and socat: the network
# namespace of a second real node and its way to kube-apiserver.
NODE_DEBS := containernetworking-plugins iptables conntrack openssl curl procps libseccomp-dev pkg-config iproute2 util-linux socat
# REAL_NODES is how many real nodes node-up and test-node start (1 to 9):
# node 1 in the host's network namespace, each other in its own
# (hack/node.sh). NODES counts the kwok cluster's fake nodes.
REAL_NODES ?= 1
# make test (so CI) runs the real-node suite on two real nodes, unless
# REAL_NODES is given: the second adds about 3 s to the node's start and
# the test that needs it (TestSpreadAndLostNode) about a minute.
TEST_REAL_NODES := $(if $(filter command line environment,$(origin REAL_NODES)),$(REAL_NODES),2)
NODE_IMAGES := $(BIN)/node-images/images.tar
# CoreDNS, the real-node suite's cluster DNS (test/node: each pod's
# <pod>.<serviceName>.<namespace>.svc name), built from its Go module by
# the tools module hack/coredns with only the plugins the suite uses.
COREDNS_VERSION := $(call go_mod_version,hack/coredns/go.mod,github.com/coredns/coredns)
COREDNS := $(BIN)/coredns-$(COREDNS_VERSION)/coredns
KWOK_DIR := $(BIN)/kwok-$(KWOK_VERSION)
# OpenKruise's kruise-manager, the benchmark's kruise contender (hack/kruise.sh).
KRUISE_VERSION := v1.8.2
KRUISE_DIR := $(BIN)/kruise-$(KRUISE_VERSION)
# Flux's kustomize-controller, the GitOps suite's controller (test/gitops),
# built from the tools module hack/flux, and Flux's CRDs from the same
# release's modules: the Kustomization from kustomize-controller's, the
# sources from source-controller's at the API version it pins. Cold, alone
# on a quiet 2-core machine: about 2 minutes (its modules share the main
# module's versions, so most of its packages are compiled already); from
# the Go build cache it links in about 15 s.
FLUX_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/fluxcd/kustomize-controller" {print $$3}' hack/flux/go.mod)
FLUX_SOURCE_VERSION := $(shell awk '$$1 == "github.com/fluxcd/source-controller/api" {print $$2}' hack/flux/go.mod)
FLUX_DIR := $(BIN)/flux-$(FLUX_VERSION)
KWOK := $(KWOK_DIR)/kwok
KWOKCTL := $(KWOK_DIR)/kwokctl
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)/controller-gen
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)/kustomize
# helm is a tool of the main module (go.mod's `tool` line), so it is built
# with the module's own Kubernetes packages, which `go test` has compiled
# already.
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" {print $$2}' go.mod)
HELM := $(BIN)/helm-$(HELM_VERSION)/helm
CHART := charts/podset-operator
# Release tooling, each built from its Go module into bin/ on first use:
# syft writes the images' SBOMs, actionlint checks the GitHub workflows,
# kubeconform validates every manifest the repository ships.
SYFT_VERSION := v1.57.0
SYFT := $(BIN)/syft-$(SYFT_VERSION)/syft
ACTIONLINT_VERSION := $(call go_mod_version,hack/tools/go.mod,github.com/rhysd/actionlint)
ACTIONLINT := $(BIN)/actionlint-$(ACTIONLINT_VERSION)/actionlint
KUBECONFORM_VERSION := $(call go_mod_version,hack/tools/go.mod,github.com/yannh/kubeconform)
KUBECONFORM := $(BIN)/kubeconform-$(KUBECONFORM_VERSION)/kubeconform
# The linters of `make lint`: golangci-lint (configured in .golangci.yml)
# built from its Go module, about 3 core-minutes cold; shellcheck from
# Debian's package.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
LINT_DEBS := shellcheck
# Every shell script of the repository: each file whose first line is a sh
# or bash shebang (.ci/run has no extension).
SHELL_SCRIPTS = $(shell git ls-files -z --cached --others --exclude-standard | xargs -0 awk 'FNR == 1 { if (/^\#!.*[\/ ](ba)?sh( |$$)/) print FILENAME; nextfile }')
# VERSION is the release stamped into the binary and the image tag:
# `make release VERSION=v0.2.0`. Default: what git describes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG_REPO := ghcr.io/podset-dev/podset-operator
IMG ?= $(IMG_REPO):$(VERSION)

export KUBEBUILDER_ASSETS := $(CONTROLPLANE)

K8S_MINOR = $(word 2,$(subst ., ,$(K8S_VERSION)))
VERSION_LDFLAGS = $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(K8S_VERSION) -X $(pkg).gitMajor=1 -X $(pkg).gitMinor=$(K8S_MINOR) \
	-X $(pkg).gitTreeState=clean -X $(pkg).buildDate=1970-01-01T00:00:00Z)
comma := ,

##@ Help

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions and apply configurations.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	$(CONTROLLER_GEN) applyconfiguration:headerFile=hack/boilerplate.go.txt,externalApplyConfigurations=k8s.io/api/core/v1.PodTemplateSpec@k8s.io/client-go/applyconfigurations/core/v1 paths=./apis/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and the RBAC role from markers.
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./apis/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=podset-operator paths=./controller/... output:rbac:artifacts:config=config/rbac
	@# The chart renders the CRD, the operator's rules and the admission
	@# policies from copies of config/, never from a second hand-kept version.
	rm -rf $(CHART)/files && mkdir -p $(CHART)/files/crds $(CHART)/files/rbac $(CHART)/files/policy $(CHART)/files/prometheus
	cp config/crd/bases/podset.dev_podsets.yaml $(CHART)/files/crds/
	cp config/rbac/role.yaml $(CHART)/files/rbac/
	cp config/policy/hardening.yaml config/policy/pod-validity.yaml config/policy/replace.yaml $(CHART)/files/policy/
	cp config/prometheus/rules.yaml config/prometheus/dashboard.json $(CHART)/files/prometheus/

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -l -w $$(git ls-files --cached --others --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet on every package, the end-to-end, GitOps and real-node suites included.
	go vet -tags e2e,node,gitops ./...

.PHONY: build
build: ## Build the operator binary into bin/ (VERSION stamped in).
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN)/podset-operator .

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-podset (VERSION stamped in).
	go build -ldflags "$(PLUGIN_LDFLAGS)" -o $(BIN)/kubectl-podset ./cmd/kubectl-podset

# make test runs in two phases, each step's output in .logs/ (printed in
# full when the step fails), its start and duration on the terminal:
#  1. kube-apiserver and etcd, which every layer needs;
#  2. one make -j4 of everything else, each layer started as soon as its
#     tools are built: test-unit; test-node; the kwok lane (test-manifests,
#     test-e2e, then test-gitops, in that order); and the builds of those
#     tools, then of Flux and of make verify's tools.
# The layers mostly wait (on envtest's API servers, on kwok clusters, on
# the kubelet), so the builds run in their idle time. Priorities keep the
# real node's timing (probes, drains, kube-proxy) first: its suite runs at
# the normal one, the other layers at nice 5 (SUITE_NICE), the builds at
# nice 15 (TOOL_NICE). On a machine that cannot run the real node
# (NODE_CHECK_HOST fails: not root, not Linux, no cgroups...), test-node
# and the node's tools are left out; make test says so at the end, and
# fails only on CI.
# Phase 2's steps, in the order make starts them when a job slot is free:
# the real node's suite is the longest layer, so its tools come first.
TEST_NODE := node-tools test-node
TEST_KWOK := kwok-lane-tools test-manifests test-e2e test-gitops
TEST_LAST := flux verify-tools
NODE_CHECK_HOST := hack/node.sh check-host
LAYER_LOGS := $(CURDIR)/.logs
PHASE = STEP_LOGS=$(LAYER_LOGS) $(MAKE) --no-print-directory TOOL_NICE="nice -n 15"

# In phase 2 (KWOK_LANE set), the kwok lane's layers run one after the
# other.
test-e2e: | $(if $(KWOK_LANE),test-manifests)
test-gitops: | $(if $(KWOK_LANE),test-e2e)
SUITE_NICE :=

.PHONY: kwok-lane-tools node-tools
kwok-lane-tools: controlplane $(HELM) $(KUBECONFORM) $(KUSTOMIZE)
	@: # a recipe, so that make says nothing when all is built
node-tools: node-bins $(NODE_IMAGES) $(COREDNS)
	@: # a recipe, so that make says nothing when all is built

# In phase 2 (SERIAL_BUILDS set), the tools build one at a time, those the
# layers wait for first (NODE set: the real node's too): two go builds side
# by side each compile the packages they share, and a build of verify's
# tools would slow the one the node's suite waits for.
ifneq ($(SERIAL_BUILDS),)
$(KWOK) $(KWOKCTL): | $(KUBECTL)
$(HELM): | $(KWOKCTL)
ifneq ($(NODE),)
$(KUBELET) $(KUBE_PROXY): | $(HELM)
$(CONTAINERD_DIR)/containerd $(CONTAINERD_DIR)/containerd-shim-runc-v2 $(CONTAINERD_DIR)/ctr: | $(KUBE_PROXY)
$(RUNC): | $(CONTAINERD_DIR)/ctr
$(NODE_IMAGES): | $(RUNC)
$(COREDNS): | $(NODE_IMAGES)
$(KUBECONFORM): | $(COREDNS)
else
$(KUBECONFORM): | $(HELM)
endif
$(KUSTOMIZE): | $(KUBECONFORM)
$(FLUX_DIR)/kustomize-controller: | $(KUSTOMIZE)
$(CONTROLLER_GEN): | $(FLUX_DIR)/kustomize-controller
$(ACTIONLINT): | $(CONTROLLER_GEN)
$(GOLANGCI_LINT): | $(ACTIONLINT)
endif

.PHONY: test
test: ## Run every test layer: unit and envtest suites, the manifests' validation, end-to-end and a tiny benchmark on local kwok clusters, the GitOps suite (Flux), and the real-node suite (skipped, loudly, where the machine cannot run it; CI=true: a failure).
	@$(STEP) reset
	@rm -rf $(LAYER_LOGS)
	@if why=$$($(NODE_CHECK_HOST) 2>&1); then node=1; else node=; echo "test-node will be skipped: this machine cannot run the real node (see the end)"; fi; \
	rc=0; \
	$(PHASE) envtest-assets && \
	$(PHASE) -j4 -k KWOK_LANE=1 SERIAL_BUILDS=1 NODE=$$node REAL_NODES=$(TEST_REAL_NODES) SUITE_NICE="nice -n 5" test-unit $${node:+$(TEST_NODE)} $(TEST_KWOK) $(TEST_LAST) || rc=$$?; \
	$(STEP) summary; \
	echo "each step's output: $(LAYER_LOGS)/"; \
	if [[ -z $$node ]]; then \
		printf '%s\n' "" "$(LOUD_LINE)" \
			"test-node SKIPPED: the real-node suite did not run." "$$why" "" \
			"Every other layer ran. The node suite needs Linux with cgroups, root and Debian's" \
			"packages (make node-deps); run it there with:  sudo make test-node" \
			"$(if $(filter true,$(CI)),CI=true: a skipped node suite fails the run.,On CI (CI=true) a skipped node suite fails the run.)" \
			"$(LOUD_LINE)"; \
		$(if $(filter true,$(CI)),[[ $$rc != 0 ]] || rc=1;) \
	fi; \
	exit $$rc

LOUD_LINE := $(subst _,=,________________________________________________________________________________)

.PHONY: verify-tools
verify-tools: $(CONTROLLER_GEN) $(KUSTOMIZE) $(ACTIONLINT) $(GOLANGCI_LINT) ## Build the tools of make verify.
	@: # a recipe, so that make says nothing when all is built

# make verify checks too that the go.mod files agree.
verify: verify-modules

.PHONY: verify-modules
verify-modules: ## Fail when two go.mod files (go.mod, hack/*/go.mod) require one module at two versions: its packages would compile once per version.
	go run ./hack/modsync

.PHONY: test-unit
test-unit: $(KUBE_APISERVER) $(ETCD) ## Run the unit and envtest suites (they need only kube-apiserver and etcd).
	@$(SUITE_NICE) $(STEP) run test-unit go test ./... -count=1 $(TESTFLAGS)

.PHONY: test-core
test-core: ## Run the pure core's and the reconciler's unit tests: no control plane, seconds.
	$(STEP) run test-core go test ./internal/... ./controller/ -count=1 $(TESTFLAGS)

# KUBE_SCHEMAS are the JSON schemas kubeconform validates with, made by
# hack/kubeschemas from the OpenAPI document of the k8s.io/kubernetes
# module that hack/controlplane builds from, and from config/crd.
KUBE_SCHEMAS := $(BIN)/kube-schemas/k8s-$(K8S_VERSION)
# The chart, rendered with its defaults and with every option, as kubeconform
# validates it.
CHART_RENDERS := defaults: \
	every-option:--set=metrics.certificate.certManager.enabled=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true,networkPolicy.enabled=true,commonLabels.team=platform,global.imagePullSecrets[0].name=pull,image.digest=sha256:0000000000000000000000000000000000000000000000000000000000000000,extraEnv[0].name=HTTPS_PROXY,extraEnv[0].value=http://proxy:3128,hostAliases[0].ip=10.0.0.10,hostAliases[0].hostnames[0]=api.internal \
	existing-cert-one-replica:--set=replicaCount=1,metrics.certificate.existingSecret=cert,metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.authorization.credentials.name=token,metrics.serviceMonitor.authorization.credentials.key=token,metrics.serviceMonitor.relabelings[0].targetLabel=cluster,metrics.serviceMonitor.relabelings[0].replacement=east \
	no-metrics-no-crds:--set=metrics.enabled=false,crds.enabled=false,admissionPolicies.enabled=false,leaderElection.enabled=false,replicaCount=1
# The optional manifests use the Prometheus Operator's and cert-manager's
# kinds: their CRDs come from those projects' Go modules (downloaded into
# the module cache, 44 MB, nothing built).
PROMETHEUS_OPERATOR_VERSION := v0.85.0
CERT_MANAGER_VERSION := v1.21.2
MODULE_DIR = go mod download -json $(1) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'

.PHONY: test-manifests
test-manifests: $(KUBECONFORM) $(KUSTOMIZE) $(HELM) ## Validate every manifest of config/ and of the chart (defaults, every option) with kubeconform, strictly, against Kubernetes' schemas, the PodSet CRD and the Prometheus Operator's and cert-manager's CRDs, offline.
	@$(SUITE_NICE) $(STEP) run test-manifests $(MAKE) --no-print-directory validate-manifests

# validate-manifests is test-manifests' work.
.PHONY: validate-manifests
validate-manifests:
	swagger=$$(cd hack/controlplane && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/api/openapi-spec/swagger.json; \
	prometheus=$$($(call MODULE_DIR,github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION))); \
	certmanager=$$($(call MODULE_DIR,github.com/cert-manager/cert-manager@$(CERT_MANAGER_VERSION))); \
	go run ./hack/kubeschemas -swagger $$swagger -out $(KUBE_SCHEMAS) \
		-crds config/crd/bases,$$prometheus/example/prometheus-operator-crd,$$certmanager/deploy/crds
	rm -rf .manifests && mkdir -p .manifests
	for dir in $$(cd config && ls -d */ | tr -d /); do \
		if [[ -f config/$$dir/kustomization.yaml ]]; then $(KUSTOMIZE) build config/$$dir > .manifests/config-$$dir.yaml; fi; \
	done
	for r in $(CHART_RENDERS); do \
		$(HELM) template podset-operator $(CHART) --namespace podset-system $${r#*:} > .manifests/chart-$${r%%:*}.yaml; \
	done
	$(KUBECONFORM) -strict -summary \
		-schema-location '$(KUBE_SCHEMAS)/{{ .ResourceKind }}{{ .KindSuffix }}.json' .manifests/*.yaml
	rm -rf .manifests

.PHONY: test-e2e
test-e2e: controlplane $(KUSTOMIZE) $(HELM) ## Run the end-to-end suite (with the Helm chart's checks) and a tiny benchmark (correctness only) on local kwok clusters.
	@CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) KUSTOMIZE=$(KUSTOMIZE) HELM=$(HELM) $(SUITE_NICE) $(STEP) run "test-e2e (suite)" go test -tags e2e ./test/e2e/ -count=1 -v -timeout 30m $(TESTFLAGS)
	@CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) $(SUITE_NICE) $(STEP) run "test-e2e (tiny bench)" go run ./test/bench -size tiny

# test-gitops: see test/gitops/doc.go. The first run builds the
# kustomize-controller (hack/flux); later runs reuse it from bin/.
.PHONY: test-gitops
test-gitops: controlplane flux ## Run the GitOps suite: Flux's kustomize-controller applies, waits on, rolls, corrects and prunes a PodSet on a local kwok cluster.
	@CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) FLUX_DIR=$(FLUX_DIR) $(SUITE_NICE) $(STEP) run test-gitops go test -tags gitops ./test/gitops/ -count=1 -v -timeout 20m $(TESTFLAGS)

NODE_ENV = CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) CONTAINERD_DIR=$(CONTAINERD_DIR) RUNC=$(RUNC) NODE_IMAGES=$(NODE_IMAGES) COREDNS=$(COREDNS) REAL_NODES=$(REAL_NODES)

.PHONY: test-node
test-node: node-host node-deps node-bins $(NODE_IMAGES) $(COREDNS) $(HELM) ## Run the real-node suite: REAL_NODES real kubelets, containerds and kube-proxies (default 1; make test runs 2) joined to a local kwok cluster, and the chart installing the operator's image there (needs root).
	@$(NODE_ENV) hack/node.sh check
	@# The suite stops the node itself; a timeout kills it before it can,
	@# so the node is stopped here too, whatever the suite did.
	@# -parallel 8: the parallel tests mostly wait (on the kubelet, on a
	@# lost node), so they all run at once, not GOMAXPROCS (2 here) at a time.
	@rc=0; $(NODE_ENV) HELM=$(HELM) $(STEP) run test-node go test -tags node ./test/node/ -count=1 -v -parallel 8 -timeout 30m $(TESTFLAGS) || rc=$$?; \
	$(NODE_ENV) hack/node.sh down; exit $$rc

.PHONY: bench
bench: controlplane kruise ## Measure podset-operator beside the physical limit, ReplicaSet, Deployment, StatefulSet, OpenKruise's CloneSet and the tutorial controller: one markdown table; then, as root, the real node's rollout (bench-node).
	CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) KRUISE_DIR=$(KRUISE_DIR) go run ./test/bench -size full $(BENCHFLAGS)
	@if [[ $$(id -u) == 0 ]]; then $(MAKE) --no-print-directory bench-node; else echo "bench-node skipped: the real node needs root"; fi

# NODE_BENCH_PODS is how many pods bench-node rolls out and creates.
NODE_BENCH_PODS ?= 40

.PHONY: bench-node
bench-node: node-host node-deps node-bins $(NODE_IMAGES) $(COREDNS) kruise ## On the real node, under client load through a Service: an image change across NODE_BENCH_PODS pods (two pod shapes) by a PodSet in place, a Deployment, a StatefulSet and OpenKruise's CloneSet of equal safety, a Deployment as users run it and a CloneSet as users set it, beside the floor; and the creation of as many pods by a PodSet, a Deployment and a StatefulSet (needs root).
	@$(NODE_ENV) hack/node.sh check
	rc=0; $(NODE_ENV) KRUISE_DIR=$(KRUISE_DIR) NODE_BENCH=1 NODE_BENCH_PODS=$(NODE_BENCH_PODS) go test -tags node ./test/node/ -run "TestDrainSweep|TestRolloutBenchmark|TestCreateBenchmark" -count=1 -v -timeout 60m || rc=$$?; \
	$(NODE_ENV) hack/node.sh down; exit $$rc

# SCALE is K x N of make bench-scale.
SCALE ?= 1000x10

.PHONY: bench-scale
bench-scale: controlplane ## The scale scenario: SCALE (1000x10) PodSets beside as many ReplicaSets and StatefulSets, then an operator restart and a leader change over the PodSets, then each contender's sets scaled down to a tenth.
	CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) go run ./test/bench -size full -only scale -scale $(SCALE) $(BENCHFLAGS)

# The soak: the seeded model-based fault test, repeated for SOAK_DURATION
# with SOAK_FAULT_RATE of the operator's requests failed (429, 500, lost
# answers). RELIABILITY_SEED picks the seed.
SOAK_DURATION ?= 10m
SOAK_FAULT_RATE ?= 0.05
RELIABILITY_SEED ?= 1

.PHONY: soak
soak: $(KUBE_APISERVER) $(ETCD) ## Run the long fault soak (SOAK_DURATION, SOAK_FAULT_RATE, RELIABILITY_SEED).
	SOAK_DURATION=$(SOAK_DURATION) SOAK_FAULT_RATE=$(SOAK_FAULT_RATE) RELIABILITY_SEED=$(RELIABILITY_SEED) \
		go test ./test/reliability/ -run TestModelBasedRandomSteps -count=1 -v -timeout 0

.PHONY: lint
lint: $(GOLANGCI_LINT) lint-deps ## Lint the Go code (golangci-lint, .golangci.yml; every build tag) and every shell script (shellcheck).
	@# Both run, so one pass shows every finding.
	rc=0; $(GOLANGCI_LINT) run ./... || rc=$$?; shellcheck $(SHELL_SCRIPTS) || rc=$$?; exit $$rc

.PHONY: verify
verify: generate manifests vet lint $(KUSTOMIZE) $(ACTIONLINT) ## Fail when generated files are stale, Go code is unformatted, does not vet or lint, a shell script fails shellcheck, the install does not build or a GitHub workflow is wrong (actionlint).
	for dir in default certmanager prometheus network-policy; do $(KUSTOMIZE) build config/$$dir >/dev/null; done
	@# shellcheck and pyflakes off: what actionlint checks does not depend
	@# on what else the machine has installed.
	$(ACTIONLINT) -no-color -shellcheck= -pyflakes= .github/workflows/*.yaml
	@test -z "$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'))" || { gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'); echo "gofmt: the files above are not formatted"; exit 1; }
	@git diff --exit-code --stat -- . || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- apis applyconfig config charts)" || { git status --porcelain -- apis applyconfig config charts; echo "untracked generated files: commit them"; exit 1; }

##@ Release

# The GitOps examples name the release they install; `make release` points
# them at VERSION.
GITOPS_EXAMPLES ?= $(wildcard config/gitops/argocd/application*.yaml config/gitops/flux/podset-operator*.yaml)
# DIST is where the release files go.
DIST ?= $(CURDIR)/dist
# The kubectl plugin's release archives, one per platform of the krew
# manifest plugins/podset.yaml.
PLUGIN_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# KREW_MANIFEST is where `make release` writes the filled krew manifest
# (empty: only into DIST).
KREW_MANIFEST ?= plugins/podset.yaml
PLUGIN_LDFLAGS = -s -w -X github.com/podset-dev/podset-operator/cmd/kubectl-podset/plugin.version=$(VERSION)

# RELEASE_PINS are the files in Git that name the current release (the
# image tag of config/manager, the chart's version): `make release` points
# them at VERSION, so that the tagged commit installs its own image.
RELEASE_PINS ?= config/manager/kustomization.yaml $(CHART)/Chart.yaml
# IMAGE_PLATFORMS are the platforms of the operator's image.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_ARCHIVE = $(DIST)/podset-operator_$(VERSION)_oci.tar
# SBOM=0 leaves the SBOMs out (and syft unbuilt: it takes about 13 minutes
# to build from a cold cache on 2 cores).
SBOM ?= 1

.PHONY: image
image: $(if $(filter 1,$(SBOM)),$(SYFT)) ## Build the operator's image for IMAGE_PLATFORMS without Docker (hack/image) into DIST: an OCI layout archive, its index digest, and an SPDX SBOM per platform (syft).
	go run ./hack/image -version $(VERSION) -revision $$(git rev-parse HEAD) -platforms $(IMAGE_PLATFORMS) -out $(DIST)
	$(if $(filter 1,$(SBOM)),for p in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
		SYFT_CHECK_FOR_APP_UPDATE=false $(SYFT) scan --quiet --platform $$p oci-archive:$(IMAGE_ARCHIVE) \
			--source-name $(IMG_REPO) --source-version $(VERSION) \
			-o spdx-json=$(DIST)/podset-operator_$(VERSION)_$${p/\//_}.spdx.json; \
	done)

.PHONY: release
release: $(KUSTOMIZE) $(HELM) ## Write into DIST everything a release vX.Y.Z attaches (VERSION=vX.Y.Z): the image archives and SBOMs, install.yaml and the chart pinned to the image's digest, the plugin archives, the krew manifest and checksums; point the GitOps examples and RELEASE_PINS at it.
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "set VERSION=vX.Y.Z (now: $(VERSION))"; exit 1; }
	rm -rf $(DIST) .release && mkdir -p $(DIST) .release
	$(MAKE) --no-print-directory image
	@# config/default with the image pinned to the release's tag and digest
	@# (kustomize wants a relative path, and bin/ may be a link elsewhere),
	@# and the chart with the digest in values.yaml and in Artifact Hub's
	@# image list.
	$(HELM) lint --strict $(CHART)
	cp -r $(CHART) .release/podset-operator
	digest=$$(cat $(IMAGE_ARCHIVE:.tar=.digest)); \
	(cd .release && $(KUSTOMIZE) create --resources ../config/default && \
		$(KUSTOMIZE) edit set image $(IMG_REPO)=$(IMG_REPO):$(VERSION)@$$digest && \
		$(KUSTOMIZE) build . > $(DIST)/install.yaml) && \
	sed -i -E "s/^(  digest: ).*/\1\"$$digest\"/" .release/podset-operator/values.yaml && \
	sed -i -E "s#( image: $(IMG_REPO)):.*#\1:$(VERSION)@$$digest#" .release/podset-operator/Chart.yaml
	$(HELM) package .release/podset-operator --version $(VERSION:v%=%) --app-version $(VERSION) --destination $(DIST)
	rm -rf .release
	$(MAKE) --no-print-directory plugin-dist
	cd $(DIST) && sha256sum $$(ls | grep -v '^checksums.txt$$') > checksums.txt
	$(if $(GITOPS_EXAMPLES),sed -i -E 's/v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?([" ]|$$)/$(VERSION)\2/g' $(GITOPS_EXAMPLES))
	$(if $(filter config/manager/kustomization.yaml,$(RELEASE_PINS)),sed -i -E 's/^(  newTag: ).*/\1$(VERSION)/' config/manager/kustomization.yaml)
	$(if $(filter $(CHART)/Chart.yaml,$(RELEASE_PINS)),sed -i -E 's/^version: .*/version: $(VERSION:v%=%)/; s/^appVersion: .*/appVersion: $(VERSION)/; s#( image: $(IMG_REPO)):.*#\1:$(VERSION)#' $(CHART)/Chart.yaml)
	@echo "$(DIST): $$(cd $(DIST) && ls | tr '\n' ' ')"
	@echo "Next: commit, tag $(VERSION) and push the tag: .github/workflows/release.yaml pushes and signs the image and the chart and publishes dist/."

.PHONY: plugin-dist
plugin-dist: ## Write the kubectl plugin's archives for VERSION into dist/, the krew manifest filled with their version, URIs and sha256 beside them, and that manifest to KREW_MANIFEST.
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$$ ]] || { echo "set VERSION=vX.Y.Z (now: $(VERSION))"; exit 1; }
	@mkdir -p $(DIST)
	@# plugins/podset.yaml is the template; the filled copy is written to
	@# dist/ and only then over KREW_MANIFEST, so a release with
	@# KREW_MANIFEST= (the e2e test's) leaves the work tree alone.
	cp plugins/podset.yaml $(DIST)/podset.yaml
	for p in $(PLUGIN_PLATFORMS); do os=$${p%/*} arch=$${p#*/} dir=$$(mktemp -d); \
		GOOS=$$os GOARCH=$$arch go build -ldflags "$(PLUGIN_LDFLAGS)" -o $$dir/kubectl-podset ./cmd/kubectl-podset; \
		cp README.md LICENSE $$dir/; \
		archive=kubectl-podset_$(VERSION)_$${os}_$${arch}.tar.gz; \
		tar -C $$dir -czf $(DIST)/$$archive --owner=0 --group=0 --mtime=@0 --sort=name kubectl-podset README.md LICENSE; rm -rf $$dir; \
		sum=$$(sha256sum $(DIST)/$$archive | cut -d' ' -f1); \
		sed -i -E "/_$${os}_$${arch}\.tar\.gz/,/sha256:/ s/sha256: .*/sha256: \"$$sum\"/" $(DIST)/podset.yaml; \
	done
	sed -i -E '/^  version:|uri:/ s/v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?/$(VERSION)/g' $(DIST)/podset.yaml
	$(if $(KREW_MANIFEST),cp $(DIST)/podset.yaml $(KREW_MANIFEST))

##@ Running

# CLUSTER_KUBECONFIG: a kubeconfig to run against a real cluster. Empty (the
# default): a local kwok cluster under bin/, started on demand.
CLUSTER_KUBECONFIG ?=
# The local kwok cluster's flags (hack/cluster): CLUSTER_NAME (default
# podset), NODES (default 3) and HEARTBEAT_FACTOR (default kwokctl's, 5), as
# in `HEARTBEAT_FACTOR=0.5 make run`.
CLUSTER_FLAGS = $(strip -controlplane $(CONTROLPLANE) -kwok $(KWOK_DIR) $(if $(CLUSTER_NAME),-name $(CLUSTER_NAME)) \
	$(if $(NODES),-nodes $(NODES)) $(if $(HEARTBEAT_FACTOR),-heartbeat-factor $(HEARTBEAT_FACTOR)))

.PHONY: run
run: build controlplane ## Run the operator with the sample PodSet on a local cluster (or CLUSTER_KUBECONFIG).
	@CONTROLPLANE=$(CONTROLPLANE) CLUSTER_KUBECONFIG=$(CLUSTER_KUBECONFIG) hack/run.sh $(CLUSTER_FLAGS)

.PHONY: cluster-up
cluster-up: controlplane ## Start the local kwok cluster and print its kubeconfig path.
	@go run ./hack/cluster $(CLUSTER_FLAGS) up

.PHONY: node-up
node-up: node-host node-deps node-bins $(NODE_IMAGES) $(COREDNS) ## Start REAL_NODES real nodes (default 1; each a kubelet, containerd, kube-proxy; each after the first in its own network namespace; CoreDNS as their cluster DNS) joined to a local kwok cluster and print its kubeconfig (needs root).
	@$(NODE_ENV) hack/node.sh up

.PHONY: node-down
node-down: ## Stop every real node and their cluster, and put back what they changed on the host.
	@$(NODE_ENV) hack/node.sh down

.PHONY: cluster-down
cluster-down: ## Stop and delete the local kwok cluster.
	@go run ./hack/cluster $(CLUSTER_FLAGS) down

.PHONY: deploy
deploy: $(KUSTOMIZE) $(KUBECTL) ## Install the operator (config/default) into the cluster of CLUSTER_KUBECONFIG.
	@test -n "$(CLUSTER_KUBECONFIG)" || { echo "set CLUSTER_KUBECONFIG to the kubeconfig of the cluster to install into"; exit 1; }
	@rm -rf $(BIN)/deploy && mkdir -p $(BIN)/deploy && cd $(BIN)/deploy && \
	$(KUSTOMIZE) create --resources ../../config/default && \
	$(KUSTOMIZE) edit set image ghcr.io/podset-dev/podset-operator=$(IMG) && \
	$(KUSTOMIZE) build . | $(KUBECTL) --kubeconfig $(CLUSTER_KUBECONFIG) apply --server-side --field-manager=podset-install -f -

.PHONY: docker-build
docker-build: ## Build the operator image $(IMG) (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image $(IMG).
	docker push $(IMG)

##@ Tools

.PHONY: controlplane
controlplane: $(KUBE_APISERVER) $(ETCD) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(KUBECTL) $(KWOK) $(KWOKCTL) ## Build the control plane and kwok into bin/.

.PHONY: tool-env
tool-env: ## Print, as shell exports, where every tool the suites read is built (versions from the go.mod files and this Makefile), to run one test by hand: eval "$$(make -s tool-env)". It builds nothing.
	@echo "export KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) CONTROLPLANE=$(CONTROLPLANE) KWOK_DIR=$(KWOK_DIR) KUSTOMIZE=$(KUSTOMIZE) HELM=$(HELM) FLUX_DIR=$(FLUX_DIR) KRUISE_DIR=$(KRUISE_DIR)"
	@echo "export CONTAINERD_DIR=$(CONTAINERD_DIR) RUNC=$(RUNC) NODE_IMAGES=$(NODE_IMAGES) COREDNS=$(COREDNS)"

.PHONY: envtest-assets
envtest-assets: $(KUBE_APISERVER) $(ETCD) ## Build only what envtest needs.
	@echo "KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS)"

# Binaries that share most of their packages are built by one go build
# (grouped targets, &:), which compiles each package once; two go builds
# side by side (make -j) would each compile them. The node's pair waits for
# the first group and reuses its packages from the build cache.
$(KUBE_APISERVER):
	$(call build,kube-apiserver) go -C hack/controlplane build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(KUBECTL) &:
	$(call build,kube-controller-manager kube-scheduler kubectl) go -C hack/controlplane build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(CONTROLPLANE)/ \
		k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl

$(KUBELET) $(KUBE_PROXY) &: | $(KUBE_CONTROLLER_MANAGER)
	$(call build,kubelet kube-proxy) go -C hack/controlplane build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(CONTROLPLANE)/ \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy

.PHONY: node-bins
node-bins: controlplane $(KUBELET) $(KUBE_PROXY) $(CONTAINERD_DIR)/containerd $(CONTAINERD_DIR)/containerd-shim-runc-v2 $(CONTAINERD_DIR)/ctr $(RUNC) ## Build the real node's kubelet, kube-proxy, containerd and runc into bin/.

$(RUNC): | node-deps
	$(call build,runc) env GOBIN=$(dir $@) CGO_ENABLED=1 go install -trimpath -tags seccomp -ldflags "-X main.version=$(RUNC_VERSION:v%=%)" github.com/opencontainers/runc@$(RUNC_VERSION)

$(CONTAINERD_DIR)/containerd $(CONTAINERD_DIR)/containerd-shim-runc-v2 $(CONTAINERD_DIR)/ctr &:
	$(call build,containerd containerd-shim-runc-v2 ctr) go -C hack/containerd build -trimpath -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" -o $(CONTAINERD_DIR)/ \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr

.PHONY: node-host
node-host: ## Fail at once, naming what is missing, on a machine that cannot run the real node (not root, no cgroups, a kernel without overlay or netfilter).
	@hack/node.sh check-host

# install-debs installs those of the Debian packages $(1) that are missing.
define install-debs
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [[ -n $$missing ]]; then \
		echo "installing $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
endef

.PHONY: node-deps
node-deps: ## Install the real node's Debian packages (runc, CNI plugins, iptables, conntrack) when missing.
	$(call install-debs,$(NODE_DEBS))

.PHONY: lint-deps
lint-deps: ## Install shellcheck (Debian's package) when missing.
	$(call install-debs,$(LINT_DEBS))

# The test images of the real node, built from the test app's static
# binary without a registry (test/node/images).
$(NODE_IMAGES): $(wildcard test/node/app/*.go test/node/pause/*.go test/node/images/*.go)
	$(call build,node images) go run ./test/node/images -out $(dir $@)

# From an empty Go build cache on 2 cores: 1m35s (143 CPU-seconds). In
# make test, 470 of its 547 packages (client-go, grpc, prometheus) are
# compiled already by the other builds: it took 9 s (10 CPU-seconds).
$(COREDNS):
	$(call build,coredns) go -C hack/coredns build -trimpath -ldflags "-s -w" -o $@ .

$(ETCD):
	$(call build,etcd) go -C hack/etcd build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

$(KWOK) $(KWOKCTL) &:
	$(call build,kwok kwokctl) go -C hack/kwok build -trimpath -o $(KWOK_DIR)/ sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl

.PHONY: kruise
kruise: $(KRUISE_DIR)/manager ## Build OpenKruise's kruise-manager for the benchmark (about 10 minutes; hack/kruise.sh).

$(KRUISE_DIR)/manager: hack/kruise.sh hack/kruise/webhook-bind-host.patch
	KRUISE_VERSION=$(KRUISE_VERSION) KRUISE_DIR=$(abspath $(KRUISE_DIR)) hack/kruise.sh

FLUX_BINS := $(FLUX_DIR)/kustomize-controller $(FLUX_DIR)/crds.yaml

.PHONY: flux
flux: $(FLUX_BINS) ## Build Flux's kustomize-controller and gather Flux's CRDs into bin/ for the GitOps suite.
	@: # a recipe, so that make says nothing when all is built

$(FLUX_DIR)/kustomize-controller:
	$(call build,kustomize-controller) go -C hack/flux build -trimpath -ldflags "-s -w" -o $@ github.com/fluxcd/kustomize-controller

$(FLUX_DIR)/crds.yaml:
	kc=$$($(call MODULE_DIR,github.com/fluxcd/kustomize-controller@$(FLUX_VERSION))); \
	sc=$$($(call MODULE_DIR,github.com/fluxcd/source-controller@$(FLUX_SOURCE_VERSION))); \
	mkdir -p $(dir $@); \
	cat $$kc/config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml \
		$$sc/config/crd/bases/source.toolkit.fluxcd.io_{gitrepositories,ocirepositories,buckets,externalartifacts}.yaml >$@.new
	mv $@.new $@

$(KUSTOMIZE):
	$(call build,kustomize) go -C hack/tools build -trimpath -o $@ sigs.k8s.io/kustomize/kustomize/v5

$(HELM):
	$(call build,helm) go build -ldflags "-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o $@ helm.sh/helm/v4/cmd/helm

$(SYFT):
	GOBIN=$(dir $@) CGO_ENABLED=0 go install github.com/anchore/syft/cmd/syft@$(SYFT_VERSION)

$(ACTIONLINT):
	$(call build,actionlint) go -C hack/tools build -trimpath -ldflags "-X github.com/rhysd/actionlint.version=$(ACTIONLINT_VERSION)" -o $@ github.com/rhysd/actionlint/cmd/actionlint

$(KUBECONFORM):
	$(call build,kubeconform) go -C hack/tools build -trimpath -o $@ github.com/yannh/kubeconform/cmd/kubeconform

$(GOLANGCI_LINT):
	$(call build,golangci-lint) env GOBIN=$(dir $@) CGO_ENABLED=0 go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# controller-gen writes its version into the CRD it generates: built in
# hack/tools, its module's version is not the main module's, so it is set.
$(CONTROLLER_GEN):
	$(call build,controller-gen) go -C hack/tools build -trimpath -ldflags "-X sigs.k8s.io/controller-tools/pkg/version.version=$(CONTROLLER_TOOLS_VERSION)" -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen
